"""RACE questions -> four `[CLS] article [SEP] question+option [SEP]` rows each, as the release builds them.

For every option the question and the option become one text: a cloze question (one with "_",
after normalisation) has each "_" replaced by the option, any other question is followed by a
space and the option. That text keeps its last `max_qa_length` pieces (the option sits at its
end); the article then keeps its first pieces up to what fills `max_seq_length` with the three
special tokens. The same rule runs in Python (for the cached records) and in the graph (for the
SavedModel's raw-text signature); a test holds them id for id.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import tensorflow as tf

from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.utils.validation import require_positive_ints
from finetune.race.readers import LETTERS, NUM_OPTIONS, Question

MAX_SEQ_LENGTH = 512
MAX_QA_LENGTH = 128
BLANK = "_"
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")

# Questions tokenized per SentencePiece call: batching is several times faster than one call per
# text, and this many keeps memory flat.
_CHUNK = 512


def check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """Raises ValueError unless both lengths are positive and leave the article at least one piece."""
    require_positive_ints({"max_seq_length": max_seq_length, "max_qa_length": max_qa_length})
    if max_qa_length > max_seq_length - 4:
        raise ValueError(
            f"max_qa_length={max_qa_length} must be at most max_seq_length - 4 = {max_seq_length - 4}: "
            "the three special tokens and at least one piece of the article need the rest"
        )


def qa_text(question: str, option: str, tokenizer: AlbertTokenizer) -> str:
    """The second segment of one option's row: the normalised question with the option in its
    blanks, or followed by the option when it has none."""
    question, option = tokenizer.normalize(question), tokenizer.normalize(option)
    if BLANK in question:
        return question.replace(BLANK, option)
    return f"{question} {option}"


def fit(article_ids: Sequence[int], qa_ids: Sequence[int], max_seq_length: int, max_qa_length: int):
    """The release's truncation: the qa part keeps its last `max_qa_length` pieces, the article its
    first pieces up to `max_seq_length - 3` in all. Returns the two kept lists."""
    qa = list(qa_ids[-max_qa_length:]) if len(qa_ids) > max_qa_length else list(qa_ids)
    return list(article_ids[: max_seq_length - 3 - len(qa)]), qa


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


def _checked_batch(articles, questions, options):
    """The three inputs, once their sizes agree: one article, one question and one row of four
    options per question; a mismatch is one clear error, not a tensor that loses the surplus."""
    articles, questions, options = (tf.convert_to_tensor(x, tf.string) for x in (articles, questions, options))
    sizes = [tf.shape(articles)[0], tf.shape(questions)[0], tf.shape(options)[0]]
    same = tf.logical_and(tf.equal(sizes[0], sizes[1]), tf.equal(sizes[1], sizes[2]))
    batch = tf.debugging.Assert(same, [tf.strings.format(
        "RACE serve_text got {} articles, {} questions and {} rows of options: give one article, one "
        "question and one row of options for each question", sizes)])
    width = tf.shape(options)[-1]
    four = tf.debugging.Assert(tf.equal(width, NUM_OPTIONS), [tf.strings.format(
        "RACE serve_text got {} options for each question: give " + str(NUM_OPTIONS) + " (A-D)", [width])])
    with tf.control_dependencies([batch, four]):
        return tf.identity(articles), tf.identity(questions), tf.identity(options)


def graph_features(tokenizer, articles, questions, options, max_seq_length: int = MAX_SEQ_LENGTH,
                   max_qa_length: int = MAX_QA_LENGTH) -> dict[str, tf.Tensor]:
    """`convert_questions`' rows built in a TensorFlow graph from raw strings.

    Args:
        tokenizer: an `albert_tf.tokenizers.graph_tokenizer.AlbertGraphTokenizer`.
        articles, questions: string tensors [B].
        options: strings [B, 4], the options A-D of each question.
    Returns int32 `input_ids`, `input_mask`, `segment_ids` [B, 4, max_seq_length].
    """
    check_lengths(max_seq_length, max_qa_length)
    articles, questions, options = _checked_batch(articles, questions, options)
    articles = tokenizer.normalize(tf.convert_to_tensor(articles, tf.string))
    questions = tokenizer.normalize(tf.convert_to_tensor(questions, tf.string))
    options = tokenizer.normalize(tf.convert_to_tensor(options, tf.string))
    batch = tf.shape(questions)[0]
    # One row per (question, option), question-major like `options`' flattening.
    row_question = tf.repeat(tf.range(batch), NUM_OPTIONS)
    question_rows = tf.gather(questions, row_question)
    option_rows = tf.reshape(options, [-1])
    # Every blank takes the option: split at the blanks, append the option to every part, join,
    # and cut the one option too many from the end.
    parts = tf.strings.split(question_rows, BLANK)
    filled = parts.with_flat_values(parts.flat_values + tf.repeat(option_rows, parts.row_lengths()))
    joined = tf.strings.reduce_join(filled, axis=1)
    kept = tf.strings.length(joined) - tf.strings.length(option_rows)
    replaced = tf.strings.substr(joined, tf.zeros_like(kept), kept)
    has_blank = parts.row_lengths() > 1
    qa = tf.where(has_blank, replaced, tf.strings.join([question_rows, option_rows], separator=" "))

    # Both in one pass: a traced function (the export's serve_text) holds one tokenizer, not two.
    ids = tokenizer.tokenize(tf.concat([qa, articles], axis=0))
    qa_ids = ids[: batch * NUM_OPTIONS]
    qa_length = qa_ids.row_lengths()
    qa_ids = tf.ragged.boolean_mask(qa_ids, tf.ragged.range(qa_length) >= (qa_length - max_qa_length)[:, None])
    article_ids = tf.gather(ids[batch * NUM_OPTIONS :], row_question)
    article_room = max_seq_length - 3 - qa_ids.row_lengths()
    article_ids = tf.ragged.boolean_mask(article_ids, tf.ragged.range(article_ids.row_lengths()) < article_room[:, None])
    packed = tokenizer.pack(article_ids, qa_ids, max_seq_length=max_seq_length)
    return {name: tf.reshape(packed[name], [-1, NUM_OPTIONS, max_seq_length]) for name in SEQUENCE_FEATURES}


def letters(predictions) -> list[str]:
    """Option indices -> answer letters."""
    return [LETTERS[int(i)] for i in predictions]
