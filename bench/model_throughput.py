"""Model throughput of albert base on the CPU, side by side with its peers in one run.

Rows: forward latency at batch 1 x 128, forward at batch 8 x 128, and a pretraining train step
(MLM on 20 masked positions + SOP, loss, gradients, Adam update) at batch 8 x 128.
Systems, all built from the same config with random weights:
  albert_tf with and without XLA, keras-hub's AlbertBackbone (TensorFlow backend) with and
  without XLA (its train step: its MaskedLMHead plus a 2-way dense on the pooled output), and
  Hugging Face's PyTorch AlbertForPreTraining (its own loss, which scores all 128 positions).
Each repeat times every system once per row, interleaved, so machine noise hits all alike; the
table shows medians, the ratio to the fastest peer, and achieved GFLOP/s of the work our model does
(in the train step its last block computes only the masked rows and the first token) as a
fraction of the measured float32 matmul peak on the same threads.

Needs the bench extras: `pip install keras-hub==0.32.0` (torch and transformers come with [test]).
The bf16 rows use Keras' mixed_bfloat16 policy with and without XLA, and the "bfloat16" policy
(weights held in bf16, for inference) without XLA; a second table gives their
speed as a ratio to every float32 system, and the largest difference of their forward output from
our float32 one.

Usage: python bench/model_throughput.py [--threads 2] [--repeats 7] [--forward_only] [--bf16_only]
       [--skip "HF PyTorch"]
"""

import argparse
import time

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_repeats(parser, 7)
    harness.add_model(parser, 128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--predictions", type=int, default=20)
    harness.add_skip(parser)
    parser.add_argument("--forward_only", action="store_true",
                        help="time the forward rows only (many repeats of the short rows are cheap)")
    parser.add_argument("--bf16_only", action="store_true",
                        help="leave out our XLA bf16 row and keras-hub without XLA (the bf16 question's table)")
    return parser.parse_args()


harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer  # noqa: E402


def encoder_flops(c: AlbertConfig, batch: int, length: int, last_rows: int | None = None) -> float:
    """Multiply-adds x 2 of the encoder forward: projection, blocks (dense + attention), pooler.

    `last_rows`: the rows the last block computes (`output_positions` and the first token); keys
    and values are computed for every row all the same."""
    def block(rows):
        dense = rows * (2 * c.hidden_size**2 + 2 * c.hidden_size * c.intermediate_size)
        return 2 * (dense + 2 * length * c.hidden_size**2 + 2 * rows * length * c.hidden_size)

    applications = c.num_hidden_layers * c.inner_group_num
    total = (applications - 1) * block(length) + block(length if last_rows is None else last_rows)
    total += 2 * length * c.embedding_size * c.hidden_size * c.has_projection + 2 * c.hidden_size**2
    return batch * total


def heads_flops(c: AlbertConfig, batch: int, predictions: int) -> float:
    per_prediction = 2 * (c.hidden_size * c.embedding_size + c.embedding_size * c.vocab_size)
    return batch * (predictions * per_prediction + 2 * c.hidden_size * 2)


def matmul_peak_gflops(threads: int) -> float:
    """Best of repeated 2048^3 float32 matmuls on the same thread count, in GFLOP/s."""
    a = tf.random.normal([2048, 2048])
    fn = tf.function(lambda x: tf.matmul(x, x), jit_compile=True)
    fn(a).numpy()
    best = float("inf")
    for _ in range(10):
        start = time.perf_counter()
        fn(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * 2048**3 / best / 1e9


def random_batch(c: AlbertConfig, batch: int, length: int, predictions: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(5, c.vocab_size, (batch, length)).astype(np.int32),
        "input_mask": np.ones((batch, length), np.int32),
        "segment_ids": (np.arange(length)[None] >= length // 2).repeat(batch, 0).astype(np.int32),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, length), (batch, predictions)), axis=1).astype(np.int32),
        "masked_lm_ids": rng.integers(5, c.vocab_size, (batch, predictions)).astype(np.int32),
        "masked_lm_weights": np.ones((batch, predictions), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32),
    }


def tf_train_step(model, loss_fn, jit):
    optimizer = keras.optimizers.Adam(1e-4)

    @tf.function(jit_compile=jit)
    def step(batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    return step


def albert_tf_system(c, jit, dtype=None, weights_of=None):
    """Our pretrainer; `dtype` a Keras dtype policy (e.g. "mixed_bfloat16"), `weights_of` another
    system's model whose weights it copies (so outputs can be compared)."""
    model = AlbertPretrainer(c, dtype=dtype) if dtype else AlbertPretrainer(c)
    model.build()
    if weights_of is not None:
        model.set_weights(weights_of.get_weights())
    forward = tf.function(lambda b: tf.cast(model.encoder(b)["sequence_output"], tf.float32), jit_compile=jit)
    train = tf_train_step(model, lambda b: model(b, training=True)["loss"], jit)
    forward.model = model
    return forward, train


def keras_hub_system(c, jit):
    import keras_hub
    from keras_hub.layers import MaskedLMHead

    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=c.vocab_size, num_layers=c.num_hidden_layers, num_heads=c.num_attention_heads,
        embedding_dim=c.embedding_size, hidden_dim=c.hidden_size, intermediate_dim=c.intermediate_size,
        num_groups=c.num_hidden_groups, num_inner_repetitions=c.inner_group_num,
        dropout=c.hidden_dropout_prob, max_sequence_length=c.max_position_embeddings,
    )
    mlm_head = MaskedLMHead(
        vocabulary_size=c.vocab_size, token_embedding=backbone.token_embedding,
        intermediate_activation=lambda x: keras.activations.gelu(x, approximate=True),
    )
    sop_head = keras.layers.Dense(2)

    def inputs(b):
        return {"token_ids": b["input_ids"], "segment_ids": b["segment_ids"], "padding_mask": b["input_mask"]}

    def loss_fn(b):
        out = backbone(inputs(b), training=True)
        mlm = mlm_head(out["sequence_output"], b["masked_lm_positions"])
        sop = sop_head(out["pooled_output"])
        mlm_loss = keras.losses.sparse_categorical_crossentropy(b["masked_lm_ids"], mlm, from_logits=True)
        sop_loss = keras.losses.sparse_categorical_crossentropy(b["next_sentence_labels"][:, 0], sop, from_logits=True)
        return tf.reduce_mean(mlm_loss) + tf.reduce_mean(sop_loss)

    b = random_batch(c, 1, 8, 2)
    loss_fn(b)  # builds the heads
    forward = tf.function(lambda b: backbone(inputs(b))["sequence_output"], jit_compile=jit)

    class Holder:
        trainable_variables = backbone.trainable_variables + mlm_head.trainable_variables + sop_head.trainable_variables

    return forward, tf_train_step(Holder, loss_fn, jit)


def hugging_face_system(c):
    import torch
    import transformers

    from albert_tf.presets.convert import config_to_hf

    values = config_to_hf(c)
    # No dropout where ours has none: the SOP head's own rate follows the config's hidden rate.
    config = transformers.AlbertConfig(**{**values, "classifier_dropout_prob": values["hidden_dropout_prob"]})
    model = transformers.AlbertForPreTraining(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def tensors(b):
        return {
            "input_ids": torch.from_numpy(b["input_ids"]).long(),
            "attention_mask": torch.from_numpy(b["input_mask"]).long(),
            "token_type_ids": torch.from_numpy(b["segment_ids"]).long(),
        }

    def forward(b):
        model.eval()
        with torch.no_grad():
            return model.albert(**tensors(b)).last_hidden_state

    def train(b):
        model.train()
        labels = torch.full(b["input_ids"].shape, -100, dtype=torch.long)
        rows = np.arange(len(b["input_ids"]))[:, None]
        labels[rows, b["masked_lm_positions"]] = torch.from_numpy(b["masked_lm_ids"]).long()
        out = model(**tensors(b), labels=labels,
                    sentence_order_label=torch.from_numpy(b["next_sentence_labels"][:, 0]).long())
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        return out.loss.detach()

    return forward, train


def block(result):
    # Both TF and torch tensors: .numpy() waits for the value, so the timing covers the work.
    result.numpy()
    return result


def median_times(systems: dict, runs: dict, repeats: int) -> dict:
    """Medians of `repeats` interleaved timings of every (run, system) (`harness.interleaved_times`).

    `runs` maps a row name to `(call, batch)`, where `call(system)` returns the function to time.
    """
    calls = {(row, name): (lambda call=call, batch=batch, system=system: block(call(system)(batch)))
             for row, (call, batch) in runs.items() for name, system in systems.items()}
    return harness.medians(harness.interleaved_times(calls, repeats))


def main():
    args = parse_args()
    harness.set_threads(args.threads, torch=True)
    c = AlbertConfig.named(args.size)
    skip = set(filter(None, args.skip.split(",")))
    reference = {}

    def ours(jit, dtype=None):
        system = albert_tf_system(c, jit, dtype, reference.get("model"))
        reference.setdefault("model", system[0].model)
        return system

    # The bf16 rows: Keras' mixed_bfloat16 policy (float32 variables, LayerNorm and softmax;
    # matmuls in bf16). Without XLA TensorFlow runs the matmuls on oneDNN's bf16 kernels
    # (AVX512_BF16 / AMX where the CPU has them); XLA's CPU backend does not use them. The
    # "bfloat16" policy (inference) holds the weights in bf16 (LayerNorm's weights and softmax stay
    # float32): the same outputs as mixed_bfloat16, without casting the shared weights 12 times.
    builders = {
        "albert_tf XLA": lambda: ours(True),
        "albert_tf no-XLA": lambda: ours(False),
        "albert_tf bf16 no-XLA": lambda: ours(False, "mixed_bfloat16"),
        "albert_tf bf16-weights no-XLA": lambda: ours(False, "bfloat16"),
        "albert_tf bf16 XLA": lambda: ours(True, "mixed_bfloat16"),
        "keras-hub XLA": lambda: keras_hub_system(c, True),
        "keras-hub no-XLA": lambda: keras_hub_system(c, False),
        "HF PyTorch": lambda: hugging_face_system(c),
    }
    if args.bf16_only:
        skip |= {"albert_tf bf16 XLA", "keras-hub no-XLA"}
    if not args.forward_only:
        skip.add("albert_tf bf16-weights no-XLA")  # an inference policy: no train step
    systems = {name: build() for name, build in builders.items() if name not in skip}
    b1 = random_batch(c, 1, args.seq_length, args.predictions)
    b8 = random_batch(c, args.batch, args.seq_length, args.predictions)
    rows = {
        f"forward 1x{args.seq_length} (s)": (lambda s: s[0], b1, encoder_flops(c, 1, args.seq_length)),
        f"forward {args.batch}x{args.seq_length} (s)": (lambda s: s[0], b8, encoder_flops(c, args.batch, args.seq_length)),
        f"train step {args.batch}x{args.seq_length}, {args.predictions} masked (s)": (
            lambda s: s[1], b8,
            # Our train step: the last block computes the masked rows and the first token only.
            3 * (encoder_flops(c, args.batch, args.seq_length, last_rows=args.predictions + 1)
                 + heads_flops(c, args.batch, args.predictions)),
        ),
    }
    if args.forward_only:
        rows = {name: row for name, row in rows.items() if name.startswith("forward")}
    for name, system in systems.items():  # compile and warm up everything before timing
        for pick, batch, _ in rows.values():
            for _ in range(2):
                block(pick(system)(batch))
        print(f"warmed up {name}", flush=True)

    med_all = median_times(systems, {row: (pick, batch) for row, (pick, batch, _) in rows.items()}, args.repeats)
    peak = matmul_peak_gflops(args.threads)

    float32_name = "albert_tf XLA" if "albert_tf XLA" in systems else "albert_tf no-XLA"
    differences = {}
    for name, system in systems.items():
        if name.startswith("albert_tf") and name != float32_name and float32_name in systems:
            got = system[0](b8).numpy()
            differences[name] = float(np.abs(got - systems[float32_name][0](b8).numpy()).max())

    print(f"\n{args.size}, {args.threads} threads, median of {args.repeats} interleaved repeats; "
          f"float32 matmul peak {peak:.0f} GFLOP/s (2048^3, XLA)\n")
    names = list(systems)
    table = []
    for row, (_, _, flops) in rows.items():
        med = {n: med_all[row, n] for n in names}
        ours = med["albert_tf XLA"]
        peers = [med[n] for n in names if not n.startswith("albert_tf")]
        ratio = f"{ours / min(peers):.2f}" if peers else "-"
        gflops = flops / ours / 1e9
        table.append([row, *(f"{med[n]:.3f}" for n in names), ratio, f"{gflops:.0f} ({100 * gflops / peak:.0f}%)"])
    harness.print_table(["row", *names, "ours / fastest peer", "ours GFLOP/s (% of peak)"], table)
    bf16 = [n for n in names if "bf16" in n]
    if bf16:
        print("\nbf16 against float32 (ratios of medians; > 1 means bf16 is faster):\n")
        float32_names = [n for n in names if "bf16" not in n]
        harness.print_table(["row", *(f"{b} vs {f}" for b in bf16 for f in float32_names)],
                            [[row, *(f"{med_all[row, f] / med_all[row, b]:.2f}" for b in bf16 for f in float32_names)]
                             for row in rows])
        for name, difference in differences.items():
            print(f"largest |{name} - {float32_name}| on the forward {args.batch}x{args.seq_length} "
                  f"sequence_output: {difference:.4f}")


if __name__ == "__main__":
    main()
