"""NER sentences -> cached records: `albert_tf.data.tagging` (words to pieces, windows, the first
piece of each word labelled and read once) over a split's sentences."""

from __future__ import annotations

from typing import Iterator, Sequence

from albert_tf.data.tagging import DOC_STRIDE, tagging_records, word_pieces
from finetune.ner.readers import Sentence


def convert_sentences(sentences: Sequence[Sentence], tokenizer, labels: Sequence[str], max_seq_length: int,
                      doc_stride: int = DOC_STRIDE, report=None, labelled: bool = True) -> Iterator[dict]:
    """The records of every sentence, in order (`tagging_records`; without `labelled`, a file to
    predict, its tags are not read: they may be of types the model lacks); `report` (a
    `finetune.cache.ConversionReport`) counts in its `details` the sentences cut into several
    windows (`windowed_sentences`) and the words that have no piece (`words_without_pieces`)."""
    index_of = {label: i for i, label in enumerate(labels)}
    for example_index, sentence in enumerate(sentences):
        ids, piece_words = word_pieces(tokenizer, sentence.words)
        word_labels = [index_of[tag] for tag in sentence.tags] if labelled else None
        records = tagging_records(ids, piece_words, word_labels, max_seq_length,
                                  doc_stride, tokenizer.cls_id, tokenizer.sep_id, example_index)
        if report is not None:
            details = report.details
            details["windowed_sentences"] = details.get("windowed_sentences", 0) + (len(records) > 1)
            missing = len(sentence.words) - len(set(piece_words.tolist()))
            details["words_without_pieces"] = details.get("words_without_pieces", 0) + missing
        yield from records
