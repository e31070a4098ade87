"""What tracing the pretraining reader's parser costs, this checkout against a base revision.

Every pretraining run traces `albert_tf.data.datasets._parser` once per pipeline it builds (the
training reader, the evaluation reader, the held-out baselines, the records' shape check), as
tf.data does for the functions it maps. Each case traces the training parser (vocabulary checks
on) and the evaluation parser (filler weights) once each into a graph, in a new process, the
versions interleaved in a fresh random order each repeat; the table gives medians of the
process's CPU seconds for the two traces and the size of the two graphs (nodes, and the nested
functions that a `tf.cond` adds).

    python bench/parser_trace.py [--base REV] [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import statistics
import tempfile
import time

import harness

SEQ, PREDICTIONS, BATCH, VOCAB = 128, 20, 16, 30000


def _case() -> dict:
    """In the child: traces both parsers; their CPU seconds, nodes and nested functions."""
    harness.quiet_tensorflow()
    import tensorflow as tf

    from albert_tf.data import datasets
    from albert_tf.data.features import pretraining_feature_spec

    spec = pretraining_feature_spec(SEQ, PREDICTIONS)
    parsers = [
        (datasets._parser(spec, BATCH, num_records=None, vocab_size=VOCAB), [tf.TensorSpec([BATCH], tf.string)]),
        (datasets._parser(spec, BATCH, num_records=100),
         [tf.TensorSpec([BATCH], tf.int64), tf.TensorSpec([BATCH], tf.string)]),
    ]
    tf.constant(0)  # TensorFlow's runtime started before the clock
    started = time.process_time()
    graphs = [tf.function(parse, autograph=False).get_concrete_function(*specs).graph.as_graph_def()
              for parse, specs in parsers]
    return {"cpu": time.process_time() - started, "nodes": sum(len(g.node) for g in graphs),
            "functions": sum(len(g.library.function) for g in graphs),
            "code": str(pathlib.Path(datasets.__file__).parents[2])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="The revision to compare with (git rev).")
    harness.add_repeats(parser, 5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions = {args.base: harness.checkout(args.base, pathlib.Path(tmp) / "base"), "this checkout": harness.REPO}
        runs = {version: [] for version in versions}

        def run(version):
            runs[version].append(harness.call_on_code(versions[version], "parser_trace", "_case()", cwd=tmp))

        harness.interleaved_times({("parser", version): functools.partial(run, version) for version in runs},
                                  args.repeats)
    print(f"the training and evaluation parsers traced (sequence {SEQ}, {PREDICTIONS} predictions, batch "
          f"{BATCH}), medians of {args.repeats} (a new process each)")
    rows = [[version, f"{statistics.median(r['cpu'] for r in results):.3f}",
             f"{statistics.median(r['nodes'] for r in results):,.0f}",
             f"{statistics.median(r['functions'] for r in results):.0f}"] for version, results in runs.items()]
    harness.print_table(["version", "CPU s", "nodes", "nested functions"], rows)


if __name__ == "__main__":
    main()
