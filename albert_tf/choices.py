"""The named choices of the training tools: strategies, optimizers, mixed-precision policies.

They live here, free of TensorFlow, so that a console script can define its flags (and answer
`--help`) without loading TensorFlow; `albert_tf.strategies`, `albert_tf.optimization` and
`albert_tf.training` use and re-export them.
"""

STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")

OPTIMIZERS = ("lamb", "adamw")

MIXED_PRECISION_POLICIES = {"none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
MIXED_PRECISION_HELP = ("bf16 (TPU, GPUs from Ampere on, recent CPUs), fp16 with dynamic loss scaling "
                        "(older GPUs), or none.")
