"""albert-convert: released ALBERT checkpoints -> a preset folder of ours, and ours -> Hugging Face.

    albert-convert --source tf1 --input albert_base/ --output_dir presets/albert_base_v2
    albert-convert --source hf --input hf_albert_base_v2/ --output_dir presets/albert_base_v2
    albert-convert --source preset --to hf --input presets/mine --output_dir hf_mine/
    albert-convert --source any --input runs/demo/model --output_dir presets/demo
    albert-convert --source any --to hf --input runs/rte --output_dir hf_rte/

With `--source any`, --input is any model source (a released name, a URL, hf://, a run's output_dir,
a SavedModel of albert-export, a release's folder: docs/presets.md), written as a preset folder (its
encoder, heads and vocabulary), or with `--to hf` as a Hugging Face folder.

A TF1 input is the released tarball's folder (albert_config.json, 30k-clean.model,
model.ckpt-best.*); an HF input holds config.json, model.safetensors or pytorch_model.bin and
spiece.model. Optimizer slots and global_step are skipped; any other missing, unexpected or
misshapen tensor stops the conversion with its name.
"""

from absl import flags

from albert_tf.cli.entry_point import run_main
from albert_tf.cli.option_flags import check_values
from albert_tf.utils.errors import FlagError
from albert_tf.utils.locks import locked_run_folder
from albert_tf.utils.output_dirs import prepare_output_dir

FLAGS = flags.FlagValues()  # its own: other scripts define the same names (see entry_point)
flags.DEFINE_enum("source", None, ["tf1", "hf", "preset", "any"], "What --input holds (any: any model source).",
                  flag_values=FLAGS)
flags.DEFINE_enum("to", "preset", ["preset", "hf"], "What to write: a preset of ours, or (from "
                  "--source preset) a Hugging Face folder.", flag_values=FLAGS)
flags.DEFINE_string("input", None, "Input folder (or, for tf1, a checkpoint prefix).", flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Output folder (must not exist or be empty).", flag_values=FLAGS)
flags.DEFINE_bool("exact_gelu_as_tanh", False, "HF only: accept hidden_act 'gelu' (exact GELU) and "
                  "convert it to ALBERT's tanh approximation.", flag_values=FLAGS)
flags.DEFINE_bool("encoder_only", False, "Convert the encoder alone, dropping the pretraining heads "
                  "(e.g. for a masked-LM checkpoint without the sentence-order head).", flag_values=FLAGS)
flags.mark_flags_as_required(["source", "input", "output_dir"], flag_values=FLAGS)
check_values(FLAGS, paths=("input", "output_dir"))


def main(argv):
    del argv
    from albert_tf.presets import convert

    prepare_output_dir(FLAGS.output_dir, create=False, empty=True)  # before any weights are read
    with locked_run_folder(FLAGS.output_dir):  # one run a folder; a failed one leaves nothing
        convert_to(convert)


def convert_to(convert):
    """The conversion the flags ask for, written into the locked --output_dir."""
    from albert_tf.presets.loader import preset_from_source

    if FLAGS.source == "any" and FLAGS.to == "preset":
        path = preset_from_source(FLAGS.input, FLAGS.output_dir)
    elif FLAGS.source in ("preset", "any"):
        if FLAGS.to != "hf":
            raise FlagError("--source preset converts to Hugging Face: pass --to hf")
        if FLAGS.source == "preset":
            path = convert.convert_preset_to_hf(FLAGS.input, FLAGS.output_dir)
        else:
            import tempfile

            with tempfile.TemporaryDirectory() as work:  # the source as a preset, then as Hugging Face's
                path = convert.convert_preset_to_hf(preset_from_source(FLAGS.input, f"{work}/preset"),
                                                    FLAGS.output_dir)
    elif FLAGS.to != "preset":
        raise FlagError(f"--source {FLAGS.source} converts to a preset; convert that preset with "
                        "--source preset --to hf")
    elif FLAGS.source == "tf1":
        path = convert.convert_tf1(FLAGS.input, FLAGS.output_dir, encoder_only=FLAGS.encoder_only)
    else:
        path = convert.convert_hf(FLAGS.input, FLAGS.output_dir, exact_gelu_as_tanh=FLAGS.exact_gelu_as_tanh,
                                  encoder_only=FLAGS.encoder_only)
    print(f"wrote {path}")


def run():
    run_main(main, FLAGS, __doc__)


if __name__ == "__main__":
    run()
