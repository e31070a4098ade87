"""A model's weights by name: the one way this package names, saves and loads them.

A weight is named by its path below the model (`encoder/embeddings/word_embeddings/embeddings`),
which does not depend on the top-level model's uniquified name. A preset keeps the encoder's weights
(named below the encoder) in `model.weights.h5` and a task's other weights (named below the task
model: the pretraining heads, a classifier's dense layer) in `task.weights.h5`, each an HDF5 file of
one dataset per weight. So any model loads the part it shares with any preset: an encoder from a
classifier's preset, a classifier with a new head from an encoder's. Loading is strict: a weight
missing, left over or of another shape is an error naming it.
"""

from __future__ import annotations

import os

import numpy as np

from albert_tf.utils.errors import UserError

ENCODER_PREFIX = "encoder/"


def model_weights(model) -> dict:
    """The model's variables by path below the model, which is how checkpoints here name them.

    A `tf.train.Checkpoint(model=model)` of a Keras 3 model does not reach layers kept in Python
    lists (the encoder's blocks): most weights would then be saved only as the optimizer's
    numbered slots, and a model-only restore would silently skip them. Naming every variable by
    its path ("encoder/group_0_inner_group_0/attention/query/kernel") keeps them all, readable,
    and independent of the top-level model's uniquified name.
    """
    if not model.built:  # an unbuilt model has neither weights nor a path yet
        model.build()
    weights = {}
    prefix = model.path + "/"  # a model inside another (a text classifier's classifier) has its path
    for variable in model.weights:
        key = variable.path[len(prefix):] if variable.path.startswith(prefix) else variable.path.split("/", 1)[-1]
        if key in weights and weights[key] is not variable:
            raise ValueError(f"two variables of the model share the path {variable.path}")
        weights[key] = variable
    return weights


def split(model) -> tuple[dict, dict]:
    """`(encoder, task)`: the model's variables by name, the encoder's below the encoder and the
    rest (heads) below the model. An encoder is all encoder; a task model keeps it as `.encoder`."""
    weights = model_weights(model)
    if not hasattr(model, "encoder"):
        return weights, {}
    encoder = {k[len(ENCODER_PREFIX):]: v for k, v in weights.items() if k.startswith(ENCODER_PREFIX)}
    task = {k: v for k, v in weights.items() if not k.startswith(ENCODER_PREFIX)}
    return encoder, task


def values(variables: dict) -> dict[str, np.ndarray]:
    """float32 arrays of variables by name (a bf16 model saves float32, as it loads any)."""
    return {name: np.asarray(v.numpy(), np.float32) for name, v in variables.items()}


def save(path: str | os.PathLike, tensors: dict[str, np.ndarray]) -> None:
    """Writes tensors by name as one HDF5 file (written aside and renamed).

    The file is made in memory and written with Python's I/O. HDF5 writing to a full disk fails
    in its caches, as RuntimeErrors h5py raises while closing, and then crashes the process; the
    write of a finished image fails as an OSError that names the file (a full disk, a file size
    limit), and nothing is left. The cost is one copy of the weights in memory while saving.
    """
    import h5py

    from albert_tf.utils.atomic import atomic_open

    with h5py.File(f"{os.fspath(path)}-{id(tensors)}", "w", driver="core", backing_store=False) as f:
        for name in sorted(tensors):
            f.create_dataset(name, data=np.asarray(tensors[name]))
        f.flush()
        image = f.id.get_file_image()
    try:
        with atomic_open(path, "wb") as out:
            out.write(image)
    except OSError as error:  # a write's error names no file
        raise OSError(error.errno, error.strerror, os.fspath(path)) from None


def read(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The tensors by name of a file of `save`."""
    import h5py

    tensors = {}
    try:
        with h5py.File(os.fspath(path), "r") as f:
            f.visititems(lambda name, item: tensors.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                         else None)
    except OSError as error:
        from albert_tf.utils.errors import UserError

        raise UserError(f"{path}: not a readable weights file ({str(error).splitlines()[0]})") from None
    return tensors


def check_match(source: str, shapes: dict[str, tuple], wanted: dict[str, tuple], missing_ok: bool = False) -> None:
    """The one check of stored weights against a model's: `shapes` (name -> shape of what
    `source` holds) against `wanted` (the model's); a weight missing (unless `missing_ok`), left
    over or of another shape is a UserError naming the first of each."""
    missing = [] if missing_ok else sorted(set(wanted) - set(shapes))
    extra = sorted(set(shapes) - set(wanted))
    other = [f"{name} has shape {list(shapes[name])} there, {list(shape)} here"
             for name, shape in wanted.items() if name in shapes and tuple(shapes[name]) != tuple(shape)]
    problems = ([f"missing {_few(missing)}"] if missing else []) + (
        [f"unexpected {_few(extra)}"] if extra else []) + other[:4] + (
        [f"and {len(other) - 4} more"] if len(other) > 4 else [])
    if problems:
        raise UserError(f"{source} does not match the model: {'; '.join(problems)}")


def assign(variables: dict, tensors: dict[str, np.ndarray], source: str) -> None:
    """Assigns every variable its tensor of the same name; a tensor missing, left over or of another
    shape is an error that names it (nothing is assigned then)."""
    check_match(source, {name: tensor.shape for name, tensor in tensors.items()},
                {name: tuple(v.shape) for name, v in variables.items()})
    for name, variable in variables.items():
        variable.assign(tensors[name].astype(variable.dtype))


def _few(names: list[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
