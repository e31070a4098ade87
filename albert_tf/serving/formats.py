"""What an export may be, and the one check of a combination: free of TensorFlow, so that every
tool defines its `--format`, `--quantization` and `--precision` flags from these (and answers
`--help`) without loading it.

`albert-export`, the fine-tuning tools (`finetune.cli`) and the library's exports
(`albert_tf.serving.export.at_precision`, `finetune.task.FinetuningTask.export`) all call
`check_export_settings`, so a refusal reads the same one line from every door.

Example:
    >>> check_export_settings("litert", precision="bfloat16")
    Traceback (most recent call last):
    FlagError: --precision=bfloat16 is for SavedModels: LiteRT has no bfloat16 kernels (pick ...)
"""

from __future__ import annotations

from albert_tf.utils.errors import FlagError
from albert_tf.utils.validation import require_choice

# The exports' formats (albert_tf.serving.export: SavedModels; albert_tf.serving.litert: LiteRT models).
EXPORT_FORMATS = ("saved_model", "litert")
# A LiteRT model's quantizations (albert_tf.serving.litert).
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "full_int8")
# A SavedModel's serving precision (albert_tf.serving.export.at_precision).
PRECISIONS = ("float32", "bfloat16")


def check_export_settings(format: str = "saved_model", quantization: str = "none",
                          precision: str = "float32") -> None:
    """Raises FlagError (one line naming the flag) unless `format`, `quantization` and `precision`
    are known and go together: a quantization is LiteRT's, a precision other than float32 a
    SavedModel's (LiteRT has no bfloat16 kernels; its smaller weights are its quantizations)."""
    for name, value, allowed in (("format", format, EXPORT_FORMATS), ("quantization", quantization, QUANTIZATIONS),
                                 ("precision", precision, PRECISIONS)):
        require_choice(f"--{name}", value, allowed, FlagError)
    if format == "litert" and precision != "float32":
        raise FlagError(f"--precision={precision} is for SavedModels: LiteRT has no {precision} kernels "
                        "(pick --quantization=float16 or dynamic_int8 for smaller weights)")
    if format != "litert" and quantization != "none":
        raise FlagError("--quantization is for --format=litert")
