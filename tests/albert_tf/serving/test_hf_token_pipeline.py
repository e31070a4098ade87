"""A token classifier of transformers finds here the entities transformers' pipeline finds (issue 54, item 2).

An `AlbertForTokenClassification` with BIO tags in `id2label`, made with transformers (every
parameter random, saved by `save_pretrained`, the release's 30k-clean.model as spiece.model), comes
in as our `AlbertEntityRecognizer` (`from_preset(folder)`, the one loader) whose `predict` runs the
exported `serve_text` graph, on 20 texts.

What is equal, and what differs by design: our recognizer tags words (runs of non-whitespace) by
their first piece, as the release's and CoNLL's NER does (`albert_tf.data.tagging`), and groups
words into entities as conlleval does; that is transformers' `aggregation_strategy="first"`
(its words found by its fallback heuristic for a tokenizer without word pieces: a piece starts a
word where a space precedes it), and our entities equal its entities there: type, start, end and
score (the mean over the entity's words of the first piece's tag probability) to 1e-5, on every
text but where the heuristic errs: a word whose first piece is a lone "▁" ("Ada": "▁" "ada") is two
words to it. `aggregation_strategy="simple"` tags every piece: on a text whose words are each one piece
it is the same thing, and our entities equal its entities there too (type, word, start, end,
score); a word of several pieces may be cut between two entities there, which a word tagger never
does (the one text below whose entities differ shows it). transformers' `word` is rebuilt from the
pieces (lowercased; under "first" without the spaces between words), ours is the input's
characters `text[start:end]`: the test compares `word` for "simple", lowercased.

The same folder goes out by one command, `albert-export --preset <folder>`: the tagger's SavedModel
(the default for a source holding a token classifier), whose `serve_text` gives the recognizer's
outputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import tensorflow as tf
import transformers

from albert_tf.cli import export as export_cli
from albert_tf.presets.model_source import load_saved_model
from albert_tf.tasks.entity_recognizer import AlbertEntityRecognizer
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from tests.albert_tf.presets.test_hf_heads import _hf_model, cache  # noqa: F401  (the cache fixture)
from tests.albert_tf.serving.test_hf_pipelines import CONFIG, SPM
from tests.helpers import console_script

TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC", 5: "B-ORG", 6: "I-ORG"}
TEXTS = [
    "Jane Austen lived in Bath", "The river runs through London to the sea", "Ada met Bob in Paris last year",
    "Mount Everest is in Nepal", "Our team played in Berlin and Rome", "She works for the United Nations",
    "Charles Darwin sailed on the Beagle", "The museum in Madrid opens at nine", "John and Mary moved to Canada",
    "Apple opened a new store in Tokyo", "The Nile flows north into the sea", "Marie Curie studied in Paris",
    "A train leaves Vienna for Prague", "He visited the White House once", "The bank in Zurich closed early",
    "Leonardo painted it in Florence", "Alice, Bob and Carol met in Oslo.", "Einstein taught at Princeton",
    "The Amazon crosses Brazil and Peru", "We flew from Sydney to Auckland",
]


def _pipelines(folder):
    tokenizer = transformers.AlbertTokenizer.from_pretrained(folder)
    model = transformers.AlbertForTokenClassification.from_pretrained(folder).eval()
    pieces = AlbertTokenizer(str(SPM))
    for text in TEXTS:  # transformers' pieces are the release's on these texts, so the logits agree
        assert tokenizer(text)["input_ids"][1:-1] == pieces.encode(text), text
    found = {}
    for strategy in ("first", "simple"):
        pipe = transformers.pipeline("token-classification", model=model, tokenizer=tokenizer,
                                     aggregation_strategy=strategy, device="cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Tokenizer does not support real words, using fallback heuristic"
            found[strategy] = pipe(TEXTS)
    return found, pieces


def _equal(ours, theirs, text, word: bool) -> bool:
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs):
        if (a["type"], a["start"], a["end"]) != (b["entity_group"], b["start"], b["end"]) or abs(a["score"] - b["score"]) > 1e-5:
            return False
        if a["text"] != text[a["start"]:a["end"]] or (word and a["text"].lower() != b["word"]):
            return False
    return True


def test_entities_equal_the_token_classification_pipelines_and_albert_exports(tmp_path, monkeypatch, capsys):
    _hf_model("AlbertForTokenClassification", tmp_path / "hf", config=CONFIG, vocab=SPM, num_labels=len(TAGS),
              id2label=TAGS, label2id={v: k for k, v in TAGS.items()})
    theirs, pieces = _pipelines(tmp_path / "hf")
    recognizer = AlbertEntityRecognizer.from_preset(str(tmp_path / "hf"))
    assert recognizer.labels == list(TAGS.values())
    ours = recognizer.predict(TEXTS)

    # transformers' heuristic makes a lone "▁" piece (before "ada" in "Ada") a word of its own.
    lone = pieces.encode("x ada")[1]
    assert pieces.tokenize("x ada")[1] == "\u2581"
    heuristic_holds = [lone not in pieces.encode(text) for text in TEXTS]
    assert 15 <= sum(heuristic_holds) < len(TEXTS)
    for text, mine, first, holds in zip(TEXTS, ours, theirs["first"], heuristic_holds):
        if holds:
            assert _equal(mine, first, text, word=False), (text, mine, first)
    one_piece_words = [all(len(pieces.encode(w)) == 1 for w in text.split()) for text in TEXTS]
    assert sum(one_piece_words) >= 10
    for text, mine, simple, single in zip(TEXTS, ours, theirs["simple"], one_piece_words):
        if single:
            assert _equal(mine, simple, text, word=True), (text, mine, simple)
    # Not all alike: entities of several types, of several words, and the by-design difference seen.
    assert {e["type"] for found in ours for e in found} == {"PER", "LOC", "ORG"}
    assert any(len(e["text"].split()) > 1 for found in ours for e in found)
    assert not all(_equal(m, s, t, word=False) for t, m, s in zip(TEXTS, ours, theirs["simple"]))

    # One command exports it (the tagger, the default for a source holding one): the recognizer's outputs.
    code, out, err = console_script(export_cli.run, [
        "albert-export", "--preset", tmp_path / "hf", "--max_seq_length", recognizer.preprocessor.sequence_length,
        "--output_dir", tmp_path / "serving"], monkeypatch, capsys)
    assert code == 0, err
    assert f"wrote the AlbertEntityRecognizer SavedModel (float32) to {tmp_path / 'serving'}" in out
    served = load_saved_model(str(tmp_path / "serving")).signatures["serve_text"](text=tf.constant(TEXTS))
    expected = recognizer.tag(TEXTS)
    assert sorted(served) == sorted(expected)
    for name, values in expected.items():
        if values.dtype.kind == "f":
            np.testing.assert_allclose(served[name].numpy(), values, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(served[name].numpy(), values, err_msg=name)
