"""The served answers equal transformers' pipelines on the same files (issue 54, item 2).

A sequence classifier made with transformers (every parameter random, saved by `save_pretrained`
with its `id2label`, beside the release's 30k-clean.model as spiece.model), and the tokenizer that
`AlbertTokenizer.from_pretrained` reads from the same folder: transformers'
`text-classification` pipeline and our export of the folder (`albert-export --model text_classifier
--serving_version 1`: `serve_text`, raw strings in) give the same label and the same score for every label, on 20
texts. A multi-label model's pipeline scores are the sigmoid of our logits (docs/conversion.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import transformers

from albert_tf import AlbertConfig
from albert_tf.cli import export as export_cli
from albert_tf.presets.model_source import load_saved_model
from albert_tf.tasks.text_classifier import AlbertTextClassifier
from tests.albert_tf.presets.test_hf_heads import _hf_model, cache  # noqa: F401  (the cache fixture)
from tests.conftest import SMALL_DATA_DIR
from tests.helpers import console_script

SPM = SMALL_DATA_DIR / "albert" / "30k-clean.model"
CONFIG = AlbertConfig(vocab_size=30000, embedding_size=10, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                      intermediate_size=40, max_position_embeddings=128)
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
TEXTS = [
    "A gem of a film.", "Dull, slow and far too long.", "I liked it.", "Not my kind of movie!",
    "The acting was fine; the plot was not.", "What a delight", "Meh.", "A total mess from start to end.",
    "Funny, warm and wise.", "It was OK, I guess?", "Loved every minute", "Worst film of the year",
    "The music alone is worth it.", "Too loud.", "A quiet, moving story.", "Nothing new here",
    "Bold and beautiful", "I fell asleep twice.", "Great cast, weak script", "See it!",
]


def _pipeline(folder):
    tokenizer = transformers.AlbertTokenizer.from_pretrained(folder)
    model = transformers.AlbertForSequenceClassification.from_pretrained(folder).eval()
    return transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, top_k=None, device="cpu")


def test_text_classification_answers_equal_the_pipelines(tmp_path, monkeypatch, capsys):
    """The journey of issue 54: a Hugging Face sequence classifier -> `albert-export --model
    text_classifier --serving_version 1` -> TF Serving's layout, whose serve_text answers as the
    pipeline does."""
    _hf_model("AlbertForSequenceClassification", tmp_path / "hf", config=CONFIG, vocab=SPM, num_labels=3,
              id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    theirs = _pipeline(tmp_path / "hf")(TEXTS)
    code, out, err = console_script(export_cli.run, [
        "albert-export", "--preset", tmp_path / "hf", "--model", "text_classifier", "--output_dir",
        tmp_path / "serving" / "sst2", "--serving_version", 1], monkeypatch, capsys)
    assert code == 0, err
    exported = tmp_path / "serving" / "sst2" / "1"
    assert (exported / "assets.extra" / "tf_serving_warmup_requests").is_file()
    served = load_saved_model(str(exported)).signatures["serve_text"](text=tf.constant(TEXTS))
    probabilities, labels = served["probabilities"].numpy(), [v.decode() for v in served["label"].numpy()]
    for text, answer, ours, label in zip(TEXTS, theirs, probabilities, labels):
        assert label == answer[0]["label"], text
        scores = {a["label"]: a["score"] for a in answer}
        np.testing.assert_allclose([scores[name] for name in LABELS.values()], ours, atol=1e-5, rtol=0,
                                   err_msg=text)
    assert np.ptp(probabilities, axis=0).max() > 1e-3  # the answers differ between texts: not a constant


def test_a_multi_label_models_pipeline_scores_are_the_sigmoid_of_our_logits(tmp_path):
    _hf_model("AlbertForSequenceClassification", tmp_path / "hf", config=CONFIG, vocab=SPM, num_labels=3, id2label=LABELS,
              label2id={v: k for k, v in LABELS.items()}, problem_type="multi_label_classification")
    theirs = _pipeline(tmp_path / "hf")(TEXTS)
    logits = AlbertTextClassifier.from_preset(str(tmp_path / "hf")).predict(TEXTS, verbose=0)
    for text, answer, ours in zip(TEXTS, theirs, 1 / (1 + np.exp(-logits))):
        scores = {a["label"]: a["score"] for a in answer}
        np.testing.assert_allclose([scores[name] for name in LABELS.values()], ours, atol=1e-5, rtol=0,
                                   err_msg=text)
    assert np.std(logits) > 1e-2
