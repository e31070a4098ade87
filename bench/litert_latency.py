"""Batch-1 latency of albert base on this CPU: LiteRT float32 and dynamic int8 against our SavedModel
and against Hugging Face's AlbertModel under PyTorch dynamic int8 quantization (the peer's CPU and
on-device path).

albert base with random weights (the same architecture as the released one; latency does not
depend on the values) at sequence length 128, batch 1:

- `saved_model`: `albert_tf.serving.export.export_encoder`, reloaded with `tf.saved_model.load`, its
  `serving_default` signature (float32, the fused CPU LayerNorm form);
- `litert float32`, `litert dynamic_int8`: `albert_tf.serving.litert.convert` of the same encoder, run by
  the LiteRT interpreter (ai_edge_litert where installed) through its signature runner;
- `hf torch dynamic_int8`: `transformers.AlbertModel` of the same config under
  `torch.ao.quantization.quantize_dynamic` (its Linear layers int8), in `torch.inference_mode`.

Every runner gets the same thread count (`--threads`). The four calls alternate within each repeat,
so load from other processes on a shared machine hits them alike; the table gives medians and each
one's speed-up over the SavedModel. Goal: int8 LiteRT at least 2x our float32 SavedModel and faster
than the peer.

    python bench/litert_latency.py [--repeats 50] [--threads 2] [--seq_length 128]
"""

import os
import statistics
import tempfile
import time

from absl import app, flags

import harness

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "Named config (AlbertConfig.named) with random weights.")
flags.DEFINE_string("spm_model_file", str(harness.REPO / "tests" / "fixtures" / "data" / "albert" / "30k-clean.model"),
                    "SentencePiece model to put inside the SavedModel (the released 30k-clean.model).")
flags.DEFINE_integer("seq_length", 128, "Tokens per request.")
flags.DEFINE_integer("repeats", 50, "Timed repeats of each runner (after 3 warm-up calls).")
flags.DEFINE_integer("threads", 2, "Threads of every runner (TF intra-op, LiteRT, torch).")


def _inputs(vocab_size: int, length: int):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab_size, (1, length)).astype(np.int32)
    ids[0, 0], ids[0, -1] = 2, 3
    segments = np.zeros((1, length), np.int32)
    segments[0, length // 2:] = 1
    return {"input_ids": ids, "input_mask": np.ones((1, length), np.int32), "segment_ids": segments}


def _runners(workdir: str):
    import keras
    import numpy as np
    import tensorflow as tf
    import torch
    import transformers

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.serving import litert
    from albert_tf.serving.export import export_encoder

    harness.set_threads(FLAGS.threads, torch=True)
    keras.utils.set_random_seed(0)
    config = AlbertConfig.named(FLAGS.preset)
    encoder = AlbertEncoder(config)
    encoder.build()
    features = _inputs(config.vocab_size, FLAGS.seq_length)
    runners, sizes = {}, {}

    saved = export_encoder(encoder, os.path.join(workdir, "saved_model"), FLAGS.spm_model_file, FLAGS.seq_length)
    serving = tf.saved_model.load(saved).signatures["serving_default"]
    tensors = {k: tf.constant(v) for k, v in features.items()}
    runners["saved_model float32"] = lambda: serving(**tensors)["pooled_output"].numpy()

    for quantization in ("none", "dynamic_int8"):
        flatbuffer = litert.convert(encoder, FLAGS.seq_length, quantization)
        name = f"litert {'float32' if quantization == 'none' else quantization}"
        sizes[name] = len(flatbuffer)
        runner = litert.interpreter(flatbuffer, num_threads=FLAGS.threads).get_signature_runner("serving_default")
        runners[name] = lambda runner=runner: runner(**features)["pooled_output"]

    hf_config = transformers.AlbertConfig(**{k: getattr(config, k) for k in (
        "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "max_position_embeddings", "type_vocab_size")}, hidden_act="gelu_new")
    peer = transformers.AlbertModel(hf_config).eval()
    peer = torch.ao.quantization.quantize_dynamic(peer, {torch.nn.Linear}, dtype=torch.qint8)
    torch_inputs = {"input_ids": torch.from_numpy(features["input_ids"]).long(),
                    "attention_mask": torch.from_numpy(features["input_mask"]).long(),
                    "token_type_ids": torch.from_numpy(features["segment_ids"]).long()}

    def run_peer():
        with torch.inference_mode():
            return peer(**torch_inputs).pooler_output.numpy()

    runners["hf torch dynamic_int8"] = run_peer
    assert all(np.isfinite(run()).all() for run in runners.values())
    return runners, sizes


def main(argv):
    del argv
    with tempfile.TemporaryDirectory() as workdir:
        runners, sizes = _runners(workdir)
        for run in runners.values():
            for _ in range(3):
                run()
        times = {name: [] for name in runners}
        for _ in range(FLAGS.repeats):
            for name, run in runners.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    medians = {name: 1000 * statistics.median(t) for name, t in times.items()}
    base = medians["saved_model float32"]
    print(f"albert {FLAGS.preset} (random weights), batch 1, {FLAGS.seq_length} tokens, {FLAGS.threads} threads, "
          f"{FLAGS.repeats} alternating repeats, {os.cpu_count()} CPUs")
    print("| runner | median ms | speed-up over saved_model float32 | file MB |")
    print("|---|---:|---:|---:|")
    for name, median in medians.items():
        size = f"{sizes[name] / 1e6:.1f}" if name in sizes else ""
        print(f"| {name} | {median:.1f} | {base / median:.2f}x | {size} |")
    litert_int8 = medians["litert dynamic_int8"]
    print(f"goal: litert dynamic_int8 >= 2x saved_model float32: {base / litert_int8:.2f}x; "
          f"faster than hf torch dynamic_int8: {medians['hf torch dynamic_int8'] / litert_int8:.2f}x")


if __name__ == "__main__":
    app.run(main)
