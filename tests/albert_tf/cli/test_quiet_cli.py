"""A user sees the progress bar, the summary and real warnings, nothing else, unless --verbose."""

import json
import re

import pytest

from albert_tf.training.summaries import format_metrics
from tests.pretrained_runs import (TINY, TINY_CONFIG, new_process, pretraining_flags, process_output,
                                  tiny_corpus_pretraining)

# absl's "I1123 20:47:57.562336 1402 training.py:571] ...", TensorFlow's C++ "I0000 00:00:17... port.cc",
# Python logging's "INFO:absl:", and the two lines the issue names.
NOISE = re.compile(r"^[IWEF]\d{4} |INFO:absl:|absl::InitializeLog|oneDNN|cuInit|renamed to|Ignoring Assert",
                   re.MULTILINE)


def test_a_small_learning_rate_is_printed_with_its_digits():
    line = format_metrics({"loss": 0.5, "learning_rate": 3e-5, "examples_per_second": 12.34})
    assert line == "loss 0.5000 learning_rate 3e-05 12.3 ex/s"


@pytest.mark.slow
def test_pretraining_prints_the_bar_and_the_summary_only(tmp_path, tmp_path_factory, warm_python):
    # The records and the quiet run are the session's (tests/pretrained_runs.py), made as new processes
    # with this environment's log settings left out, their output kept: the verbose run below is this
    # test's own, a child of the warm Python (the Python logs it looks for are the script's, not
    # TensorFlow's start-up, which the new processes above have shown quiet).
    shared = tiny_corpus_pretraining(tmp_path_factory)
    made = process_output(shared, "albert-create-pretraining-data")
    assert made.returncode == 0, made.stderr[-2000:]
    assert not NOISE.search(made.stdout + made.stderr), made.stdout + made.stderr
    quiet = process_output(shared, "albert-pretrain")
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
    trimmed = [arg for arg in pretraining_flags(shared)
               if not arg.startswith(("--eval_input_file", "--spm_model_file"))]
    verbose = warm_python.run(["albert-pretrain", *trimmed, f"--output_dir={tmp_path / 'verbose'}", "--verbose"],
                              capture_output=True, text=True, timeout=600)
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert re.search(r"^I\d{4} .*saved ", verbose.stderr, re.MULTILINE), verbose.stderr[-3000:]


@pytest.mark.slow
def test_glue_fine_tuning_prints_no_tensorflow_lines(tmp_path, small_data_dir):
    """With XLA: no "Ignoring Assert operator", no C++ start-up or cuInit lines, no INFO logs."""
    (tmp_path / "config.json").write_text(json.dumps(TINY_CONFIG))
    args = ["--task=MRPC", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={tmp_path / 'run'}",
            f"--albert_config_file={tmp_path / 'config.json'}", f"--spm_model_file={TINY / 'tiny_vocab.model'}",
            "--max_seq_length=32", "--do_train", "--do_eval", "--num_train_steps=4", "--train_batch_size=8",
            "--eval_batch_size=32", "--learning_rate=3e-5"]
    result = new_process("albert-finetune-glue", *args)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert not NOISE.search(output), output[-3000:]
    assert '"examples": 408' in result.stdout  # the summary
