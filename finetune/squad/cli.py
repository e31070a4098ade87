"""albert-finetune-squad: fine-tune ALBERT on SQuAD v1.1 or v2.0, predict and score a file, export it.

    albert-finetune-squad --train_file train-v1.1.json --predict_file dev-v1.1.json \\
        --init_checkpoint pretrain_run --output_dir squad1 --do_train --do_predict
    albert-finetune-squad --version_2_with_negative --train_file train-v2.0.json \\
        --predict_file dev-v2.0.json --preset albert_base --output_dir squad2 --do_train --do_predict

The flags are the release's (run_squad_v1/v2.py): `--do_predict` answers every question of
`--predict_file` and scores the answers with the official metrics (as `--do_eval` does). The
learning rate, batch, steps, warmup, length and the encoder's and classifier's dropout default to
the paper's Table 14 (`--hparams=paper`: v1.1 5e-5, 48, 3,649, 365, 384 tokens; v2.0 3e-5, 48,
8,144, 814, 512 tokens; encoder dropout 0, classifier 0.1) or to the release's README commands
(`--hparams=release`: 5e-5, 48, 2 epochs with 10% warmup, 384 tokens, the encoder's dropout from its
config: v1.1 3,649 and 364 steps, v2.0 5,429 and 542); each flag overrides its value.

Outputs in `--output_dir`: checkpoints, `predictions.json` (question id -> answer),
`nbest_predictions.json`, `null_odds.json` (v2.0: the no-answer logit of each question),
`eval_results.json` (v1.1: exact_match, f1; v2.0: exact, f1, HasAns_*, NoAns_*, best_exact,
best_f1 and their thresholds, and the null_score_diff_threshold applied) and `export/`, a
SavedModel whose `serve_text(question, context)` returns the answer text, its character start and
end, its score and (v2.0) the no-answer probability.
"""

from __future__ import annotations

from absl import app, flags

from albert_tf.data.windows import ANSWER_RULES, RELEASE_ANSWERS
from finetune import cli as skeleton

FLAGS = flags.FlagValues()
flags.DEFINE_string("train_file", None, "SQuAD JSON to train on (train-v1.1.json, train-v2.0.json).", flag_values=FLAGS)
flags.DEFINE_string("predict_file", None, "SQuAD JSON to answer and score (dev-v1.1.json, dev-v2.0.json).",
                    flag_values=FLAGS)
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer "
                  "(is_impossible); the answerability head is trained and a no-answer threshold applied.",
                  flag_values=FLAGS)
flags.DEFINE_integer("doc_stride", 128, "Pieces between the starts of two windows of a long context.", flag_values=FLAGS)
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept (the first ones).", flag_values=FLAGS)
flags.DEFINE_integer("n_best_size", 20, "Candidates per question in nbest_predictions.json (and start/end "
                     "logits paired, v1.1).", flag_values=FLAGS)
flags.DEFINE_integer("export_top_k", 5, "Answers of the n-best list the exported SavedModel returns with their "
                     "probabilities and offsets (top_k_text, top_k_probability, ...; docs/squad.md); at most "
                     "--n_best_size.", flag_values=FLAGS)
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.", flag_values=FLAGS)
flags.DEFINE_integer("start_n_top", 5, "v2.0: starts kept by the beam.", flag_values=FLAGS)
flags.DEFINE_integer("end_n_top", 5, "v2.0: ends kept for each start.", flag_values=FLAGS)
flags.DEFINE_enum("answer_rule", None, list(ANSWER_RULES), "v1.1: how the span head's logits become answers, "
                  "offline and exported (and recorded in task.json): the release's (start + end logit), or "
                  "transformers' question-answering pipeline's (per-window softmax, whole words, docs/serving.md). "
                  "Default: the rule the --preset or --init_checkpoint records (transformers' for an hf:// or "
                  "Hugging Face folder of an AlbertForQuestionAnswering, a run's own for a run's folder), the "
                  "release's where it records none and for v2.0.", flag_values=FLAGS)
flags.DEFINE_float("null_score_diff_threshold", None, "v2.0: answer \"\" where the null odds reach this "
                   "(default: the release's, the threshold that maximises F1 on --predict_file).", flag_values=FLAGS)
skeleton.define_flags(FLAGS, hparams=("paper", "release"), hparams_help=(
    "the paper's Table 14 or the release's README commands (v2.0: 5e-5, 5,429 steps, 384 tokens; "
    "the encoder's dropout from its config)."))


def make_task(flag_values):
    """The SquadTask of the flags, once they agree with each other."""
    F = flag_values
    if F.do_train and not F.train_file:
        raise app.UsageError("--do_train needs --train_file")
    if (F.do_eval or F.do_predict) and not F.predict_file:
        raise app.UsageError("--do_predict needs --predict_file")
    for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "start_n_top", "end_n_top",
                 "export_top_k"):
        if F[name].value < 1:
            raise app.UsageError(f"--{name} must be positive, got {F[name].value}")
    from finetune.squad.features import FeatureSettings
    from finetune.squad.task import SquadTask

    limits = skeleton.example_limits(F)
    # The release's --do_predict scores --predict_file (the skeleton's evaluation, below): so
    # --max_predict_examples limits it when --max_eval_examples does not.
    max_examples = limits["max_eval_examples"] or limits["max_predict_examples"]
    if F.answer_rule not in (None, RELEASE_ANSWERS) and F.version_2_with_negative:
        raise app.UsageError(f"--answer_rule={F.answer_rule} reads a v1.1 span head: drop --version_2_with_negative")
    task = SquadTask(F.train_file, F.predict_file, F.version_2_with_negative, F.doc_stride, F.max_query_length,
                     F.n_best_size, F.max_answer_length, F.start_n_top, F.end_n_top, F.null_score_diff_threshold,
                     F.hparams, F.export_top_k, max_examples, answer_rule(F))
    try:  # before anything is read or written: the lengths leave room for a context
        FeatureSettings(F.max_seq_length or task.default_options()["max_seq_length"], F.doc_stride,
                        F.max_query_length)
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    return task


def answer_rule(flag_values) -> str:
    """--answer_rule, else the rule the run's source records (`hf_heads.answer_rule` of its task.json,
    as albert-export reads it): the source that `finetune.cli` initialises from (--preset,
    --init_checkpoint, or the output_dir a run resumes or predicts from), the release's where it
    records none, and always for v2.0 (its head is this package's)."""
    F = flag_values
    if F.answer_rule is not None:
        return F.answer_rule
    if F.version_2_with_negative:
        return RELEASE_ANSWERS
    from albert_tf.presets.hf_heads import answer_rule as recorded_rule

    name = F.preset or F.init_checkpoint
    if not name:  # random weights, or a run resumed or predicting from its output_dir: its task.json
        from albert_tf.checkpoints.run_folder import read_task_file

        recorded = read_task_file(F.output_dir) if F.output_dir else None
        return recorded_rule(recorded if isinstance(recorded, dict) else None)
    from albert_tf.presets import registry

    if name in registry.RELEASES:  # the release's pretraining heads: no download to learn that
        return RELEASE_ANSWERS
    from albert_tf.presets.model_source import open_source
    from albert_tf.serving.task_exports import run_info

    return recorded_rule(run_info(open_source(name)))  # fetched and converted once, as the run then reads it


def actions(flag_values) -> skeleton.Actions:
    """The release's --do_predict answers --predict_file and scores it: that is the skeleton's
    evaluation (--do_eval says the same)."""
    F = flag_values
    score = F.do_eval or F.do_predict
    if not (F.do_train or score):
        raise app.UsageError("give at least one of --do_train and --do_predict")
    return skeleton.Actions(F.do_train, score, False, tuple(name for name in ("do_eval", "do_predict") if F[name].value))


# `finetune(argv)`: the command line in this process (returns the summary: `train`, `eval`,
# `predictions`, `export_dir`, `model`); `run()`: the console script. One parser, one main.
finetune, run = skeleton.entry_points(__doc__, FLAGS, make_task, actions=actions)


if __name__ == "__main__":
    run()
