"""The multiple-choice model's SavedModel (RACE's, and a Hugging Face AlbertForMultipleChoice's): it
answers raw (article, question, four options).

Signatures:

- `serve_text`: strings `article` [B], `question` [B], `options` [B, 4] -> `probabilities`
  [B, 4] (float32, the softmax over the options), `prediction` [B] (the letter, "A"-"D") and
  `logits` [B, 4]; the rows are built in the graph as the release builds RACE's
  (`albert_tf.data.multiple_choice.graph_features`: `[CLS] article [SEP] question+option [SEP]`);
- `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, 4, T] -> the same outputs,
  for rows paired any other way (a model of transformers was trained on the pairs its user chose,
  e.g. SWAG's context and ending: build them with its tokenizer and feed the ids);
- `tokenize`: the `serve_text` inputs -> the int32 [B, 4, max_seq_length] rows it feeds the model.

`export_multiple_choice` is the export map's entry (`albert_tf.serving.task_exports`: albert-export
of any source holding an `AlbertMultipleChoice`, albert-finetune-race --export), with the
`max_qa_length` a RACE run records in its task.json (`MC_SETTINGS`), else the release's share of the
row (`albert_tf.data.multiple_choice.default_qa_length`). The SentencePiece model is the asset
`vocab_file`; `max_seq_length` and `max_qa_length` are stored as variables. A consumer needs only
tensorflow and tensorflow_text (for the SentencePiece op).
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf.data.multiple_choice import (LETTERS, NUM_OPTIONS, SEQUENCE_FEATURES, check_lengths,
                                            default_qa_length, graph_features)
from albert_tf.serving import export
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer

# What a RACE run's task.json records of its rows (`finetune.race.task.RaceTask.run_info`).
MC_SETTINGS = ("max_qa_length",)


class MultipleChoiceServing(export.ServingModule):
    """The multiple-choice serving module (`albert_tf.serving.export.ServingModule`): the signatures above."""

    def __init__(self, model, tokenizer: AlbertGraphTokenizer, max_seq_length: int, max_qa_length: int):
        super().__init__()
        # The model is not tracked: its variables are saved once, through the root's lists.
        self._model = model
        self._tokenizer = tokenizer
        self._max_seq_length = max_seq_length
        self._max_qa_length = max_qa_length
        self._letters = tf.constant(LETTERS)

    def stored(self):
        return {"max_seq_length": self._max_seq_length, "max_qa_length": self._max_qa_length}

    def outputs(self, inputs):
        logits = tf.cast(self._model({k: tf.cast(inputs[k], tf.int32) for k in SEQUENCE_FEATURES},
                                     training=False), tf.float32)
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {
            "logits": logits,
            "probabilities": probabilities,
            "prediction": tf.gather(self._letters, tf.argmax(probabilities, axis=-1, output_type=tf.int32)),
        }

    def tokenize(self, article, question, options):
        rows = graph_features(self._tokenizer, article, question, options, self._max_seq_length, self._max_qa_length)
        return {k: tf.ensure_shape(v, [None, NUM_OPTIONS, self._max_seq_length]) for k, v in rows.items()}

    def signatures(self):
        ids = {k: tf.TensorSpec([None, NUM_OPTIONS, None], tf.int32, name=k) for k in SEQUENCE_FEATURES}
        text = dict(
            article=tf.TensorSpec([None], tf.string, name="article"),
            question=tf.TensorSpec([None], tf.string, name="question"),
            options=tf.TensorSpec([None, NUM_OPTIONS], tf.string, name="options"),
        )
        infer = tf.function(self.outputs, autograph=False, input_signature=[ids])
        tokenize = tf.function(self.tokenize, autograph=False, input_signature=list(text.values()))

        def serving_default(**inputs):
            return infer(inputs)

        def serve_text(article, question, options):
            return infer(tokenize(article, question, options))

        def concrete(fn, **specs):
            return tf.function(fn, autograph=False).get_concrete_function(**specs)

        return {
            "serving_default": concrete(serving_default, **ids),
            "serve_text": concrete(serve_text, **text),
            "tokenize": tokenize.get_concrete_function(),
        }


def export_multiple_choice(model, export_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                           max_seq_length: int, max_qa_length: int | None = None, do_lower_case: bool = True) -> str:
    """Writes `model` (inputs [B, 4, T] -> logits [B, 4], an `AlbertMultipleChoice` of four choices)
    as a SavedModel with the signatures of this module's docstring, rows of `max_seq_length` whose
    question+option keeps `max_qa_length` pieces (default: `default_qa_length`); returns `export_dir`."""
    if getattr(model, "num_choices", NUM_OPTIONS) != NUM_OPTIONS:
        raise ValueError(f"the multiple-choice SavedModel serves {NUM_OPTIONS} options (A-D); this model has "
                         f"{model.num_choices} choices")
    max_qa_length = default_qa_length(max_seq_length) if max_qa_length is None else max_qa_length
    check_lengths(max_seq_length, max_qa_length)
    tokenizer = export.prepare(model, spm_model_file, max_seq_length, do_lower_case)
    server = MultipleChoiceServing(model, tokenizer, max_seq_length, max_qa_length)
    return export.write(model, export_dir, server, tokenizer)


def export_recorded(model, export_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                    max_seq_length: int, info: dict, do_lower_case: bool = True) -> str:
    """`export_multiple_choice` with the settings of `info` (its source's task.json, as
    `task_exports.run_info` reads it: a RACE run's `MC_SETTINGS`); where it records none, the defaults."""
    recorded = {k: info[k] for k in MC_SETTINGS if info.get(k) is not None}
    return export_multiple_choice(model, export_dir, spm_model_file, max_seq_length, do_lower_case=do_lower_case,
                                  **recorded)
