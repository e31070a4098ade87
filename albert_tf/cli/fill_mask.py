"""albert-fill-mask: fill in the [MASK]s of a sentence with a pretrainer SavedModel.

Example:
    albert-fill-mask --saved_model runs/demo/export_pretrainer \\
        --text "it was a truth universally [MASK] that a single man ..."
"""

from absl import flags

from albert_tf.cli.entry_point import run_main
from albert_tf.cli.option_flags import check_values
from albert_tf.utils.errors import FlagError

FLAGS = flags.FlagValues()
flags.DEFINE_string("saved_model", None, "A pretrainer SavedModel (albert-export --model pretrainer).",
                    flag_values=FLAGS)
flags.DEFINE_multi_string("text", None, "Text with one or more [MASK]; repeat the flag for more texts.",
                          flag_values=FLAGS)
flags.DEFINE_integer("top_k", 5, "Candidates shown per [MASK].", lower_bound=1, flag_values=FLAGS)
check_values(FLAGS, paths=("saved_model",))


def main(argv):
    del argv
    if not FLAGS.saved_model or not FLAGS.text:
        raise FlagError("--saved_model and --text are required")
    from albert_tf.serving.fill_mask import fill_mask, saved_model_predictor

    predict, tokenizer = saved_model_predictor(FLAGS.saved_model)
    for text in FLAGS.text:
        candidates = fill_mask(text, predict, tokenizer, FLAGS.top_k)
        filled = text
        for options in candidates:
            filled = filled.replace("[MASK]", f"[{options[0][0].lstrip('▁')}]", 1)
        print(f"\n{text}\n-> {filled}")
        for n, options in enumerate(candidates, 1):
            shown = ", ".join(f"{piece.lstrip('▁') or piece} {p:.2f}" for piece, p in options)
            print(f"   [MASK] {n}: {shown}")


def run():
    run_main(main, FLAGS, __doc__)


if __name__ == "__main__":
    run()
