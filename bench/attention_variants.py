"""A/B of the shipped transformer layers against variants of themselves, in one process (the model
bench's rows).

Each variant replaces methods of `AlbertAttention` or `AlbertTransformerBlock` while its model is
traced; all models then run interleaved, in a fresh random order each repeat, and the table gives
each variant's median time over the shipped layers'. Variants:
  fused_qkv: one [H, 3H] product over the query, key and value kernels instead of three [H, H].
  no_mask:   the padding bias replaced by zeros (less work than shipped: a floor for mask handling).
  all_rows:  the last block computes every row and the rows the heads read are gathered after it,
             as before `output_positions` (the train step's work without that saving).
  keras_layer_norm: LayerNorm as Keras' formula at inference too, not the form oneDNN runs as one
             kernel (the same program under XLA, which always gets Keras' formula).
Albert base, random weights, rows: forward 1x128, forward 8x128, train step 8x128 (Adam).

Usage: python bench/attention_variants.py [--repeats 9] [--threads 2] [--dtype bfloat16] [--no_xla]
       [--forward_only] [--variants fused_qkv,keras_layer_norm]
"""

import argparse

import harness

harness.quiet_tensorflow()

import model_throughput  # noqa: E402  (random batches and the train step of the model bench)
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer  # noqa: E402
from albert_tf.layers import common  # noqa: E402
from albert_tf.layers.attention import AlbertAttention  # noqa: E402
from albert_tf.layers.transformer_block import AlbertTransformerBlock  # noqa: E402

SHIPPED = {
    (AlbertAttention, "call"): AlbertAttention.call,
    (AlbertAttention, "_query_key_value"): AlbertAttention._query_key_value,
    (AlbertTransformerBlock, "call"): AlbertTransformerBlock.call,
    (common.LayerNorm, "_fusable"): common.LayerNorm._fusable,
}


def fused_qkv(self, x, rows):
    """In place of AlbertAttention._query_key_value: one [H, 3H] product, then split."""
    if rows is not x:  # only the rows of the last block of the train step differ; split them off
        return SHIPPED[(AlbertAttention, "_query_key_value")](self, x, rows)
    dense = (self.query, self.key, self.value)
    kernel = tf.concat([tf.cast(layer.kernel, self.compute_dtype) for layer in dense], axis=1)
    bias = tf.concat([tf.cast(layer.bias, self.compute_dtype) for layer in dense], axis=0)
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    qkv = tf.reshape(tf.matmul(x, kernel) + bias, [batch, length, 3, self.num_heads, self.head_size])
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]


def no_mask(self, x, attention_bias, training=None, query_positions=None):
    return SHIPPED[(AlbertAttention, "call")](self, x, tf.zeros_like(attention_bias), training, query_positions)


def all_rows(self, x, attention_bias, training=None, query_positions=None):
    x = SHIPPED[(AlbertTransformerBlock, "call")](self, x, attention_bias, training)
    return x if query_positions is None else tf.gather(x, query_positions, batch_dims=1)


# Each variant: the (class, method) pairs it replaces.
VARIANTS = {
    "shipped": {},
    "fused_qkv": {(AlbertAttention, "_query_key_value"): fused_qkv},
    "no_mask": {(AlbertAttention, "call"): no_mask},
    "all_rows": {(AlbertTransformerBlock, "call"): all_rows},
    "keras_layer_norm": {(common.LayerNorm, "_fusable"): lambda self, inputs: False},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_repeats(parser, 9)
    harness.add_threads(parser)
    parser.add_argument("--dtype", default="float32",
                        help='the models\' Keras dtype policy, e.g. "bfloat16" (bf16 weights, for inference)')
    parser.add_argument("--no_xla", action="store_true", help="run the models without XLA")
    parser.add_argument("--forward_only", action="store_true", help="leave out the train step row")
    parser.add_argument("--variants", default=",".join(list(VARIANTS)[1:]), help="comma-separated")
    args = parser.parse_args()
    jit = not args.no_xla
    variants = {"shipped": {}, **{name: VARIANTS[name] for name in args.variants.split(",")}}
    # Outputs must agree within float32 rounding, or a few bf16 units at values of order 1-10.
    tolerance = 1e-4 if args.dtype == "float32" else 0.125
    harness.set_threads(args.threads)

    config = AlbertConfig.named("albert_base_v2")
    batches = {size: {k: tf.constant(v) for k, v in model_throughput.random_batch(config, size, 128, 20).items()}
               for size in (1, 8)}
    rows = {"forward 1x128": (False, 1, 5), "forward 8x128": (False, 8, 1), "train step 8x128": (True, 8, 1)}
    if args.forward_only:
        del rows["train step 8x128"]
    systems, reference = {}, None
    for name, replaced in variants.items():
        for (cls, method), function in {**SHIPPED, **replaced}.items():
            setattr(cls, method, function)
        model = AlbertPretrainer(config, dtype=args.dtype)
        model.build()
        forward = tf.function(lambda b, m=model: tf.cast(m.encoder(b)["sequence_output"], tf.float32),
                              jit_compile=jit)
        # Same weights in every variant, and the same outputs (the batches have no padding, so
        # no_mask computes the same function too).
        if reference is None:
            reference = (model.get_weights(), forward(batches[8]).numpy())
        else:
            model.set_weights(reference[0])
            difference = abs(forward(batches[8]).numpy() - reference[1]).max()
            if difference > tolerance:
                raise AssertionError(f"{name} differs from the shipped layer by {difference}")
        train = model_throughput.tf_train_step(model, lambda b, m=model: m(b, training=True)["loss"], jit)
        for train_row, size, _ in rows.values():  # trace under this variant, and warm up
            for _ in range(2):
                (train if train_row else forward)(batches[size]).numpy()
        systems[name] = (forward, train)
    for (cls, method), function in SHIPPED.items():
        setattr(cls, method, function)

    def call(name, train_row, size, calls):
        step = systems[name][1 if train_row else 0]
        return lambda: [step(batches[size]).numpy() for _ in range(calls)]

    names = list(systems)
    times = harness.medians(harness.interleaved_times(
        {(row, name): call(name, *row_args) for row, row_args in rows.items() for name in names}, args.repeats))
    print(f"\nalbert base, {args.dtype}, {'XLA' if jit else 'no XLA'}, {args.threads} threads, "
          f"{args.repeats} repeats; median seconds (ratio to shipped)")
    per_call = {key: seconds / rows[key[0]][2] for key, seconds in times.items()}
    harness.print_table(["row", *names], [
        [row, *(f"{per_call[row, n]:.4f} ({per_call[row, n] / per_call[row, 'shipped']:.3f})" for n in names)]
        for row in rows])

if __name__ == "__main__":
    main()
