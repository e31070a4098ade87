"""Raw strings -> the encoder's inputs, as a Keras layer: the keras-hub preprocessor of ALBERT.

The SentencePiece tokenization, truncation, `[CLS] a [SEP] b [SEP]` packing and padding run in the
TensorFlow graph (`albert_tf.tokenizers.graph_tokenizer`, tensorflow-text), so the layer works in `tf.data`
pipelines and inside exported SavedModels alike, and gives the ids of the Python
`AlbertTokenizer.pack`.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.tokenizers.tokenizer import check_seq_length


def _is_pair(inputs) -> bool:
    """A tuple of two batches is a pair of segments; a list (or array) of strings is one batch."""
    return isinstance(inputs, tuple) and len(inputs) == 2


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextPreprocessor(keras.layers.Layer):
    """Tokenizes and packs strings for an ALBERT model.

    Args:
        spm_model_file: the SentencePiece model (a preset's `spiece.model`).
        sequence_length: tokens per packed sequence, `[CLS]` and `[SEP]`s included.
        do_lower_case: lowercase after stripping accents (True for the released English models).

    Call with strings [B] (one segment) or a tuple `(texts_a, texts_b)` of [B] strings; returns
    int32 `input_ids`, `input_mask`, `segment_ids` [B, sequence_length].

    Example:
        >>> preprocessor = AlbertTextPreprocessor("preset/spiece.model", sequence_length=128)
        >>> preprocessor(["The movie was great."])["input_ids"].shape
        TensorShape([1, 128])
    """

    def __init__(self, spm_model_file: str, sequence_length: int = 128, do_lower_case: bool = True, **kwargs):
        super().__init__(**kwargs)
        check_seq_length(sequence_length, "sequence_length")
        self.spm_model_file = os.fspath(spm_model_file)
        self.sequence_length = sequence_length
        self.do_lower_case = do_lower_case
        self.tokenizer = AlbertGraphTokenizer(self.spm_model_file, do_lower_case=do_lower_case)
        self.built = True

    def __call__(self, inputs, *args, **kwargs):
        # Keras takes only tensors positionally: Python strings become string tensors first.
        if _is_pair(inputs):
            inputs = tuple(tf.convert_to_tensor(t, tf.string) for t in inputs)
        else:
            inputs = tf.convert_to_tensor(inputs, tf.string)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs):
        texts_a, texts_b = inputs if _is_pair(inputs) else (inputs, None)
        if texts_a.shape.rank != 1:
            raise ValueError(f"give strings of shape [batch] (or a pair of them), got shape {texts_a.shape}")
        return self.tokenizer(texts_a, texts_b, max_seq_length=self.sequence_length)

    def get_config(self):
        config = super().get_config()
        config.update(spm_model_file=self.spm_model_file, sequence_length=self.sequence_length,
                      do_lower_case=self.do_lower_case)
        return config
