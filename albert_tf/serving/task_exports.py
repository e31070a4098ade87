"""The one map from a model to its SavedModel, and the one function every door exports through
(Model Garden's export_savedmodel.py: a map from task to serving module, one export call).

`SAVED_MODELS` maps a model's class to the export of its signatures (`albert_tf.serving.export`'s
token-level module, `albert_tf.serving.tagging`'s tagger); `export_task_saved_model` looks the model
up there. albert-export calls it on any source (an encoder, a pretrainer, a fine-tuning run's
output_dir), every fine-tuning tool's task calls it from its `export_saved_model`,
and `albert_tf.tasks.AlbertTextClassifier.export` (albert-export --model text_classifier) too, so
`albert-export --preset runs/rte` writes what `albert-finetune-glue --export` wrote: the same
signatures and outputs, one classifier's serving module.

What an export needs beyond the weights is the run's `info`: what a fine-tuning run records in its
task.json (`finetune.task.FinetuningTask.run_info`): `labels` (the class or tag names, None for a
regression), `text_segments` (1 or 2: `serve_text` refuses the other) and `doc_stride` (a tagger's
windows). A span labeler (`albert_tf.serving.question_answering`) answers by the rule its source
records (`hf_heads.answer_rule`: transformers' for a Hugging Face AlbertForQuestionAnswering) with
a SQuAD run's recorded settings; a multiple-choice model (`albert_tf.serving.multiple_choice`: RACE's,
a Hugging Face AlbertForMultipleChoice's) builds its rows as the release builds RACE's, with a RACE
run's recorded `max_qa_length`. SQuAD v2.0's answerability head
(`albert_tf.models.AlbertSquadV2`) answers as the span labeler does, by its run's recorded settings
and null-score threshold: the run's --null_score_diff_threshold, else the one its last evaluation
chose, which `run_info` reads from the run folder's eval_results.json (the tool's --export passes
its own evaluation's). Any other class is refused in one line naming those exported
(`check_exportable`).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

import tensorflow as tf

from albert_tf.data.tagging import DOC_STRIDE
from albert_tf.presets.folder import ENTITY_RECOGNIZER_TASK
from albert_tf.serving import export
from albert_tf.utils.errors import UserError


def classifier_outputs(model, labels: Optional[list]):
    """`outputs_fn` of a sentence (pair) classifier (`AlbertClassifier`, also inside an
    `AlbertTextClassifier`): `probabilities` and, where `labels` name the classes, the predicted
    `label` and the `label_names` [B, num_classes] (one row per example: TF Serving's rows); `score`
    [B] for a regressor (one output)."""
    label_names = None if not labels else tf.constant(list(labels))
    regression = model.num_classes == 1

    def outputs_fn(inputs, training):
        logits = model(inputs, training=training)
        if regression:
            return {"score": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        if label_names is None:
            return {"probabilities": probabilities}
        batch = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "label": tf.gather(label_names, tf.argmax(probabilities, axis=-1)),
            "label_names": tf.tile(label_names[None, :], [batch, 1]),
        }

    return outputs_fn


def _encoder(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    kwargs.pop("max_predictions_per_seq", None)
    return export.export_encoder(model, output_dir, spm_model_file, max_seq_length, **kwargs)


def _pretrainer(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    return export.export_pretrainer(model, output_dir, spm_model_file, max_seq_length, **kwargs)


def _classifier(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    kwargs.pop("max_predictions_per_seq", None)
    return export.export_saved_model(model, output_dir, spm_model_file, max_seq_length,
                                     outputs_fn=classifier_outputs(model, info.get("labels")),
                                     text_segments=info.get("text_segments"), **kwargs)


def _tagger(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    from albert_tf.serving.tagging import export_tagger

    if not info.get("labels"):
        raise UserError("a token classifier's export needs its tag names: the run's task.json records none "
                        "(export it with albert-finetune-ner --export)")
    return export_tagger(model, output_dir, spm_model_file, max_seq_length, info["labels"],
                         info.get("doc_stride") or DOC_STRIDE, do_lower_case=kwargs.get("do_lower_case", True))


def _span_labeler(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    from albert_tf.serving.question_answering import export_recorded

    return export_recorded(model, output_dir, spm_model_file, max_seq_length, info,
                           do_lower_case=kwargs.get("do_lower_case", True))


def _squad_v2(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    from albert_tf.serving.question_answering import export_recorded

    return export_recorded(model, output_dir, spm_model_file, max_seq_length, info, version_2=True,
                           do_lower_case=kwargs.get("do_lower_case", True))


def _multiple_choice(model, output_dir, spm_model_file, max_seq_length, info, **kwargs):
    from albert_tf.serving.multiple_choice import export_recorded

    return export_recorded(model, output_dir, spm_model_file, max_seq_length, info,
                           do_lower_case=kwargs.get("do_lower_case", True))


# A model's class -> the export of its SavedModel.
SAVED_MODELS = {"AlbertEncoder": _encoder, "AlbertPretrainer": _pretrainer, "AlbertClassifier": _classifier,
                "AlbertTokenClassifier": _tagger, "AlbertSpanLabeler": _span_labeler, "AlbertSquadV2": _squad_v2,
                "AlbertMultipleChoice": _multiple_choice}
# A source's task class -> the model class exported for it (an entity recognizer serves its tagger).
EXPORTED_AS = {ENTITY_RECOGNIZER_TASK: "AlbertTokenClassifier"}


def exported_class(class_name: Optional[str]) -> Optional[str]:
    """The model class exported for a source's task class `class_name` (`EXPORTED_AS`)."""
    return EXPORTED_AS.get(class_name, class_name)


def is_task_model(class_name: Optional[str]) -> bool:
    """Whether a source holding `class_name`'s weights holds a fine-tuned task model (what
    albert-export exports from it by default), not an encoder or a pretrainer."""
    return exported_class(class_name) in set(SAVED_MODELS) - {"AlbertEncoder", "AlbertPretrainer"}


def check_exportable(class_name: str) -> None:
    """A one-line UserError unless `export_task_saved_model` exports a model of `class_name`."""
    if exported_class(class_name) not in SAVED_MODELS:
        raise UserError(f"a {class_name} has its own serving signatures: albert-export exports "
                        f"{', '.join(SAVED_MODELS)}")


def export_task_saved_model(model, output_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                            max_seq_length: int, info: Optional[Mapping] = None, **kwargs) -> str:
    """Writes `model` as the SavedModel of its class (`SAVED_MODELS`), with the settings of `info`
    (a fine-tuning run's task.json, see the module docstring); `kwargs` go to the export
    (`do_lower_case`, a pretrainer's `max_predictions_per_seq`). Returns `output_dir`."""
    name = type(model).__name__
    check_exportable(name)
    return SAVED_MODELS[name](model, output_dir, spm_model_file, max_seq_length, dict(info or {}), **kwargs)


def run_info(source) -> dict:
    """What `source` (an `albert_tf.presets.model_source.ModelSource`) records of its task: its
    task.json (a fine-tuning run's, an export's; `albert_tf.checkpoints.run_folder.read_task_file`,
    on any filesystem) where it has one, with the run's last evaluation (its eval_results.json, under
    `question_answering.EVALUATION`) where it has one; else the labels its task names; {} for an encoder."""
    from albert_tf.checkpoints.run_folder import read_run_json, read_task_file
    from albert_tf.serving.question_answering import EVALUATION
    from albert_tf.training.options import EVAL_RESULTS

    task = source.task or {}
    labels = task.get("labels") or (task.get("arguments") or {}).get("labels")  # a tagger's, a recognizer's
    info = {"labels": labels} if labels else {}
    path = os.fspath(source.path) if source.path else ""
    for folder in (path, os.path.dirname(path)) if path else ():  # a run's folder, or its checkpoint's
        recorded = read_task_file(folder) if folder else None
        if recorded is not None:
            if not isinstance(recorded, dict):
                return info
            evaluated = read_run_json(folder, EVAL_RESULTS)
            return {**info, **recorded, **({EVALUATION: evaluated} if isinstance(evaluated, dict) else {})}
    return info
