"""`finetune.run.run_finetuning`: a fine-tuning run as a library call, the one the console scripts
make (issue 51 item 1). Called with options and a source, it gives what the command line gives."""

import json

import pytest

from albert_tf.checkpoints.run_folder import RUN_VOCAB
from albert_tf.presets.loader import find_source
from albert_tf.training.strategies import get_strategy
from finetune import cli, run as finetune_run
from tests.finetune.test_layer import CONFIG, SEQ, TINY_VOCAB, _DevTask, _flag_values, _options


def test_the_library_run_is_the_command_lines(tmp_path):
    config_file = tmp_path / "config.json"
    CONFIG.to_json_file(config_file)
    flags_given = [f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}", f"--max_seq_length={SEQ}",
                   "--train_batch_size=8", "--num_train_steps=20", "--num_warmup_steps=4", "--learning_rate=2e-3",
                   "--classifier_dropout=0", "--save_checkpoints_steps=10", "--steps_per_loop=10", "--eval_batch_size=8",
                   "--jit_compile=false", "--seed=3", "--progress_bar=false", "--export=false", "--do_train", "--do_eval"]
    by_flags = cli.finetune(["prog", f"--output_dir={tmp_path / 'cli'}", *flags_given], _flag_values(),
                            lambda flag_values: _DevTask(num_examples=24))

    options = _options(tmp_path / "library", num_train_steps=20, save_checkpoints_steps=10, steps_per_loop=10,
                       progress_bar=False)
    parsed = _flag_values()
    parsed(["prog", f"--output_dir={tmp_path / 'library'}", *flags_given])
    assert options == cli.options_from_flags(parsed, _DevTask())  # the same run, told without flags
    source = find_source(albert_config_file=str(config_file))
    assert source.kind == "random"
    by_call = finetune_run.run_finetuning(_DevTask(num_examples=24), options, source, str(TINY_VOCAB),
                                          actions=finetune_run.Actions(train=True, eval=True, predict=False),
                                          strategy=get_strategy("one_device"), export=None)

    assert by_call["train"]["step"] == by_flags["train"]["step"] == 20
    assert by_call["eval"]["dev"]["accuracy"] == pytest.approx(by_flags["eval"]["dev"]["accuracy"], abs=1e-6)
    assert by_call["train"]["train"]["loss"] == pytest.approx(by_flags["train"]["train"]["loss"], rel=1e-5)
    assert by_call["export_dir"] is by_flags["export_dir"] is None
    for name in ("cli", "library"):  # the best checkpoint and the results, the run's vocabulary kept
        folder = tmp_path / name
        assert (folder / f"{finetune_run.BEST_CHECKPOINT}.index").is_file() and (folder / RUN_VOCAB).is_file()
        assert json.loads((folder / finetune_run.EVAL_RESULTS).read_text())["global_step"] == 20
    best = [json.loads((tmp_path / name / finetune_run.BEST_RESULTS).read_text()) for name in ("cli", "library")]
    assert best[0]["global_step"] == best[1]["global_step"]
    assert best[0]["value"] == pytest.approx(best[1]["value"], abs=1e-6)


def test_the_library_refuses_what_the_command_line_refuses(tmp_path):
    options = _options(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"^--do_eval without --do_train needs a fine-tuned model, and --output_dir "):
        finetune_run.run_finetuning(_DevTask(), options, None, str(TINY_VOCAB),  # refused before the source is read
                                    actions=finetune_run.Actions(train=False, eval=True, predict=False))
    assert not (tmp_path / "empty").exists()
