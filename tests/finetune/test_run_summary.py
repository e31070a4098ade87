"""A fine-tuning tool's summary (issue 30 items 4 and 5): a fresh run says it started fresh, a rerun
after a kill says which checkpoint and step it resumed from (a process of its own, as a user reruns:
a child of the warm Python, tests/warm_python.py), and
both name curves.png, which draws the whole run's loss, task metric and learning rate."""

import json
import os

import pytest

from albert_tf import AlbertConfig
from albert_tf.training.curves import curve_series
from finetune import cli as skeleton
from finetune.glue import cli
from tests.conftest import REPO_ROOT

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


def _args(small_data_dir, output_dir, config_file):
    return ["--task=RTE", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={output_dir}",
            f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}", "--max_seq_length=32",
            "--train_batch_size=8", "--num_train_steps=4", "--num_warmup_steps=1", "--learning_rate=1e-3",
            "--max_train_examples=64", "--steps_per_loop=2", "--save_checkpoints_steps=2",
            "--eval_batch_size=64", "--progress_bar=false", "--jit_compile=false", "--export=false",
            "--do_train", "--do_eval"]


@pytest.mark.slow
def test_a_rerun_after_a_kill_says_where_it_resumed_and_plots_the_whole_run(tmp_path, small_data_dir, capsys,
                                                                           warm_python):
    config_file = tmp_path / "albert_config.json"
    CONFIG.to_json_file(config_file)
    output_dir = tmp_path / "run"
    args = _args(small_data_dir, output_dir, config_file)
    skeleton.print_summary(cli.finetune(["albert-finetune-glue", *args]))
    (fresh,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("trained to step")]
    assert fresh.startswith("trained to step 4: train loss "), fresh
    assert fresh.endswith(f"; started fresh; curves {output_dir / 'curves.png'}"), fresh
    assert "; optimizer adamw_release; " in fresh  # GLUE's recipe: the release's AdamW (issue 55)
    accuracy = json.loads((output_dir / skeleton.EVAL_RESULTS).read_text())["dev"]["accuracy"]
    drawn = curve_series(str(output_dir))
    assert [step for step, _ in drawn["accuracy and metrics"]["eval dev/accuracy"]] == [2, 4]
    assert drawn["accuracy and metrics"]["eval dev/accuracy"][-1][1] == pytest.approx(accuracy, abs=1e-6)
    first_loss = drawn["loss"]["train loss"]

    # Killed after its checkpoint of step 2: the one of step 4 never landed.
    for path in output_dir.glob("ckpt-4.*"):
        path.unlink()
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (output_dir / "curves.png").unlink()
    code = "import sys; sys.argv = ['albert-finetune-glue', *sys.argv[1:]]; from finetune.glue.cli import run; run()"
    env = {k: v for k, v in os.environ.items() if k != "ALBERT_TF_VERBOSE"}
    rerun = warm_python.run(["-c", code, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    (line,) = [line for line in rerun.stdout.splitlines() if line.startswith("trained to step")]
    assert line.startswith("trained to step 4: train loss "), line
    assert line.endswith(f"; resumed from {output_dir / 'ckpt-2'} at step 2; curves {output_dir / 'curves.png'}"), line
    # The whole run is drawn: step 2 of the first process, step 4 redone by the rerun (the same
    # data and dropout masks as the first run's step 4, so the same loss).
    redrawn = curve_series(str(output_dir))
    assert [step for step, _ in redrawn["loss"]["train loss"]] == [2, 4]
    assert redrawn["loss"]["train loss"][0] == first_loss[0]
    assert redrawn["loss"]["train loss"][1][1] == pytest.approx(first_loss[1][1], abs=1e-5)
    assert (output_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
