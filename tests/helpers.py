"""Helpers that more than one test module uses (import them from here, not from another test)."""

import contextlib
import os
import pathlib
import shutil
import tempfile
import textwrap

import numpy as np

from albert_tf.errors import FlagError

FILLER = "the a of house river king night long old little man came went saw there".split()


def good_bad_sentences(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """`n` sentences of filler words with "good" (label 1) or "bad" (label 0) somewhere in them: a
    task a tiny classifier learns in seconds."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        label = int(rng.integers(0, 2))
        words = list(rng.choice(FILLER, size=5))
        words.insert(int(rng.integers(0, 6)), "good" if label else "bad")
        texts.append(" ".join(words).capitalize() + ".")
        labels.append(label)
    return texts, np.array(labels)


# ---- a SavedModel asked in a process without this package (SQuAD serving and CLI tests) ----

# argv: the export folder, a JSON file of [question, context] pairs; prints the outputs as JSON.
FRESH_SERVING_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece op)
    assert not any(m.startswith(("albert_tf", "finetune")) for m in sys.modules)
    pairs = json.load(open(sys.argv[2]))
    serve = tf.saved_model.load(sys.argv[1]).signatures["serve_text"]
    out = serve(question=tf.constant([p[0] for p in pairs]), context=tf.constant([p[1] for p in pairs]))

    def plain(x):  # [B] and [B, k] outputs
        return [plain(y) for y in x] if isinstance(x, list) else x.decode() if isinstance(x, bytes) else float(x)

    print(json.dumps({k: plain(v.numpy().tolist()) for k, v in out.items()}))
    """
)


# ---- data prep's console script in this process (Beam and bad-input tests) ----


def run_create_pretraining_data(args):
    """The console script's main in this process, flags it does not know passed on as to Beam."""
    from data_prep import create_pretraining_data

    create_pretraining_data.FLAGS.unparse_flags()
    try:
        remaining = create_pretraining_data.FLAGS(["albert-create-pretraining-data", *args], known_only=True)
        return create_pretraining_data.main(remaining)
    finally:
        create_pretraining_data.FLAGS.unparse_flags()


# ---- a user without write permission (files and bad-input tests) ----


def as_another_user(function):
    """Runs `function()` in a child process that cannot write where this one can: as root, a fork
    that drops to the user `nobody` (permission bits bind it, unlike root); otherwise a fork as is.
    Returns the FlagError message it raised, or None."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        message = b""
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            function()
        except FlagError as error:
            message = str(error).encode()
        except BaseException as error:
            message = f"unexpected {type(error).__name__}: {error}".encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        message = f.read().decode()
    os.waitpid(pid, 0)
    return message or None


@contextlib.contextmanager
def world_readable_folder():
    """A fresh folder that the child of `as_another_user` can enter (pytest's tmp_path is under a
    folder only its owner may enter)."""
    top = pathlib.Path(tempfile.mkdtemp())
    top.chmod(0o755)
    try:
        yield top
    finally:
        for folder in top.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(top)


# ---- tiny pretraining records and options (bad-input and fault tests) ----

PRETRAINING_SEQ, PRETRAINING_PREDICTIONS = 16, 4


def write_pretraining_records(path, count, seq=PRETRAINING_SEQ, max_id=50):
    import tensorflow as tf

    from albert_tf import features

    spec = features.pretraining_feature_spec(seq, PRETRAINING_PREDICTIONS)
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            values = {
                "input_ids": rng.integers(5, max_id + 1, seq).tolist(),
                "input_mask": [1] * seq,
                "segment_ids": [0] * (seq // 2) + [1] * (seq - seq // 2),
                "token_boundary": [1] * seq,
                "masked_lm_positions": [1, 2, 3, 4],
                "masked_lm_ids": [7, 8, 9, max_id],
                "masked_lm_weights": [1.0] * PRETRAINING_PREDICTIONS,
                "next_sentence_labels": [1],
            }
            writer.write(features.serialize_example(values, spec))
    return str(path)


def pretraining_options(output_dir, **changes):
    from albert_tf import pretraining

    values = dict(output_dir=str(output_dir), train_batch_size=4, eval_batch_size=4, max_seq_length=PRETRAINING_SEQ,
                  max_predictions_per_seq=PRETRAINING_PREDICTIONS, num_train_steps=10, num_warmup_steps=0, jit_compile=False)
    values.update(changes)
    return pretraining.PretrainingOptions(**values)
