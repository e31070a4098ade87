"""A user sees the progress bar, the summary and real warnings, nothing else, unless --verbose."""

import json
import os
import re
import subprocess
import sys

import pytest

from albert_tf.training.summaries import format_metrics
from tests.conftest import REPO_ROOT

TINY = REPO_ROOT / "tests" / "fixtures" / "data_prep"
CONFIG = {"vocab_size": 300, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
# absl's "I1123 20:47:57.562336 1402 training.py:571] ...", TensorFlow's C++ "I0000 00:00:17... port.cc",
# Python logging's "INFO:absl:", and the two lines the issue names.
NOISE = re.compile(r"^[IWEF]\d{4} |INFO:absl:|absl::InitializeLog|oneDNN|cuInit|renamed to|Ignoring Assert",
                   re.MULTILINE)


def test_a_small_learning_rate_is_printed_with_its_digits():
    line = format_metrics({"loss": 0.5, "learning_rate": 3e-5, "examples_per_second": 12.34})
    assert line == "loss 0.5000 learning_rate 3e-05 12.3 ex/s"


def _script(name, *args, **env):
    code = f"import sys; sys.argv = {[name, *args]!r}; from albert_tf.cli.pretrain import run; run()"
    if name == "albert-create-pretraining-data":
        code = code.replace("albert_tf.cli.pretrain", "data_prep.create_pretraining_data")
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ALBERT_TF_VERBOSE")}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=dict(clean, **env),
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_pretraining_prints_the_bar_and_the_summary_only(tmp_path):
    records = tmp_path / "records"
    made = _script("albert-create-pretraining-data", f"--input_file={TINY / 'tiny_corpus.txt'}",
                   f"--output_dir={records}", f"--spm_model_file={TINY / 'tiny_vocab.model'}",
                   "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2")
    assert made.returncode == 0, made.stderr[-2000:]
    assert not NOISE.search(made.stdout + made.stderr), made.stdout + made.stderr
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    args = [f"--input_file={records}/*.tfrecord", f"--eval_input_file={records}/*.tfrecord",
            f"--albert_config_file={tmp_path / 'config.json'}", f"--spm_model_file={TINY / 'tiny_vocab.model'}",
            "--train_batch_size=8", "--max_seq_length=64", "--max_predictions_per_seq=10", "--num_train_steps=4",
            "--num_warmup_steps=1", "--steps_per_loop=2", "--save_checkpoints_steps=2", "--learning_rate=3e-5",
            "--nojit_compile"]
    quiet = _script("albert-pretrain", *args, f"--output_dir={tmp_path / 'run'}")
    output = quiet.stdout + quiet.stderr
    assert quiet.returncode == 0, output[-3000:]
    assert not NOISE.search(output), output[-3000:]
    assert "4/4" in quiet.stderr  # the progress bar
    # The summary reports the last update's rate: lr(4) of a linear decay to 0 at step 4, as the release
    # (a small nonzero rate's digits are the unit test above).
    assert re.search(r"^finished at step 4: train .*learning_rate 0 ", quiet.stdout, re.MULTILINE), output
    assert output.count("eval at step 2:") == 1  # once, not beside a log line of the same
    # --verbose brings the logs back: a checkpoint's "saved" line, from a run without the eval and the
    # export (no --spm_model_file), whose quiet output the run above has shown.
    trimmed = [arg for arg in args if not arg.startswith(("--eval_input_file", "--spm_model_file"))]
    verbose = _script("albert-pretrain", *trimmed, f"--output_dir={tmp_path / 'verbose'}", "--verbose")
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert re.search(r"^I\d{4} .*saved ", verbose.stderr, re.MULTILINE), verbose.stderr[-3000:]


@pytest.mark.slow
def test_glue_fine_tuning_prints_no_tensorflow_lines(tmp_path, small_data_dir):
    """With XLA: no "Ignoring Assert operator", no C++ start-up or cuInit lines, no INFO logs."""
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    code = ("import sys; sys.argv = ['albert-finetune-glue', *sys.argv[1:]]; "
            "from finetune.glue.cli import run; run()")
    args = ["--task=MRPC", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={tmp_path / 'run'}",
            f"--albert_config_file={tmp_path / 'config.json'}", f"--spm_model_file={TINY / 'tiny_vocab.model'}",
            "--max_seq_length=32", "--do_train", "--do_eval", "--num_train_steps=4", "--train_batch_size=8",
            "--eval_batch_size=32", "--learning_rate=3e-5"]
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ALBERT_TF_VERBOSE")}
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO_ROOT, env=clean,
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert not NOISE.search(output), output[-3000:]
    assert '"examples": 408' in result.stdout  # the summary
