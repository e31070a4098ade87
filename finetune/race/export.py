"""The RACE model as a SavedModel that answers raw (article, question, four options).

Signatures:

- `serve_text`: strings `article` [B], `question` [B], `options` [B, 4] -> `probabilities`
  [B, 4] (float32, the softmax over the options), `prediction` [B] (the letter, "A"-"D") and
  `logits` [B, 4]; the rows are built in the graph exactly as `finetune.race.features` builds the
  cached records (`graph_features`);
- `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, 4, T] -> the same outputs;
- `tokenize`: the `serve_text` inputs -> the int32 [B, 4, max_seq_length] rows it feeds the model.

The SentencePiece model is the asset `vocab_file`; `max_seq_length` and `max_qa_length` are stored
as variables. A consumer needs only tensorflow and tensorflow_text (for the SentencePiece op).
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf.serving import export
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from finetune.race.features import SEQUENCE_FEATURES, check_lengths, graph_features
from finetune.race.readers import LETTERS, NUM_OPTIONS


class RaceServing(export.ServingModule):
    """RACE's serving module (`albert_tf.serving.export.ServingModule`): the signatures above."""

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


def export_race_model(model, export_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                      max_seq_length: int, max_qa_length: int, do_lower_case: bool = True) -> str:
    """Writes `model` (inputs [B, 4, T] -> logits [B, 4], e.g. `AlbertMultipleChoice`) as a
    SavedModel with the signatures of this module's docstring; returns `export_dir`."""
    check_lengths(max_seq_length, max_qa_length)
    tokenizer = export.prepare(model, spm_model_file, max_seq_length, do_lower_case)
    return export.write(model, export_dir, RaceServing(model, tokenizer, max_seq_length, max_qa_length), tokenizer)
