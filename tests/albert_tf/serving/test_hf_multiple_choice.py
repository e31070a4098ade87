"""A multiple-choice model of transformers served by one command (issue 54: multiple choice logits).

An `AlbertForMultipleChoice` made with transformers (every parameter random, saved by
`save_pretrained`, the release's 30k-clean.model as spiece.model), as a Hub repository (the loopback
stand-in), goes out by `albert-export --preset hf://...` (the files fetched, then read as a local
folder's are) as the multiple-choice SavedModel (`albert_tf.serving.multiple_choice`): its `serve_text`
builds RACE's rows (`[CLS] article [SEP] question+option [SEP]`, the release's rule), and transformers'
model gives the served logits to 1e-5 on those rows, fed as ids to both. transformers' model takes
whatever pairs its user trained it on (SWAG's context and ending, ...); for a question that is no
cloze and fits the row, its tokenizer's pair (article, question + " " + option) is the served row.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from albert_tf.cli import export as export_cli
from albert_tf.presets.model_source import load_saved_model
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.race import features
from finetune.race.readers import Question
from tests.albert_tf import release_replicas as replicas
from tests.albert_tf.presets.test_hf_heads import _hf_model, cache  # noqa: F401  (the cache fixture)
from tests.albert_tf.serving.test_hf_pipelines import CONFIG, SPM
from tests.helpers import console_script

MAX_SEQ_LENGTH = 64  # the default question+option length: a quarter of it, 16 (the release's 128 of 512)
QUESTIONS = [
    ("Tom kept a small red ball in his bag and took it to school every day.", "What colour is Tom's ball?",
     ["red", "blue", "green", "yellow"]),
    ("The bridge opened to traffic in May 1937 after four years of work.", "The bridge opened in _.",
     ["1937", "May 1933", "four years", "the spring of a very long, cold and rainy year that nobody in the town forgot"]),
    ("She plays the cello in a string quartet every Sunday, and teaches on Mondays.", "When does she teach?",
     ["on Sundays", "on Mondays", "every day", "never"]),
]


def _texts() -> dict:
    articles, questions, options = zip(*QUESTIONS)
    return {"article": tf.constant(articles), "question": tf.constant(questions),
            "options": tf.constant([list(o) for o in options])}


def _transformers_logits(model, rows) -> np.ndarray:
    with torch.no_grad():
        return model(input_ids=torch.tensor(rows["input_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(rows["input_mask"], dtype=torch.long),
                     token_type_ids=torch.tensor(rows["segment_ids"], dtype=torch.long)).logits.numpy()


def _export(preset, output_dir, monkeypatch, capsys) -> dict:
    code, out, err = console_script(export_cli.run, [
        "albert-export", "--preset", preset, "--max_seq_length", MAX_SEQ_LENGTH, "--serving_version", 1,
        "--output_dir", output_dir], monkeypatch, capsys)
    assert code == 0, err
    assert f"wrote the AlbertMultipleChoice SavedModel (float32) to {output_dir / '1'}" in out
    loaded = load_saved_model(str(output_dir / "1"))
    rows = {k: v.numpy() for k, v in loaded.signatures["tokenize"](**_texts()).items()}
    served = {k: v.numpy() for k, v in loaded.signatures["serve_text"](**_texts()).items()}
    fed = {k: tf.constant(v) for k, v in rows.items()}
    ids = {k: v.numpy() for k, v in loaded.signatures["serving_default"](**fed).items()}
    return {"rows": rows, "text": served, "ids": ids}


def test_albert_export_of_a_hub_multiple_choice_model_gives_transformers_logits(tmp_path, monkeypatch, capsys):
    theirs = _hf_model("AlbertForMultipleChoice", tmp_path / "hf", config=CONFIG, vocab=SPM)
    repo = "someone/albert-tiny-race"
    server = replicas.LoopbackServer()
    server.repos[repo] = replicas.hub_task_files(tmp_path / "hf")
    replicas.point_the_hub_at(monkeypatch, server, tmp_path / "hub")
    try:
        hub = _export(f"hf://{repo}", tmp_path / "serving", monkeypatch, capsys)
    finally:
        server.stop()
    assert (tmp_path / "serving" / "1" / "assets.extra" / "tf_serving_warmup_requests").is_file()

    # The rows are RACE's, built as the fine-tuning tool builds its records (a quarter of the row for
    # the question+option: the long option of the cloze question keeps its last 16 pieces).
    tokenizer = AlbertTokenizer(str(SPM))
    questions = [Question(str(i), "", a, q, tuple(o), "A") for i, (a, q, o) in enumerate(QUESTIONS)]
    python_rows = list(features.convert_questions(questions, tokenizer, MAX_SEQ_LENGTH, MAX_SEQ_LENGTH // 4))
    for name in features.SEQUENCE_FEATURES:
        np.testing.assert_array_equal(hub["rows"][name], [r[name] for r in python_rows], err_msg=name)
    _, cloze, options = QUESTIONS[1]
    assert len(tokenizer.encode(features.qa_text(cloze, options[3], tokenizer))) > MAX_SEQ_LENGTH // 4
    # transformers' tokenizer pairs (article, question + " " + option) into the same row where the
    # question has no blank and nothing is cut.
    hf_tokenizer = transformers.AlbertTokenizer.from_pretrained(tmp_path / "hf")
    for index in (0, 2):
        article, question, options = QUESTIONS[index]
        pairs = hf_tokenizer([article] * 4, [f"{question} {o}" for o in options], padding="max_length",
                             max_length=MAX_SEQ_LENGTH, return_token_type_ids=True)
        np.testing.assert_array_equal(hub["rows"]["input_ids"][index], pairs["input_ids"])
        np.testing.assert_array_equal(hub["rows"]["segment_ids"][index], pairs["token_type_ids"])

    expected = _transformers_logits(theirs, hub["rows"])
    assert np.std(expected) > 1e-2  # the logits vary: not a comparison of constants
    for call in ("ids", "text"):
        np.testing.assert_allclose(hub[call]["logits"], expected, atol=1e-5, rtol=0, err_msg=call)
        probabilities = np.exp(expected - expected.max(-1, keepdims=True))
        np.testing.assert_allclose(hub[call]["probabilities"], probabilities / probabilities.sum(-1, keepdims=True),
                                   atol=1e-5, err_msg=call)
        assert [p.decode() for p in hub[call]["prediction"]] == ["ABCD"[i] for i in expected.argmax(-1)]

