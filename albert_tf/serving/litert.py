"""LiteRT (TFLite) models of every task: token ids in, builtin ops only, quantized or not.

`export_litert` writes into an output folder

    model.tflite     the model: int32 `input_ids`, `input_mask`, `segment_ids` [1, max_seq_length]
                     ([1, num_choices, max_seq_length] for multiple choice) -> the task's outputs
    model_io.json    its inputs and outputs in the interpreter's order: name, dtype, shape, index
                     (and a text classifier's `labels`, the names of its outputs in order)
    spiece.model     the SentencePiece model the ids come from (the on-device tokenizer's)
    albert_config.json  the encoder's AlbertConfig (every export's config: `export.write_config`)

for the encoder (`pooled_output`, `sequence_output`) and the classifier (`logits`, and
`probability`, their softmax, unless it is a regressor). A fine-tuning task owns its model's
outputs and gives them as a `TaskOutputs` (`FinetuningTask.litert_outputs`): SQuAD v1.1's span
model (`end_logits`, `start_logits`, in the order TFLite Task Library's BertQuestionAnswerer reads
them), SQuAD v2.0's answerability head, RACE's multiple choice (`logits`, `probability` over the
choices). The checks (lengths, vocabulary) are every export's: `albert_tf.serving.export.prepare`.

The model is traced at batch 1 with Keras' LayerNorm formula (`common.keras_layer_norm`): the
fused CPU form goes through `FusedBatchNormV3`, which LiteRT has no builtin kernel for. The
converter may use builtin ops only, so a phone's stock LiteRT runs the file (no Flex delegate).

Quantization (`QUANTIZATIONS`): "none" (float32), "float16" (weights in float16, computed in
float32), "dynamic_int8" (weights int8, activations quantized on the fly: about a quarter of the
float32 size) and "full_int8" (weights and activations int8, calibrated on `representative_data`:
feature dicts of the task's own training texts, e.g. from `tokenized_texts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import warnings
from typing import Callable, Iterable, Mapping

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from albert_tf.serving import export
from albert_tf.serving.formats import QUANTIZATIONS
from albert_tf.utils.quiet import cpp_lines_kept
from albert_tf.utils.validation import require_choice
from albert_tf.layers import common

MODEL_FILE = "model.tflite"
IO_FILE = "model_io.json"
INPUTS = ("input_ids", "input_mask", "segment_ids")
# Calibration examples full int8 reads at most (the converter's own examples use about 100).
CALIBRATION_EXAMPLES = 100
# Full int8's attention mask: exp(-50) is 0 in any softmax of scores below about 30 in size, and the
# scores' int8 range keeps a step of about 0.2, where the encoder's -10000 left a step of 40.
FULL_INT8_MASK_BIAS = -50.0


@dataclasses.dataclass(frozen=True)
class TaskOutputs:
    """What a task's LiteRT model is: `task` (its name in model_io.json), its int32 `inputs` in
    order, each of `shape`, and `outputs_fn`, the outputs by name of a dict of those inputs (the
    model's outputs are in the order of their names). The encoder and classifier have theirs
    (`task_outputs`); a fine-tuning task gives its model's (`FinetuningTask.litert_outputs`)."""

    task: str
    inputs: tuple[str, ...]
    shape: tuple[int, ...]
    outputs_fn: Callable[[dict], dict]


def task_of(model) -> str:
    """"encoder" or "classifier": the albert_tf models whose LiteRT outputs this module knows; a
    fine-tuning task's model gives its own (`FinetuningTask.litert_outputs`)."""
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models import AlbertClassifier

    for cls, task in ((AlbertEncoder, "encoder"), (AlbertClassifier, "classifier")):
        if isinstance(model, cls):
            return task
    raise ValueError(f"no LiteRT outputs known for a {type(model).__name__}: give an AlbertEncoder or "
                     "AlbertClassifier, or the model's TaskOutputs (a fine-tuning task's litert_outputs)")


def _unwrap(model):
    # A text classifier (albert_tf.tasks.text_classifier) converts as its classifier: ids in.
    inner = getattr(model, "classifier", None)
    from albert_tf.models import AlbertClassifier

    return inner if isinstance(inner, AlbertClassifier) else model


def logits_and_probability(logits) -> dict:
    """A classifier's LiteRT outputs: `logits` and, unless it is a regressor (one output, its
    score), `probability`, their softmax."""
    outputs = {"logits": logits}
    if logits.shape[-1] > 1:
        outputs["probability"] = tf.nn.softmax(logits, axis=-1)
    return outputs


def task_outputs(model, max_seq_length: int) -> TaskOutputs:
    """The `TaskOutputs` of an albert_tf encoder or classifier (see `task_of`)."""
    model = _unwrap(model)
    task = task_of(model)
    if task == "encoder":  # pooled_output, sequence_output
        return TaskOutputs(task, INPUTS, (1, max_seq_length), lambda inputs: dict(model(inputs, training=False)))
    return TaskOutputs(task, INPUTS, (1, max_seq_length),
                       lambda inputs: logits_and_probability(model(inputs, training=False)))


def _calibration(representative_data, outputs: TaskOutputs):
    """The converter's representative dataset: the first examples of `representative_data` (an
    iterable of feature dicts, or a callable returning one) as int32 arrays of the model's shape."""
    def dataset():
        data = representative_data() if callable(representative_data) else representative_data
        count = 0
        for features in itertools.islice(data, CALIBRATION_EXAMPLES):
            yield {k: np.asarray(features[k], np.int32).reshape(outputs.shape) for k in outputs.inputs}
            count += 1
        if not count:
            raise ValueError("representative_data gave no examples to calibrate full_int8 on")
    return dataset


def convert(model, max_seq_length: int, quantization: str = "none", representative_data=None,
            outputs: TaskOutputs | None = None) -> bytes:
    """`model` as a LiteRT flatbuffer.

    Args:
        model: a built encoder or classifier (or an `AlbertTextClassifier`), or another model with
            its `outputs`.
        max_seq_length: the fixed length T of the int32 [1, T] inputs.
        quantization: one of `QUANTIZATIONS`.
        representative_data: for "full_int8": feature dicts (`input_ids`, `input_mask`,
            `segment_ids`, each [T], [1, T] or the multiple-choice [C, T]) of the task's training
            texts, or a callable returning a fresh iterable of them; the first
            `CALIBRATION_EXAMPLES` are read.
        outputs: the model's `TaskOutputs` where it is not an encoder or classifier.
    """
    require_choice("quantization", quantization, QUANTIZATIONS)
    if quantization == "full_int8" and representative_data is None:
        raise ValueError("full_int8 needs representative_data: feature dicts of the task's training texts")
    model = _unwrap(model)
    export.check_length(model, max_seq_length)
    outputs = outputs or task_outputs(model, max_seq_length)
    names = outputs.inputs

    def serving_default(*inputs):
        return outputs.outputs_fn(dict(zip(names, inputs, strict=True)))

    specs = [tf.TensorSpec(outputs.shape, tf.int32, name=name) for name in names]
    encoder = model.encoder if hasattr(model, "encoder") else model
    if quantization == "full_int8":
        encoder.attention_mask_bias = FULL_INT8_MASK_BIAS
    try:
        with common.keras_layer_norm():
            traced = tf.function(serving_default, autograph=False).get_concrete_function(*specs)
    finally:
        vars(encoder).pop("attention_mask_bias", None)
    # Weights as constants: the converter would keep Keras 3's variables as LiteRT resource
    # variables, which nothing initialises. Freezing loses the output names: put them back.
    output_names = sorted(traced.structured_outputs)
    frozen = convert_variables_to_constants_v2(traced)

    def named(*inputs):
        return dict(zip(output_names, frozen(*inputs), strict=True))

    function = tf.function(named, autograph=False).get_concrete_function(*specs)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif quantization == "full_int8":
        converter.representative_dataset = _calibration(representative_data, outputs)
        # int8 kernels wherever LiteRT has one, float32 builtins elsewhere; ids stay int32 and
        # the outputs float32, so callers see the float model's interface.
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]
    with _litert_notes_kept():  # full_int8 is calibrated on TensorFlow's own interpreter
        flatbuffer = _in_order(converter.convert(), names, output_names)
    custom = custom_ops(flatbuffer)
    if custom:
        raise RuntimeError(f"the converted model uses ops outside LiteRT's builtins: {', '.join(custom)}")
    return flatbuffer


def _in_order(flatbuffer: bytes, inputs, outputs) -> bytes:
    """The model with its inputs and outputs in the given order of names, and each of those
    tensors named so: the converter orders them as it likes, and on-device libraries without
    metadata (BertQuestionAnswerer) take them by position."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(flatbuffer, 0))
    (signature,) = model.signatureDefs
    subgraph = model.subgraphs[signature.subgraphIndex]
    by_name = {t.name.decode(): t.tensorIndex for t in (*signature.inputs, *signature.outputs)}
    subgraph.inputs = [by_name[name] for name in inputs]
    subgraph.outputs = [by_name[name] for name in outputs]
    for name, index in by_name.items():
        subgraph.tensors[index].name = name.encode()
    builder = flatbuffers.Builder(len(flatbuffer) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def custom_ops(flatbuffer: bytes) -> list[str]:
    """The ops of a LiteRT model that are not builtin (Flex/Select TF ops are custom ops)."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    names = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            names.append(code.CustomCode().decode("utf-8"))
    return sorted(set(names))


def builtin_ops(flatbuffer: bytes) -> list[str]:
    """The names of the builtin ops a LiteRT model uses (e.g. FULLY_CONNECTED)."""
    from tensorflow.lite.python import schema_py_generated as schema

    by_code = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    codes = (model.OperatorCodes(i) for i in range(model.OperatorCodesLength()))
    return sorted({by_code[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())] for c in codes})


@contextlib.contextmanager
def _litert_notes_kept():
    """Around LiteRT's interpreter and converter: what they print that is no warning for the user is
    kept from them. TensorFlow's `tf.lite.Interpreter` warns that it is deprecated each time one is
    made (its converter makes one to calibrate full_int8; docs/on_device.md names the runtime that
    replaces it); the C++ lines (the runtime's XNNPACK delegate, the quantizer's settings) are
    `cpp_lines_kept`: shown with --verbose or on failure."""
    with warnings.catch_warnings(), cpp_lines_kept():
        warnings.filterwarnings("ignore", message=r"\s*Warning: tf.lite.Interpreter is deprecated")
        yield


def interpreter(model: str | os.PathLike | bytes, num_threads: int | None = None):
    """A LiteRT interpreter of a model file or flatbuffer: the LiteRT runtime's (ai_edge_litert,
    the `litert` extra) where installed, else TensorFlow's own; made and its tensors allocated
    without its notes to the user (`_litert_notes_kept`)."""
    kwargs = {"model_content": bytes(model)} if isinstance(model, (bytes, bytearray)) else {"model_path": os.fspath(model)}
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    with _litert_notes_kept():
        result = Interpreter(num_threads=num_threads, **kwargs)
        result.allocate_tensors()
    return result


def io_description(flatbuffer: bytes) -> dict:
    """The model's inputs and outputs in the interpreter's order: name, dtype, shape, index."""
    runner_interpreter = interpreter(flatbuffer)
    runner = runner_interpreter.get_signature_runner("serving_default")

    def described(by_name: Mapping[str, dict], details: list[dict]):
        order = [d["index"] for d in details]
        entries = [{"name": name, "dtype": np.dtype(d["dtype"]).name, "shape": [int(n) for n in d["shape"]],
                    "index": order.index(d["index"])} for name, d in by_name.items()]
        return sorted(entries, key=lambda e: e["index"])

    return {
        "inputs": described(runner.get_input_details(), runner_interpreter.get_input_details()),
        "outputs": described(runner.get_output_details(), runner_interpreter.get_output_details()),
    }


class LiteRTModel:
    """A LiteRT model called like the Keras one: a dict of int arrays in, a dict of float32 arrays
    out. Inputs of batch B > 1 run one row at a time (the model's batch is 1); a batch of 0 gives
    empty outputs. Inputs of another length, and ids outside the vocabulary (negative ones, and
    where the export's albert_config.json is beside the model file, ids of vocab_size and above), are a
    ValueError naming them, as the SavedModel refuses them.

    Example:
        >>> model = LiteRTModel("exported/model.tflite")
        >>> model({"input_ids": ids, "input_mask": mask, "segment_ids": segments})["probability"]
    """

    def __init__(self, model: str | os.PathLike | bytes, num_threads: int | None = None):
        self.interpreter = interpreter(model, num_threads)
        self._runner = self.interpreter.get_signature_runner("serving_default")
        self.input_shape = [int(n) for n in self._runner.get_input_details()["input_ids"]["shape"]]
        self.input_names = [d["name"] for d in self.interpreter.get_input_details()]
        self.vocab_size = None
        if not isinstance(model, bytes):
            from albert_tf.checkpoints.run_folder import CONFIG_FILE

            config = os.path.join(os.path.dirname(os.fspath(model)), CONFIG_FILE)  # export.write_config's
            if os.path.isfile(config):
                with open(config, encoding="utf-8") as f:
                    self.vocab_size = json.load(f).get("vocab_size")

    def _check(self, inputs: dict[str, np.ndarray]) -> bool:
        """Whether the inputs are batched; a ValueError naming the input that does not fit."""
        row = self.input_shape[1:]
        batched = inputs["input_ids"].ndim == len(self.input_shape)
        for name, value in inputs.items():
            if list(value.shape[1:] if batched else value.shape) != row or value.shape != inputs["input_ids"].shape:
                raise ValueError(f"the model takes {name} of shape {self.input_shape} (or [B, {', '.join(map(str, row))}] "
                                 f"for B rows, or {row} for one), got {list(value.shape)}")
        ids = inputs["input_ids"]
        # The words of the encoder's own checks (AlbertEmbeddings), which the SavedModel raises.
        for bad, rule in ((ids < 0, "input_ids must be >= 0"),
                          (ids >= (self.vocab_size or np.iinfo(np.int32).max),
                           f"input_ids must be < vocab_size ({self.vocab_size})")):
            if bad.any():
                where = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(f"{rule}: input_ids{list(where)} is {ids[where]}")
        return batched

    def __call__(self, features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [k for k in self.input_names if k not in features]
        if missing:
            raise ValueError(f"the model takes {', '.join(self.input_names)}; missing: {', '.join(missing)}")
        inputs = {k: np.asarray(features[k], np.int32) for k in self.input_names}
        batched = self._check(inputs)
        if not batched:
            inputs = {k: v[None] for k, v in inputs.items()}
        if len(inputs["input_ids"]) == 0:
            return {k: np.zeros([0, *d["shape"][1:]], d["dtype"]) for k, d in self._runner.get_output_details().items()}
        rows = [self._runner(**{k: v[i: i + 1] for k, v in inputs.items()}) for i in range(len(inputs["input_ids"]))]
        outputs = {k: np.concatenate([row[k] for row in rows]) for k in rows[0]}
        return outputs if batched else {k: v[0] for k, v in outputs.items()}


def tokenized_texts(texts: Iterable, spm_model_file: str | os.PathLike, max_seq_length: int,
                    do_lower_case: bool = True) -> Iterable[dict[str, list[int]]]:
    """Feature dicts of texts (a string, or a pair (a, b)) as the classifier's training packs them:
    calibration data for full int8. A generator: nothing is tokenized until it is read."""
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(spm_model_file, do_lower_case=do_lower_case)
    for text in texts:
        a, b = (text, None) if isinstance(text, str) else text
        yield tokenizer.pack(tokenizer.encode(a), None if b is None else tokenizer.encode(b),
                             max_seq_length=max_seq_length)


def export_litert(model, output_dir: str | os.PathLike, spm_model_file: str | os.PathLike, max_seq_length: int,
                  *, quantization: str = "none", representative_data=None, do_lower_case: bool = True,
                  outputs: TaskOutputs | None = None) -> str:
    """Writes `model` as `<output_dir>/model.tflite` with `model_io.json`, `spiece.model` and
    `albert_config.json` beside it (see the module); returns `output_dir`, which must be missing or
    empty.

    The conversion runs before anything is written; the folder is written aside and renamed when
    complete (`albert_tf.utils.atomic.atomic_folder`), a folder holding files refused first.
    `outputs`: the model's `TaskOutputs` where it is not one of albert_tf's models (`convert`).

    Example:
        >>> export_litert(classifier, "on_device", "30k-clean.model", 128, quantization="dynamic_int8")
    """
    from albert_tf.utils.atomic import atomic_folder, write_json
    from albert_tf.presets.folder import VOCAB

    labels = getattr(model, "labels", None)  # a text classifier's class names: the app's labels
    model = _unwrap(model)
    outputs = outputs or task_outputs(model, max_seq_length)
    export.prepare(model, spm_model_file, max_seq_length, do_lower_case)  # the checks of every export
    output_dir = os.fspath(output_dir)
    with atomic_folder(output_dir) as folder:  # a folder holding files is refused before converting
        flatbuffer = convert(model, max_seq_length, quantization, representative_data, outputs)
        os.makedirs(folder)
        shutil.copyfile(spm_model_file, os.path.join(folder, VOCAB))
        export.write_config(model, folder)
        description = {"task": outputs.task, "quantization": quantization, "max_seq_length": max_seq_length,
                       "do_lower_case": do_lower_case, "vocab_file": VOCAB, **io_description(flatbuffer)}
        if labels:
            description["labels"] = list(labels)
        write_json(os.path.join(folder, IO_FILE), description, sort_keys=False)
        with open(os.path.join(folder, MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
    return output_dir
