"""Whether LiteRT float32's lag behind our SavedModel (issue 43) is XNNPACK's float32 kernels: albert
base's largest op alone, the feed-forward matmul [128, 768] x [768, 3072] (and its output one,
[128, 3072] x [3072, 768]), as a one-op LiteRT model under XNNPACK against the same matmul in
TensorFlow (oneDNN), and the whole encoder's ops (`litert.builtin_ops`) for what else it runs.

If the one-op ratio is about the whole model's (1.2-1.3x at batch 1), the converted graph adds
nothing (its TRANSPOSE, BATCH_MATMUL and the LayerNorm formula's elementwise ops are all delegated
to XNNPACK) and the kernels are the limit; docs/on_device.md says which format to pick instead.

    python bench/litert_kernels.py [--repeats 21] [--threads 2]
"""

import argparse
import collections

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_repeats(parser, 21)
    parser.add_argument("--rows", type=int, default=128, help="tokens: the rows of the matmul")
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

harness.set_threads(ARGS.threads)

from albert_tf.serving import litert  # noqa: E402


def one_matmul(inner: int, outer: int):
    """A Dense of [rows, inner] -> [rows, outer] as a TF function and a LiteRT runner of the same weights."""
    rng = np.random.default_rng(0)
    kernel = tf.constant(rng.normal(0, 0.02, (inner, outer)).astype(np.float32))
    bias = tf.constant(np.zeros(outer, np.float32))
    spec = tf.TensorSpec([ARGS.rows, inner], tf.float32, name="x")
    function = tf.function(lambda x: {"y": tf.matmul(x, kernel) + bias}, autograph=False)
    concrete = function.get_concrete_function(spec)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], tf.Module())
    flatbuffer = converter.convert()
    ops = litert.builtin_ops(flatbuffer)
    runner = litert.interpreter(flatbuffer, num_threads=ARGS.threads).get_signature_runner("serving_default")
    x = rng.normal(0, 1, (ARGS.rows, inner)).astype(np.float32)
    tensor = tf.constant(x)
    np.testing.assert_allclose(runner(x=x)["y"], function(tensor)["y"].numpy(), atol=1e-3, rtol=0)
    return ops, (lambda: function(tensor)["y"].numpy()), (lambda: runner(x=x)["y"])


def main():
    calls, ops = {}, {}
    for inner, outer in ((768, 3072), (3072, 768)):
        row = f"[{ARGS.rows}, {inner}] x [{inner}, {outer}]"
        ops[row], calls[row, "TensorFlow (oneDNN)"], calls[row, "LiteRT (XNNPACK)"] = one_matmul(inner, outer)
    for call in calls.values():
        call()
    times = harness.medians(harness.interleaved_times(calls, ARGS.repeats))
    print(f"{ARGS.threads} threads, {ARGS.repeats} rounds in a fresh random order; {harness.cpu_model()}")
    rows = []
    for row in dict.fromkeys(r for r, _ in calls):
        tf_ms, lite_ms = 1000 * times[row, "TensorFlow (oneDNN)"], 1000 * times[row, "LiteRT (XNNPACK)"]
        rows.append([row, ", ".join(ops[row]), f"{tf_ms:.2f}", f"{lite_ms:.2f}", f"{lite_ms / tf_ms:.2f}"])
    harness.print_table(["matmul", "LiteRT ops", "TensorFlow ms", "LiteRT ms", "LiteRT / TensorFlow"], rows)

    from albert_tf import AlbertConfig, AlbertEncoder
    from tensorflow.lite.python import schema_py_generated as schema

    encoder = AlbertEncoder(AlbertConfig.named("albert_base_v2"))
    encoder.build()
    model = schema.Model.GetRootAsModel(litert.convert(encoder, ARGS.rows), 0)
    by_code = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = [by_code[max(model.OperatorCodes(i).BuiltinCode(), model.OperatorCodes(i).DeprecatedBuiltinCode())]
             for i in range(model.OperatorCodesLength())]
    graph = model.Subgraphs(0)
    counts = collections.Counter(codes[graph.Operators(i).OpcodeIndex()] for i in range(graph.OperatorsLength()))
    print(f"\nalbert base's LiteRT float32 graph: {graph.OperatorsLength()} ops:",
          ", ".join(f"{name} {count}" for name, count in counts.most_common()))


if __name__ == "__main__":
    main()
