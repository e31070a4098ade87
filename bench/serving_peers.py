"""CPU serving of albert base in every format and precision we export, against what users would pick
instead, from one command: issue 43's table.

albert base with random weights (latency does not depend on the values), 128 tokens, batch 1 and 8,
the same weights in every system (our encoder -> its preset -> `convert_preset_to_hf` -> Hugging
Face's AlbertModel -> `torch.onnx.export`):

- ours: the Keras encoder (float32, no XLA); the SavedModel of `albert-export` in float32 and
  bfloat16 (`--precision`); LiteRT float32 and dynamic int8 (`albert_tf.serving.litert`, XNNPACK; its batch
  is 1, so batch 8 runs eight calls, as `LiteRTModel` does);
- PyTorch: the Hugging Face AlbertModel in float32, bfloat16 (`.to(torch.bfloat16)`) and dynamic
  int8 (`torch.ao.quantization.quantize_dynamic` of its Linear layers);
- ONNX Runtime: the same model exported by `torch.onnx.export` in float32, dynamic int8
  (`onnxruntime.quantization.quantize_dynamic`, per-channel) and float32 with its transformer
  fusions (`onnxruntime.transformers.optimizer`, model_type "bert"); sessions do not spin
  (`harness.onnxruntime_session`).

Before timing, every float32 system's pooled output is checked equal to the Keras model's (1e-3)
on real sentences (RTE's, tokenized with the released 30k-clean.model), and the bf16 and int8
systems' cosine to float32 is measured on 64 of them. Then `--repeats` rounds, each in a fresh
random order with a pause before every call (`harness.interleaved_times`); the table gives medians
and interquartile ranges in ms, the ratio to the float32 SavedModel, and file sizes.

Needs the bench extra (`pip install -e .[bench]`: onnxruntime, onnx); torch and transformers come
with [test].

    python bench/serving_peers.py [--repeats 7] [--threads 2] [--skip "PyTorch int8"]
"""

import argparse
import os
import tempfile

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_repeats(parser, 7)
    harness.add_model(parser, 128)
    parser.add_argument("--batches", default="1,8")
    harness.add_skip(parser)
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

harness.set_threads(ARGS.threads, torch=True)

import keras  # noqa: E402
import torch  # noqa: E402

from albert_tf import AlbertConfig, AlbertEncoder  # noqa: E402
from albert_tf.serving import litert
from albert_tf.serving.export import at_precision, export_encoder  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402

SPM = harness.REPO / "tests" / "fixtures" / "data" / "albert" / "30k-clean.model"
RTE = harness.REPO / "tests" / "fixtures" / "data" / "glue" / "RTE" / "train.tsv"


def sentences(count: int, length: int) -> dict[str, np.ndarray]:
    """`count` real sentence pairs (RTE's), packed to `length` tokens."""
    tokenizer = AlbertTokenizer(str(SPM))
    rows = [line.split("\t") for line in RTE.read_text(encoding="utf-8").splitlines()[1:count + 1]]
    packed = [tokenizer.pack(tokenizer.encode(a), tokenizer.encode(b), max_seq_length=length) for _, a, b, _ in rows]
    return {k: np.asarray([p[k] for p in packed], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}


def size_of(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names)


def build(workdir: str, config: AlbertConfig):
    """name -> (run(features) -> pooled_output [B, H] float32 array, bytes on disk or None)."""
    import onnxruntime  # noqa: F401  (fails early without the bench extra)
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    from albert_tf.presets.convert import convert_preset_to_hf

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(config)
    encoder.build()
    systems = {}
    keras_call = tf.function(lambda f: encoder(f, training=False)["pooled_output"], jit_compile=False)
    systems["albert_tf Keras float32 (no XLA)"] = (lambda f: keras_call({k: tf.constant(v) for k, v in f.items()}).numpy(),
                                                    None)
    for precision in ("float32", "bfloat16"):
        path = export_encoder(at_precision(encoder, precision), os.path.join(workdir, f"saved_{precision}"), SPM,
                              ARGS.seq_length)
        serving = tf.saved_model.load(path).signatures["serving_default"]
        systems[f"albert_tf SavedModel {precision}"] = (
            lambda f, s=serving: s(**{k: tf.constant(v) for k, v in f.items()})["pooled_output"].numpy(), size_of(path))
    for quantization in ("none", "dynamic_int8"):
        path = os.path.join(workdir, f"litert_{quantization}.tflite")
        with open(path, "wb") as out:
            out.write(litert.convert(encoder, ARGS.seq_length, quantization))
        model = litert.LiteRTModel(path, num_threads=ARGS.threads)
        name = "float32" if quantization == "none" else quantization.replace("_", " ")
        systems[f"albert_tf LiteRT {name} (XNNPACK)"] = (lambda f, m=model: m(f)["pooled_output"], size_of(path))

    preset = encoder.save_to_preset(os.path.join(workdir, "preset"), SPM)
    hf_dir = convert_preset_to_hf(preset, os.path.join(workdir, "hf"))
    hf = transformers.AlbertModel.from_pretrained(hf_dir).eval()

    def torch_runner(model, dtype=None):
        def run(f):
            inputs = {"input_ids": torch.from_numpy(f["input_ids"]).long(),
                      "attention_mask": torch.from_numpy(f["input_mask"]).long(),
                      "token_type_ids": torch.from_numpy(f["segment_ids"]).long()}
            with torch.inference_mode():
                return model(**inputs).pooler_output.float().numpy()
        return run

    systems["PyTorch float32"] = (torch_runner(hf), size_of(hf_dir))
    hf_bf16 = transformers.AlbertModel.from_pretrained(hf_dir, torch_dtype=torch.bfloat16).eval()
    systems["PyTorch bf16"] = (torch_runner(hf_bf16), None)
    hf_int8 = torch.ao.quantization.quantize_dynamic(
        transformers.AlbertModel.from_pretrained(hf_dir).eval(), {torch.nn.Linear}, dtype=torch.qint8)
    systems["PyTorch dynamic int8"] = (torch_runner(hf_int8), None)

    onnx_path = os.path.join(workdir, "albert.onnx")
    example = sentences(2, ARGS.seq_length)
    torch.onnx.export(
        hf, (torch.from_numpy(example["input_ids"]).long(), torch.from_numpy(example["input_mask"]).long(),
             torch.from_numpy(example["segment_ids"]).long()),
        onnx_path, input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state", "pooler_output"], opset_version=17, dynamo=False,
        dynamic_axes={name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask", "token_type_ids")})
    int8_path = os.path.join(workdir, "albert.int8.onnx")
    quantize_dynamic(onnx_path, int8_path, weight_type=QuantType.QInt8, per_channel=True)
    fused_path = os.path.join(workdir, "albert.fused.onnx")
    optimize_model(onnx_path, model_type="bert", num_heads=config.num_attention_heads,
                   hidden_size=config.hidden_size).save_model_to_file(fused_path)

    def ort_runner(path):
        session = harness.onnxruntime_session(path, ARGS.threads)

        def run(f):
            return session.run(["pooler_output"], {"input_ids": f["input_ids"].astype(np.int64),
                                                   "attention_mask": f["input_mask"].astype(np.int64),
                                                   "token_type_ids": f["segment_ids"].astype(np.int64)})[0]
        return run

    systems["ONNX Runtime float32"] = (ort_runner(onnx_path), size_of(onnx_path) + size_of(onnx_path + ".data")
                                       if os.path.exists(onnx_path + ".data") else size_of(onnx_path))
    systems["ONNX Runtime dynamic int8"] = (ort_runner(int8_path), size_of(int8_path))
    systems["ONNX Runtime float32 fused"] = (ort_runner(fused_path), size_of(fused_path))
    skip = {name.strip() for name in ARGS.skip.split(",") if name.strip()}
    return {name: system for name, system in systems.items() if name not in skip}


def cosine(a, b):
    return float(np.mean((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)))


def main():
    config = AlbertConfig.named(ARGS.size)
    batches = [int(b) for b in ARGS.batches.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        systems = build(workdir, config)
        real = sentences(64, ARGS.seq_length)
        reference = systems["albert_tf Keras float32 (no XLA)"][0](real)
        accuracy = {}
        for name, (run, _) in systems.items():
            got = run(real)
            if "float32" in name:  # the same function of the same weights: equal before timing
                np.testing.assert_allclose(got, reference, atol=1e-3, rtol=0, err_msg=name)
            accuracy[name] = cosine(got, reference)
        calls = {}
        for batch in batches:
            features = {k: v[:batch] for k, v in real.items()}
            for name, (run, _) in systems.items():
                for _ in range(2):  # warm-up: traces, allocations
                    run(features)
                calls[f"batch {batch}", name] = lambda run=run, features=features: run(features)
        times = harness.interleaved_times(calls, ARGS.repeats, progress=True)
    print(f"\nalbert {ARGS.size} (random weights), {ARGS.seq_length} tokens, {ARGS.threads} threads, "
          f"{ARGS.repeats} rounds in a fresh random order; {harness.cpu_model()}; load {os.getloadavg()[0]:.2f}")
    header = ["system", *(f"batch {b}: median ms (IQR)" for b in batches),
              *(f"batch {b} / SavedModel float32" for b in batches), "pooled cosine to float32", "file MB"]
    rows = []
    base = {b: harness.quartiles(times[f"batch {b}", "albert_tf SavedModel float32"])[1] for b in batches}
    for name, (_, size) in systems.items():
        quartiles = {b: [1000 * q for q in harness.quartiles(times[f"batch {b}", name])] for b in batches}
        rows.append([name, *(f"{q[1]:.1f} ({q[0]:.1f}-{q[2]:.1f})" for q in quartiles.values()),
                     *(f"{quartiles[b][1] / 1000 / base[b]:.2f}" for b in batches),
                     f"{accuracy[name]:.4f}", f"{size / 1e6:.1f}" if size else ""])
    harness.print_table(header, rows)


if __name__ == "__main__":
    main()
