"""albert-fill-mask: fill in the [MASK]s of a sentence with a pretrainer: a SavedModel of one, or any
model source that holds one (a run of albert-pretrain, a release, a pretrainer preset).

Example:
    albert-fill-mask --saved_model runs/demo/export_pretrainer \\
        --text "it was a truth universally [MASK] that a single man ..."
    albert-fill-mask --preset runs/demo/model --text "it was a truth universally [MASK] ..."
"""

from absl import flags

from albert_tf.cli.entry_point import run_main
from albert_tf.cli.option_flags import check_values, define_weights_source_flags, weights_source
from albert_tf.utils.errors import FlagError

FLAGS = flags.FlagValues()
flags.DEFINE_string("saved_model", None, "A pretrainer SavedModel (albert-export --model pretrainer).",
                    flag_values=FLAGS)
define_weights_source_flags(FLAGS, "Instead of --saved_model: the pretrainer")
flags.DEFINE_multi_string("text", None, "Text with one or more [MASK]; repeat the flag for more texts.",
                          flag_values=FLAGS)
flags.DEFINE_integer("top_k", 5, "Candidates shown per [MASK].", lower_bound=1, flag_values=FLAGS)
check_values(FLAGS, paths=("saved_model",))


def main(argv):
    del argv
    source = weights_source(FLAGS)
    if bool(FLAGS.saved_model) == bool(source) or not FLAGS.text:
        raise FlagError("--text and one of --saved_model, --preset and --init_checkpoint are required")
    from albert_tf.serving.fill_mask import fill_mask, model_predictor

    predict, tokenizer = model_predictor(FLAGS.saved_model or source)
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
