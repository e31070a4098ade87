"""Hugging Face's ALBERT task models to presets of ours and back: which head is which task.

Each of transformers' ALBERT task models is the encoder (`albert.*`) and one dense layer
(`albert_tf.checkpoints.names.HF_TASK_HEADS`); its `config.json` says which (`architectures`) and
names the outputs (`id2label`, `label2id`, `problem_type`):

    AlbertForSequenceClassification  classifier.* on the pooled output  AlbertTextClassifier (id2label's labels)
    AlbertForMultipleChoice          classifier.* (1 output a choice)   AlbertMultipleChoice
    AlbertForTokenClassification     classifier.* on every token        AlbertEntityRecognizer (BIO tags in
                                                                        id2label), else AlbertTokenClassifier
    AlbertForQuestionAnswering       qa_outputs.* (start, end)          AlbertSpanLabeler

so `from_preset` of the matching class restores the head by the one task rule
(`albert_tf.presets.loader.task_arguments`), and a preset of any of them goes back to the same
Hugging Face class with the same logits. The two without a pooler in Hugging Face get a pooler of
zeros in the preset, which none of their heads reads. Tensors and config keys only: the files are
read and written by `albert_tf.presets.convert`, and no model is built.
"""

from __future__ import annotations

import numpy as np

from albert_tf.checkpoints.names import HF_TASK_HEADS, encoder_weight_names, task_head_weight_names, to_ours, to_source
from albert_tf.data.windows import ANSWER_RULE, ANSWER_RULES, HF_ANSWERS, RELEASE_ANSWERS
from albert_tf.presets import folder as preset_folder

SEQUENCE_CLASSIFICATION = "AlbertForSequenceClassification"
MULTIPLE_CHOICE = "AlbertForMultipleChoice"
TOKEN_CLASSIFICATION = "AlbertForTokenClassification"
QUESTION_ANSWERING = "AlbertForQuestionAnswering"
SPAN_LABELER_TASK = "AlbertSpanLabeler"
MULTIPLE_CHOICE_TASK = "AlbertMultipleChoice"
# The Hugging Face class of each task class of ours that has one.
ARCHITECTURE_OF = {
    preset_folder.TEXT_CLASSIFIER_TASK: SEQUENCE_CLASSIFICATION,
    "AlbertClassifier": SEQUENCE_CLASSIFICATION,
    MULTIPLE_CHOICE_TASK: MULTIPLE_CHOICE,
    preset_folder.ENTITY_RECOGNIZER_TASK: TOKEN_CLASSIFICATION,
    preset_folder.TOKEN_CLASSIFIER_TASK: TOKEN_CLASSIFICATION,
    SPAN_LABELER_TASK: QUESTION_ANSWERING,
}
# What the sequence classifier's outputs mean (transformers' `problem_type`): kept in task.json
# beside the class, as our classifier has one head for all three (docs/presets.md).
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
_POOLER = "pooler/"


def task_architecture(values: dict) -> str | None:
    """The task model a Hugging Face config names in `architectures`; None for the encoder and the
    pretraining heads."""
    found = [a for a in values.get("architectures") or [] if a in HF_TASK_HEADS]
    return found[0] if found else None


def labels_of_hf(values: dict, num_labels: int, source: str) -> list[str]:
    """The names of a Hugging Face config's `id2label`, in id order (LABEL_<i> where it has none)."""
    id2label = values.get("id2label") or {}
    try:
        names = {int(k): str(v) for k, v in id2label.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{source}: id2label keys must be the label ids, got {sorted(id2label)[:5]}") from None
    return [names.get(i, f"LABEL_{i}") for i in range(num_labels)]


def problem_type_of_hf(values: dict, num_labels: int, source: str) -> str:
    """transformers' rule when `problem_type` is unset: one label is a regression."""
    problem = values.get("problem_type") or ("regression" if num_labels == 1 else "single_label_classification")
    if problem not in PROBLEM_TYPES:
        raise ValueError(f"{source}: problem_type {problem!r} is none of {list(PROBLEM_TYPES)}")
    return problem


def _task(architecture: str, values: dict, outputs: int, dropout: float, source: str) -> dict:
    """The task.json of a Hugging Face task model whose head has `outputs` outputs."""
    from albert_tf.data.tagging import check_labels

    expected = {QUESTION_ANSWERING: 2, MULTIPLE_CHOICE: 1}.get(architecture)
    if expected is not None and outputs != expected:
        raise ValueError(f"{source}: an {architecture} whose {HF_TASK_HEADS[architecture].hf}.weight has {outputs} "
                         f"outputs; it has {expected}")
    if architecture == QUESTION_ANSWERING:
        return {"class": SPAN_LABELER_TASK, "arguments": {}, ANSWER_RULE: HF_ANSWERS}
    if architecture == MULTIPLE_CHOICE:
        # Hugging Face's model takes any number of choices; ours is told it (num_choices=, 4 by default).
        return {"class": MULTIPLE_CHOICE_TASK, "arguments": {"dropout": dropout}}
    labels = labels_of_hf(values, outputs, source)
    arguments = {"num_classes": outputs, "dropout": dropout}
    if architecture == SEQUENCE_CLASSIFICATION:
        return {"class": preset_folder.TEXT_CLASSIFIER_TASK, "arguments": {**arguments, "labels": labels},
                "problem_type": problem_type_of_hf(values, outputs, source)}
    try:
        check_labels(labels)
        return {"class": preset_folder.ENTITY_RECOGNIZER_TASK, "arguments": {**arguments, "labels": labels}}
    except ValueError:  # not BIO tags: a tagger, its label names kept beside (as a run's task.json keeps them)
        return {"class": preset_folder.TOKEN_CLASSIFIER_TASK, "arguments": arguments, "labels": labels}


def answer_rule(recorded: dict | None) -> str:
    """The answer rule a source's task.json records (`ANSWER_RULES`; `recorded` as
    `albert_tf.serving.task_exports.run_info` reads it): the release's unless it names one."""
    rule = (recorded or {}).get(ANSWER_RULE) or RELEASE_ANSWERS
    if rule not in ANSWER_RULES:
        raise ValueError(f"task.json's {ANSWER_RULE} {rule!r} is none of {list(ANSWER_RULES)}")
    return rule


def split_task(architecture: str, config, values: dict, tensors: dict, source: str,
               encoder_only: bool = False) -> tuple[dict, dict, dict | None]:
    """A Hugging Face task model's tensors (`values`: its config.json) -> `(encoder, heads, task)`:
    the encoder's tensors by Hugging Face's names (the head's taken out, a pooler of zeros put in
    where the class has none), the head's by ours, and the task.json of our matching task (module
    docstring; None with `encoder_only`); a head missing or of another size than its class has is
    an error naming it."""
    head = HF_TASK_HEADS[architecture]
    weight = tensors.get(f"{head.hf}.weight")
    if weight is None or f"{head.hf}.bias" not in tensors:
        raise ValueError(f"{source}: an {architecture} without {head.hf}.weight and {head.hf}.bias")
    outputs = int(np.shape(weight)[0])
    heads = to_ours(task_head_weight_names(config, architecture, outputs), tensors, source)
    encoder = {k: v for k, v in tensors.items() if not k.startswith(head.hf + ".")}
    if not head.pooler:
        for name in encoder_weight_names(config, "hf"):
            if name.ours.startswith(_POOLER) and name.source not in encoder:
                encoder[name.source] = np.zeros(name.source_shape, np.float32)
    dropout = values.get("classifier_dropout_prob")
    dropout = float(config.hidden_dropout_prob if dropout is None else dropout)
    return encoder, heads, None if encoder_only else _task(architecture, values, outputs, dropout, source)


def task_to_hf(recorded: dict, config, encoder: dict, heads: dict) -> tuple[dict, dict]:
    """A task preset of ours (`recorded`: its task.json, of one of `ARCHITECTURE_OF`'s classes; its
    encoder's and heads' tensors by our names) -> `(tensors, config)`: the Hugging Face tensors and
    the config.json keys (architectures, id2label, problem_type) of the same task model."""
    arguments = recorded.get("arguments") or {}
    return head_to_hf(ARCHITECTURE_OF[recorded["class"]], config, encoder, heads,
                      labels=arguments.get("labels") or recorded.get("labels"),
                      dropout_rate=arguments.get("dropout", 0.1), problem_type=recorded.get("problem_type"))


def head_to_hf(architecture: str, config, encoder: dict, heads: dict, labels=None, dropout_rate: float = 0.1,
               problem_type: str | None = None) -> tuple[dict, dict]:
    """An encoder's tensors and a task head's (by our names, `<ours>/kernel` [H, N] and `<ours>/bias`)
    -> `(tensors, config keys)` of `architecture`; `labels` name a classifier's outputs (`id2label`)."""
    head = HF_TASK_HEADS[architecture]
    names = [n for n in encoder_weight_names(config, "hf") if head.pooler or not n.ours.startswith(_POOLER)]
    num_labels = int(np.shape(heads[f"{head.ours}/kernel"])[1])
    tensors = {**to_source(names, encoder),
               **to_source(task_head_weight_names(config, architecture, num_labels), heads)}
    keys = {"architectures": [architecture], "classifier_dropout_prob": dropout_rate}
    if architecture in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION):
        labels = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]
        if len(labels) != num_labels:
            what = "a token classifier" if architecture == TOKEN_CLASSIFICATION else "a classifier"
            raise ValueError(f"{len(labels)} labels for {what} of {num_labels} outputs")
        keys.update(num_labels=num_labels, id2label={str(i): label for i, label in enumerate(labels)},
                    label2id={label: i for i, label in enumerate(labels)})
    if architecture == SEQUENCE_CLASSIFICATION:
        keys["problem_type"] = problem_type or ("regression" if num_labels == 1 else "single_label_classification")
    return tensors, keys
