"""The named choices of the training tools: strategies, optimizers, mixed-precision policies.

They live here, free of TensorFlow, so that a console script can define its flags (and answer
`--help`) without loading TensorFlow; `albert_tf.strategies`, `albert_tf.optimization` and
`albert_tf.training` use them.
"""

STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")

OPTIMIZERS = ("lamb", "adamw")

# The paper's pretraining schedule: 3,125 warmup updates of 125,000.
PRETRAINING_STEPS, PRETRAINING_WARMUP_STEPS = 125_000, 3_125


def scaled_warmup_steps(num_train_steps: int, reference_steps: int, reference_warmup_steps: int) -> int:
    """Warmup for a run of `num_train_steps` at the reference schedule's ratio (at least 0, at
    most the run): a short run keeps the recipe's shape instead of failing on its warmup."""
    if reference_steps <= 0:
        return 0
    return max(0, min(num_train_steps, round(num_train_steps * reference_warmup_steps / reference_steps)))


MIXED_PRECISION_POLICIES = {"none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
MIXED_PRECISION_HELP = ("bf16 (TPU, GPUs from Ampere on, recent CPUs), fp16 with dynamic loss scaling "
                        "(older GPUs), or none.")

# --strategy=multi_worker: a worker not heard from for this long is taken as lost (albert_tf.strategies;
# TensorFlow's own default of 10 s would end a job on a long pause of a busy host).
WORKER_TIMEOUT_S = 60.0

# The exports' formats and a LiteRT model's quantizations (albert_tf.export, albert_tf.litert).
EXPORT_FORMATS = ("saved_model", "litert")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "full_int8")
# A SavedModel's serving precision (`albert_tf.export.at_precision`); LiteRT's is its quantization.
PRECISIONS = ("float32", "bfloat16")
