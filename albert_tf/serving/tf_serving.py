"""TF Serving's layout and warmup file for the SavedModels of this package.

TF Serving serves a *model base path* whose subfolders named by integers are the model's versions
(tensorflow/serving's docs, serving_config.md: the highest version is served by default, and a new
one is loaded when it appears, beside the others); a version's `assets.extra/tf_serving_warmup_requests`
(saved_model_warmup.md) is a TFRecord file of `tensorflow.serving.PredictionLog` records that the
server runs once when it loads the version, so that the first real request does not pay for the
first call (tracing, kernel selection, memory; issue 54 reports 0.9 s for `serve_text`'s).

`write_version(model_base, version, export)` writes one version: the SavedModel (`export(folder)`)
and its warmup file, in a folder beside `<model_base>/<version>` under a name that is no integer
(`albert_tf.utils.atomic.atomic_folder`) and renamed when whole, so a server watching the base
never loads half a version; a version that is there already is never written over (the server may
be serving it). The warmup requests are `serve_text`'s (raw strings, as a REST client sends them),
one a few texts of different lengths (each length bucket) and batch sizes, and each is replayed
through the written SavedModel before the version is renamed into place.

The records are built with the `tensorflow-serving-api` protos (`pip install tensorflow-serving-api`,
the version of the installed TensorFlow).
"""

from __future__ import annotations

import os
import re

import tensorflow as tf

from albert_tf.utils.atomic import atomic_folder
from albert_tf.utils.errors import UserError

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
SIGNATURE = "serve_text"
# Short, middling and long (past 64 pieces): the first buckets of `serve_text` are each traced once.
WARMUP_TEXTS = (
    "Hello.",
    "The quick brown fox jumps over the lazy dog, and the dog does not mind at all.",
    " ".join(["A long text reaches the longer length buckets of the tokenizer, so that warm-up covers "
              "them as well as the short ones."] * 4),
)
_VERSION = re.compile(r"^[0-9]+$")


def _protos():
    try:
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    except ImportError:
        raise UserError("TF Serving's warmup file is built with its protos: pip install "
                        f"'tensorflow-serving-api~={'.'.join(tf.__version__.split('.')[:2])}.0'") from None
    return model_pb2, predict_pb2, prediction_log_pb2


def versions(model_base: str | os.PathLike) -> list[int]:
    """The versions under a model base path (its subfolders named by integers), lowest first."""
    model_base = os.fspath(model_base)
    if not os.path.isdir(model_base):
        return []
    return sorted(int(n) for n in os.listdir(model_base)
                  if _VERSION.match(n) and os.path.isdir(os.path.join(model_base, n)))


def version_folder(model_base: str | os.PathLike, version: int) -> str:
    """`<model_base>/<version>`, which must not be there yet: a version is never written over."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"a TF Serving version is a positive integer, got {version!r}")
    path = os.path.join(os.fspath(model_base), str(version))
    if os.path.exists(path):
        raise UserError(f"{path} exists: version {version} is there already (TF Serving may be serving it); "
                        f"write a new version beside it, e.g. {max(versions(model_base), default=0) + 1}")
    return path


def warmup_requests(texts=WARMUP_TEXTS, model_name: str = "", pairs: bool = False, specs=None) -> list:
    """`PredictionLog` records of `serve_text` requests: each text alone, then all of them as one
    batch. The inputs are those of `specs` (the signature's `TensorSpec`s by name; `text` alone
    without them): a string input gets the text ([B, k] inputs, as RACE's options, k times; with
    `pairs`, `text` is both segments of a pair, for a model fine-tuned on pairs), an integer one
    zeros [B, 1] (the pretrainer's `masked_lm_positions`)."""
    model_pb2, predict_pb2, prediction_log_pb2 = _protos()
    specs = specs or {"text": tf.TensorSpec(None, tf.string)}

    def column(spec, batch, name):
        if spec.dtype != tf.string:
            return tf.make_tensor_proto([[0]] * len(batch), dtype=spec.dtype)
        if name == "text" and pairs:
            return tf.make_tensor_proto([[text, text] for text in batch], dtype=tf.string)
        width = spec.shape[-1] if spec.shape.rank == 2 else None
        return tf.make_tensor_proto([[text] * width if width else text for text in batch], dtype=tf.string)

    logs = []
    for batch in [[text] for text in texts] + [list(texts)]:
        request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SIGNATURE))
        for name, spec in sorted(specs.items()):
            request.inputs[name].CopyFrom(column(spec, batch, name))
        logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def read_warmup(saved_model_dir: str | os.PathLike) -> list:
    """The `PredictionLog` records of a version's warmup file."""
    _, _, prediction_log_pb2 = _protos()
    path = os.path.join(os.fspath(saved_model_dir), WARMUP_FILE)
    return [prediction_log_pb2.PredictionLog.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]


def replay(loaded, logs) -> list[dict]:
    """Runs each record's request through `loaded` (a `tf.saved_model.load`ed SavedModel) as TF
    Serving runs it: the named signature on the request's tensors. Returns the outputs."""
    outputs = []
    for log in logs:
        request = log.predict_log.request
        signature = loaded.signatures[request.model_spec.signature_name or "serving_default"]
        inputs = {name: tf.constant(tf.make_ndarray(tensor)) for name, tensor in request.inputs.items()}
        outputs.append({k: v.numpy() for k, v in signature(**inputs).items()})
    return outputs


def write_warmup(saved_model_dir: str | os.PathLike, texts=WARMUP_TEXTS, model_name: str = "",
                 pairs: bool = False) -> str:
    """Writes `saved_model_dir`'s warmup file (`warmup_requests`) after replaying every record
    through it: a request the SavedModel refuses is an error here, not at the server's start."""
    import tensorflow_text  # noqa: F401  (registers the SentencePiece op of serve_text)

    saved_model_dir = os.fspath(saved_model_dir)
    loaded = tf.saved_model.load(saved_model_dir)
    _, specs = loaded.signatures[SIGNATURE].structured_input_signature
    logs = warmup_requests(texts, model_name, pairs, specs)
    replay(loaded, logs)
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


def write_version(model_base: str | os.PathLike, version: int, export, texts=WARMUP_TEXTS, pairs: bool = False) -> str:
    """Writes version `version` of the model at `model_base`: `export(folder)` writes the SavedModel,
    then its warmup file; the folder becomes `<model_base>/<version>` only when whole. Returns it."""
    path = version_folder(model_base, version)
    with atomic_folder(path) as staging:
        export(staging)
        write_warmup(staging, texts, model_name=os.path.basename(os.path.abspath(os.fspath(model_base))), pairs=pairs)
    return path
