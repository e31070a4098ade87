"""How fast this machine is right now: CPU seconds of two fixed workloads (python bench/machine_speed.py
[--repeats 5]), to read a full run of the suite beside (docs/testing.md, "Measured").

The 2-core machine's speed changes by hours: one commit's suite took 12 min 45 s and, later the same
day, 23 min 29 s (docs/testing.md, "Measured", and the paragraph after its findings). A suite time
means little without the speed it ran at, so the rows of "Measured" carry these figures, read
beside the run:
- `python loop`: 20 million additions in a pure-Python loop (the interpreter, as pytest, the
  tracing of tf.functions and every import spend their time);
- `numpy matmul`: 20 products of two 512 x 512 float32 matrices, on one thread (what kernels do).

Both are CPU time of this process (`time.process_time`), which other processes on the machine disturb
less than wall time; the host's slowness shows in them all the same. Medians over the repeats.
"""

from __future__ import annotations

import argparse
import os
import time

# One thread for numpy's BLAS, set before numpy loads: the figure is a core's speed, not the pool's.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import harness  # noqa: E402

LOOP_ADDITIONS = 20_000_000
MATMULS, SIZE = 20, 512


# At a module's top level, as a script's own loop runs: names looked up in a dict, not a frame's slots
# (the same loop in a function took 0.35-0.49 times as long, read back to back).
LOOP = compile(f"total = 0\nfor i in range({LOOP_ADDITIONS}):\n    total += i\n", "loop", "exec")


def python_loop() -> int:
    names = {}
    exec(LOOP, names)
    return names["total"]


def numpy_matmul() -> float:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((SIZE, SIZE), dtype=np.float32)
    b = a.T.copy()
    for _ in range(MATMULS):
        a = (a @ b) / SIZE
    return float(a[0, 0])


def cpu_seconds(work) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_repeats(parser, default=5)
    args = parser.parse_args()
    rows = []
    for name, work in (("python loop", python_loop), ("numpy matmul", numpy_matmul)):
        work()  # numpy loaded, caches warm
        seconds = [cpu_seconds(work) for _ in range(args.repeats)]
        low, median, high = harness.quartiles(seconds)
        rows.append([name, f"{median:.2f}", f"{low:.2f}-{high:.2f}"])
    harness.print_table(["workload", "CPU s (median)", "quartiles"], rows)


if __name__ == "__main__":
    main()
