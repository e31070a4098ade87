"""What a training run is told, and the values each choice allows: free of TensorFlow, so that a
console script defines its flags from these fields (and answers `--help`) without loading it.

`TrainingOptions` holds the fields the loop (`albert_tf.training.loop`) reads; `PretrainingOptions`
extends it with pretraining's (`albert_tf.training.pretraining`), `finetune.options.FinetuneOptions` with
fine-tuning's. Each field's default is written here once: the flags of albert-pretrain and of the
fine-tuning tools are generated from the fields, each with its help (`albert_tf.cli.option_flags`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from albert_tf.utils.errors import FlagError
from albert_tf.utils.validation import require_choice, require_positive_ints

# The tf.distribute strategies `albert_tf.training.strategies.get_strategy` makes.
STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")
# --strategy=multi_worker: a worker not heard from for this long is taken as lost (albert_tf.training.strategies;
# TensorFlow's own default of 10 s would end a job on a long pause of a busy host).
WORKER_TIMEOUT_S = 60.0

# The optimizers `albert_tf.training.optimization` builds: the release's LAMB and AdamW, and torch's
# bias-corrected AdamW (what recipes taken from Hugging Face were tuned on).
OPTIMIZERS = ("lamb", "adamw_release", "adamw")
OPTIMIZER_HELP = ("lamb (the release's pretraining), adamw_release (the release's fine-tuning AdamW: no bias "
                  "correction) or adamw (torch's AdamW, bias-corrected, for recipes tuned on it).")

MIXED_PRECISION_POLICIES = {"none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
MIXED_PRECISION_HELP = ("bf16 (TPU, GPUs from Ampere on, recent CPUs), fp16 with dynamic loss scaling "
                        "(older GPUs), or none.")

# The paper's pretraining schedule: 3,125 warmup updates of 125,000.
PRETRAINING_STEPS, PRETRAINING_WARMUP_STEPS = 125_000, 3_125


TRAIN_BATCH_HELP = "Global batch of one update, over all replicas and accumulated micro-batches."
# <output_dir>/export: the SavedModel a run exports (pretraining's encoder, a fine-tuned task's model).
# Here, not with the formats (albert_tf.serving.formats): it is where a run writes, and pretraining
# (below serving) writes there.
EXPORT_DIR = "export"
# <output_dir>/eval_results.json: a fine-tuning run's last evaluation (finetune.run writes it;
# albert-export reads SQuAD v2.0's null-score threshold there).
EVAL_RESULTS = "eval_results.json"


def option_field(default=dataclasses.MISSING, help_text: str = ""):
    """A field with its default and its help, the flag's (`albert_tf.cli.option_flags`)."""
    return dataclasses.field(default=default, metadata={"help": help_text})


def scaled_warmup_steps(num_train_steps: int, reference_steps: int, reference_warmup_steps: int) -> int:
    """Warmup for a run of `num_train_steps` at the reference schedule's ratio (at least 0, at
    most the run): a short run keeps the recipe's shape instead of failing on its warmup."""
    if reference_steps <= 0:
        return 0
    return max(0, min(num_train_steps, round(num_train_steps * reference_warmup_steps / reference_steps)))


def check_warmup(num_train_steps: int, num_warmup_steps: int, prefix: str = "") -> None:
    """Raises FlagError unless 0 <= warmup <= steps; `prefix` ("--" on a command line) names them."""
    if not 0 <= num_warmup_steps <= num_train_steps:
        raise FlagError(f"{prefix}num_warmup_steps={num_warmup_steps} must be between 0 and "
                        f"{prefix}num_train_steps={num_train_steps}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """How to run the loop: the fields that `Trainer` and `run_loop` read, checked here.

    A task's options extend it with their own fields (and, where the task's run differs, their own
    defaults): `PretrainingOptions`, `finetune.options.FinetuneOptions`. The defaults here are a
    short fine-tuning run's (the release's run_classifier.py).

    `train_batch_size` and `eval_batch_size` are global batches, split across replicas (and, for a
    task whose options declare `grad_accum_steps`, each replica's share into that many
    micro-batches whose gradients are summed before the one update). The learning rate warms up
    linearly over `num_warmup_steps` to `learning_rate` and decays linearly to 0 at
    `num_train_steps`, on `optimizer` (`OPTIMIZERS`; a fine-tuning recipe names the one it was
    tuned on). A checkpoint is written every `save_checkpoints_steps` and at the end, the
    newest `keep_checkpoint_max` kept; `steps_per_loop` updates run in one compiled call.
    """

    output_dir: str = option_field(help_text="The run folder: checkpoints, TensorBoard summaries and what the "
                                             "run writes; a rerun resumes from its latest checkpoint.")
    train_batch_size: int = option_field(32, TRAIN_BATCH_HELP)
    eval_batch_size: int = option_field(32, "Global batch of evaluation and prediction.")
    max_seq_length: int = option_field(512, "Tokens per sequence.")
    learning_rate: float = option_field(2e-5, "Peak learning rate (after warmup).")
    num_train_steps: int = option_field(800, "Updates in all; the learning rate reaches 0 there.")
    num_warmup_steps: int = option_field(200, "Updates of linear warmup.")
    weight_decay: float = option_field(0.01, "Weight decay of the non-LayerNorm, non-bias weights.")
    optimizer: str = option_field("adamw_release", OPTIMIZER_HELP)
    save_checkpoints_steps: int = option_field(1000, "Updates between checkpoints.")
    keep_checkpoint_max: int = option_field(3, "Checkpoints kept.")
    steps_per_loop: int = option_field(50, "Updates per call to the compiled loop (TPUs want many); also the "
                                           "interval of the progress line and summaries.")
    mixed_precision: str = option_field("none", MIXED_PRECISION_HELP)
    jit_compile: bool = option_field(True, "Compile the forward and backward pass with XLA.")
    seed: int = option_field(12345, "Seed of the initialisation, dropout and input shuffling.")
    progress_bar: bool = option_field(False, "Show a progress bar (on the chief).")

    grad_accum_steps = 1  # not a field: for tasks whose options do not declare gradient accumulation
    _positive = ("train_batch_size", "eval_batch_size", "max_seq_length", "num_train_steps",
                 "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop", "grad_accum_steps")

    def __post_init__(self):
        try:
            require_positive_ints({name: getattr(self, name) for name in self._positive})
        except ValueError as error:  # a flag's value (the command line refuses it before: option_flags)
            raise FlagError(str(error)) from None
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            # 0 trains nothing, a negative rate ascends the loss, NaN ruins the weights: and each
            # would still run to the end and export.
            raise FlagError(f"learning_rate must be a positive number, got {self.learning_rate!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise FlagError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        check_warmup(self.num_train_steps, self.num_warmup_steps)
        require_choice("optimizer", self.optimizer, OPTIMIZERS, FlagError)
        require_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION_POLICIES, FlagError)
        if not self.output_dir:
            raise FlagError("output_dir must be given")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingOptions(TrainingOptions):
    """How to pretrain; the defaults are the paper's run (ALBERT.md §4) except `steps_per_loop`.

    `train_batch_size` is the global batch of one update: it is split across replicas, and each
    replica's share into `grad_accum_steps` micro-batches whose gradients are summed before the one
    update. `input_file` and `eval_input_file` are comma-separated globs of pretraining TFRecords,
    evaluated every `eval_every_steps` (None: at every checkpoint) on at most `max_eval_steps`
    batches (None: all). `spm_model_file` is the records' vocabulary: the encoder exported at the
    end carries it (without one, nothing is exported). Where a fresh run's weights start is the
    caller's (`run_pretraining`'s `initialize`), as in fine-tuning.
    """

    input_file: str = option_field("", "Comma-separated globs of pretraining TFRecords.")
    eval_input_file: str = option_field("", "Comma-separated globs of held-out TFRecords, evaluated every "
                                            "--eval_every_steps and at the end.")
    train_batch_size: int = option_field(4096, TRAIN_BATCH_HELP)
    eval_batch_size: int = option_field(64, "Global batch of evaluation.")
    max_predictions_per_seq: int = option_field(20, "Masked positions per record, as written.")
    learning_rate: float = option_field(0.00176, "Peak learning rate (after warmup).")
    num_train_steps: int = option_field(PRETRAINING_STEPS, "Updates in all; the learning rate reaches 0 there.")
    num_warmup_steps: int = option_field(PRETRAINING_WARMUP_STEPS, "Updates of linear warmup.")
    optimizer: str = option_field("lamb", OPTIMIZER_HELP)
    save_checkpoints_steps: int = option_field(5000, "Updates between checkpoints.")
    keep_checkpoint_max: int = option_field(5, "Checkpoints kept.")
    steps_per_loop: int = option_field(100, "Updates per call to the compiled loop (TPUs want many); also the "
                                            "interval of the progress line and summaries.")
    grad_accum_steps: int = option_field(1, "Micro-batches per update: the batch of each replica is split in this many, "
                                      "their gradients summed, and applied once.")
    eval_every_steps: Optional[int] = option_field(None, "Updates between evaluations (default: at every checkpoint).")
    max_eval_steps: Optional[int] = option_field(None, "Evaluate at most this many batches (default: all).")
    spm_model_file: Optional[str] = option_field(None, "The SentencePiece model of the records, kept in --output_dir (a "
                                                 "rerun needs it no more); the encoder is exported at the end only "
                                                 "with one.")

    _positive = TrainingOptions._positive + ("max_predictions_per_seq",)

