"""Named-entity recognition on the shared fine-tuning layer: the task module (see finetune/task.py
for the protocol).

Readers and tag schemes (finetune/ner/readers.py), records (finetune/ner/features.py, on
`albert_tf.data.tagging`), metrics and the raw-text SavedModel (finetune/ner/serving.py) are the
task's; the model is `albert_tf.models.AlbertTokenClassifier` (sequence output, dropout, a dense
layer per token) and the loss each sentence's mean cross-entropy over its words' first pieces.
The splits are files: "train" (`train_file`), "dev" (`eval_file`, evaluated) and "test"
(`predict_file`, predicted; its tags may be missing).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import tensorflow as tf

from albert_tf.data.features import EXAMPLE_WEIGHT, tagging_feature_spec
from albert_tf.data.tagging import DOC_STRIDE, bio_labels, check_labels, word_tags
from albert_tf.models import AlbertTokenClassifier, token_classifier_sums
from albert_tf.utils.errors import UserError
from albert_tf.utils.atomic import atomic_open
from albert_tf.utils.validation import require_choice
from finetune import cache
from finetune.ner import features, metrics, readers
from albert_tf.checkpoints.run_folder import read_task_file
from finetune.task import FinetuningTask, Hparams, model_inputs

FEATURE_FORMAT_VERSION = 1  # bump when what a record holds changes: old caches are then not reused

# Hugging Face's token-classification guide (WNUT-17): learning rate 2e-5, batch 16, 2 epochs,
# which on WNUT-17's 3,394 training sentences are 424 steps; no warmup; 128 tokens hold all but a
# few of its sentences (the rest are windowed); on the optimizer it was tuned on, torch's AdamW
# (bias-corrected, weight decay 0.01 without LayerNorm and biases; the guide's Trainer). The
# release's AdamW, without bias correction, takes steps 3 to 6.5 times larger over the first
# hundred updates at the same rate (docs/finetuning.md, "Does it learn what the paper's code learns?").
HPARAMS = {"hf": Hparams(learning_rate=2e-5, train_batch_size=16, num_train_steps=424, num_warmup_steps=0,
                         max_seq_length=128, classifier_dropout=0.1, encoder_dropout=None, optimizer="adamw")}


class NerTask(FinetuningTask):
    """Named entities of CoNLL-style files.

    Args:
        train_file, eval_file, predict_file: the splits' files (any may be None when unused).
        tag_scheme: the files' tags, "bio", "iob1" or "bioes" (`finetune.ner.readers`).
        labels: the entity types (the label list is "O" and a B- and I- tag of each); None: the
            types of the training file, else those a run in `output_dir` was trained with.
        output_dir: the run folder whose labels an evaluation without `train_file` reads.
        doc_stride: pieces between the starts of two windows of a long sentence.
    """

    name = "NER"
    train_metric_names = ("loss", "accuracy")
    best_metric = "f1"
    prediction_features = ("example_index", "word_ids")

    def __init__(self, train_file=None, eval_file=None, predict_file=None, tag_scheme: str = "bio",
                 labels: Optional[Sequence[str]] = None, output_dir=None, doc_stride: int = DOC_STRIDE,
                 hparams: str = "hf", max_eval_examples: Optional[int] = None,
                 max_predict_examples: Optional[int] = None):
        require_choice("tag_scheme", tag_scheme, readers.SCHEMES)
        require_choice("hparams", hparams, HPARAMS)
        if doc_stride < 1:
            raise ValueError(f"doc_stride must be positive, got {doc_stride}")
        self.files = {"train": train_file, "dev": eval_file, "test": predict_file}
        self.train_split = "train" if train_file else None
        self.eval_splits = ("dev",) if eval_file else ()
        self.predict_splits = ("test",) if predict_file else ()
        self.tag_scheme, self.doc_stride, self.hparams = tag_scheme, doc_stride, hparams
        self.output_dir = output_dir
        self.max_eval_examples, self.max_predict_examples = max_eval_examples, max_predict_examples
        self._types = list(labels) if labels else None
        self._labels: Optional[list[str]] = None
        self._sentences: dict[str, list] = {}

    # ---- data --------------------------------------------------------------------------------

    def sentences(self, split: str) -> list[readers.Sentence]:
        if split not in self._sentences:
            read = readers.read_conll(self.files[split], self.tag_scheme, tagged=split != "test")
            self._sentences[split] = self.first_examples(split, read)
        return self._sentences[split]

    @property
    def labels(self) -> list[str]:
        """The BIO label list, in the model's output order."""
        if self._labels is None:
            if self._types is not None:
                self._labels = bio_labels(self._types)
            elif self.files["train"]:
                self._labels = readers.labels_of(self.sentences("train"))
            else:
                self._labels = self._saved_labels()
            check_labels(self._labels)
        return self._labels

    def _saved_labels(self) -> list[str]:
        saved = read_task_file(self.output_dir) if self.output_dir else None
        if isinstance(saved, dict):
            if saved.get("task") == self.name and saved.get("labels"):
                return list(saved["labels"])
        raise UserError("NER needs its labels: give --train_file (its types), --labels, or the --output_dir of a "
                        "run trained with them")

    def check_data(self, splits):
        for split in splits:
            sentences = self.sentences(split)  # a bad file stops here, one line naming it
            if not sentences:
                raise UserError(f"{self.files[split]} holds no sentence: nothing to "
                                f"{'train on' if split == 'train' else 'tag'}")
            if split != "test":
                source = "the training file" if self._types is None and self.files["train"] else None
                readers.check_tags(sentences, self.labels, self.files[split], source)

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        def convert(report):
            sentences = self.sentences(split)
            report.num_examples = len(sentences)
            yield from features.convert_sentences(sentences, tokenizer, self.labels, max_seq_length,
                                                  self.doc_stride, report, labelled=split != "test")

        return cache.cache_features(
            task=self.name, split=split, spec=tagging_feature_spec(max_seq_length), max_seq_length=max_seq_length,
            sources=[self.files[split]],
            settings=(FEATURE_FORMAT_VERSION, self.tag_scheme, tuple(self.labels), self.doc_stride,
                      split == "test", *self.example_settings(split)),
            tokenizer=tokenizer, convert=convert, cache_dir=cache_dir)

    # ---- model -------------------------------------------------------------------------------

    def check_output_dir(self, output_dir, write):
        """Also refuses a NER run folder of other labels: its head has other meanings (or shape)."""
        saved = read_task_file(output_dir)
        if isinstance(saved, dict):
            if saved.get("task") == self.name and saved.get("labels") not in (None, self.labels):
                raise UserError(f"output_dir {output_dir} holds a NER run of other labels "
                                f"({', '.join(saved['labels'])}, not {', '.join(self.labels)}); use a fresh output_dir")
        super().check_output_dir(output_dir, write)

    def build_model(self, config, options, dtype):
        return AlbertTokenClassifier(config, len(self.labels), options.classifier_dropout, dtype=dtype)

    def loss_sums(self, model, batch, training):
        logits = model(model_inputs(batch), training=training)
        sums = token_classifier_sums(logits, batch["label_ids"], batch[EXAMPLE_WEIGHT])
        return {"loss": sums["loss"], "accuracy": sums["hits"]}

    def predict_outputs(self, model, batch):
        logits = model(model_inputs(batch), training=False)
        return {"tag_ids": tf.argmax(logits, axis=-1, output_type=tf.int32),
                "probability": tf.reduce_max(tf.nn.softmax(logits, axis=-1), axis=-1)}

    # ---- results -----------------------------------------------------------------------------

    def predicted_tags(self, split, predictions) -> list[list[str]]:
        sentences = self.sentences(split)
        return word_tags([len(s.words) for s in sentences], predictions["example_index"],
                         predictions["word_ids"], predictions["tag_ids"], self.labels)

    def evaluate(self, split, predictions, cached):
        gold = [s.tags for s in self.sentences(split)]
        return {**metrics.ner_metrics(gold, self.predicted_tags(split, predictions)),
                "baseline": metrics.all_outside_baseline(gold)}

    def write_predictions(self, split, predictions, cached, output_dir):
        """`predictions_<split>.conll`: the file's sentences, a word a line with its tags (BIO) and
        the predicted tag last, a blank line between sentences (what conlleval reads)."""
        path = os.path.join(output_dir, f"predictions_{split}.conll")
        with atomic_open(path, "w") as f:
            for sentence, tags in zip(self.sentences(split), self.predicted_tags(split, predictions), strict=True):
                for word, gold, tag in zip(sentence.words, sentence.tags, tags):
                    f.write(f"{word}\t{tag}\n" if split == "test" else f"{word}\t{gold}\t{tag}\n")
                f.write("\n")
        return [path]

    # ---- serving and runs --------------------------------------------------------------------

    def export_saved_model(self, model, spm_model_file, max_seq_length, export_dir, results):
        # The one export of a tagger, which albert-export calls too on this run's task.json.
        from albert_tf.serving.task_exports import export_task_saved_model

        return export_task_saved_model(model, export_dir, spm_model_file, max_seq_length, self.run_info())

    def litert_outputs(self, model, max_seq_length):
        from albert_tf.serving.litert import INPUTS, TaskOutputs, logits_and_probability

        return TaskOutputs("ner", INPUTS, (1, max_seq_length),
                           lambda inputs: logits_and_probability(model(inputs, training=False)))

    def recipe(self):
        return HPARAMS[self.hparams]

    def run_info(self):
        return {"task": self.name, "labels": self.labels, "doc_stride": self.doc_stride}

