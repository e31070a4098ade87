"""LiteRT float32 at batch 8: the batch-1 model called eight times (what `LiteRTModel` does) against
the same encoder converted at batch 8 (one call; XNNPACK then multiplies [8 x 128, 768] at once) and
the float32 SavedModel; albert base, random weights, 128 tokens, outputs checked equal first.

    python bench/litert_batch.py [--repeats 7] [--threads 2]
"""

import argparse
import os
import tempfile

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_repeats(parser, 7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

harness.set_threads(ARGS.threads)

from albert_tf import AlbertConfig, AlbertEncoder  # noqa: E402
from albert_tf.serving import litert
from albert_tf.serving.export import export_encoder  # noqa: E402


def main():
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig.named("albert_base_v2"))
    encoder.build()
    shape = (ARGS.batch, ARGS.seq_length)
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(5, 30000, shape).astype(np.int32),
                "input_mask": np.ones(shape, np.int32), "segment_ids": np.zeros(shape, np.int32)}
    one = litert.LiteRTModel(litert.convert(encoder, ARGS.seq_length), num_threads=ARGS.threads)
    batched = litert.TaskOutputs("encoder", litert.INPUTS, shape, lambda inputs: dict(encoder(inputs, training=False)))
    whole = litert.LiteRTModel(litert.convert(encoder, ARGS.seq_length, outputs=batched), num_threads=ARGS.threads)
    with tempfile.TemporaryDirectory() as workdir:
        path = export_encoder(encoder, os.path.join(workdir, "saved_model"), harness.REPO / "tests" / "fixtures" /
                              "data" / "albert" / "30k-clean.model", ARGS.seq_length)
        serving = tf.saved_model.load(path).signatures["serving_default"]
        tensors = {k: tf.constant(v) for k, v in features.items()}
        calls = {
            ("batch", "SavedModel float32"): lambda: serving(**tensors)["pooled_output"].numpy(),
            ("batch", f"LiteRT float32, {ARGS.batch} batch-1 calls"): lambda: one(features)["pooled_output"],
            ("batch", f"LiteRT float32 converted at batch {ARGS.batch}"):
                lambda: whole._runner(**features)["pooled_output"],
        }
        want = calls["batch", "SavedModel float32"]()
        for call in calls.values():
            np.testing.assert_allclose(call(), want, atol=1e-3, rtol=0)
        times = harness.interleaved_times(calls, ARGS.repeats)
    print(f"batch {ARGS.batch} x {ARGS.seq_length}, {ARGS.threads} threads, {ARGS.repeats} rounds in a fresh random "
          f"order; {harness.cpu_model()}; load {os.getloadavg()[0]:.1f}")
    rows = []
    for (_, name), seconds in times.items():
        first, median, third = (1000 * q for q in harness.quartiles(seconds))
        rows.append([name, f"{median:.1f} ({first:.1f}-{third:.1f})"])
    harness.print_table(["system", "median ms (IQR)"], rows)


if __name__ == "__main__":
    main()
