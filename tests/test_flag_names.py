"""One vocabulary across the tools, and the original release's flag names as aliases (issue 20, item 8)."""

import pytest

from albert_tf.cli import export, pretrain
from albert_tf.cli.release_flags import apply_release_flags, define_release_flags


def _parse(flag_values, *args):
    flag_values.unparse_flags()
    flag_values(["prog", *args])
    apply_release_flags(flag_values)
    return flag_values


def test_export_names_its_folders_as_the_other_tools_and_only_so():
    """Issue 39: the names of earlier development versions (--output, --checkpoint) are gone."""
    from absl import flags as absl_flags

    try:
        flags = _parse(export.FLAGS, "--output_dir=out", "--init_checkpoint=run")
        assert (flags.output_dir, flags.init_checkpoint) == ("out", "run")
        for old in ("--output=old_out", "--checkpoint=old_run"):
            with pytest.raises(absl_flags.UnrecognizedFlagError):
                _parse(export.FLAGS, old)
    finally:
        export.FLAGS.unparse_flags()


def test_pretraining_takes_the_release_names():
    define_release_flags(pretrain.FLAGS)  # what run_main does before parsing
    try:
        flags = _parse(pretrain.FLAGS, "--train_step=40", "--warmup_step=4", "--iterations_per_loop=7",
                       "--use_tpu", "--tpu_name=my-tpu")
        assert (flags.num_train_steps, flags.num_warmup_steps, flags.steps_per_loop) == (40, 4, 7)
        assert (flags.strategy, flags.tpu) == ("tpu", "my-tpu")
        assert _parse(pretrain.FLAGS).strategy == "one_device"
    finally:
        pretrain.FLAGS.unparse_flags()


def test_glue_takes_the_release_names():
    from finetune.glue import cli

    try:
        flags = _parse(cli.FLAGS, "--task_name=MRPC", "--train_step=40", "--warmup_step=4",
                       "--predict_batch_size=16", "--iterations_per_loop=5")
        assert (flags.task, flags.num_train_steps, flags.num_warmup_steps) == ("MRPC", 40, 4)
        assert (flags.eval_batch_size, flags.steps_per_loop) == (16, 5)
    finally:
        cli.FLAGS.unparse_flags()


def test_the_release_output_file_names_the_output_folder():
    from data_prep import create_pretraining_data

    define_release_flags(create_pretraining_data.FLAGS)
    try:
        assert _parse(create_pretraining_data.FLAGS, "--output_file=records").output_dir == "records"
    finally:
        create_pretraining_data.FLAGS.unparse_flags()


@pytest.mark.parametrize("alias", ["--train_step=3", "--task_name=X"])
def test_an_alias_of_a_flag_the_tool_lacks_is_an_unknown_flag(alias):
    from absl import flags

    define_release_flags(export.FLAGS)
    with pytest.raises(flags.UnrecognizedFlagError):
        _parse(export.FLAGS, alias)
    export.FLAGS.unparse_flags()


def test_convert_names_its_output_folder_as_the_other_tools_and_only_so():
    from absl import flags as absl_flags

    from albert_tf.cli import convert

    try:
        assert _parse(convert.FLAGS, "--source=tf1", "--input=in", "--output_dir=out").output_dir == "out"
        with pytest.raises(absl_flags.UnrecognizedFlagError):
            _parse(convert.FLAGS, "--source=tf1", "--input=in", "--output=out")
    finally:
        convert.FLAGS.unparse_flags()


@pytest.mark.parametrize("tool", ["pretrain", "glue"])
def test_the_option_flags_take_their_defaults_and_help_from_the_option_fields(tool):
    """Issue 39: each default and help text written once, on the option dataclass's field; a tool
    says only where its command line means otherwise."""
    import dataclasses

    from albert_tf.training.options import PretrainingOptions
    from finetune.options import FinetuneOptions
    from finetune.task import HPARAM_FIELDS

    if tool == "pretrain":
        flag_values, options_class = pretrain.FLAGS, PretrainingOptions
        # read from the records' pretraining_data.json, scaled to the steps, or a bar on a terminal
        own = {"input_file": None, "eval_input_file": None, "max_seq_length": None, "max_predictions_per_seq": None,
               "num_warmup_steps": None, "progress_bar": True}
    else:
        from finetune.glue import cli

        flag_values, options_class = cli.FLAGS, FinetuneOptions
        own = {"progress_bar": True, **{name: None for name in HPARAM_FIELDS}}  # the task's hparams fill these
    for field in dataclasses.fields(options_class):
        flag = flag_values[field.name]
        default = None if field.default is dataclasses.MISSING else field.default
        assert flag.default == own.get(field.name, default), field.name
        assert flag.help, field.name
    assert flag_values["jit_compile"].help == "Compile the forward and backward pass with XLA."
    assert flag_values["keep_checkpoint_max"].help == "Checkpoints kept."
