"""NER records: words to the release's pieces (the word's label on its first piece, the others not
scored), windows with a stride where each word is read exactly once (in its most-context window),
and the graph of the SavedModel (albert_tf.serving.tagging) reading the same words and tags as the
Python records on any text."""

import numpy as np

from albert_tf.data import tagging, windows
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.ner import readers
from finetune.ner.features import convert_sentences
from tests.conftest import SMALL_DATA_DIR

TOKENIZER = AlbertTokenizer(SMALL_DATA_DIR / "albert" / "30k-clean.model")


def test_a_words_label_is_on_its_first_piece():
    words = ["Redondo", "Beach", "Blvd", "."]
    ids, piece_words = tagging.word_pieces(TOKENIZER, words)
    pieces = TOKENIZER.convert_ids_to_tokens(ids.tolist())
    # Each word's pieces are its own tokenization's (the first one carrying "▁").
    assert [p for p, w in zip(pieces, piece_words) if w == 0] == TOKENIZER.tokenize("Redondo")
    assert piece_words.tolist() == sorted(piece_words.tolist()) and set(piece_words.tolist()) == {0, 1, 2, 3}
    (record,) = tagging.tagging_records(ids, piece_words, [3, 4, 4, 0], 32, 8, TOKENIZER.cls_id, TOKENIZER.sep_id)
    n = len(ids)
    first = np.r_[True, piece_words[1:] != piece_words[:-1]]
    assert record["input_ids"][: n + 2].tolist() == [TOKENIZER.cls_id, *ids.tolist(), TOKENIZER.sep_id]
    assert record["input_mask"].sum() == n + 2
    assert record["label_ids"][1: n + 1].tolist() == [[3, 4, 4, 0][w] if f else -1 for w, f in zip(piece_words, first)]
    assert record["label_ids"][0] == record["label_ids"][n + 1] == -1
    assert record["word_ids"][1: n + 1].tolist() == [w if f else -1 for w, f in zip(piece_words, first)]


def test_windows_read_every_word_once_and_learn_it_in_every_window():
    sentence = readers.read_conll(SMALL_DATA_DIR / "ner" / "wnut17" / "wnut17train.conll")[0]
    labels = readers.labels_of([sentence])
    ids, piece_words = tagging.word_pieces(TOKENIZER, sentence.words)
    records = list(convert_sentences([sentence], TOKENIZER, labels, max_seq_length=10, doc_stride=3))
    spans = windows.window_spans(len(ids), 8, 3)
    assert len(records) == len(spans) > 3
    read = [w for r in records for w in r["word_ids"].tolist() if w >= 0]
    assert read == list(range(len(sentence.words)))  # each word once, in order
    best = windows.max_context_windows(spans, len(ids))
    for index, (record, (start, count)) in enumerate(zip(records, spans)):
        assert record["input_ids"][1: count + 1].tolist() == ids[start: start + count].tolist()
        for position in range(count):
            piece = start + position
            is_first = piece == 0 or piece_words[piece] != piece_words[piece - 1]
            label = labels.index(sentence.tags[piece_words[piece]]) if is_first else -1
            assert record["label_ids"][position + 1] == label
            assert (record["word_ids"][position + 1] >= 0) == (is_first and best[piece] == index)
    # The tags read back from the windows are the file's.
    tag_ids = np.stack([r["label_ids"] for r in records]).clip(0)
    assert tagging.word_tags([len(sentence.words)], np.zeros(len(records), int),
                             np.stack([r["word_ids"] for r in records]), tag_ids, labels) == [list(sentence.tags)]


def test_entities_are_conllevals_chunks():
    tags = ["I-A", "I-A", "B-A", "I-B", "O", "B-B", "I-B", "I-A"]
    assert tagging.entities(tags) == [("A", 0, 2), ("A", 2, 3), ("B", 3, 4), ("B", 5, 7), ("A", 7, 8)]


def test_the_serving_graph_reads_the_python_records_words_and_tags():
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.models import AlbertTokenClassifier
    from albert_tf.serving.tagging import TaggingServer
    from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer

    keras.utils.set_random_seed(0)
    config = AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    labels = tagging.bio_labels(["PER", "LOC"])
    model = AlbertTokenClassifier(config, len(labels))
    server = TaggingServer(model, AlbertGraphTokenizer(TOKENIZER.model_proto), 8, labels, 3)
    texts = ["  Jürgen  visited   New York\u00a0City yesterday , said Ms. Ólafsdóttir  ", "", "   ", "a\u0301 b",
             "Ünïcödé ́ x\u2003ﬁn ½"]
    served = {k: v.numpy() for k, v in server.tag(tf.constant(texts)).items()}
    for row, text in enumerate(texts):
        spans = tagging.word_spans(text)
        words = [text[a:b] for a, b in spans]
        ids, piece_words = tagging.word_pieces(TOKENIZER, words)
        records = tagging.tagging_records(ids, piece_words, None, 8, 3, TOKENIZER.cls_id, TOKENIZER.sep_id)
        logits = model({k: np.stack([r[k] for r in records]) for k in ("input_ids", "input_mask", "segment_ids")})
        tags = tagging.word_tags([len(words)], np.zeros(len(records), int), np.stack([r["word_ids"] for r in records]),
                                 np.asarray(logits).argmax(-1), labels)[0]
        count = served["num_words"][row]
        assert [t.decode() for t in served["tags"][row][:count]] == tags
        assert list(zip(served["word_start"][row][:count], served["word_end"][row][:count])) == spans
        found = tagging.entities(tags)
        assert served["num_entities"][row] == len(found)
        for k, (kind, first, end) in enumerate(found):
            start, stop = spans[first][0], spans[end - 1][1]
            assert (served["entity_start"][row][k], served["entity_end"][row][k]) == (start, stop)
            assert served["entity_text"][row][k].decode() == text[start:stop]
            assert served["entity_type"][row][k].decode() == kind
    assert served["num_words"].tolist()[1:3] == [0, 0] and served["num_entities"].tolist()[1:3] == [0, 0]
