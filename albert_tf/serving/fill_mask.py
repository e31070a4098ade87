"""Filling in [MASK] tokens with a pretrained model: the quickest look at what it learned."""

from __future__ import annotations

import glob
import os
from typing import Callable

import numpy as np

from albert_tf.utils.errors import UserError
from albert_tf.tokenizers.tokenizer import MASK_PIECE, AlbertTokenizer

PredictFn = Callable[[dict[str, np.ndarray]], np.ndarray]


def masked_inputs(text: str, tokenizer: AlbertTokenizer, max_seq_length: int) -> dict[str, np.ndarray]:
    """`[CLS] text [SEP]` with every "[MASK]" in `text` as the mask id, and the mask positions.

    [MASK] is a control symbol that SentencePiece never produces from text, so the text is split
    on it and the id put in between.
    """
    parts = text.split(MASK_PIECE)
    if len(parts) < 2:
        raise UserError(f"the text holds no {MASK_PIECE}: {text!r}")
    ids = [tokenizer.cls_id]
    for i, part in enumerate(parts):
        if i:
            ids.append(tokenizer.mask_id)
        if part.strip():
            ids.extend(tokenizer.encode(part))
    ids.append(tokenizer.sep_id)
    if len(ids) > max_seq_length:
        raise UserError(f"the text is {len(ids)} tokens long with [CLS] and [SEP]; at most {max_seq_length} fit")
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
    return {
        "input_ids": np.array([ids], np.int32),
        "input_mask": np.ones((1, len(ids)), np.int32),
        "segment_ids": np.zeros((1, len(ids)), np.int32),
        "masked_lm_positions": np.array([positions], np.int32),
    }


def fill_mask(text: str, predict: PredictFn, tokenizer: AlbertTokenizer, top_k: int = 5,
              max_seq_length: int | None = None) -> list[list[tuple[str, float]]]:
    """For each [MASK] of `text`, the `top_k` pieces and their probabilities.

    `predict` maps the inputs of `masked_inputs` to masked-LM logits [1, masks, vocab]; control
    pieces ([CLS], [SEP], [MASK], <pad>) are never proposed.
    """
    if max_seq_length is None:  # the model's own length (a SavedModel's predictor knows it)
        max_seq_length = getattr(predict, "max_seq_length", 512)
    logits = np.asarray(predict(masked_inputs(text, tokenizer, max_seq_length)), np.float64)[0]
    never = [i for i in range(tokenizer.vocab_size) if tokenizer.is_control(i)] + [tokenizer.unk_id]
    logits[:, never] = -np.inf
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    best = np.argsort(-probs, axis=-1)[:, :top_k]
    return [[(tokenizer.convert_ids_to_tokens([int(i)])[0], float(p[i])) for i in row] for p, row in zip(probs, best)]


def saved_model_predictor(saved_model_dir: str) -> tuple[PredictFn, AlbertTokenizer]:
    """The masked-LM predictor of a pretrainer SavedModel and the tokenizer of its vocabulary asset."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of serve_text)

    loaded = tf.saved_model.load(saved_model_dir)
    if "masked_lm_positions" not in loaded.signatures["serving_default"].structured_input_signature[1]:
        raise UserError(f"{saved_model_dir} is not a pretrainer SavedModel (export it with --model pretrainer)")
    models = glob.glob(os.path.join(saved_model_dir, "assets", "*.model"))
    if len(models) != 1:
        raise UserError(f"{saved_model_dir}: expected one SentencePiece model in assets/, found {models}")
    tokenizer = AlbertTokenizer(models[0])

    def predict(inputs):
        return loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})["mlm_logits"].numpy()

    # The length it was exported for (at most its max_position_embeddings): a longer text is an
    # error of the user's, named before the model sees it.
    if hasattr(loaded, "max_seq_length"):
        predict.max_seq_length = int(loaded.max_seq_length.numpy())
    return predict, tokenizer


def model_predictor(source) -> tuple[PredictFn, AlbertTokenizer]:
    """The masked-LM predictor of any model source holding a pretrainer (a run of albert-pretrain, a
    pretrainer preset or release, a pretrainer SavedModel) and the tokenizer of its vocabulary."""
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.presets.loader import open_source

    source = open_source(source)
    if source.kind == "saved_model":  # served as it was exported (its own length and lower-casing)
        return saved_model_predictor(source.path)
    model = AlbertPretrainer.from_preset(source)
    tokenizer = AlbertTokenizer(source.vocabulary())

    def predict(inputs):
        return model(inputs, training=False)["mlm_logits"].numpy()

    predict.max_seq_length = source.config.max_position_embeddings
    return predict, tokenizer
