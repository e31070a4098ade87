"""The README's main command stays true: run_demo.sh runs end to end (with few training steps)."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.warm_python import command_folder, console_scripts


def test_readme_names_the_demo_and_the_test_command():
    readme = (REPO_ROOT / "README.md").read_text()
    setup = readme.split("## Set-up")[1].split("<!--")[0]
    assert "./run_demo.sh" in setup
    # Command 1 installs the main job's dependencies only (issue 30, item 2); command 2 adds the test extras.
    (install,) = [line for line in setup.splitlines() if line.endswith("&& ./run_demo.sh")]
    assert "pip install -e . &&" in install and "[test]" not in install and "torch" not in install
    # CI runs the README's test command, word for word, after the same install.
    (command,) = [line.rsplit("&& ", 1)[1] for line in setup.splitlines() if "&& python -m pytest" in line]
    assert 'pip install -e ".[test]" && python -m pytest' in setup
    assert command.startswith("python -m pytest -q")
    ci_commands = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
                   if line.startswith("python -m pytest")]
    assert ci_commands == [command]


@pytest.mark.slow
def test_run_demo_end_to_end_and_again_training_on(tmp_path, warm_python):
    # The script as written, on the first 100,000 characters of each book (two fifths of the corpus),
    # each cut in four documents (the script deals documents to its four shards): what it makes and
    # prints does not depend on the corpus's size, its minutes do.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train.txt", "heldout.txt"):
        books = (REPO_ROOT / "data" / "corpus" / name).read_text(encoding="utf-8").splitlines()
        parts = [book[i:i + 25_000] for book in books for i in range(0, min(len(book), 100_000), 25_000)]
        (corpus / name).write_text("".join(part + "\n" for part in parts if part.strip()), encoding="utf-8")

    def run_demo(steps, tools=os.path.dirname(sys.executable)):
        env = dict(os.environ, DEMO_STEPS=str(steps), DEMO_CORPUS=str(corpus), PATH=f"{tools}:{os.environ['PATH']}")
        result = subprocess.run([str(REPO_ROOT / "run_demo.sh"), str(tmp_path / "demo")], env=env,
                                capture_output=True, text=True, timeout=900)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        return output

    output = run_demo(8)
    demo = tmp_path / "demo"
    assert (demo / "vocab.model").is_file()
    train = json.loads((demo / "records" / "train" / "pretraining_data.json").read_text())
    assert train["counts"]["instances"] > 3_000
    assert (demo / "export_pretrainer" / "saved_model.pb").is_file()
    # The held-out figures beside their baselines, the records counted as integers, and what they show.
    heldout = json.loads((demo / "records" / "heldout" / "pretraining_data.json").read_text())["counts"]["instances"]
    assert re.search(rf"^held-out at step 8 \({heldout:,} records\): masked-LM accuracy \d+\.\d% \(the most frequent "
                     r'masked piece, ".+", every time: \d+\.\d%\), sentence order \d+\.\d% \(the majority order, '
                     r"(in order|swapped), every time: \d+\.\d%\)$", output, re.MULTILINE), output[-4000:]
    assert re.search(r"^so: the masked-LM head (learnt beyond|is not above) its baseline.*; the sentence-order head "
                     r"(learnt beyond|is not above) its baseline", output, re.MULTILINE)
    assert re.search(rf"^eval at step 8: .* examples {heldout}$", output, re.MULTILINE)
    # Each [MASK] was filled with ranked candidates.
    filled = [line for line in output.splitlines() if line.startswith("-> ")]
    assert len(filled) == 2 and all("[MASK]" not in line for line in filled)
    assert len(re.findall(r"\[MASK\] 1: \S+ \d\.\d\d", output)) == 2

    # Run again with more steps (issue 53): it resumes where the first stopped, trains on, and
    # replaces its own export (it stopped at "export is not empty" before). The installed scripts
    # ran above; here each tool runs in a child of the warm Python (TensorFlow loaded already).
    first_export = (demo / "model" / "export" / "saved_model.pb").stat().st_ino
    output = run_demo(12, command_folder(tmp_path / "warm_tools", console_scripts()))
    model = demo / "model"
    assert re.search("^finished at step 12: train .*" + re.escape(
        f"; resumed from {model / 'ckpt-8'} at step 8; curves {model / 'curves.png'}; exported to {model / 'export'}")
        + "$", output, re.MULTILINE), output[-4000:]
    assert (demo / "model" / "export" / "saved_model.pb").stat().st_ino != first_export
    assert len([line for line in output.splitlines() if line.startswith("-> ")]) == 2
