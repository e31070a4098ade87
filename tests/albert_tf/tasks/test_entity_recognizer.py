"""AlbertEntityRecognizer (keras-hub's task habits for named entities) and its Hugging Face round trip:
fit on words and tags, predict raw text -> entities whose offsets index the text, save_to_preset
and from_preset give it back whole, export serves what predict returns, and
`AlbertForTokenClassification` computes the same logits on the converted weights and converts back
with its id2label."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertEntityRecognizer
from albert_tf.data.tagging import word_spans
from albert_tf.models import AlbertTokenClassifier
from albert_tf.utils.errors import UserError
from tests.conftest import SMALL_DATA_DIR

SPM = SMALL_DATA_DIR / "albert" / "30k-clean.model"
CONFIG = AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=32)
WORDS = [["Ada", "lives", "in", "Paris", "."],
         ["Bob", "visited", "New", "York", "and", "Ada", "stayed", "in", "Rome", "with", "her", "friend", "Carl",
          "Jung", "today"]]
TAGS = [["B-person", "O", "O", "B-location", "O"],
        ["B-person", "O", "B-location", "I-location", "O", "B-person", "O", "O", "B-location", "O", "O", "O",
         "B-person", "I-person", "O"]]
# A sentence of 15 words is 3 windows of 14 pieces at most, 4 apart: the windows are exercised.
TEXTS = [" ".join(w) for w in WORDS] + ["", "   ", "  Ada   in\u00a0Paris  ", "Zoë  à Paris\tet Ünïcödé ́ x"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recognizer")
    keras.utils.set_random_seed(0)
    AlbertEncoder(CONFIG).save_to_preset(folder / "encoder", SPM)
    recognizer = AlbertEntityRecognizer.from_preset(folder / "encoder", labels=["person", "location"],
                                                    sequence_length=16, doc_stride=4)
    recognizer.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = recognizer.fit(WORDS, TAGS, epochs=60, verbose=0)
    return recognizer, history, folder


def test_it_learns_words_and_tags_and_predicts_entities_of_raw_text(trained):
    recognizer, history, _ = trained
    assert recognizer.labels == ["O", "B-person", "I-person", "B-location", "I-location"]
    assert recognizer.backbone is recognizer.tagger.encoder
    assert history.history["accuracy"][-1] == 1.0
    found = recognizer.predict(TEXTS)
    assert [[(e["text"], e["type"]) for e in row] for row in found[:2]] == [
        [("Ada", "person"), ("Paris", "location")],
        [("Bob", "person"), ("New York", "location"), ("Ada", "person"), ("Rome", "location"),
         ("Carl Jung", "person")]]
    assert found[2] == found[3] == []
    for text, row in zip(TEXTS, found):
        assert all(text[e["start"]:e["end"]] == e["text"] and 0 < e["score"] <= 1 for e in row)
    # Every word where str.split finds it (unicode, runs of spaces, no-break spaces, a lone
    # combining accent, empty text), its offsets the text's characters.
    tags = recognizer.tag(TEXTS)
    for row, text in enumerate(TEXTS):
        count = tags["num_words"][row]
        spans = list(zip(tags["word_start"][row][:count].tolist(), tags["word_end"][row][:count].tolist()))
        assert spans == word_spans(text)
        assert [w.decode() for w in tags["word_text"][row][:count]] == [text[a:b] for a, b in spans] == text.split()


def test_save_to_preset_and_export_give_it_back(trained, tmp_path):
    recognizer, _, _ = trained
    expected = recognizer.predict(TEXTS)
    saved = recognizer.save_to_preset(tmp_path / "preset")
    again = AlbertEntityRecognizer.from_preset(saved)
    assert (again.labels, again.doc_stride, again.preprocessor.sequence_length) == (recognizer.labels, 4, 16)
    assert again.predict(TEXTS) == expected
    # The task rule: the bare token classifier takes the recognizer's head (and gives it back).
    packed = recognizer.preprocessor(TEXTS)
    bare = AlbertTokenClassifier.from_preset(saved)
    np.testing.assert_array_equal(bare(packed, training=False), recognizer(packed, training=False))
    recognizer.export(tmp_path / "export")
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_text"](text=tf.constant(TEXTS))
    for row, entities in enumerate(expected):
        assert served["num_entities"][row] == len(entities)
        texts = [t.decode() for t in served["entity_text"][row][: len(entities)].numpy()]
        assert texts == [e["text"] for e in entities]
        np.testing.assert_allclose(served["entity_score"][row][: len(entities)], [e["score"] for e in entities],
                                   atol=1e-5)


def test_bad_words_tags_and_labels_are_one_line(trained):
    recognizer, _, folder = trained
    with pytest.raises(UserError, match=r"^y\[0\] holds the tag 'B-org', not one of the labels \(O, B-person, "):
        recognizer.fit([["Acme"]], [["B-org"]], epochs=1, verbose=0)
    with pytest.raises(UserError, match=r"^x\[0\] holds 2 words and y\[0\] 1 tags$"):
        recognizer.fit([["Acme", "Inc"]], [["O"]], epochs=1, verbose=0)
    with pytest.raises(UserError, match=r"^x\[0\] is not a list of words"):
        recognizer.fit(["Acme Inc"], [["O"]], epochs=1, verbose=0)
    with pytest.raises(UserError, match=r"holds an encoder, not an AlbertEntityRecognizer: give labels for a new head"):
        AlbertEntityRecognizer.from_preset(folder / "encoder")
    with pytest.raises(UserError, match=r"^label 'X-person' is not a BIO tag"):
        AlbertEntityRecognizer.from_preset(folder / "encoder", labels=["O", "X-person"])


@pytest.mark.slow
def test_hugging_faces_token_classifier_computes_the_same_logits_and_converts_back(trained, tmp_path):
    import torch
    import transformers

    from albert_tf.presets.convert import convert_hf, convert_preset_to_hf

    recognizer, _, _ = trained
    hf_dir = convert_preset_to_hf(recognizer.save_to_preset(tmp_path / "preset"), tmp_path / "hf")
    hf = transformers.AlbertForTokenClassification.from_pretrained(hf_dir).eval()
    assert hf.config.id2label == dict(enumerate(recognizer.labels))
    assert not any("pooler" in name for name in hf.state_dict())
    packed = recognizer.preprocessor(TEXTS)
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(packed["input_ids"].numpy(), dtype=torch.long),
                    attention_mask=torch.tensor(packed["input_mask"].numpy(), dtype=torch.long),
                    token_type_ids=torch.tensor(packed["segment_ids"].numpy(), dtype=torch.long)).logits.numpy()
    ours = recognizer(packed, training=False).numpy()
    mask = packed["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(theirs[mask], ours[mask], atol=1e-5, rtol=0)
    # transformers' own save (its names, its config) converts back: the same tags and logits.
    hf.save_pretrained(tmp_path / "saved_by_hf")
    (tmp_path / "saved_by_hf" / "spiece.model").write_bytes(SPM.read_bytes())
    back = AlbertEntityRecognizer.from_preset(convert_hf(tmp_path / "saved_by_hf", tmp_path / "back"),
                                              sequence_length=16, doc_stride=4)
    assert back.labels == recognizer.labels
    assert json.loads((tmp_path / "back" / "task.json").read_text())["class"] == "AlbertEntityRecognizer"
    np.testing.assert_allclose(back(packed, training=False).numpy()[mask], ours[mask], atol=1e-5, rtol=0)
    spans = lambda found: [[(e["text"], e["type"], e["start"], e["end"]) for e in row] for row in found]  # noqa: E731
    assert spans(back.predict(TEXTS)) == spans(recognizer.predict(TEXTS))
