"""A run resumed with other training flags than its checkpoints' (issue 52 item 6): refused in one line
naming each flag, old and new (exit code 2, the folder untouched), unless --allow_changed_flags; a
longer --num_train_steps trains on without a word, an evaluation at another length is no resume, and a
run folder from before `settings.json` resumes as before and records it.
"""

import dataclasses
import json
import logging
import os

import pytest

from albert_tf.checkpoints import run_folder
from albert_tf.utils.errors import FlagError
from albert_tf.cli import pretrain
from albert_tf.training import pretraining
from finetune.glue import cli as glue_cli
from tests.helpers import cli_flags, console_script, latest_step, write_random_records
from tests.pretrained_runs import glue_mrpc_flags, glue_mrpc_two_steps
from tests.shared_builds import copy_of

pytestmark = pytest.mark.faults

ALLOW = "(pass --allow_changed_flags to go on with the new values)"


def _files(folder):
    """Every file under `folder` with its size and modification time: what a refused run must not change."""
    return {os.path.relpath(os.path.join(root, name), folder): (os.stat(os.path.join(root, name)).st_size,
                                                                os.stat(os.path.join(root, name)).st_mtime_ns)
            for root, _, names in os.walk(folder) for name in names}


def _settings(folder):
    return json.loads((folder / run_folder.SETTINGS_FILE).read_text())


def test_pretraining_resumed_with_other_flags_is_refused_naming_them_unless_allowed(tmp_path, monkeypatch, capsys,
                                                                                      caplog):
    write_random_records(tmp_path / "train-0.tfrecord", 48)
    out = tmp_path / "run"

    def pretrain_run(steps, *more, **changes):
        argv = ["albert-pretrain", *cli_flags(tmp_path, out, steps, **changes), *more]
        code, _, err = console_script(pretrain.run, argv, monkeypatch, capsys)
        return code, err.strip().splitlines()

    code, err = pretrain_run(2)
    assert code == 0, err[-20:]
    assert _settings(out)["learning_rate"] == 0.02 and _settings(out)["train_batch_size"] == 8
    # A longer run trains on from the finished one without a word (run_demo.sh's DEMO_STEPS).
    caplog.clear()
    assert pretrain_run(4)[0] == 0 and latest_step(out) == 4
    assert not [r for r in caplog.records if run_folder.SETTINGS_FILE in r.getMessage() or "resuming with" in r.getMessage()]

    kept = _files(out)
    built = []  # the refusal comes with the folder's other checks, before any model or optimizer is built
    build_model = pretraining.PretrainingTask.build_model
    monkeypatch.setattr(pretraining.PretrainingTask, "build_model", lambda *a: built.append(1) or build_model(*a))
    code, err = pretrain_run(6, learning_rate=0.03, train_batch_size=4)
    assert (code, err[-1]) == (2, f"error: {out}: this run was started with --learning_rate=0.02 --train_batch_size=8; "
                                  f"resuming with --learning_rate=0.03 --train_batch_size=4 {ALLOW}")
    assert _files(out) == kept  # no checkpoint, summary, settings or vocabulary written
    assert built == []

    caplog.clear()
    code, err = pretrain_run(6, "--allow_changed_flags", learning_rate=0.03)
    assert code == 0, err[-20:]
    assert latest_step(out) == 6 and _settings(out)["learning_rate"] == 0.03
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "resuming with" in r.getMessage()] \
        == [f"{out}: this run was started with --learning_rate=0.02; resuming with --learning_rate=0.03 "
            "(--allow_changed_flags: going on with the new values)"]


def test_a_run_folder_without_settings_resumes_and_records_them(tmp_path):
    """A run folder of a version before settings.json: its checkpoints resume with any flags, once."""
    from finetune.options import FinetuneOptions

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (tmp_path / "ckpt-2.index").write_bytes(b"")  # what tf.train.latest_checkpoint looks for
    options = FinetuneOptions(output_dir=str(tmp_path), learning_rate=1e-3, train_batch_size=8, max_seq_length=64,
                              num_train_steps=10, num_warmup_steps=1, seed=3)
    run_folder.check_run_settings(str(tmp_path), options, write=True)
    assert _settings(tmp_path) == {"learning_rate": 1e-3, "train_batch_size": 8, "max_seq_length": 64,
                                   "optimizer": "adamw_release", "weight_decay": 0.01, "seed": 3,
                                   "mixed_precision": "none", "classifier_dropout": 0.1, "encoder_dropout": None,
                                   "max_train_examples": None, "group_by_length": True}
    # Steps, warmup and how the run is carried out are no settings of its training.
    longer = dataclasses.replace(options, num_train_steps=20, num_warmup_steps=2, steps_per_loop=5, jit_compile=False)
    run_folder.check_run_settings(str(tmp_path), longer, write=True)
    other = dataclasses.replace(options, optimizer="lamb", encoder_dropout=0.0)
    with pytest.raises(FlagError) as refused:
        run_folder.check_run_settings(str(tmp_path), other, write=True)
    assert (str(refused.value), refused.value.exit_code) == (
        f"{tmp_path}: this run was started with --optimizer=adamw_release no --encoder_dropout; resuming with "
        f"--optimizer=lamb --encoder_dropout=0.0 {ALLOW}", 2)
    # Without checkpoints the record protects nothing (a first run that failed before its first save).
    (tmp_path / "checkpoint").unlink()
    run_folder.check_run_settings(str(tmp_path), other, write=True)
    assert _settings(tmp_path)["optimizer"] == "lamb"


def test_finetuning_resumed_with_other_flags_is_refused_and_an_evaluation_is_no_resume(tmp_path, small_data_dir,
                                                                                        tmp_path_factory, monkeypatch,
                                                                                        capsys):
    # The first run, two steps of `--do_train --num_train_steps=2`, is the session's (tests/pretrained_runs.py).
    shared = glue_mrpc_two_steps(tmp_path_factory, small_data_dir / "glue")
    out = copy_of(shared / "run", tmp_path / "run")
    args = glue_mrpc_flags(small_data_dir / "glue", out, shared / "config.json")

    def glue(*more):
        code, _, err = console_script(glue_cli.run, [*args, *more], monkeypatch, capsys)
        return code, err.strip().splitlines()

    assert latest_step(out) == 2 and _settings(out)["max_train_examples"] == 32
    kept = _files(out)
    code, err = glue("--do_train", "--num_train_steps=4", "--learning_rate=1e-4", "--nogroup_by_length")
    # GLUE's recipe gave the first run its learning rate (the paper's for MRPC).
    first = _settings(out)["learning_rate"]
    assert (code, err[-1]) == (2, f"error: {out}: this run was started with --learning_rate={first} "
                                  f"--group_by_length=true; resuming with --learning_rate=0.0001 "
                                  f"--group_by_length=false {ALLOW}")
    assert _files(out) == kept
    # Evaluating at another length trains nothing: no settings of training are compared.
    code, err = glue("--do_eval", "--max_seq_length=24", "--max_eval_examples=8")
    assert code == 0, err[-20:]
    assert json.loads((out / "eval_results.json").read_text())["dev"]["examples"] == 8
    code, err = glue("--do_train", "--num_train_steps=4", "--learning_rate=1e-4", "--allow_changed_flags")
    assert code == 0, err[-20:]
    assert latest_step(out) == 4 and _settings(out)["learning_rate"] == 1e-4
