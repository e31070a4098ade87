"""Pretraining throughput and model FLOPs utilisation of albert base and large on one NVIDIA GPU.

    python bench/gpu_pretrain_throughput.py [--sizes albert_base_v2,albert_large_v2] \\
        [--batch 64] [--seq 512] [--predictions 20] [--steps 10] [--repeats 5] [--hf]

For each preset, our loop (`albert_tf.training.loop.Trainer` of `PretrainingTask` under the one-device strategy on the
first GPU: forward, backward, gradient clipping, LAMB with its exclusions, XLA, mixed_bfloat16) on a
synthetic batch, `--steps` updates per compiled call as `--steps_per_loop` runs them; the median of
`--repeats` calls after two warm-up calls.
Model FLOPs of an update: 3 x (multiply-adds x 2) of the forward that our model computes, counted
as bench/model_throughput.py counts them (the encoder, whose last block computes only the masked
rows and the first token, and the MLM and SOP heads). MFU is that rate over the GPU's dense bf16
peak (`--peak_tflops`, default the H100 SXM's 989.4) and over a bf16 matmul measured in the same
process (8192^3 under XLA).
With --hf, Hugging Face's PyTorch AlbertForPreTraining built from the same config (bf16 autocast
over float32 weights, as mixed_bfloat16 keeps them; fused AdamW; its MLM loss scores every
position) is timed the same way in a child process on the same GPU before TensorFlow takes the GPU:
TensorFlow keeps the memory it has taken until its process ends.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import harness

H100_SXM_DENSE_BF16_TFLOPS = 989.4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="albert_base_v2,albert_large_v2")
    parser.add_argument("--batch", type=int, default=64, help="examples per update")
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10, help="updates per timed call")
    harness.add_repeats(parser, 5)
    parser.add_argument("--peak_tflops", type=float, default=H100_SXM_DENSE_BF16_TFLOPS)
    parser.add_argument("--hf", action="store_true", help="also time Hugging Face's PyTorch model")
    parser.add_argument("--hf_child", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def median_call_seconds(call, repeats: int) -> float:
    """The median wall time of `call()`, which must wait for its own work, after two warm-ups."""
    call()
    call()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measured_bf16_matmul_tflops(n: int = 8192, chained: int = 20) -> float:
    import tensorflow as tf

    x = tf.cast(tf.random.normal([n, n]), tf.bfloat16)

    @tf.function(jit_compile=True)
    def products(x):
        total = tf.zeros([], tf.float32)
        for i in range(chained):  # distinct operands, so none of the products is folded away
            total += tf.cast(tf.matmul(x + tf.cast(i, tf.bfloat16), x)[0, 0], tf.float32)
        return total

    seconds = median_call_seconds(lambda: products(x).numpy(), 5)
    return chained * 2 * n**3 / seconds / 1e12


def our_update(config, args):
    """Seconds per update of our loop, and the peak GPU memory in MiB."""
    import tensorflow as tf

    import pretrain_throughput
    from albert_tf.training import pretraining
    from albert_tf.training import strategies
    from albert_tf.training import loop

    options = pretraining.PretrainingOptions(
        output_dir=tempfile.mkdtemp(), train_batch_size=args.batch, max_seq_length=args.seq,
        max_predictions_per_seq=args.predictions, num_train_steps=10**6, num_warmup_steps=0,
        steps_per_loop=args.steps, jit_compile=True, mixed_precision="bf16",
    )
    run = loop.Trainer(config, pretraining.PretrainingTask(), options, strategies.get_strategy("one_device"))
    dataset_fn = pretrain_throughput.synthetic_dataset_fn(args.seq, args.predictions, config.vocab_size)
    iterator = iter(run.distribute(dataset_fn, run.per_replica_batch))
    tf.config.experimental.reset_memory_stats("GPU:0")
    seconds = median_call_seconds(lambda: run.train_steps(iterator, args.steps), args.repeats)
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    return seconds / args.steps, peak


def hf_update(config, args):
    """Runs the Hugging Face step in a child process; returns its seconds per update and peak MiB."""
    from albert_tf.presets.convert import config_to_hf

    command = [sys.executable, os.path.abspath(__file__), "--hf_child", json.dumps(config_to_hf(config)),
               f"--batch={args.batch}", f"--seq={args.seq}", f"--predictions={args.predictions}",
               f"--steps={args.steps}", f"--repeats={args.repeats}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"the Hugging Face child failed:\n{result.stderr[-3000:]}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return measured["seconds_per_update"], measured["peak_mib"]


def hf_child(args):
    import torch
    import transformers

    values = json.loads(args.hf_child)  # albert_tf.presets.convert.config_to_hf of the preset
    # No dropout where ours has none: the SOP head's own rate follows the config's hidden rate.
    config = transformers.AlbertConfig(**{**values, "classifier_dropout_prob": values["hidden_dropout_prob"]})
    device = torch.device("cuda")
    model = transformers.AlbertForPreTraining(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    generator = torch.Generator().manual_seed(0)
    b, n, p = args.batch, args.seq, args.predictions
    input_ids = torch.randint(5, config.vocab_size, (b, n), generator=generator)
    positions = torch.rand(b, n - 1, generator=generator).argsort(dim=1)[:, :p].sort(dim=1).values + 1
    labels = torch.full((b, n), -100).scatter(1, positions, torch.randint(5, config.vocab_size, (b, p), generator=generator))
    inputs = {
        "input_ids": input_ids.to(device),
        "attention_mask": torch.ones(b, n, dtype=torch.long, device=device),
        "token_type_ids": (torch.arange(n)[None] >= n // 2).long().repeat(b, 1).to(device),
        "labels": labels.to(device),
        "sentence_order_label": torch.randint(0, 2, (b,), generator=generator).to(device),
    }

    def updates():
        for _ in range(args.steps):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**inputs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    torch.cuda.reset_peak_memory_stats()
    seconds = median_call_seconds(updates, args.repeats)
    print(json.dumps({"seconds_per_update": seconds / args.steps,
                      "peak_mib": torch.cuda.max_memory_allocated() / 2**20}))


def main():
    args = parse_args()
    if args.hf_child:
        return hf_child(args)

    harness.quiet_tensorflow()
    from albert_tf.config import AlbertConfig

    presets = {preset: AlbertConfig.named(preset) for preset in args.sizes.split(",")}
    peers = {preset: hf_update(config, args) for preset, config in presets.items()} if args.hf else {}

    import model_throughput
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        sys.exit("no GPU visible to TensorFlow: this bench measures the GPU only")
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    matmul_peak = measured_bf16_matmul_tflops()
    print(f"{name}: bf16 matmul 8192^3 under XLA {matmul_peak:.0f} TFLOP/s measured; "
          f"dense bf16 peak taken as {args.peak_tflops:.1f} TFLOP/s", flush=True)

    rows = []
    for preset, config in presets.items():
        flops = 3 * (model_throughput.encoder_flops(config, args.batch, args.seq, last_rows=args.predictions + 1)
                     + model_throughput.heads_flops(config, args.batch, args.predictions))
        seconds, peak = our_update(config, args)
        rows.append((preset, "albert_tf loop, XLA, bf16", seconds, peak, flops))
        print(rows[-1], flush=True)
        if preset in peers:
            seconds, peak = peers[preset]
            rows.append((preset, "HF PyTorch, bf16 autocast", seconds, peak, None))
            print(rows[-1], flush=True)

    print(f"\nbatch {args.batch} x {args.seq}, {args.predictions} masked, {args.steps} updates per call, "
          f"median of {args.repeats} calls")
    print("| preset | system | time/update | examples/s | model TFLOP/s | MFU (spec peak) | MFU (measured matmul) "
          "| peak GPU memory |")
    print("|---|---|---|---|---|---|---|---|")
    for preset, system, seconds, peak, flops in rows:
        rate = f"{flops / seconds / 1e12:.0f}" if flops else "-"
        spec = f"{flops / seconds / 1e12 / args.peak_tflops:.1%}" if flops else "-"
        measured = f"{flops / seconds / 1e12 / matmul_peak:.1%}" if flops else "-"
        print(f"| {preset} | {system} | {seconds * 1e3:.1f} ms | {args.batch / seconds:,.0f} | {rate} | {spec} "
              f"| {measured} | {peak:,.0f} MiB |")
    for preset in dict.fromkeys(r[0] for r in rows):
        ours = [r[2] for r in rows if r[0] == preset and r[1].startswith("albert_tf")]
        theirs = [r[2] for r in rows if r[0] == preset and not r[1].startswith("albert_tf")]
        if ours and theirs:
            print(f"{preset}: HF time / ours = {theirs[0] / ours[0]:.2f}")


if __name__ == "__main__":
    main()
