"""The task protocol of the one trainer (`albert_tf.training.loop.Trainer`): what a run trains.

TensorFlow-free, so that a tool's `--help` (which imports its task classes) does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

    from albert_tf.config import AlbertConfig


class TrainingTask:
    """What a run trains, for the one `Trainer`: the protocol every task implements.

    Model Garden's tasks (build_model, build_losses, validation_step, aggregate_logs) made smaller;
    `albert_tf.training.pretraining.PretrainingTask` and `finetune.task.FinetuningTask` are the two kinds.
    The trainer calls, under the strategy's scope and inside its compiled steps:

    - `build_model(config, options, dtype)`: the Keras model, of `model_config(config, options)`
      (by default the run's config, which the run folder records);
    - `optimizer_name(options)`: one of `albert_tf.training.optimization.OPTIMIZERS` (by default
      `options.optimizer`, whose default the recipe gives);
    - `denominators(ctx, batch, options)`: the normalisers of the global batch (an all-reduce over
      the replicas where one needs every replica's batch), passed to `loss_parts`;
    - `loss_parts(model, batch, denominators)`: this replica's (micro-)batch share of each metric
      of the global batch, as a dict; `total_loss(parts)` is the loss to minimise (`parts["loss"]`
      unless overridden);
    - `metric_names`: the parts that `Trainer.train_steps` reports, averaged over its steps
      ("loss" among them); `progress_metrics`: those the progress bar shows;
    - `check_output_dir(output_dir, write)`: refuses an output_dir of another task (the trainer
      checks the config itself);

    and, for `Trainer.evaluate` (Model Garden's validation_step, aggregate_logs and
    reduce_aggregated_logs: one evaluation protocol for pretraining and every fine-tuning task):

    - `validation_step(model, batch)`, in the compiled step on each replica: a dict of tensors,
      each with the batch (or, for a sum, a length-1) axis first; the trainer gathers every
      replica's along that axis;
    - `aggregate_logs(state, outputs)`, in Python after each batch: `state` (None at the first
      batch) with the batch's gathered `outputs` (numpy arrays) added; by default a list of them;
    - `reduce_aggregated_logs(state, **context)`: the evaluation's result from the aggregated state
      (pretraining: its metrics; fine-tuning: every record's outputs in file order, which the
      task's `evaluate` scores). `context` is what `Trainer.evaluate` was given besides the data.
    """

    metric_names: tuple[str, ...] = ("loss",)

    @property
    def progress_metrics(self) -> tuple[str, ...]:
        return tuple(self.metric_names)

    def model_config(self, config: AlbertConfig, options) -> AlbertConfig:
        return config

    def build_model(self, config: AlbertConfig, options, dtype) -> keras.Model:
        raise NotImplementedError

    def optimizer_name(self, options) -> str:
        return options.optimizer

    def check_output_dir(self, output_dir: str, write: bool) -> None:
        """Refuses an output_dir holding another task's run; records this one's (if `write`)."""

    def denominators(self, ctx, batch, options) -> dict:
        return {}

    def loss_parts(self, model, batch, denominators: dict) -> dict:
        raise NotImplementedError

    def total_loss(self, parts: dict):
        return parts["loss"]

    def validation_step(self, model, batch) -> dict:
        raise NotImplementedError(f"{type(self).__name__} has no evaluation")

    def aggregate_logs(self, state: list | None, outputs: dict) -> list:
        state = [] if state is None else state
        state.append(outputs)  # in place: one list for the whole evaluation, not a copy a batch
        return state

    def reduce_aggregated_logs(self, state, **context) -> dict:
        raise NotImplementedError(f"{type(self).__name__} has no evaluation")
