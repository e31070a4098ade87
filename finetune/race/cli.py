"""albert-finetune-race: fine-tune ALBERT on RACE, evaluate it per level, predict, export it.

    albert-finetune-race --data_dir RACE --init_checkpoint pretrain_run --output_dir race \\
        --do_train --do_eval

`--data_dir` holds the release's split folders `train/`, `dev/` (evaluated with --do_eval) and
`test/` (predicted with --do_predict), each with `middle/` and `high/`; `--train_data`,
`--eval_data` and `--predict_data` give a split another path (a split folder, one level's folder or
one passage file). The learning rate, batch, steps, warmup and length default to the paper's
(`--hparams v2`: 1e-5, 32, 12,000, 1,000, 512 tokens; `v1`: 2e-5); each flag overrides its value.

Outputs in `--output_dir`: checkpoints, TensorBoard summaries, `eval_results.json` (accuracy
overall and per level, the loss), `predictions_<split>.jsonl` (per question its id, predicted
letter and the four probabilities) and `export/`, a SavedModel whose `serve_text` takes an
article, a question and four options as strings and returns the probabilities and the letter.
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli.option_flags import check_values
from finetune import cli as skeleton

FLAGS = flags.FlagValues()
flags.DEFINE_string("data_dir", None, "The RACE folder holding train/, dev/ and test/ (each with middle/ and high/).",
                    flag_values=FLAGS)
flags.DEFINE_string("train_data", None, "The training split's path instead of <data_dir>/train: a split folder, "
                    "one level's folder or one passage file.", flag_values=FLAGS)
flags.DEFINE_string("eval_data", None, "The evaluation split's path instead of <data_dir>/dev.", flag_values=FLAGS)
flags.DEFINE_string("predict_data", None, "The prediction split's path instead of <data_dir>/test.",
                    flag_values=FLAGS)
flags.DEFINE_integer("max_qa_length", 128, "Pieces kept of each question+option (its last ones), as released.",
                     flag_values=FLAGS)
flags.DEFINE_multi_enum("levels", ["middle", "high"], ["middle", "high"], "The levels read (the release's "
                        "--middle_only and --high_only).", flag_values=FLAGS)
skeleton.define_flags(FLAGS, hparams=("v2", "v1"), hparams_help=(
    "the paper's RACE rows, v2 (learning rate 1e-5) or v1 (2e-5); both batch 32, 12,000 steps, 1,000 warmup, "
    "512 tokens."))
check_values(FLAGS, paths=("data_dir", "train_data", "eval_data", "predict_data"))


def make_task(flag_values):
    from albert_tf.utils.errors import FlagError
    from finetune.race.features import check_lengths
    from finetune.race.task import HPARAMS, RaceTask

    try:
        check_lengths(flag_values.max_seq_length or HPARAMS[flag_values.hparams].max_seq_length,
                      flag_values.max_qa_length)
    except ValueError as error:  # the two flags disagree: a usage error (exit code 2)
        raise FlagError(str(error)) from None
    paths = {"train": flag_values.train_data, "dev": flag_values.eval_data, "test": flag_values.predict_data}
    return RaceTask(flag_values.data_dir, max_qa_length=flag_values.max_qa_length, levels=flag_values.levels,
                    split_paths=paths, hparams=flag_values.hparams, **skeleton.example_limits(flag_values))


# `finetune(argv)`: the command line in this process (returns the summary: `train`, `eval`,
# `predictions`, `export_dir`, `model`); `run()`: the console script. One parser, one main.
finetune, run = skeleton.entry_points(__doc__, FLAGS, make_task)


if __name__ == "__main__":
    run()
