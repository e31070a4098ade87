"""What a training run is told, and the values each choice allows: free of TensorFlow, so that a
console script defines its flags from these fields (and answers `--help`) without loading it.

`TrainingOptions` holds the fields the loop (`albert_tf.training`) reads; `PretrainingOptions`
extends it with pretraining's (`albert_tf.pretraining`), `finetune.options.FinetuneOptions` with
fine-tuning's. Each field's default is written here once: the flags of albert-pretrain and of the
fine-tuning tools are generated from the fields (`albert_tf.cli.option_flags`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from albert_tf.errors import FlagError
from albert_tf.validation import require_positive_ints

# The tf.distribute strategies `albert_tf.strategies.get_strategy` makes.
STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")
# --strategy=multi_worker: a worker not heard from for this long is taken as lost (albert_tf.strategies;
# TensorFlow's own default of 10 s would end a job on a long pause of a busy host).
WORKER_TIMEOUT_S = 60.0

# The optimizers `albert_tf.optimization` builds.
OPTIMIZERS = ("lamb", "adamw")

MIXED_PRECISION_POLICIES = {"none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
MIXED_PRECISION_HELP = ("bf16 (TPU, GPUs from Ampere on, recent CPUs), fp16 with dynamic loss scaling "
                        "(older GPUs), or none.")

# The exports' formats and a LiteRT model's quantizations (albert_tf.export, albert_tf.litert).
EXPORT_FORMATS = ("saved_model", "litert")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "full_int8")

# The paper's pretraining schedule: 3,125 warmup updates of 125,000.
PRETRAINING_STEPS, PRETRAINING_WARMUP_STEPS = 125_000, 3_125


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
    """How to run the loop: the fields that `TrainingLoop` and `run_loop` read, checked here.

    A task's options extend it with their own fields (and, where the task's run differs, their own
    defaults): `PretrainingOptions`, `finetune.options.FinetuneOptions`. The defaults here are a
    short fine-tuning run's (the release's run_classifier.py).

    `train_batch_size` and `eval_batch_size` are global batches, split across replicas (and, for a
    task whose options declare `grad_accum_steps`, each replica's share into that many
    micro-batches whose gradients are summed before the one update). The learning rate warms up
    linearly over `num_warmup_steps` to `learning_rate` and decays linearly to 0 at
    `num_train_steps`. A checkpoint is written every `save_checkpoints_steps` and at the end, the
    newest `keep_checkpoint_max` kept; `steps_per_loop` updates run in one compiled call.
    """

    output_dir: str
    train_batch_size: int = 32
    eval_batch_size: int = 32
    max_seq_length: int = 512
    learning_rate: float = 2e-5
    num_train_steps: int = 800
    num_warmup_steps: int = 200
    weight_decay: float = 0.01
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 3
    steps_per_loop: int = 50
    mixed_precision: str = "none"
    jit_compile: bool = True
    seed: int = 12345
    progress_bar: bool = False

    grad_accum_steps = 1  # not a field: for tasks whose options do not declare gradient accumulation
    _positive = ("train_batch_size", "eval_batch_size", "max_seq_length", "num_train_steps",
                 "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop", "grad_accum_steps")

    def __post_init__(self):
        require_positive_ints({name: getattr(self, name) for name in self._positive})
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            # 0 trains nothing, a negative rate ascends the loss, NaN ruins the weights: and each
            # would still run to the end and export.
            raise FlagError(f"learning_rate must be a positive number, got {self.learning_rate!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise FlagError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        check_warmup(self.num_train_steps, self.num_warmup_steps)
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise FlagError(
                f"mixed_precision must be one of {', '.join(MIXED_PRECISION_POLICIES)}, "
                f"got {self.mixed_precision!r}"
            )
        if not self.output_dir:
            raise FlagError("output_dir must be given")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingOptions(TrainingOptions):
    """How to pretrain; the defaults are the paper's run (ALBERT.md §4) except `steps_per_loop`.

    `train_batch_size` is the global batch of one update: it is split across replicas, and each
    replica's share into `grad_accum_steps` micro-batches whose gradients are summed before the one
    update. `input_file` and `eval_input_file` are comma-separated globs of pretraining TFRecords,
    evaluated every `eval_every_steps` (None: at every checkpoint) on at most `max_eval_steps`
    batches (None: all). `init_checkpoint` is where a fresh run's weights start (a run folder, a
    checkpoint or a preset; None: the seed's). `spm_model_file` is the records' vocabulary: the
    encoder exported at the end carries it (without one, nothing is exported).
    """

    input_file: str = ""
    eval_input_file: str = ""
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    max_predictions_per_seq: int = 20
    learning_rate: float = 0.00176
    num_train_steps: int = PRETRAINING_STEPS
    num_warmup_steps: int = PRETRAINING_WARMUP_STEPS
    optimizer: str = "lamb"
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    steps_per_loop: int = 100
    grad_accum_steps: int = 1
    init_checkpoint: Optional[str] = None
    eval_every_steps: Optional[int] = None
    max_eval_steps: Optional[int] = None
    spm_model_file: Optional[str] = None

    _positive = TrainingOptions._positive + ("max_predictions_per_seq",)

    def __post_init__(self):
        super().__post_init__()
        if self.optimizer not in OPTIMIZERS:
            raise FlagError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
