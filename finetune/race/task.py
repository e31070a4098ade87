"""RACE on the shared fine-tuning layer: the task module (see finetune/task.py for the protocol).

Readers (finetune/race/readers.py), rows (features.py) and metrics are RACE's own; the raw-text
SavedModel is albert_tf's multiple-choice export (`albert_tf.serving.multiple_choice`, through the
export map: what albert-export of the run writes); the model is `albert_tf.models.AlbertMultipleChoice` (pooled output,
dropout, one logit per option, a softmax over the four) and the loss the release's cross-entropy.
The splits are the release's folders: `train/`, `dev/` (evaluated) and `test/` (predicted), each
holding `middle/` and `high/`; any of them may be given as another path of the reader's layouts.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Optional, Sequence

import numpy as np

from albert_tf.utils.errors import UserError
from albert_tf.data.features import EXAMPLE_WEIGHT, multiple_choice_feature_spec
from albert_tf.utils.atomic import atomic_open
from albert_tf.models import AlbertMultipleChoice, classifier_sums
from albert_tf.utils.validation import require_choice
from finetune import cache
from finetune.race import features, metrics, readers
from finetune.task import FinetuningTask, Hparams, model_inputs

# Bump when what a record holds changes, so that old caches are not reused.
FEATURE_FORMAT_VERSION = 1

# "v1": the paper's Table 14 row for RACE (learning rate 2e-5, batch 32, ALBERT DR 0.1, classifier
# dropout 0.1, 12,000 steps, 1,000 warmup, 512 tokens). "v2": the release's README for the v2 models,
# whose only changes are a learning rate of 1e-5 and an ALBERT DR of 0 ("the original (v1) RACE
# hyperparameter will cause model divergence for v2 models").
HPARAMS = {
    "v2": Hparams(learning_rate=1e-5, train_batch_size=32, num_train_steps=12000, num_warmup_steps=1000,
                  max_seq_length=512, classifier_dropout=0.1, encoder_dropout=0.0),
    "v1": Hparams(learning_rate=2e-5, train_batch_size=32, num_train_steps=12000, num_warmup_steps=1000,
                  max_seq_length=512, classifier_dropout=0.1, encoder_dropout=0.1),
}


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class RaceTask(FinetuningTask):
    """RACE questions under `data_dir` (the release's `train/`, `dev/`, `test/` folders).

    Args:
        data_dir: the folder holding the split folders; may be None when every split used is
            given by its own path.
        max_qa_length: pieces kept of each question+option (its last ones), 128 as released.
        levels: the levels read ("middle", "high"; the release's --middle_only / --high_only).
        split_paths: {"train" | "dev" | "test": path} overriding a split's folder; a path is any
            layout `finetune.race.readers.passage_files` takes (a split folder, a level's folder,
            one passage file).
        hparams: "v2" or "v1", the paper's hyperparameters that fill the options not given.
    """

    name = "RACE"
    train_split = "train"
    eval_splits = ("dev",)
    predict_splits = ("test",)
    train_metric_names = ("loss", "accuracy")
    best_metric = "accuracy"
    prediction_features = ("label_ids",)

    def __init__(self, data_dir=None, max_qa_length: int = features.MAX_QA_LENGTH,
                 levels: Sequence[str] = readers.LEVELS, split_paths: Optional[dict] = None, hparams: str = "v2",
                 max_eval_examples: Optional[int] = None, max_predict_examples: Optional[int] = None):
        require_choice("hparams", hparams, HPARAMS)
        self.data_dir = data_dir
        self.max_qa_length = max_qa_length
        self.levels = tuple(levels)
        self.split_paths = {k: v for k, v in (split_paths or {}).items() if v}
        self.hparams = hparams
        self.max_eval_examples, self.max_predict_examples = max_eval_examples, max_predict_examples

    def split_path(self, split: str) -> pathlib.Path:
        if split in self.split_paths:
            return pathlib.Path(self.split_paths[split])
        if self.data_dir is None:
            raise ValueError(f"RACE: no data for the {split} split: give --data_dir (holding {split}/) "
                             f"or the split's own path")
        return pathlib.Path(self.data_dir) / split

    def questions(self, split: str) -> list[readers.Question]:
        return self.first_examples(split, readers.read_questions(self.split_path(split), self.levels))

    # ---- data --------------------------------------------------------------------------------

    def check_data(self, splits):
        # Reading validates every file: a bad one is named before any model is built.
        for split in splits:
            if not self.questions(split):
                levels = " and ".join(f"{level}/" for level in self.levels)
                raise UserError(f"RACE data {self.split_path(split)} holds no question ({split} split; the "
                                f"levels read: {levels}): nothing to {'train on' if split == 'train' else 'score'}")

    def feature_spec(self, max_seq_length: int):
        return multiple_choice_feature_spec(max_seq_length, readers.NUM_OPTIONS)

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        features.check_lengths(max_seq_length, self.max_qa_length)
        files = [file for _, file in readers.passage_files(self.split_path(split), self.levels)]

        def convert(report):
            questions = self.questions(split)
            report.num_examples = len(questions)
            for record, truncated in features.convert_with_truncation(
                    questions, tokenizer, max_seq_length, self.max_qa_length):
                report.num_truncated += truncated
                yield {k: np.asarray(v).reshape(-1) if k != "label_ids" else v for k, v in record.items()}

        return cache.cache_features(
            task=self.name, split=split, spec=self.feature_spec(max_seq_length), max_seq_length=max_seq_length,
            sources=files,
            settings=(FEATURE_FORMAT_VERSION, self.max_qa_length, self.levels, *self.example_settings(split)),
            tokenizer=tokenizer, convert=convert, cache_dir=cache_dir,
        )

    # ---- model -------------------------------------------------------------------------------

    def build_model(self, config, options, dtype):
        return AlbertMultipleChoice(config, readers.NUM_OPTIONS, options.classifier_dropout, dtype=dtype)

    def loss_sums(self, model, batch, training):
        logits = model(model_inputs(batch), training=training)
        sums = classifier_sums(logits, batch["label_ids"], batch[EXAMPLE_WEIGHT], False)
        return {"loss": sums["loss"], "accuracy": sums["hits"]}

    def predict_outputs(self, model, batch):
        return {"logits": model(model_inputs(batch), training=False)}

    # ---- results -----------------------------------------------------------------------------

    def evaluate(self, split, predictions, cached):
        questions = self.questions(split)
        return {**metrics.race_metrics([q.level for q in questions], predictions["label_ids"],
                                       _softmax(predictions["logits"].astype(np.float64))),
                "baseline": metrics.majority_letter_baseline(predictions["label_ids"])}

    def write_predictions(self, split, predictions, cached, output_dir):
        """`predictions_<split>.jsonl`: per question its id, level, predicted letter, the four
        probabilities (A-D) and the answer of the file."""
        questions = self.questions(split)
        probabilities = _softmax(predictions["logits"].astype(np.float64))
        path = os.path.join(output_dir, f"predictions_{split}.jsonl")
        with atomic_open(path, "w") as f:
            for question, row in zip(questions, probabilities, strict=True):
                f.write(json.dumps({
                    "id": question.qid,
                    "level": question.level,
                    "prediction": readers.LETTERS[int(row.argmax())],
                    "probabilities": [round(float(p), 6) for p in row],
                    "answer": question.answer,
                }) + "\n")
        return [path]

    # ---- serving and runs --------------------------------------------------------------------

    def export_saved_model(self, model, spm_model_file, max_seq_length, export_dir, results):
        """The multiple-choice export (`task_exports`: what albert-export of this run writes)."""
        from albert_tf.serving.task_exports import export_task_saved_model

        return export_task_saved_model(model, export_dir, spm_model_file, max_seq_length, self.run_info())

    def litert_outputs(self, model, max_seq_length):
        from albert_tf.serving.litert import INPUTS, TaskOutputs, logits_and_probability

        return TaskOutputs("race", INPUTS, (1, model.num_choices, max_seq_length),
                           lambda inputs: logits_and_probability(model(inputs, training=False)))

    def recipe(self):
        return HPARAMS[self.hparams]

    def run_info(self):
        """The task, its letters and its rows' question+option length (`multiple_choice.MC_SETTINGS`):
        what an export of this run builds its rows by, albert-export's too."""
        return {"task": self.name, "labels": list(readers.LETTERS), "max_qa_length": self.max_qa_length}
