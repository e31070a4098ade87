"""SavedModels for serving and for reuse: token ids, serialized tf.Examples or raw text in.

Every SavedModel written here has the signatures

- `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, T] (plus any extra inputs
  of the model, e.g. `masked_lm_positions` [B, P] of the pretrainer) -> the model's outputs;
- `serve_examples`: serialized `tf.train.Example`s [B] in the feature spec of `albert_tf.data.features`
  -> the same outputs;
- `serve_text`: strings `text` [B] (one segment each, what a TF Serving REST call
  `{"instances": ["..."]}` sends) or [B, S] with S = 1 (one segment) or S = 2 (a pair),
  tokenized, packed and truncated to `max_seq_length` in the graph, and padded only to the
  smallest of a few bucket lengths that holds the batch's longest row (`albert_tf.tokenizers.length_buckets`:
  16, 32, 64, ... up to `max_seq_length`) -> the same outputs; sequence outputs have that
  bucket's length;
- `tokenize`: `text` [B] or [B, S] -> the packed `input_ids`, `input_mask`, `segment_ids` [B, T]
  that `serve_text` feeds the model (T its bucket length), so a client can see them (and pick
  masked positions on them);

and it is a reusable SavedModel the TF-Hub way: the loaded object is callable as
`obj(inputs, training=False)` on a dict of int32 [B, T] tensors, and has `variables`,
`trainable_variables` and `regularization_losses`, so it can be fine-tuned (see
`SavedModelLayer`). The SentencePiece model is stored as the asset `vocab_file`.

A consumer needs only tensorflow and tensorflow_text (for the SentencePiece op); not this package.

This module is also the one export path of every task and format: `prepare` makes the checks of
every export (the length against the positions, the vocabulary against the embedding table) and
the graph tokenizer, `write` assembles and writes every SavedModel's root object (variables,
vocabulary asset, stored settings, config) from a task's `ServingModule`, the one export contract:
the encoder's and classifier's (`TokenServing`) is here, the span labeler's (SQuAD's) in
question_answering.py, the multiple-choice model's (RACE's) in multiple_choice.py;
`albert_tf.serving.litert` writes the LiteRT format after the same `prepare`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from albert_tf.serving.formats import check_export_settings
from albert_tf.data.features import classification_feature_spec, pretraining_feature_spec
from albert_tf.utils.atomic import atomic_folder
from albert_tf.checkpoints.run_folder import record_task
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.tokenizers.length_buckets import bucket_lengths, check_bucket_lengths
from albert_tf.tokenizers.tokenizer import check_seq_length
from albert_tf.utils.validation import check_positions

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")
SIGNATURES = ("serving_default", "serve_examples", "serve_text", "tokenize")

OutputsFn = Callable[[Mapping[str, tf.Tensor], bool], Mapping[str, tf.Tensor]]


def _float32(outputs: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    # Under mixed precision the model computes in bfloat16; serving clients expect float32.
    return {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v for k, v in outputs.items()}


def serving_variables(model) -> tuple[list, list]:
    """The tf.Variables under the model's Keras variables (what the graph captures): the trainable
    ones, and the others (Keras' `variables` includes seed-generator states, which dropout in
    training mode reads)."""
    def unwrap(v):
        return getattr(v, "value", v) if isinstance(v, keras.Variable) else v

    trainable = [unwrap(v) for v in model.trainable_variables]
    ids = {id(v) for v in trainable}
    others = [unwrap(v) for v in model.variables if id(unwrap(v)) not in ids]
    return trainable, others


def at_precision(model, precision: str):
    """`model` to serve at `precision`: itself for "float32"; for "bfloat16" a copy under Keras'
    "bfloat16" policy holding its weights rounded to bf16 (bf16 weights and matmuls; LayerNorm,
    softmax logits and every output stay float32, `albert_tf.layers.common.float32_policy`). On a
    CPU with AVX512_BF16 or AMX, and on GPUs from Ampere on, it serves about 1.5-2x faster than
    float32 (docs/serving.md); elsewhere bf16 matmuls are emulated and slower.

    The model must be a Keras model whose `get_config` rebuilds it (every model of albert_tf and
    of finetune/ does). A text classifier converts as its classifier.
    """
    check_export_settings(precision=precision)
    if precision == "float32":
        return model
    model = getattr(model, "classifier", None) if _is_text_classifier(model) else model
    if not model.built:
        model.build()
    copy = type(model).from_config({**model.get_config(), "dtype": precision})
    copy.build()
    copy.set_weights(model.get_weights())  # assigning casts each to its variable's dtype
    return copy


def _is_text_classifier(model) -> bool:
    from albert_tf.models import AlbertClassifier

    return isinstance(getattr(model, "classifier", None), AlbertClassifier)


def check_length(model, max_seq_length: int):
    """`max_seq_length` against the model's positions; builds the model."""
    check_seq_length(max_seq_length)
    check_positions(max_seq_length, getattr(getattr(model, "config", None), "max_position_embeddings", None))
    if not model.built:
        model.build()


def prepare(model, spm_model_file: str | os.PathLike, max_seq_length: int,
            do_lower_case: bool = True) -> AlbertGraphTokenizer:
    """The checks of every export, of either format, before anything is traced or written: the
    length against the model's positions, the SentencePiece model against its embedding table.
    Builds the model; returns the graph tokenizer, whose SentencePiece model a SavedModel stores
    as the asset `vocab_file`."""
    check_length(model, max_seq_length)
    tokenizer = AlbertGraphTokenizer(tf.saved_model.Asset(os.fspath(spm_model_file)), do_lower_case=do_lower_case)
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab_size is not None:
        from albert_tf.presets.folder import check_pieces

        check_pieces(spm_model_file, tokenizer.vocab_size, vocab_size)
    return tokenizer


class ServingModule(tf.Module):
    """The one export contract (Model Garden's ExportModule shape): what a task's SavedModel serves.

    A task's serving module derives from it and gives
    - `signatures()`: the SavedModel's signatures by name (concrete functions), traced once, each
      calling one traced forward pass of the model (a trace of its own in each signature cost the
      export its time and the SavedModel a copy of the model's graph);
    - `stored()`: the export's settings (`max_seq_length`, ...), saved as variables of the root;
    - `reusable_call`: the TF-Hub `__call__(inputs, training)` where the module is reusable (None:
      not reusable);
    and `write(model, output_dir, module, tokenizer)` writes it. The encoder's and classifier's is
    `TokenServing` here, the span labeler's `question_answering.SquadServer`, RACE's
    `multiple_choice.MultipleChoiceServing`. Its attributes are what `tf.saved_model.save` tracks: a
    module keeps the model in a non-tracked way (the root saves the weights once, as plain lists).
    A task's LiteRT outputs are its own too: `FinetuningTask.litert_outputs`.
    """

    reusable_call = None

    def signatures(self) -> dict:
        raise NotImplementedError

    def stored(self) -> dict:
        return {}


def write(model, output_dir: str | os.PathLike, serving: ServingModule, tokenizer: AlbertGraphTokenizer) -> str:
    """Writes the SavedModel of every task into `output_dir`, which must be missing or empty (a whole
    folder written aside and renamed when complete: `albert_tf.utils.atomic.atomic_folder`; a killed export
    leaves nothing a rerun trips on). The root object holds the task's `serving` module (its
    functions; the model itself is not tracked there, which would save every weight twice), the
    model's variables as plain lists (TF-Hub's reusable-SavedModel attributes), the SentencePiece
    asset `vocab_file`, and each of `serving.stored()` as a variable; the model's config goes beside
    (`write_config`, with its task.json). Returns the output directory."""
    output_dir = os.fspath(output_dir)
    options = tf.saved_model.SaveOptions()
    with atomic_folder(output_dir) as folder:  # a folder holding files is refused before any tracing
        with save_tracing(options):
            signatures = serving.signatures()
        trainable, others = serving_variables(model)
        root = tf.train.Checkpoint()
        root.serving = serving
        if serving.reusable_call is not None:
            root.__call__ = serving.reusable_call
        root.vocab_file = tokenizer.model_asset
        root.variables = trainable + others
        root.trainable_variables = trainable
        root.regularization_losses = []
        for name, value in serving.stored().items():
            setattr(root, name, tf.Variable(value, trainable=False, name=name))
        from albert_tf.checkpoints.run_folder import disk_refusals_named

        with disk_refusals_named(os.path.join(folder, "variables", "variables"), shown=output_dir):
            tf.saved_model.save(root, folder, signatures=dict(signatures), options=options)
        write_config(model, folder)
        record_task(folder, model)  # which model's heads its variables hold: the export is a model source
    return output_dir


@contextlib.contextmanager
def save_tracing(options):
    """Traces as `tf.saved_model.save(..., options=options)` does. The save traces every function it
    stores again unless it was traced in a save context with the same options (the context is part
    of a function's cache key): without this, the reusable `__call__` and the model's forward pass
    were traced twice per export. TensorFlow's save context is not public API; where it is gone the
    export is the same, only traced twice."""
    try:
        from tensorflow.python.saved_model import save_context
    except ImportError:  # pragma: no cover - a TensorFlow without it
        yield
        return
    with save_context.save_context(options):
        yield


def write_config(model, folder: str) -> None:
    """The model's config in an export's folder, of either format, under the run folder's name
    (albert_config.json): every artifact carries its config, so fine-tuning from it or serving it
    needs no other flag."""
    config = getattr(model, "config", None)
    if config is not None:
        from albert_tf.utils.atomic import write_json
        from albert_tf.checkpoints.run_folder import CONFIG_FILE

        write_json(os.path.join(folder, CONFIG_FILE), config.to_dict())


class TokenServing(ServingModule):
    """The serving module of token-level models (encoder, pretrainer, classifiers): the signatures
    of this module's docstring on `outputs_fn`."""

    def __init__(self, outputs_fn: OutputsFn, tokenizer: AlbertGraphTokenizer,
                 max_seq_length: int, extra_inputs: Mapping[str, tf.io.FixedLenFeature],
                 length_buckets: tuple[int, ...], text_segments: int | None):
        super().__init__(name=None)
        # The model is not an attribute: tracking it would save every weight a second time, beside
        # the plain variable lists of the root object.
        self._outputs_fn = outputs_fn
        self._tokenizer = tokenizer
        self.vocab_file = tokenizer.model_asset
        self._max_seq_length = max_seq_length
        self._length_buckets = length_buckets
        self._text_segments = text_segments
        self._extra = dict(extra_inputs)
        self._example_spec = {
            **{k: classification_feature_spec(max_seq_length)[k] for k in SEQUENCE_INPUTS},
            **self._extra,
        }

    def stored(self):
        return {"max_seq_length": self._max_seq_length, "do_lower_case": self._tokenizer.do_lower_case,
                "length_buckets": self._length_buckets}

    def outputs(self, inputs, training=False):
        inputs = {k: tf.cast(v, tf.int32) for k, v in inputs.items()}
        return _float32(self._outputs_fn(inputs, training))

    def tokenize_text(self, text):
        """`text` [B], [B, 1] or [B, 2] strings -> packed int32 [B, T] tensors, T a bucket length."""
        text = tf.convert_to_tensor(text, tf.string)
        check_rank = tf.debugging.assert_rank_in(
            text, [1, 2], message="text must have shape [batch] or [batch, 1] (one segment) or [batch, 2] (a pair)")
        with tf.control_dependencies([check_rank]):
            # [B] is [B, 1]; the product of no dimensions is 1, so an empty [0] batch reshapes too.
            shape = tf.shape(text)
            text = tf.reshape(text, tf.stack([shape[0], tf.reduce_prod(shape[1:])]))
        width = tf.shape(text)[1]
        if self._text_segments is None:
            allowed = tf.logical_or(tf.equal(width, 1), tf.equal(width, 2))
            message = "text must have shape [batch] or [batch, 1] (one segment) or [batch, 2] (a pair)"
        elif self._text_segments == 2:
            allowed = tf.equal(width, 2)
            message = ("this model was fine-tuned on pairs of texts: text must have shape [batch, 2], "
                       "got one segment per row or more than two")
        else:
            allowed = tf.equal(width, 1)
            message = ("this model was fine-tuned on single texts: text must have shape [batch] or "
                       "[batch, 1], got more than one segment per row")
        check = tf.debugging.assert_equal(allowed, True, message=message)
        with tf.control_dependencies([check]):
            text = tf.identity(text)

        packed = self._tokenizer.pack_rows(text, max_seq_length=self._max_seq_length,
                                           length_buckets=self._length_buckets)
        return {k: tf.ensure_shape(packed[k], [None, None]) for k in SEQUENCE_INPUTS}

    def parse_examples(self, serialized):
        features = tf.io.parse_example(serialized, self._example_spec)
        return {k: tf.cast(v, tf.int32) for k, v in features.items()}

    def signatures(self):
        """Traces the signatures and the reusable `__call__`; returns the signature map.

        The model and the tokenizer are each traced once, as nested functions that the signatures
        call: tracing is most of the export time, and AutoGraph is off because nothing here has
        tensor-dependent Python control flow.
        """
        names = (*SEQUENCE_INPUTS, *self._extra)
        input_specs = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in names}
        # Rank 1 or 2: a flat batch of single texts, or [batch, segments].
        text_spec = tf.TensorSpec(None, tf.string, name="text")
        infer = tf.function(lambda inputs: self.outputs(inputs), autograph=False,
                            input_signature=[input_specs])
        tokenize = tf.function(self.tokenize_text, autograph=False, input_signature=[text_spec])
        extra_specs = {k: input_specs[k] for k in self._extra}

        def serving_default(**inputs):
            return infer(inputs)

        def serve_examples(examples):
            return infer(self.parse_examples(examples))

        def serve_text(text, **extra):
            return infer({**tokenize(text), **extra})

        def concrete(fn, *args, **kwargs):
            return tf.function(fn, autograph=False).get_concrete_function(*args, **kwargs)

        signatures = {
            "serving_default": concrete(serving_default, **input_specs),
            "serve_examples": concrete(serve_examples, tf.TensorSpec([None], tf.string, name="examples")),
            "serve_text": concrete(serve_text, text_spec, **extra_specs),
            "tokenize": tokenize.get_concrete_function(),
        }

        # The reusable callable: one trace per value of the Python `training` flag, as TF-Hub's
        # reusable SavedModels do, so dropout is on when fine-tuning and off at inference.
        def call(inputs, training=False):
            return infer(inputs) if not training else self.outputs(inputs, True)

        call = tf.function(call, autograph=False)
        for training in (False, True):
            call.get_concrete_function(input_specs, training=training)
        self.__call__ = self.reusable_call = call
        return signatures


def export_saved_model(
    model,
    output_dir: str | os.PathLike,
    spm_model_file: str | os.PathLike,
    max_seq_length: int,
    *,
    outputs_fn: OutputsFn | None = None,
    extra_inputs: Mapping[str, tf.io.FixedLenFeature] | None = None,
    do_lower_case: bool = True,
    length_buckets: Sequence[int] | None = None,
    text_segments: int | None = None,
) -> str:
    """Writes `model` as a SavedModel with the signatures of this module's docstring.

    Args:
        model: a built Keras model (or layer); its variables are saved.
        output_dir: where to write; created if needed.
        spm_model_file: the SentencePiece model, stored inside as the asset `vocab_file`.
        max_seq_length: the length `serve_text` truncates to (and its longest bucket), and the length of the
            sequence features `serve_examples` parses. `serving_default` takes any length the
            model allows.
        outputs_fn: maps `(inputs, training)` to the output dict, where `inputs` is a dict of int32
            tensors: `input_ids`, `input_mask`, `segment_ids` [B, T] and the `extra_inputs`.
            Default: `model(inputs, training=training)`. A classifier passes e.g.
            `lambda inputs, training: {"logits": classifier(inputs, training=training)}`.
        extra_inputs: per-example inputs beyond the three sequence ones, by name, as the
            `tf.io.FixedLenFeature` that `serve_examples` parses them with (int features, 1-D).
            They are int32 [B, N] inputs of `serving_default` and `serve_text`.
        do_lower_case: the tokenizer's lowercasing (True for the released English models).
        length_buckets: the lengths `serve_text` pads a batch to (the smallest that holds its
            longest row); the largest must be `max_seq_length`. Default:
            `albert_tf.tokenizers.length_buckets.bucket_lengths(max_seq_length)`. `[max_seq_length]` pads
            every batch to `max_seq_length`.
        text_segments: 1 or 2 where the model only makes sense on single texts or on pairs (a
            fine-tuned classifier): `serve_text` then refuses the other with a message that says
            so. Default None: either.

    Returns the output directory.

    Example:
        >>> export_saved_model(encoder, "exported", "30k-clean.model", max_seq_length=128)
        >>> loaded = tf.saved_model.load("exported")
        >>> loaded.signatures["serve_text"](text=tf.constant([["A question?", "An answer."]]))
    """
    if text_segments not in (None, 1, 2):
        raise ValueError(f"text_segments must be None, 1 or 2, got {text_segments!r}")
    extra_inputs = dict(extra_inputs or {})
    for name, feature in extra_inputs.items():
        if name in SEQUENCE_INPUTS or not feature.dtype.is_integer or len(feature.shape) != 1:
            raise ValueError(f"extra input {name!r} must be a new name with a 1-D integer feature, got {feature}")
    tokenizer = prepare(model, spm_model_file, max_seq_length, do_lower_case)
    length_buckets = (bucket_lengths(max_seq_length) if length_buckets is None
                      else check_bucket_lengths(length_buckets, max_seq_length))
    if outputs_fn is None:
        outputs_fn = lambda inputs, training: model(inputs, training=training)  # noqa: E731
    module = TokenServing(outputs_fn, tokenizer, max_seq_length, extra_inputs, length_buckets, text_segments)
    return write(model, output_dir, module, tokenizer)


def export_encoder(encoder, output_dir, spm_model_file, max_seq_length: int, **kwargs) -> str:
    """An `AlbertEncoder` (outputs `sequence_output`, `pooled_output`) as a SavedModel."""
    return export_saved_model(encoder, output_dir, spm_model_file, max_seq_length, **kwargs)


def export_pretrainer(pretrainer, output_dir, spm_model_file, max_seq_length: int,
                      max_predictions_per_seq: int = 20, **kwargs) -> str:
    """An `AlbertPretrainer` (outputs `mlm_logits`, `sop_logits`) as a SavedModel; its extra input
    is `masked_lm_positions` [B, P] (P = `max_predictions_per_seq` in `serve_examples`)."""
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    return export_saved_model(
        pretrainer, output_dir, spm_model_file, max_seq_length,
        extra_inputs={"masked_lm_positions": spec["masked_lm_positions"]}, **kwargs,
    )


class _LoadedVariable(keras.Variable):
    """A Keras variable whose value is a variable of a loaded SavedModel, not a copy of it.

    A Keras variable made from a `tf.Variable` copies it, and the loaded functions would go on
    reading the original; but the TensorFlow backend keeps a `tf.Variable` that `_initialize`
    receives as its value, so the initializer here returns the loaded variable and goes there
    directly instead of into a new `tf.Variable`.
    """

    def __init__(self, variable: tf.Variable, name: str, trainable: bool):
        self._loaded_variable = variable
        super().__init__(initializer=self._the_loaded_variable, shape=tuple(variable.shape),
                         dtype=variable.dtype.name, trainable=trainable, name=name)
        if self._value is not variable:
            raise RuntimeError(f"this Keras copied the loaded variable {variable.name} instead of using it")

    def _the_loaded_variable(self, shape, dtype):
        return self._loaded_variable

    def _initialize_with_initializer(self, initializer):
        self._initialize(initializer(self._shape, self._dtype))


class SavedModelLayer(keras.layers.Layer):
    """A reusable SavedModel of this module as a trainable Keras layer (for fine-tuning).

    Keras 3 does not see the variables of a loaded SavedModel, and `keras.layers.TFSMLayer` trains
    copies that the loaded functions never read; this layer tracks Keras variables whose values
    are the loaded variables themselves, so `model.fit` or a custom loop updates what the
    SavedModel computes with. Their names are the loaded paths with "/" as "__".

    Args:
        path: the SavedModel directory (or an already loaded object).
        trainable: whether fine-tuning updates the SavedModel's variables.

    Example:
        >>> encoder = SavedModelLayer("exported_encoder")
        >>> encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})["pooled_output"]
    """

    def __init__(self, path, trainable: bool = True, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        # `path` is a read-only property of Keras layers.
        self.saved_model_path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
        self._loaded = tf.saved_model.load(self.saved_model_path) if self.saved_model_path else path
        # Keras tracks the variables of a list attribute; like `add_weight`, a frozen layer's are
        # made non-trainable.
        with keras.name_scope(self.name):
            self.loaded_weights = [
                _LoadedVariable(v, name=v.name.split(":")[0].replace("/", "__"), trainable=v.trainable and trainable)
                for v in self._loaded.variables
            ]
        self.built = True

    @property
    def loaded(self):
        return self._loaded

    def call(self, inputs, training=False):
        inputs = {k: tf.cast(v, tf.int32) for k, v in inputs.items()}
        return self._loaded(inputs, training=bool(training))

    def get_config(self):
        config = super().get_config()
        config.update(path=self.saved_model_path)
        return config
