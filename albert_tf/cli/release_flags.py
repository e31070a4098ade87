"""The original google-research/albert release's flag names, accepted beside ours.

Where our name differs, the release's is an alias of ours (absl `DEFINE_alias`: either name sets
the same flag), so the release's command lines run unchanged. `--use_tpu` (a bool in the release)
means `--strategy=tpu`, and `--tpu_name` is `--tpu`. A script gets the aliases of the flags it has.
"""

from __future__ import annotations

from absl import flags

# The release's name -> ours (run_pretraining.py, run_classifier.py, run_squad.py, run_race.py,
# create_pretraining_data.py).
RELEASE_NAMES = {
    "task_name": "task",
    "train_step": "num_train_steps",
    "warmup_step": "num_warmup_steps",
    "iterations_per_loop": "steps_per_loop",
    "tpu_name": "tpu",
    "predict_batch_size": "eval_batch_size",
    "output_file": "output_dir",
}


def define_release_flags(flag_values: flags.FlagValues) -> None:
    """Defines, in `flag_values`, the release's names of the flags it holds, and `--use_tpu`."""
    for release, ours in RELEASE_NAMES.items():
        if ours in flag_values and release not in flag_values:
            flags.DEFINE_alias(release, ours, flag_values=flag_values)
    if "strategy" in flag_values and "use_tpu" not in flag_values:
        flags.DEFINE_bool("use_tpu", False, "The release's name for --strategy=tpu.", flag_values=flag_values)


def apply_release_flags(flag_values: flags.FlagValues) -> None:
    """After parsing: `--use_tpu` sets `--strategy=tpu`."""
    if "use_tpu" in flag_values and flag_values["use_tpu"].value:
        flag_values["strategy"].value = "tpu"
