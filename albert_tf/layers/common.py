"""Small pieces every ALBERT layer uses: initializer, activation, dense layer, LayerNorm and its dtype."""

import contextlib
import threading

import keras
import tensorflow as tf
# TensorFlow's own test for "inside a jit_compile function" (tf.cond and the gradients use it).
from tensorflow.python.ops import control_flow_util

# The original release uses 1e-12 everywhere (BERT's value); not a config field there either.
LAYER_NORM_EPSILON = 1e-12


_keras_formula = threading.local()


@contextlib.contextmanager
def keras_layer_norm():
    """Within the block, every `LayerNorm` traced computes Keras' formula, never the fused form.

    For converters that have no `FusedBatchNormV3` (LiteRT's builtin ops): trace the model inside
    it. Per thread, as tracing is.
    """
    previous = getattr(_keras_formula, "on", False)
    _keras_formula.on = True
    try:
        yield
    finally:
        _keras_formula.on = previous


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
    LayerNorm keeps float32 statistics and float32 scale and bias (at inference on the CPU a bf16
    input's scale and shift round to bf16, see `LayerNorm`); float64 stays float64.
    """
    variable_dtype = layer.dtype_policy.variable_dtype
    return keras.DTypePolicy("float32" if variable_dtype in ("bfloat16", "float16") else variable_dtype)


def layer_norm(layer: keras.layers.Layer, name: str = "layer_norm"):
    return LayerNorm(dtype=float32_policy(layer), name=name)


@keras.saving.register_keras_serializable(package="albert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis, at inference in the form oneDNN runs as one kernel.

    The same variables, names and (within rounding) outputs as Keras' layer. Keras computes the
    mean, variance, scale and shift as about ten elementwise ops, each a pass over the tensor. At
    inference (`training` not true) in float32 or bf16, this layer normalises through
    `FusedBatchNormV3` on a [1, rows, width, 1] view and then scales and shifts: the pattern that
    TensorFlow's graph optimiser rewrites into one `_MklLayerNorm` kernel when the model runs
    without XLA (Keras 2's LayerNormalization was written so; its speed: docs/benchmarks.md).
    A bf16 input is not cast: the kernel keeps its statistics in
    float32, scale and shift round to bf16 as the output does. In training, inside XLA and on a
    GPU the layer is Keras' formula in float32 (its policy's dtype), as Keras' layer computes it.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("epsilon", LAYER_NORM_EPSILON)
        super().__init__(**kwargs)
        self.autocast = False  # a bf16 input stays bf16 at inference; training casts it below

    def call(self, inputs, training=None):
        if training or not self._fusable(inputs):
            return super().call(tf.cast(inputs, self.compute_dtype))
        shape = tf.shape(inputs)
        rows = tf.reduce_prod(shape[:-1], keepdims=True)
        # Constant folding would turn a static row count's `tf.fill` below into a constant, and
        # the rewrite matches `Fill` only: PlaceholderWithDefault keeps the count out of folding.
        rows = tf.raw_ops.PlaceholderWithDefault(input=rows, shape=[1])
        view = tf.reshape(inputs, tf.concat([[1], rows, [inputs.shape[-1], 1]], 0))
        normalized, _, _ = tf.compat.v1.nn.fused_batch_norm(
            view, tf.fill(rows, 1.0), tf.fill(rows, 0.0), epsilon=self.epsilon, data_format="NCHW"
        )
        normalized = tf.reshape(normalized, shape)
        return normalized * tf.cast(self.gamma, inputs.dtype) + tf.cast(self.beta, inputs.dtype)

    def _fusable(self, inputs) -> bool:
        """The last axis in float32 or bf16, on the CPU, outside XLA and outside `keras_layer_norm()`:
        where the rewrite applies.

        XLA expands `FusedBatchNormV3` into plainer code than it makes of Keras' formula (slower:
        docs/benchmarks.md), and on a GPU the rewrite is absent.
        """
        return (
            not getattr(_keras_formula, "on", False)
            and self.axis in (-1, [-1])
            and inputs.dtype in (tf.float32, tf.bfloat16)
            and not tf.config.list_logical_devices("GPU")
            and not control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
        )


class Dense(keras.layers.Dense):
    """Keras' Dense as one 2-D matmul and a bias add: the same variables, names and outputs. Every
    dense layer of the package (encoder, pooler, heads, fine-tuning models) is this one.

    Keras multiplies a [B, T, I] input through `tensordot` and adds the bias apart. Flattened to
    [B*T, I] with `tf.nn.bias_add`, TensorFlow's graph optimiser fuses matmul, bias and activation
    into one oneDNN kernel when the model runs without XLA (its speed: docs/benchmarks.md). Under
    XLA the program is the same.
    """

    def call(self, inputs, training=None):
        flat = tf.reshape(inputs, [-1, inputs.shape[-1]])
        outputs = tf.matmul(flat, tf.cast(self.kernel, flat.dtype))
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, outputs.dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        outputs = tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))
        outputs.set_shape(inputs.shape[:-1].concatenate([self.units]))
        return outputs
