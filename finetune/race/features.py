"""RACE questions -> four `[CLS] article [SEP] question+option [SEP]` rows each, as the release builds them.

The rule (the qa text of a question and an option, the truncation) and its in-graph twin for the
SavedModel's raw-text signature (`graph_features`) are albert_tf's multiple-choice rows
(`albert_tf.data.multiple_choice`, whose docstring states it); this module applies it to RACE's
questions for the cached records, a chunk of questions per SentencePiece call.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from albert_tf.data.multiple_choice import (LETTERS, MAX_QA_LENGTH, MAX_SEQ_LENGTH, NUM_OPTIONS, SEQUENCE_FEATURES,
                                            check_lengths, fit, qa_text)
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.race.readers import Question

# Questions tokenized per SentencePiece call: batching is several times faster than one call per
# text, and this many keeps memory flat.
_CHUNK = 512


def convert_questions(
    questions: Iterable[Question],
    tokenizer: AlbertTokenizer,
    max_seq_length: int = MAX_SEQ_LENGTH,
    max_qa_length: int = MAX_QA_LENGTH,
) -> Iterator[dict]:
    """Features of each question, in order.

    Each is a dict of `input_ids`, `input_mask`, `segment_ids` (four lists of `max_seq_length`
    ints, one per option A-D) and `label_ids` (the answer's index).
    """
    for features, _ in convert_with_truncation(questions, tokenizer, max_seq_length, max_qa_length):
        yield features


def convert_with_truncation(
    questions: Iterable[Question],
    tokenizer: AlbertTokenizer,
    max_seq_length: int = MAX_SEQ_LENGTH,
    max_qa_length: int = MAX_QA_LENGTH,
) -> Iterator[tuple[dict, bool]]:
    """`convert_questions`, each question's features with whether any of its rows lost pieces."""
    check_lengths(max_seq_length, max_qa_length)
    chunk: list[Question] = []
    for question in questions:
        chunk.append(question)
        if len(chunk) == _CHUNK:
            yield from _convert_chunk(chunk, tokenizer, max_seq_length, max_qa_length)
            chunk = []
    if chunk:
        yield from _convert_chunk(chunk, tokenizer, max_seq_length, max_qa_length)


def _convert_chunk(chunk, tokenizer, max_seq_length, max_qa_length):
    # Questions of one passage share its article: each distinct article is tokenized once.
    articles = list(dict.fromkeys(q.article for q in chunk))
    article_ids = dict(zip(articles, tokenizer.encode_batch(articles)))
    qa_ids = tokenizer.encode_batch([qa_text(q.question, o, tokenizer) for q in chunk for o in q.options])
    for index, question in enumerate(chunk):
        article = article_ids[question.article]
        rows, truncated = [], False
        for qa in qa_ids[index * NUM_OPTIONS : (index + 1) * NUM_OPTIONS]:
            kept_article, kept_qa = fit(article, qa, max_seq_length, max_qa_length)
            truncated |= len(kept_article) < len(article) or len(kept_qa) < len(qa)
            rows.append(tokenizer.pack(kept_article, kept_qa, max_seq_length=max_seq_length))
        features = {name: [row[name] for row in rows] for name in SEQUENCE_FEATURES}
        features["label_ids"] = question.label
        yield features, truncated


def letters(predictions) -> list[str]:
    """Option indices -> answer letters."""
    return [LETTERS[int(i)] for i in predictions]
