"""albert-finetune-glue: fine-tune ALBERT on a GLUE task, evaluate it, predict the test set, export it.

    albert-finetune-glue --task MRPC --data_dir glue_data --init_checkpoint pretrain_run \\
        --output_dir mrpc --do_train --do_eval --do_predict --max_seq_length 128

The learning rate, batch size, steps, warmup, length and the encoder's and classifier's dropout
default to the paper's Table 14 (`--hparams=paper`; finetune/glue/hparams.py) or to the release's
run_glue.sh (`--hparams=release`: the same, but the encoder keeps its config's dropout); each flag
overrides its value. The encoder starts from
`--init_checkpoint` (an albert-pretrain output_dir or checkpoint prefix, an encoder or pretrainer
SavedModel of albert-export, a preset folder or a TF1 checkpoint of the original release), from
`--preset` (a preset folder of albert-convert), or from random weights when only
`--albert_config_file` is given. A rerun with the same `--output_dir` resumes from its latest
checkpoint.

Outputs in `--output_dir`: checkpoints, TensorBoard summaries (`train/`; `eval/`: the dev metrics
at every checkpoint with --do_train --do_eval), `model.ckpt-best` and `best_checkpoint.json` (the
checkpoint of the best dev score, as the release kept), `eval_results.json` (the task's metrics on
each evaluation split), `<split>_predictions.tsv` (each dev row's prediction and label), the GLUE
submission files (`<TASK>.tsv`, official label strings) and `export/` (written after training, or
when missing: a predict-only run leaves it), a SavedModel whose `serve_text` signature takes raw
sentences and returns `probabilities`, the predicted `label` and the `label_names` (`score` for
STS-B).
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli.option_flags import check_values
from finetune import cli as skeleton
from finetune.cli import BEST_CHECKPOINT, BEST_RESULTS, EVAL_RESULTS, EXPORT_DIR  # noqa: F401  (names callers use)

# Its own FlagValues, as every console script here: one process (the tests) may import several.
FLAGS = flags.FlagValues()
flags.DEFINE_string("task", None, "GLUE task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE or WNLI.", flag_values=FLAGS)
flags.DEFINE_string("data_dir", None, "The GLUE data folder (holding <task>/train.tsv, ...) or the task's folder.", flag_values=FLAGS)
flags.DEFINE_bool("skip_bad_rows", False, "Count and skip malformed TSV rows instead of stopping at the first.", flag_values=FLAGS)
skeleton.define_flags(FLAGS, hparams=("paper", "release"), hparams_help=(
    "the paper's Table 14 (with its encoder dropout, ALBERT DR: 0.1 for QQP, RTE and WNLI, else 0) or "
    "the release's run_glue.sh (the same, the encoder's dropout from its config)."))
check_values(FLAGS, paths=("data_dir",))


def make_task(flag_values):
    from albert_tf.utils.errors import FlagError
    from finetune.glue.task import GlueTask
    from finetune.glue.definitions import get_task

    try:
        task = get_task(flag_values.task)
    except ValueError as error:  # --task names no GLUE task: a usage error (exit code 2)
        raise FlagError(str(error)) from None
    return GlueTask(task, flag_values.data_dir, skip_bad_rows=flag_values.skip_bad_rows,
                    hparams=flag_values.hparams, **skeleton.example_limits(flag_values))


# `finetune(argv)`: the command line in this process (returns the summary: `train`, `eval`,
# `predictions`, `export_dir`, `model`); `run()`: the console script. One parser, one main.
finetune, run = skeleton.entry_points(__doc__, FLAGS, make_task, required=("task", "data_dir"))


if __name__ == "__main__":
    run()
