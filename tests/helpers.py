"""Helpers that more than one test module uses (import them from here, not from another test)."""

import contextlib
import json
import os
import pathlib
import shutil
import socket
import sys
import tempfile
import textwrap

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data.datasets import traced_as_written
from albert_tf.utils.errors import FlagError

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


# ---- a console script in this process (where a child process is not what a test is about) ----


def console_script(run, argv, monkeypatch, capsys):
    """Calls a console script's entry point `run` (`albert_tf.cli.entry_point.run_main`'s caller)
    with `argv` as its command line in this process, which has TensorFlow loaded already, instead of
    a child that spends seconds loading it: (exit code, stdout, stderr)."""
    import pytest

    from albert_tf.utils import quiet

    monkeypatch.setattr(sys, "argv", [str(arg) for arg in argv])
    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    with pytest.raises(SystemExit) as exited:
        run()
    captured = capsys.readouterr()
    code = exited.value.code
    return 0 if code is None else code, captured.out, captured.err  # sys.exit(None) is status 0


# ---- data prep's console script in this process (Beam and bad-input tests) ----


def run_create_pretraining_data(args):
    """The console script's main in this process, flags it does not know passed on as to Beam: its
    exit code, a user's error reported as `albert_tf.cli.entry_point.run_main` reports it."""
    from data_prep import create_pretraining_data

    from albert_tf.cli.entry_point import report_errors

    create_pretraining_data.FLAGS.unparse_flags()
    try:
        remaining = create_pretraining_data.FLAGS(["albert-create-pretraining-data", *args], known_only=True)
        return report_errors(create_pretraining_data.main, value_errors_are_users=True)(remaining)
    except SystemExit as exit:  # a user's error: its one line is on stderr
        return exit.code
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

    from albert_tf.data import features

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
    from albert_tf.training import pretraining

    values = dict(output_dir=str(output_dir), train_batch_size=4, eval_batch_size=4, max_seq_length=PRETRAINING_SEQ,
                  max_predictions_per_seq=PRETRAINING_PREDICTIONS, num_train_steps=10, num_warmup_steps=0, jit_compile=False)
    values.update(changes)
    return pretraining.PretrainingOptions(**values)


# ---- the pretraining loop on synthetic batches (training, preemption and worker-fault tests) ----


LOOP_CONFIG = AlbertConfig(
    vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=64, max_position_embeddings=64,
)


def random_dataset_fn(seed: int = 0, num_examples: int = 2**40):
    """Synthetic pretraining batches; element `i` is a fixed function of (i, seed), so that any
    split across replicas or any resume sees the same examples in the same order."""

    def fn(input_context, batch_size):
        def example(i):
            key = tf.stack([tf.cast(i, tf.int32), seed])
            uniform = tf.random.stateless_uniform
            return {
                "input_ids": uniform([PRETRAINING_SEQ], key, 5, LOOP_CONFIG.vocab_size, tf.int32),
                "input_mask": tf.ones([PRETRAINING_SEQ], tf.int32),
                "segment_ids": tf.repeat(tf.constant([0, 1], tf.int32), PRETRAINING_SEQ // 2),
                "masked_lm_positions": uniform([PRETRAINING_PREDICTIONS], key + 1, 1, PRETRAINING_SEQ, tf.int32),
                # Ids from a small range, so a few steps visibly learn them.
                "masked_lm_ids": uniform([PRETRAINING_PREDICTIONS], key + 2, 5, 9, tf.int32),
                "masked_lm_weights": tf.cast(uniform([PRETRAINING_PREDICTIONS], key + 3, 0, 2, tf.int32), tf.float32),
                "next_sentence_labels": uniform([1], key + 4, 0, 2, tf.int32),
            }

        dataset = tf.data.Dataset.range(num_examples)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.map(traced_as_written(example)).batch(batch_size, drop_remainder=True)

    return fn


def loop_options(output_dir, **changes):
    from albert_tf.training import pretraining

    values = dict(
        output_dir=str(output_dir), train_batch_size=8, eval_batch_size=8, max_seq_length=PRETRAINING_SEQ,
        max_predictions_per_seq=PRETRAINING_PREDICTIONS, learning_rate=2e-2, num_train_steps=20,
        num_warmup_steps=2, save_checkpoints_steps=1000, steps_per_loop=1, jit_compile=False,
        seed=7,
    )
    values.update(changes)
    return pretraining.PretrainingOptions(**values)


def run_weights(run):
    return [v.numpy() for v in run.model.weights]


def attention_score_einsums(saved_model_dir) -> int:
    """How many attention-score einsums the SavedModel's functions hold: a model's forward pass
    traced once has one a block application (`num_hidden_layers * inner_group_num`), each further
    trace as many more."""
    from tensorflow.core.protobuf import saved_model_pb2

    from albert_tf.layers.attention import SCORES  # one einsum each time a model applies a block

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].graph_def
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    return sum(node.op == "Einsum" and node.attr["equation"].s.decode() == SCORES for node in nodes)


class ReservedPorts:
    """`n` loopback ports kept for a test until `close()` (or the end of the `with` block): each
    stays bound by a socket here (SO_REUSEPORT, never listening). Alone, a port is a dead address:
    nothing answers there, and no other process can start to. A test's TensorFlow cluster binds its
    gRPC servers beside them when their environment has `ENV` (TensorFlow's TF_GRPC_REUSE_PORT:
    they then set SO_REUSEPORT too). A port picked free and closed before it is used (seconds later,
    by a process that loads TensorFlow) is any process's in between: another test worker's server,
    or an outgoing connection's ephemeral port, which the kernel does not hand out while a socket
    here holds it."""

    ENV = {"TF_GRPC_REUSE_PORT": "1"}

    def __init__(self, n: int):
        self._sockets = []
        for _ in range(n):
            held = socket.socket()
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            held.bind(("127.0.0.1", 0))
            self._sockets.append(held)
        self.ports = [s.getsockname()[1] for s in self._sockets]

    def close(self) -> None:
        for held in self._sockets:
            held.close()

    def __enter__(self) -> "ReservedPorts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def process_group_states(group: int) -> list[str]:
    """The state (/proc's R, S, D, T, Z, ...) of every thread of every process in process group
    `group` (a process started with start_new_session=True and what it started, unless they left
    it): [] once they have all been reaped."""
    states = []
    for process in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            if int((process / "stat").read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            tasks = (process / "task").iterdir()
            states += [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks]
        except (FileNotFoundError, ProcessLookupError, IndexError):  # ended in between
            continue
    return states


def write_random_records(path, num_records, seed=0, max_seq_length=PRETRAINING_SEQ, max_predictions=PRETRAINING_PREDICTIONS):
    """Pretraining TFRecords with random contents, in the schema of albert_tf.data.features."""
    from albert_tf.data import features

    spec = features.pretraining_feature_spec(max_seq_length, max_predictions)
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(num_records):
            values = {
                "input_ids": rng.integers(5, LOOP_CONFIG.vocab_size, max_seq_length),
                "input_mask": np.ones(max_seq_length, np.int64),
                "segment_ids": np.repeat([0, 1], max_seq_length // 2),
                "token_boundary": np.ones(max_seq_length, np.int64),
                "masked_lm_positions": rng.integers(1, max_seq_length, max_predictions),
                "masked_lm_ids": rng.integers(5, 9, max_predictions),
                "masked_lm_weights": rng.integers(0, 2, max_predictions).astype(np.float32),
                "next_sentence_labels": rng.integers(0, 2, 1),
            }
            writer.write(features.to_example(values, spec).SerializeToString())
    return str(path)


def cli_flags(tmp_path, output_dir, num_train_steps, **extra):
    config_file = tmp_path / "albert_config.json"
    if not config_file.exists():
        LOOP_CONFIG.to_json_file(config_file)
    values = dict(
        input_file=str(tmp_path / "train-*.tfrecord"), output_dir=str(output_dir),
        albert_config_file=str(config_file), train_batch_size=8, max_seq_length=PRETRAINING_SEQ,
        max_predictions_per_seq=PRETRAINING_PREDICTIONS, learning_rate=2e-2, num_train_steps=num_train_steps,
        num_warmup_steps=2, save_checkpoints_steps=2, steps_per_loop=1, seed=7, strategy="one_device",
    )
    values.update(extra)
    return [f"--{k}={v}" for k, v in values.items()] + ["--nojit_compile", "--noprogress_bar"]


def latest_step(directory):
    """The step of the checkpoint that the manager's state file names (0 if none yet)."""
    try:
        state = (directory / "checkpoint").read_text()
    except FileNotFoundError:
        return 0
    return int(state.split('"')[1].rsplit("-", 1)[1]) if '"' in state else 0


def release_learning_rate(k, init_lr, num_train_steps, num_warmup_steps):
    """The release's optimization.py rate at global step k: linear warmup, linear decay to 0."""
    if k < num_warmup_steps:
        return init_lr * k / num_warmup_steps
    return init_lr * (1 - min(k, num_train_steps) / num_train_steps)


# ---- the SQuAD chain: a tiny model that learns its questions (SQuAD CLI and LiteRT tests) ----

SQUAD_CHAIN_CONFIG = {"vocab_size": 30000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 128,
                      "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SQUAD_CHAIN_TRAINING = ["--max_seq_length=128", "--doc_stride=64", "--max_query_length=32", "--learning_rate=2e-3",
                        "--num_train_steps=750", "--num_warmup_steps=75", "--train_batch_size=32", "--eval_batch_size=64",
                        "--steps_per_loop=100", "--progress_bar=false"]


def first_squad_questions(path, count, out):
    data = json.loads(path.read_text())
    kept, total = [], 0
    for article in data["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if total >= count:
                break
            paragraphs.append(paragraph)
            total += len(paragraph["qas"])
        if paragraphs:
            kept.append({"title": article["title"], "paragraphs": paragraphs})
    out.write_text(json.dumps({"version": data["version"], "data": kept}))
    return out
