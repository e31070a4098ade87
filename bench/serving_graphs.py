"""Size and cost of the raw-text serving graphs: this checkout beside another revision of it.

    python bench/serving_graphs.py [--base REV] [--repeats 3] [--cases encoder tagger ...] [--layers 1]

For each export with a `serve_text` signature (the encoder's, the tagger's, SQuAD v1.1's and v2.0's),
on a small ALBERT (hidden 32, the released 30k-clean vocabulary; 1 layer, or --layers: the graph
around the model does not depend on its size, the model's own trace grows with its depth), each
case in a new process, its two code versions back to back in a
fresh random order each repeat (bench/harness.py's `interleaved_times`): the nodes of `serve_text`
(its function library included), the CPU seconds of the export (tracing and writing) and of
`tf.saved_model.load`, and the median wall time of a `serve_text` call on one short text (after a
first call). REV (default HEAD) is checked out
with `git archive` into a temporary folder. Medians over the repeats; machines are noisy, so read
the ratios.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import statistics
import tempfile

import harness

SPM = harness.REPO / "tests" / "fixtures" / "data" / "albert" / "30k-clean.model"
CASES = ("encoder", "tagger", "squad_v1", "squad_v2")
QUESTION, CONTEXT = "Who wrote it?", "Jane Austen wrote Persuasion in 1816, in Bath and Chawton."


def _case(name: str, folder: str, layers: int = 1) -> dict:
    """One case in this process: the export, the load and the calls, measured."""
    import time

    harness.quiet_tensorflow("3")
    import keras
    import tensorflow as tf

    import albert_tf
    from albert_tf import AlbertConfig

    keras.utils.set_random_seed(0)
    config = AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=layers,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    nodes = {}
    save = tf.saved_model.save

    def counting_save(obj, export_dir, signatures=None, options=None):
        graph = signatures["serve_text"].graph.as_graph_def()
        nodes["serve_text"] = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
        return save(obj, export_dir, signatures=signatures, options=options)

    tf.saved_model.save = counting_save
    export_dir = str(pathlib.Path(folder) / "export")
    if name == "encoder":
        from albert_tf.models.encoder import AlbertEncoder
        from albert_tf.serving.export import export_encoder

        export = lambda: export_encoder(AlbertEncoder(config), export_dir, SPM, 64)  # noqa: E731
        inputs = {"text": tf.constant([CONTEXT])}
    elif name == "tagger":
        from albert_tf.models.token_classifier import AlbertTokenClassifier
        from albert_tf.serving.tagging import export_tagger

        labels = ["O", "B-person", "I-person", "B-location", "I-location"]
        model = AlbertTokenClassifier(config, num_classes=len(labels))
        export = lambda: export_tagger(model, export_dir, SPM, 64, labels, 16)  # noqa: E731
        inputs = {"text": tf.constant([CONTEXT])}
    else:
        from albert_tf.data.windows import FeatureSettings
        from albert_tf.models.span_labeler import AlbertSpanLabeler
        from albert_tf.models.squad_v2 import AlbertSquadV2
        from albert_tf.serving.question_answering import export_squad

        v2 = name == "squad_v2"
        model = AlbertSquadV2(config) if v2 else AlbertSpanLabeler(config)
        export = lambda: export_squad(model, export_dir, SPM, FeatureSettings(64, 16, 16), v2)  # noqa: E731
        inputs = {"question": tf.constant([QUESTION]), "context": tf.constant([CONTEXT])}
    start = time.process_time()
    export()
    export_cpu = time.process_time() - start
    start = time.process_time()
    serve_text = tf.saved_model.load(export_dir).signatures["serve_text"]
    load_cpu = time.process_time() - start
    serve_text(**inputs)
    calls = []
    for _ in range(50):
        start = time.perf_counter()
        serve_text(**inputs)
        calls.append(time.perf_counter() - start)
    return {"nodes": nodes["serve_text"], "export_cpu": export_cpu, "load_cpu": load_cpu,
            "call_ms": 1000 * statistics.median(calls), "code": str(pathlib.Path(albert_tf.__file__).parents[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="The revision to compare with (git rev).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--layers", type=int, default=1, help="The model's num_hidden_layers.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions = {args.base: harness.checkout(args.base, pathlib.Path(tmp) / "base"), "this checkout": harness.REPO}
        runs = {(case, version): [] for case in args.cases for version in versions}

        def run(case, version):
            with tempfile.TemporaryDirectory() as folder:
                runs[case, version].append(harness.call_on_code(
                    versions[version], "serving_graphs", f"_case({case!r}, {folder!r}, {args.layers})", cwd=folder))

        # The harness's order (each case's two versions back to back, in a fresh order each repeat);
        # the figures are the processes' own, not the harness's times of them.
        harness.interleaved_times({key: functools.partial(run, *key) for key in runs}, args.repeats)
    print(f"serve_text graphs of a {args.layers}-layer model, medians of {args.repeats} (a new process each)")
    rows = []
    for (case, version), results in runs.items():
        m = {k: statistics.median(r[k] for r in results) for k in results[0]}
        rows.append([case, version, f"{m['nodes']:,.0f}", f"{m['export_cpu']:.2f}", f"{m['load_cpu']:.2f}",
                     f"{m['call_ms']:.2f}"])
    harness.print_table(["export", "version", "nodes", "export CPU s", "load CPU s", "call ms (1 short text)"], rows)


if __name__ == "__main__":
    main()
