"""What the scripts of bench/ and experiments/ share: where things are, a quiet TensorFlow on a set
number of threads, `--repeats`, interleaved timing in a fresh random order and its medians and quartiles,
Markdown tables, and another revision's code checked out to run a case on beside this checkout's.

Importing it puts this checkout first on sys.path, so that a script measures the code beside it
whether or not (and wherever) the package is installed. Nothing else happens on import: a script
calls `quiet_tensorflow()` before it imports TensorFlow and `set_threads()` before the first op.

    import harness  # in bench/; experiments/ put bench/ on sys.path first
    ARGS = parse_args()  # with harness.add_threads / harness.add_repeats
    harness.quiet_tensorflow()
    import tensorflow as tf
    harness.set_threads(ARGS.threads, torch=True)
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import time
from typing import Callable, Hashable

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def checkout(rev: str, folder: pathlib.Path) -> pathlib.Path:
    """The files of revision `rev` of this repository (`git archive`), written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def call_on_code(code: pathlib.Path, module: str, call: str, cwd) -> dict:
    """`module.call` (a bench script's function returning a dict with "code", the folder its package
    came from, and JSON values) in a new Python that imports the package from the folder `code`;
    the dict without "code". Exits naming the call where it fails."""
    path = [str(code), str(REPO / "bench"), str(REPO)]
    program = f"import sys; sys.path[:0] = {path!r}; import {module}, json; print(json.dumps({module}.{call}))"
    ran = subprocess.run([sys.executable, "-c", program], cwd=cwd, capture_output=True, text=True)
    if ran.returncode:
        sys.exit(f"{module}.{call} on {code} failed:\n{ran.stderr[-3000:]}")
    result = json.loads(ran.stdout.splitlines()[-1])
    # The harness, once on the path, does not put this checkout first: the package must be the version's.
    assert result.pop("code") == str(code), (code, result)
    return result


def data_dir() -> pathlib.Path:
    """The full data: the folder named by ALBERT_DATA_DIR, else ../shared/data beside the checkout
    (the tests' `data_dir` fixture reads the same)."""
    return pathlib.Path(os.environ.get("ALBERT_DATA_DIR", REPO.parent / "shared" / "data"))


def reference_dir() -> pathlib.Path:
    """The shared reference outputs (the original release's pretraining data): beside data_dir()."""
    return data_dir().parent / "reference"


def spm_model() -> pathlib.Path:
    """The released 30k-clean.model in the full data."""
    return data_dir() / "albert" / "30k-clean.model"


def quiet_tensorflow(level: str = "2") -> None:
    """TensorFlow's C++ logs down to errors (level "3": none), Keras on TensorFlow; before the import."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", level)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def set_threads(threads: int, torch: bool = False) -> None:
    """Every system on `threads` threads (TensorFlow's intra-op pool, one inter-op thread; torch's
    too with torch=True); call before TensorFlow runs its first op."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if torch:
        import torch as torch_module

        torch_module.set_num_threads(threads)


def add_threads(parser: argparse.ArgumentParser, default: int = 2) -> None:
    parser.add_argument("--threads", type=int, default=default, help="threads of every system")


def add_repeats(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument("--repeats", type=int, default=default,
                        help="timed repeats; the tables give their medians")


def add_model(parser: argparse.ArgumentParser, seq_length: int) -> None:
    """--size (an AlbertConfig.named size) and --seq_length, as every model bench takes them."""
    parser.add_argument("--size", default="albert_base_v2")
    parser.add_argument("--seq_length", type=int, default=seq_length)


def add_skip(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip", default="", help="comma-separated systems to leave out")


def interleaved_times(calls: dict[tuple[Hashable, str], Callable[[], object]], repeats: int,
                      progress: bool = False, pause: float = 0.05,
                      seed: int = 0) -> dict[tuple[Hashable, str], list[float]]:
    """Seconds of `repeats` runs of every call, keyed (row, system) as `calls` is; each call must
    wait for its own work (`.numpy()`).

    Every repeat runs each row's systems back to back, so a change of load on a shared machine hits
    them alike, in a fresh random order each repeat (drawn from `seed`): no system runs after the
    same predecessor every time. Before each call the harness sleeps `pause` seconds, so that the
    threads a system leaves busy after its work (PyTorch's OpenMP pool, ONNX Runtime's spinning
    workers) have gone idle before the next one starts: under a fixed order that leftover load
    fell on the same system in every round (on the Xeon of issue 43, the SavedModel took 140 ms
    right after an ONNX Runtime call against 121 ms after a pause). Peers that can be told not to
    spin are told so where they are made (`onnxruntime_session`).
    """
    rng = random.Random(seed)
    rows = list(dict.fromkeys(row for row, _ in calls))
    names = list(dict.fromkeys(name for _, name in calls))
    times = {key: [] for key in calls}
    for repeat in range(repeats):
        for row in rows:
            order = [name for name in names if (row, name) in calls]
            rng.shuffle(order)
            for name in order:
                if pause:
                    time.sleep(pause)
                began = time.perf_counter()
                calls[row, name]()
                times[row, name].append(time.perf_counter() - began)
        if progress:
            print(f"repeat {repeat + 1}/{repeats} done", flush=True)
    return times


def onnxruntime_session(path, threads: int):
    """An ONNX Runtime CPU session on `threads` intra-op threads whose workers do not spin after a
    call (they would slow whatever system runs next; `interleaved_times`)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def medians(times: dict) -> dict:
    """The median of every list of `times`, under the same keys."""
    return {key: statistics.median(values) for key, values in times.items()}


def quartiles(values) -> tuple[float, float, float]:
    """The first quartile, median and third quartile of `values` (the tables' median and IQR); of one
    value (`--repeats 1`), that value three times."""
    values = list(values)
    if len(values) == 1:
        return values[0], values[0], values[0]
    first, median, third = statistics.quantiles(values, n=4, method="inclusive")
    return first, median, third


def cpu_model() -> str:
    """The CPU's model name as `lscpu` gives it (every table names it: int8 and bf16 ratios differ
    between CPUs), with the flags that decide those ratios where it has them."""
    name, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == "unknown CPU":
                    name = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    wanted = [("avx512_vnni", "AVX-512 VNNI"), ("avx512_bf16", "AVX512_BF16"), ("amx_bf16", "AMX")]
    extras = [label for flag, label in wanted if flag in flags]
    return f"{name} ({', '.join(extras)})" if extras else name


def print_table(header: list[str], rows: list[list[object]]) -> None:
    """A Markdown table, as docs/benchmarks.md holds them (cells already formatted)."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
