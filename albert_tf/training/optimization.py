"""The optimizers and learning-rate schedule of the ALBERT release, as Keras 3 optimizers, and the
bias-corrected AdamW that recipes taken from Hugging Face were tuned on.

The release trains with LAMB and fine-tunes with AdamW ("AdamWeightDecayOptimizer"). Both differ
from their Keras namesakes in ways that change the numbers, so they are reproduced here:

- no bias correction of the moments;
- weight decay is added to the update (`update = m / (sqrt(v) + eps) + wd * w`) instead of being
  applied to the weights separately, so for LAMB it passes through the trust ratio;
- LAMB's trust ratio is ||w|| / ||update|| (1 where either norm is 0);
- variables of LayerNorm layers and biases are excluded from both weight decay and the trust
  ratio (see `is_excluded_variable`);
- gradients are clipped to a global norm of 1.0. Unlike Keras, which clips before gradients are
  summed across replicas, the norm here is that of the gradient of the whole global batch, so the
  update does not depend on how many replicas share the batch.

The schedule is the release's: linear warmup, then polynomial decay to 0 on the absolute step.

`create_optimizer`'s names: "lamb" and "adamw_release" are the release's; "adamw" is PyTorch's
`torch.optim.AdamW` (what Hugging Face's recipes were tuned on): the same rule with the moments
bias-corrected, `m / (1 - beta_1^t)` and `v / (1 - beta_2^t)`, epsilon added to the corrected
`sqrt(v)` as torch adds it, and the same exclusions, clipping and schedule. Without the correction
the release's early steps are (1 - 0.9^t) / sqrt(1 - 0.999^t) times a corrected AdamW's for steady
gradients: 3.2x at t = 1, 6.5x around t = 10, 3.2x at t = 100, 1.5x at t = 600; a recipe's
learning rate is tuned for one of the two.

Example:
    >>> optimizer = create_optimizer("lamb", 0.00176, num_train_steps=125000,
    ...                              num_warmup_steps=3125)
"""

from __future__ import annotations

import re
from typing import Iterable

import keras
import tensorflow as tf

# Substrings of a variable's path that the release excludes from weight decay and from LAMB's trust
# ratio. "LayerNorm" names the release's checkpoints; "layer_norm" names this package's layers.
DEFAULT_EXCLUDED_PATTERNS = ("LayerNorm", "layer_norm", "bias")

# keras.layers.LayerNormalization keeps its scale and offset as "gamma" and "beta"; they are
# excluded whatever the layer is called, so a renamed LayerNorm cannot silently start decaying.
_NORMALIZATION_VARIABLE_NAMES = ("gamma", "beta")

from albert_tf.training.options import OPTIMIZERS, check_warmup  # noqa: E402 (OPTIMIZERS re-exported; defined without TensorFlow)


def _variable_path(variable) -> str:
    path = getattr(variable, "path", None)
    if path is None:
        # A bare tf.Variable: its name carries the scope path and an output suffix.
        path = variable.name.split(":")[0]
    return path


def is_excluded_variable(variable, patterns: Iterable[str] = DEFAULT_EXCLUDED_PATTERNS) -> bool:
    """Whether the release rule leaves `variable` out of weight decay and the trust ratio.

    A variable is excluded when any of `patterns` occurs in its path (`variable.path`, such as
    "encoder/embeddings_layer_norm/gamma"), or when it is the scale or offset ("gamma", "beta") of a
    normalization layer.
    """
    path = _variable_path(variable)
    if any(re.search(pattern, path) for pattern in patterns):
        return True
    return path.rsplit("/", 1)[-1] in _NORMALIZATION_VARIABLE_NAMES


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to `peak_learning_rate`, then polynomial decay to `end_learning_rate`.

    As in the release, the decay is computed on the absolute step, not on the steps since warmup:
    for `step >= num_warmup_steps` the rate is
    `(peak - end) * (1 - step / num_train_steps) ** power + end`, and during warmup it is
    `peak * step / num_warmup_steps`; right after warmup the rate is already
    `peak * (1 - num_warmup_steps / num_train_steps)`. The release's update k (counting from 1)
    uses the rate at step k, so its first update, during warmup, is `peak / num_warmup_steps`, not 0:
    this package's optimizers ask the schedule for step `iterations + 1` (see `_ReleasedUpdateRule`).

    Args:
        peak_learning_rate: the rate that warmup reaches and decay starts from.
        num_train_steps: the step at which the rate reaches `end_learning_rate`.
        num_warmup_steps: length of the linear warmup; 0 for none.
        end_learning_rate: the final rate.
        power: exponent of the polynomial decay (1: linear).

    Example:
        >>> schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
        >>> float(schedule(50))
        0.0005
    """

    def __init__(
        self,
        peak_learning_rate: float,
        num_train_steps: int,
        num_warmup_steps: int = 0,
        end_learning_rate: float = 0.0,
        power: float = 1.0,
    ):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        check_warmup(num_train_steps, num_warmup_steps)
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        progress = tf.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = (self.peak_learning_rate - self.end_learning_rate) * (
            1.0 - progress
        ) ** self.power + self.end_learning_rate
        if self.num_warmup_steps == 0:
            return decayed
        warmup = self.peak_learning_rate * step / float(self.num_warmup_steps)
        return tf.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }


class _ReleasedUpdateRule:
    """The update shared by the release's LAMB and AdamW; `_layer_adaptation` tells them apart.

    Mixed into subclasses of the Keras optimizers so that slots, checkpointing, tf.distribute and
    loss scaling stay Keras's; only the arithmetic of one update and where clipping happens change.
    """

    _layer_adaptation = False
    _bias_correction = False

    def _init_release_rule(self, weight_decay_rate, excluded_patterns, clip_norm):
        self.weight_decay_rate = float(weight_decay_rate)
        self.excluded_patterns = tuple(excluded_patterns)
        self.clip_norm = None if clip_norm is None else float(clip_norm)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Decided once from the paths, which the raw tf.Variables seen in update_step do not carry.
        self._excluded = [is_excluded_variable(v, self.excluded_patterns) for v in var_list]

    def is_excluded(self, variable) -> bool:
        """Whether `variable` (one this optimizer was built on) skips decay and the trust ratio."""
        return self._excluded[self._get_variable_index(variable)]

    def get_config(self):
        config = super().get_config()
        config.update(self._release_config())
        return config

    def learning_rate_of_update(self, k):
        """The rate of update `k` (from 1): what the update applies and what the loop logs.

        Keras rates an update with the schedule at `iterations`, the number of updates already
        made, so update k would use lr(k - 1) and the first one lr(0) = 0. The release's update k
        uses lr(k): its rate is read with the global step that the same training op increments.
        """
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(k)
        return self._learning_rate

    def _get_current_learning_rate(self):
        return self.learning_rate_of_update(self._iterations + 1)

    def _apply_weight_decay(self, variables):
        # Keras's decoupled decay would shrink the weights outside the update; the release adds the
        # decay to the update instead (in update_step).
        return

    def _clip_gradients(self, grads):
        # Clipping happens after the cross-replica sum, in _all_reduce_sum_gradients.
        return grads

    def _all_reduce_sum_gradients(self, grads_and_vars):
        grads_and_vars = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if not self.clip_norm:
            return grads_and_vars
        present = [i for i, (g, _) in enumerate(grads_and_vars) if g is not None]
        # Embedding gradients arrive as IndexedSlices whose repeated rows tf.global_norm would count
        # separately; the norm is that of the dense gradient, as with the release's one-hot lookups.
        dense = [tf.convert_to_tensor(grads_and_vars[i][0]) for i in present]
        clipped, _ = tf.clip_by_global_norm(dense, self.clip_norm)
        for i, g in zip(present, clipped):
            grads_and_vars[i] = (g, grads_and_vars[i][1])
        return grads_and_vars

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        # Embedding gradients arrive as IndexedSlices; the release's moments are dense, so every
        # row's moments decay at every step, touched or not.
        gradient = tf.cast(tf.convert_to_tensor(gradient), dtype)
        index = self._get_variable_index(variable)
        m = self._momentums[index]
        v = self._velocities[index]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient))
        if self._bias_correction:  # torch.optim.AdamW's: t counts this update from 1
            t = tf.cast(self._iterations + 1, dtype)
            m = m / (1.0 - tf.pow(tf.cast(self.beta_1, dtype), t))
            v = v / (1.0 - tf.pow(tf.cast(self.beta_2, dtype), t))
        update = m / (tf.sqrt(v) + self.epsilon)
        excluded = self._excluded[index]
        if self.weight_decay_rate and not excluded:
            update += self.weight_decay_rate * variable
        ratio = tf.constant(1.0, dtype)
        if self._layer_adaptation and not excluded:
            w_norm = tf.norm(variable)
            u_norm = tf.norm(update)
            ratio = tf.where(
                w_norm > 0,
                tf.where(u_norm > 0, w_norm / tf.maximum(u_norm, 1e-30), 1.0),
                1.0,
            )
        self.assign_sub(variable, ratio * lr * update)

    def _release_config(self):
        return {
            "weight_decay_rate": self.weight_decay_rate,
            "excluded_patterns": list(self.excluded_patterns),
            "clip_norm": self.clip_norm,
        }


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(_ReleasedUpdateRule, keras.optimizers.Lamb):
    """LAMB as released with ALBERT (no bias correction, decay inside the trust ratio).

    Args:
        learning_rate: a float or a `LearningRateSchedule` (see `WarmupPolynomialDecay`).
        weight_decay_rate: decay added to the update of non-excluded variables.
        beta_1, beta_2, epsilon: the moment decays and the denominator's epsilon.
        excluded_patterns: substrings of variable paths excluded from decay and trust ratio
            (LayerNorm scale and offset are excluded in any case, see `is_excluded_variable`).
        clip_norm: global norm that the summed gradient of all replicas is clipped to; None: off.
    """

    _layer_adaptation = True

    def __init__(
        self,
        learning_rate=0.00176,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        excluded_patterns=DEFAULT_EXCLUDED_PATTERNS,
        clip_norm=1.0,
        name="lamb",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            name=name,
            **kwargs,
        )
        self._init_release_rule(weight_decay_rate, excluded_patterns, clip_norm)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_ReleasedUpdateRule, keras.optimizers.AdamW):
    """The release's AdamW for fine-tuning: Adam without bias correction, decay in the update.

    Same arguments as `Lamb`; there is no trust ratio.
    """

    def __init__(
        self,
        learning_rate=1e-5,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        excluded_patterns=DEFAULT_EXCLUDED_PATTERNS,
        clip_norm=1.0,
        name="adam_weight_decay",
        **kwargs,
    ):
        # Keras's AdamW insists on a float decay; 0 here and the release's decay in update_step.
        kwargs.pop("weight_decay", None)
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=0.0,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            name=name,
            **kwargs,
        )
        self._init_release_rule(weight_decay_rate, excluded_patterns, clip_norm)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamW(AdamWeightDecay):
    """PyTorch's AdamW (`torch.optim.AdamW`), the optimizer of recipes taken from Hugging Face.

    The release's AdamW with the moments bias-corrected: update = m_hat / (sqrt(v_hat) + eps) with
    m_hat = m / (1 - beta_1^t), v_hat = v / (1 - beta_2^t), and the decoupled decay `wd * w` added
    to it (torch's `w *= 1 - lr * wd` before the step is the same arithmetic). Keras's own AdamW
    differs in two details that this class does not copy: it adds epsilon to the uncorrected
    sqrt(v), and it clips each replica's gradient before the sum. The exclusions (LayerNorm and
    biases: Hugging Face's Trainer leaves them out of decay too), the clipping after the
    cross-replica sum and the schedule are the release rule's; same arguments as `Lamb`.
    """

    _bias_correction = True

    def __init__(self, learning_rate=2e-5, name="adamw", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)


def create_optimizer(
    name: str,
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int,
    weight_decay: float = 0.01,
    *,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-6,
    clip_norm: float | None = 1.0,
    end_learning_rate: float = 0.0,
    power: float = 1.0,
    excluded_patterns: Iterable[str] = DEFAULT_EXCLUDED_PATTERNS,
):
    """The optimizer `name` (one of `OPTIMIZERS`: "lamb" and "adamw_release", the release's, or
    "adamw", torch's) on the release's warmup-then-decay schedule.

    Example:
        >>> create_optimizer("adamw_release", 2e-5, num_train_steps=800, num_warmup_steps=200)
    """
    classes = {"lamb": Lamb, "adamw_release": AdamWeightDecay, "adamw": AdamW}
    if name not in classes:
        raise ValueError(f"unknown optimizer {name!r}: choose one of {', '.join(OPTIMIZERS)}")
    schedule = WarmupPolynomialDecay(
        learning_rate,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        end_learning_rate=end_learning_rate,
        power=power,
    )
    return classes[name](
        learning_rate=schedule,
        weight_decay_rate=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        excluded_patterns=tuple(excluded_patterns),
        clip_norm=clip_norm,
    )


def split_micro_batches(features, num_micro_batches: int):
    """Reshapes every `[B, ...]` feature to `[num_micro_batches, B / num_micro_batches, ...]`.

    Static shapes are kept, so a loop over the leading axis compiles with XLA.
    """
    def split(tensor):
        batch = tensor.shape[0]
        if batch is None:
            raise ValueError("gradient accumulation needs a static batch size (drop_remainder=True)")
        if batch % num_micro_batches:
            raise ValueError(
                f"the per-replica batch of {batch} does not divide into grad_accum_steps="
                f"{num_micro_batches} micro-batches"
            )
        return tf.reshape(tensor, [num_micro_batches, batch // num_micro_batches] + tensor.shape[1:])

    return tf.nest.map_structure(split, features)


def accumulate_gradients(loss_fn, variables, features, num_micro_batches: int = 1):
    """Gradients of `loss_fn` summed over `num_micro_batches` slices of `features`.

    `loss_fn(micro_features)` returns `(loss, aux)` where `loss` is the micro-batch's share of the
    whole batch's loss (normalised by the whole batch's denominators), so that the summed gradient
    is the gradient of the whole batch: k accumulated micro-batches give the update of one k-times
    larger batch. `aux` is a structure of tensors, summed over micro-batches too. Only one
    micro-batch's activations are alive at a time, which is the point.

    Returns `(grads, loss, aux)` with `loss` and `aux` summed.
    """
    if num_micro_batches == 1:
        with tf.GradientTape() as tape:
            loss, aux = loss_fn(features)
        return tape.gradient(loss, variables), loss, aux

    micro = split_micro_batches(features, num_micro_batches)

    def micro_step(i):
        part = tf.nest.map_structure(lambda t: t[i], micro)
        with tf.GradientTape() as tape:
            loss, aux = loss_fn(part)
        grads = tape.gradient(loss, variables)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for g, v in zip(grads, variables)]
        return grads, loss, aux

    grads, loss, aux = micro_step(0)

    def body(i, grads, loss, aux):
        g, l, a = micro_step(i)
        return (
            i + 1,
            [x + y for x, y in zip(grads, g)],
            loss + l,
            tf.nest.map_structure(tf.add, aux, a),
        )

    _, grads, loss, aux = tf.while_loop(
        lambda i, *_: i < num_micro_batches,
        body,
        (tf.constant(1), grads, loss, aux),
    )
    return grads, loss, aux
