"""Small pieces every ALBERT layer uses: initializer, activation, LayerNorm and its dtype."""

import keras

# The original release uses 1e-12 everywhere (BERT's value); not a config field there either.
LAYER_NORM_EPSILON = 1e-12


def kernel_initializer(initializer_range: float):
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def activation(name: str):
    """The activation of `hidden_act`. ALBERT's "gelu" is the tanh approximation (HF: gelu_new)."""
    if name in ("gelu", "gelu_new"):
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name in ("swish", "silu"):
        return keras.activations.silu
    return keras.activations.get(name)


def float32_policy(layer: keras.layers.Layer):
    """The policy for numerically sensitive sublayers (LayerNorm): float32 under a 16-bit policy.

    Under mixed_bfloat16 (float32 variables) and under "bfloat16" (bf16 variables: the inference
    policy, whose matmuls read their weights without a cast each time the shared layers run),
    LayerNorm keeps float32 statistics and float32 scale and bias; float64 stays float64.
    """
    variable_dtype = layer.dtype_policy.variable_dtype
    return keras.DTypePolicy("float32" if variable_dtype in ("bfloat16", "float16") else variable_dtype)


def layer_norm(layer: keras.layers.Layer, name: str = "layer_norm"):
    return keras.layers.LayerNormalization(
        epsilon=LAYER_NORM_EPSILON, dtype=float32_policy(layer), name=name
    )
