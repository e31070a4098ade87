"""Short runs keep the recipe's warmup ratio instead of failing on its warmup (issue 20, item 5)."""

import pytest
from absl import app

from albert_tf.training import options
from albert_tf.cli import pretrain
from albert_tf.utils.errors import FlagError
from tests.conftest import REPO_ROOT  # noqa: F401 (the repository on the path)


def test_scaled_warmup_keeps_the_ratio_within_the_run():
    assert options.scaled_warmup_steps(125_000, 125_000, 3_125) == 3_125
    assert options.scaled_warmup_steps(40, 125_000, 3_125) == 1  # 2.5% of 40
    assert options.scaled_warmup_steps(40, 800, 200) == 10  # MRPC's 200 of 800
    assert options.scaled_warmup_steps(3, 10, 10) == 3


def _pretrain_flags(*args):
    pretrain.FLAGS.unparse_flags()
    pretrain.FLAGS(["albert-pretrain", *args])


def test_pretraining_warmup_follows_the_steps_unless_given():
    _pretrain_flags("--num_train_steps=40")
    assert pretrain.warmup_steps() == 1
    _pretrain_flags()
    assert pretrain.warmup_steps() == 3125  # the paper's run
    _pretrain_flags("--num_train_steps=40", "--num_warmup_steps=7")
    assert pretrain.warmup_steps() == 7
    _pretrain_flags("--num_train_steps=40", "--num_warmup_steps=200")
    with pytest.raises(FlagError, match=r"^--num_warmup_steps=200 must be between 0 and --num_train_steps=40$"):
        pretrain.warmup_steps()
    pretrain.FLAGS.unparse_flags()


def test_finetuning_warmup_follows_the_steps_unless_given(small_data_dir):
    from finetune import cli as skeleton
    from finetune.glue import cli

    def options(*args):
        cli.FLAGS.unparse_flags()
        cli.FLAGS(["albert-finetune-glue", "--task=MRPC", f"--data_dir={small_data_dir / 'glue'}",
                   "--output_dir=unused", *args])
        return skeleton.options_from_flags(cli.FLAGS, cli.make_task(cli.FLAGS))

    try:
        short = options("--num_train_steps=40")
        assert (short.num_train_steps, short.num_warmup_steps) == (40, 10)  # the preset's 200 of 800
        recipe = options()
        assert (recipe.num_train_steps, recipe.num_warmup_steps) == (800, 200)
        assert options("--num_train_steps=40", "--num_warmup_steps=0").num_warmup_steps == 0
        with pytest.raises(app.UsageError, match="--num_warmup_steps=200 must be between 0 and --num_train_steps=40"):
            options("--num_train_steps=40", "--num_warmup_steps=200")
    finally:
        cli.FLAGS.unparse_flags()
