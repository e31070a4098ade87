"""Every Hugging Face ALBERT task head in and back out (albert_tf.presets.hf_heads).

Per head, a tiny model made with transformers in the test, its parameters all random, saved with
`save_pretrained` (the Hub's layout: config.json with `architectures`, `id2label`/`label2id`,
`problem_type`, `finetuning_task`; model.safetensors with `albert.*` and `classifier.*` or
`qa_outputs.*`; spiece.model) becomes our matching task by `from_preset(folder)`, with transformers'
logits to 1e-5; its preset converted back loads in the same transformers class with the same logits
and names. One of them comes through hf:// from the loopback Hub stand-in.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
import torch
import transformers

from albert_tf import AlbertConfig
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_labeler import AlbertSpanLabeler
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.presets import convert
from albert_tf.tasks.entity_recognizer import AlbertEntityRecognizer
from albert_tf.tasks.text_classifier import AlbertTextClassifier
from tests.albert_tf import hf_reference

TINY_SPM = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "export" / "tiny_spm.model"
# Sizes all distinct, two groups of two inner layers: a transposed or misplaced tensor cannot fit.
CONFIG = AlbertConfig(vocab_size=120, embedding_size=10, hidden_size=24, num_hidden_layers=4, num_attention_heads=3,
                      intermediate_size=40, max_position_embeddings=48, num_hidden_groups=2, inner_group_num=2)
SENTIMENT = {0: "negative", 1: "positive", 2: "neutral"}
TOPICS = {0: "toxic", 1: "obscene", 2: "threat", 3: "insult"}
TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "cache"))


def _hf_model(architecture: str, folder: pathlib.Path, seed: int = 0, config: AlbertConfig = CONFIG,
              vocab: pathlib.Path = TINY_SPM, **values):
    """A transformers task model of `config`, every parameter random, saved as the Hub holds it."""
    hf_config = hf_reference.hf_config(config)
    for key, value in values.items():
        setattr(hf_config, key, value)
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(hf_config).eval()
    with torch.no_grad():  # matrices large, biases small: else every row's output is the biases'
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            else:
                p.copy_((0.02 if name.endswith("bias") else 0.3) * torch.randn_like(p))
    model.save_pretrained(folder)
    shutil.copyfile(vocab, folder / "spiece.model")
    return model


def _batch(choices: int = 0, seed: int = 0):
    batch, length = 3, 12
    shape = (batch, choices, length) if choices else (batch, length)
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, CONFIG.vocab_size, size=shape).astype(np.int32)
    mask = np.ones(shape, np.int32)
    mask[1, ..., 8:] = 0
    mask[2, ..., 5:] = 0
    ids = ids * mask
    segments = np.zeros(shape, np.int32)
    segments[..., 6:] = mask[..., 6:]
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _theirs(model, batch):
    with torch.no_grad():
        return model(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                     token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long))


def _close(ours, theirs, mask=None):
    ours, theirs = np.asarray(ours), theirs.numpy()
    if mask is not None:  # the padded positions' logits: read by no one, computed differently
        ours, theirs = ours[mask.astype(bool)], theirs[mask.astype(bool)]
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)
    assert np.std(theirs) > 1e-2  # the logits vary: not a comparison of constants


def _task_json(preset) -> dict:
    return json.loads((pathlib.Path(preset) / "task.json").read_text())


@pytest.mark.parametrize("problem_type,id2label", [
    ("single_label_classification", SENTIMENT), ("regression", {0: "score"}), ("multi_label_classification", TOPICS),
])
def test_sequence_classifiers_come_in_with_their_labels_and_go_back(problem_type, id2label, tmp_path):
    theirs = _hf_model("AlbertForSequenceClassification", tmp_path / "hf", num_labels=len(id2label),
                       id2label=id2label, label2id={v: k for k, v in id2label.items()},
                       problem_type=problem_type, finetuning_task="sst2")
    batch = _batch()
    expected = _theirs(theirs, batch).logits
    classifier = AlbertTextClassifier.from_preset(str(tmp_path / "hf"))
    assert classifier.labels == list(id2label.values()) and classifier.num_classes == len(id2label)
    _close(classifier(batch, training=False), expected)
    # An AlbertClassifier keeps the same head by the task rule (not a new one).
    _close(AlbertClassifier.from_preset(str(tmp_path / "hf"))(batch, training=False), expected)

    preset = convert.convert_hf(tmp_path / "hf", tmp_path / "preset")
    assert _task_json(preset)["problem_type"] == problem_type
    back = transformers.AlbertForSequenceClassification.from_pretrained(
        convert.convert_preset_to_hf(preset, tmp_path / "back")).eval()
    assert back.config.id2label == id2label and back.config.problem_type == problem_type
    _close(_theirs(back, batch).logits, expected)


def test_question_answering_is_a_span_labeler_both_ways(tmp_path):
    theirs = _hf_model("AlbertForQuestionAnswering", tmp_path / "hf", finetuning_task="squad_v2")
    assert "albert.pooler.weight" not in theirs.state_dict()  # Hugging Face's has no pooler
    batch = _batch()
    expected = _theirs(theirs, batch)
    ours = AlbertSpanLabeler.from_preset(str(tmp_path / "hf"))(batch, training=False)
    _close(ours["start_logits"], expected.start_logits, batch["input_mask"])
    _close(ours["end_logits"], expected.end_logits, batch["input_mask"])

    preset = convert.convert_hf(tmp_path / "hf", tmp_path / "preset")
    # transformers' answer rule goes with the model trained there (test_hf_qa_pipeline.py)
    assert _task_json(preset) == {"class": "AlbertSpanLabeler", "arguments": {}, "answer_rule": "huggingface"}
    back = transformers.AlbertForQuestionAnswering.from_pretrained(
        convert.convert_preset_to_hf(preset, tmp_path / "back")).eval()
    assert set(back.state_dict()) == set(theirs.state_dict())
    again = _theirs(back, batch)
    _close(again.start_logits, expected.start_logits, batch["input_mask"])
    _close(again.end_logits, expected.end_logits, batch["input_mask"])


def test_multiple_choice_comes_in_for_any_number_of_choices_and_goes_back(tmp_path):
    theirs = _hf_model("AlbertForMultipleChoice", tmp_path / "hf", classifier_dropout_prob=0.2, finetuning_task="swag")
    batch = _batch(choices=3)
    expected = _theirs(theirs, batch).logits
    model = AlbertMultipleChoice.from_preset(str(tmp_path / "hf"), num_choices=3)
    assert model.dropout == pytest.approx(0.2)
    _close(model(batch, training=False), expected)

    preset = convert.convert_hf(tmp_path / "hf", tmp_path / "preset")
    back = transformers.AlbertForMultipleChoice.from_pretrained(
        convert.convert_preset_to_hf(preset, tmp_path / "back")).eval()
    _close(_theirs(back, batch).logits, expected)


@pytest.mark.parametrize("id2label,task_class", [(TAGS, "AlbertEntityRecognizer"),
                                                 ({0: "NOUN", 1: "VERB", 2: "ADJ"}, "AlbertTokenClassifier")])
def test_token_classifiers_come_in_as_recognizer_or_tagger_and_go_back(id2label, task_class, tmp_path):
    theirs = _hf_model("AlbertForTokenClassification", tmp_path / "hf", num_labels=len(id2label), id2label=id2label,
                       label2id={v: k for k, v in id2label.items()})
    batch = _batch()
    expected = _theirs(theirs, batch).logits
    _close(AlbertTokenClassifier.from_preset(str(tmp_path / "hf"))(batch, training=False), expected,
           batch["input_mask"])
    preset = convert.convert_hf(tmp_path / "hf", tmp_path / "preset")
    assert _task_json(preset)["class"] == task_class
    if task_class == "AlbertEntityRecognizer":
        assert AlbertEntityRecognizer.from_preset(preset, sequence_length=16).labels == list(id2label.values())
    back = transformers.AlbertForTokenClassification.from_pretrained(
        convert.convert_preset_to_hf(preset, tmp_path / "back")).eval()
    assert back.config.id2label == id2label
    _close(_theirs(back, batch).logits, expected, batch["input_mask"])


def test_a_head_of_another_size_and_encoder_only_are_named(tmp_path):
    _hf_model("AlbertForQuestionAnswering", tmp_path / "hf", num_labels=3)
    with pytest.raises(ValueError, match=r"an AlbertForQuestionAnswering whose qa_outputs.weight has 3 outputs; "
                                         r"it has 2"):
        convert.convert_hf(tmp_path / "hf", tmp_path / "preset")
    encoder_only = convert.convert_hf(tmp_path / "hf", tmp_path / "encoder", encoder_only=True)
    assert not (pathlib.Path(encoder_only) / "task.json").exists()
    (tmp_path / "hf" / "model.safetensors").unlink()
    _hf_model("AlbertForSequenceClassification", tmp_path / "cls")
    from safetensors.numpy import load_file, save_file

    tensors = load_file(tmp_path / "cls" / "model.safetensors")
    del tensors["classifier.bias"]
    save_file(tensors, tmp_path / "cls" / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="an AlbertForSequenceClassification without classifier.weight and "
                                         "classifier.bias"):
        convert.convert_hf(tmp_path / "cls", tmp_path / "preset2")


def test_a_hub_sequence_classifier_comes_in_through_hf_scheme(tmp_path, monkeypatch):
    """hf://<repo> of a sequence classifier from the loopback Hub (release_replicas.LoopbackServer)."""
    from tests.albert_tf import release_replicas as replicas

    theirs = _hf_model("AlbertForSequenceClassification", tmp_path / "hf", num_labels=2,
                       id2label={0: "NEGATIVE", 1: "POSITIVE"}, label2id={"NEGATIVE": 0, "POSITIVE": 1})
    server = replicas.LoopbackServer()
    try:
        server.repos["textattack/albert-tiny-SST-2"] = replicas.hub_task_files(tmp_path / "hf")
        replicas.point_the_hub_at(monkeypatch, server, tmp_path / "hub")
        classifier = AlbertTextClassifier.from_preset("hf://textattack/albert-tiny-SST-2")
    finally:
        server.stop()
    assert classifier.labels == ["NEGATIVE", "POSITIVE"]
    batch = _batch()
    _close(classifier(batch, training=False), _theirs(theirs, batch).logits)
    assert server.count("pytorch_model.bin") >= 1  # the repository has no model.safetensors
    assert server.count("training_args.bin") == server.count("tokenizer_config.json") == 0
