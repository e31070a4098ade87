"""What building a tokenizer costs: the first in a process, and each one after it.

Times the construction of `AlbertTokenizer(path)` and `AlbertGraphTokenizer(model_bytes)` on the
released 30k-clean.model, in CPU seconds of the process (`time.process_time`, so a busy machine
slows it less than a wall clock). Each of `--repeats` fresh processes per tokenizer builds one
(`first`: what a process pays for its first tokenizer of a model) and then `--repeats` more of the
same model (`again`: what every later one pays). TensorFlow is imported and has run one op before
either is timed, so neither figure holds TensorFlow's own start. The table gives the medians.
Goal (issue 53): each after the first under 0.02 s, the first well under the 0.3 s it once took.

    python bench/tokenizer_build.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import harness

KINDS = {"AlbertTokenizer(path)": "python", "AlbertGraphTokenizer(model_bytes)": "graph"}


def child(kind: str, repeats: int) -> None:
    """In a fresh process: the CPU seconds of the first construction and of `repeats` more, as JSON."""
    harness.quiet_tensorflow("3")
    import tensorflow as tf

    harness.set_threads(1)
    tf.constant(0).numpy()
    from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    path = harness.spm_model()
    model_bytes = path.read_bytes()
    build = (lambda: AlbertTokenizer(path)) if kind == "python" else (lambda: AlbertGraphTokenizer(model_bytes))
    times = []
    for _ in range(repeats + 1):
        began = time.process_time()
        build()
        times.append(time.process_time() - began)
    print(json.dumps({"first": times[0], "again": times[1:]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_repeats(parser, 5)
    parser.add_argument("--child", choices=sorted(KINDS.values()), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.repeats)
        return
    rows = []
    for label, kind in KINDS.items():
        firsts, again = [], []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--repeats", str(args.repeats)],
                                 check=True, capture_output=True, text=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            firsts.append(result["first"])
            again.append(statistics.median(result["again"]))
        rows.append([label, f"{statistics.median(firsts):.4f}", f"{statistics.median(again):.4f}"])
    print(f"{harness.spm_model().name}, CPU seconds, medians of {args.repeats} processes "
          f"({args.repeats} repeated constructions each), {harness.cpu_model()}")
    harness.print_table(["tokenizer", "first in a process", "each after it"], rows)


if __name__ == "__main__":
    main()
