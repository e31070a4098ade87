"""GLUE on the shared fine-tuning layer: the task module (see finetune/task.py for the protocol).

Its readers (finetune/glue/readers.py), features (finetune/glue/data.py), metrics and submission
files are GLUE's own; the model is `albert_tf.models.AlbertClassifier` (a regressor for STS-B), the
loss the release's (cross-entropy, or the squared error of the score), and the SavedModel returns
`probabilities`, the predicted `label` and the `label_names` (`score` for STS-B).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from albert_tf.data.features import EXAMPLE_WEIGHT, classification_feature_spec
from albert_tf.models import AlbertClassifier, classifier_sums
from albert_tf.tokenizers.length_buckets import bucket_lengths
from finetune.glue import data, metrics, submission
from finetune.glue.hparams import glue_hparams
from finetune.glue.readers import split_path
from finetune.glue.definitions import Task, get_task
from finetune.task import FinetuningTask, model_inputs


class GlueTask(FinetuningTask):
    """One GLUE task (`finetune.glue.definitions.Task` or its name) on the data in `data_dir`; `hparams`
    ("paper" or "release", see `finetune.glue.hparams`) fills the options not given."""

    prediction_features = ("label_ids",)

    def __init__(self, task: Task | str, data_dir=None, skip_bad_rows: bool = False, hparams: str = "paper",
                 max_eval_examples: Optional[int] = None, max_predict_examples: Optional[int] = None):
        self.max_eval_examples, self.max_predict_examples = max_eval_examples, max_predict_examples
        self.glue = get_task(task) if isinstance(task, str) else task
        self.name = self.glue.name
        self.data_dir = data_dir
        self.skip_bad_rows = skip_bad_rows
        self.hparams = hparams
        self.train_split = "train" if self.glue.has_train else None
        self.eval_splits = self.glue.eval_splits
        self.predict_splits = self.glue.predict_splits
        self.train_metric_names = ("loss",) if self.glue.is_regression else ("loss", "accuracy")
        self.best_metric = self.glue.metrics[0] if self.glue.metrics else None
        self.text_segments = 1 if all(s.text_b is None for s in self.glue.splits.values()) else 2

    def length_buckets(self, max_seq_length):
        # One label per sentence or pair: no batch need compute padding. Two buckets an octave
        # (16, 24, 32, 48, ...): a batch computes at most 1.5 times its longest row, not twice,
        # for 11 XLA shapes at 512 instead of 6.
        return bucket_lengths(max_seq_length, steps_per_octave=2)

    def check_data(self, splits):
        for split in splits:
            split_path(self.glue, self.data_dir, split)

    def feature_spec(self, max_seq_length: int):
        return classification_feature_spec(max_seq_length, regression=self.glue.is_regression)

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        return data.cache_features(self.glue, self.data_dir, split, tokenizer, max_seq_length, cache_dir,
                                   skip_bad_rows=self.skip_bad_rows, max_examples=self.example_limit(split))

    def build_model(self, config, options, dtype):
        return AlbertClassifier(config, self.glue.num_labels, options.classifier_dropout, dtype=dtype)

    def loss_sums(self, model, features, training):
        logits = model(model_inputs(features), training=training)
        sums = classifier_sums(logits, features["label_ids"], features[EXAMPLE_WEIGHT], self.glue.is_regression)
        return {"loss": sums["loss"], "accuracy": sums["hits"]}

    def predict_outputs(self, model, features):
        return {"logits": model(model_inputs(features), training=False)}

    def evaluate(self, split, predictions, cached):
        logits, label_ids = predictions["logits"], predictions["label_ids"]
        sums = classifier_sums(logits, label_ids, np.ones(len(label_ids)), self.glue.is_regression)
        results = metrics.task_metrics(self.glue, label_ids, logits)
        results["loss"] = float(sums["loss"]) / len(label_ids)
        baseline = metrics.majority_baseline(self.glue, label_ids)
        return results if baseline is None else {**results, "baseline": baseline}

    def write_predictions(self, split, predictions, cached, output_dir):
        """The submission file of a test split; `<split>_predictions.tsv` (index, prediction,
        label, in the official strings) of an evaluation split."""
        if split in self.predict_splits:
            return [str(submission.write_submission(self.glue, split, predictions["logits"], output_dir,
                                                    num_examples=cached.num_examples))]
        return [str(submission.write_predictions_with_labels(self.glue, split, predictions["logits"],
                                                             predictions["label_ids"], output_dir))]

    def export_saved_model(self, model, spm_model_file, max_seq_length, export_dir, results):
        # The one export of a classifier, which albert-export calls too on this run's task.json.
        from albert_tf.serving.task_exports import export_task_saved_model

        return export_task_saved_model(model, export_dir, spm_model_file, max_seq_length, self.run_info())

    def recipe(self):
        return glue_hparams(self.name, self.hparams)

    def run_info(self):
        # What albert-export needs to export this run as the tool does (albert_tf.serving.task_exports).
        labels = None if self.glue.is_regression else list(self.glue.labels)
        return {"task": self.name, "labels": labels, "text_segments": self.text_segments}
