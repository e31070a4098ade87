"""Every doc's opening commands run as written (issue 30, item 1).

The opening command blocks of docs/X.md (its first fenced ```bash block, before any `## ` heading,
and the bash blocks right after it) are read from the markdown itself, so the docs and this test
cannot drift. Each one is run (`bash -euo pipefail`) unless the line before it is
`<!-- not run: REASON -->` (the internet, a cluster, a GPU, minutes of timing), with the reason.

A block runs as written, in a fresh folder laid out as a clone is after the README's command 1,
with the data the docs name taken from tests/fixtures/data:

- `runs/demo`: a stand-in for `./run_demo.sh`'s output, `runs/demo/vocab.model` (the release's
  30k-clean.model) and `runs/demo/model`, a pretraining run folder of `configs/albert_tiny.json`
  (128 positions, as the demo model has) with one checkpoint of random weights;
- `configs/` and `tests/` the repository's; `data/corpus/train.txt` and `heldout.txt` the first 40,000 characters
  of each book of the repository's;
- `../shared/data/glue` the fixtures' GLUE; `train-v1.1.json` and `dev-v1.1.json` the fixtures'
  SQuAD articles; `RACE/train/middle` and `RACE/dev/middle` the fixtures' RACE passages;
  `../shared/data/ner` the fixtures' WNUT-17 sentences.

The one substitution, so that the blocks run in seconds: the tools that train run with
`STEP_FLAGS[tool]` appended to their command line (the last value of a flag wins): two updates, no
XLA, one batch of held-out pretraining records, at most 8 training and 4 evaluation or prediction
examples, and no SavedModel of a fine-tuned model (tests/finetune/ export every task's);
`albert-create-pretraining-data` duplicates the corpus once (`--dupe_factor=1`). Each tool runs in
a child of the warm Python (tests/warm_python.py), which has TensorFlow loaded already: the same
entry point as the installed script, the shell's stdio, folder and environment, without seconds of
start-up per command (the installed scripts themselves run in test_readme_demo.py and
test_fresh_clone.py).
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, SMALL_DATA_DIR
from tests.warm_python import command_folder, console_scripts

DOCS = REPO_ROOT / "docs"
_TRAINING = ["--num_train_steps=2", "--num_warmup_steps=1", "--nojit_compile", "--noprogress_bar"]
STEP_FLAGS = {
    "albert-pretrain": [*_TRAINING, "--steps_per_loop=1", "--save_checkpoints_steps=2", "--max_eval_steps=1"],
    **{f"albert-finetune-{task}": [*_TRAINING, "--max_train_examples=8", "--max_eval_examples=4",
                                   "--max_predict_examples=4", "--noexport"]
       for task in ("glue", "squad", "race", "ner")},
    "albert-create-pretraining-data": ["--dupe_factor=1"],
}
TOOLS = console_scripts()
NOT_RUN = re.compile(r"<!-- not run: (.*?) -->")


def opening_blocks(path: pathlib.Path) -> list[tuple[str, str | None]]:
    """The opening command blocks of a doc: its first fenced bash block before any `## ` heading and
    the bash blocks that follow it with nothing but blank lines and not-run markers between them;
    each as (block, the reason it is not run or None)."""
    text = path.read_text(encoding="utf-8")
    lines = (text[: text.index("\n## ")] if "\n## " in text else text).splitlines()
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i].strip()
        if line == "```bash":
            end = lines.index("```", i + 1)
            marker = NOT_RUN.fullmatch(lines[i - 1].strip()) if i else None
            blocks.append(("\n".join(lines[i + 1 : end]), marker.group(1).strip() if marker else None))
            i = end
        elif blocks and line and not NOT_RUN.fullmatch(line):
            break  # the prose after the opening blocks
        i += 1
    return blocks


DOC_FILES = sorted(DOCS.glob("*.md"))
RUN = [(path.name, block) for path in DOC_FILES for block, reason in opening_blocks(path) if reason is None]


def test_every_doc_opens_with_commands_run_here_or_marked_with_the_reason():
    for path in DOC_FILES:
        blocks = opening_blocks(path)
        assert blocks, f"{path.name} opens with no ```bash block before its first '## ' heading"
        for block, reason in blocks:
            assert reason is None or len(reason) > 10, f"{path.name}: a not-run marker without its reason"
            assert block.strip(), f"{path.name}: an empty block"
    # Every block run has what it left checked below, and nothing checked is left unrun.
    assert sorted({name for name, _ in RUN}) == sorted(CHECKS)
    # The docs that need the README's demo model at 128 positions say so.
    for name in ("squad.md", "race.md", "ner.md"):
        (block,) = [block for doc, block in RUN if doc == name]
        assert "--init_checkpoint=runs/demo/model" in block and "--max_seq_length=128" in block


@pytest.fixture(scope="module")
def demo_standin(tmp_path_factory):
    """What `./run_demo.sh` leaves in runs/demo, in small: the vocabulary and a pretraining run folder."""
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.checkpoints.run_folder import CONFIG_FILE, keep_run_vocabulary
    from albert_tf.checkpoints.weights import model_weights

    demo = tmp_path_factory.mktemp("runs") / "demo"
    run = demo / "model"
    run.mkdir(parents=True)
    vocab = shutil.copy(SMALL_DATA_DIR / "albert" / "30k-clean.model", demo / "vocab.model")
    config = AlbertConfig.from_json_file(REPO_ROOT / "configs" / "albert_tiny.json")
    pretrainer = AlbertPretrainer(config)
    pretrainer.build()
    config.to_json_file(run / CONFIG_FILE)
    tf.train.Checkpoint(model=model_weights(pretrainer)).write(str(run / "ckpt-1"))
    (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    keep_run_vocabulary(str(vocab), str(run))
    return demo


def _lay_out(root: pathlib.Path, demo: pathlib.Path) -> pathlib.Path:
    """A clone's folder after command 1, and the data the docs name (the module docstring)."""
    clone = root / "clone"
    shutil.copytree(demo, clone / "runs" / "demo")
    (clone / "configs").symlink_to(REPO_ROOT / "configs")
    (clone / "tests").symlink_to(REPO_ROOT / "tests")
    corpus = clone / "data" / "corpus"
    corpus.mkdir(parents=True)
    for name in ("train.txt", "heldout.txt"):
        books = (REPO_ROOT / "data" / "corpus" / name).read_text(encoding="utf-8").splitlines()
        (corpus / name).write_text("".join(book[:40_000] + "\n" for book in books if book), encoding="utf-8")
    (root / "shared" / "data").mkdir(parents=True)
    (root / "shared" / "data" / "glue").symlink_to(SMALL_DATA_DIR / "glue")
    (root / "shared" / "data" / "ner").symlink_to(SMALL_DATA_DIR / "ner")
    squad = SMALL_DATA_DIR / "squad"
    (clone / "train-v1.1.json").symlink_to(squad / "train-v1.1.articles2-3.json")
    (clone / "dev-v1.1.json").symlink_to(squad / "dev-v1.1.articles1-2.json")
    for split in ("train", "dev"):
        (clone / "RACE" / split).mkdir(parents=True)
        (clone / "RACE" / split / "middle").symlink_to(SMALL_DATA_DIR / "race" / "dev" / "middle")
    return clone


def _json(path):
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def _check_data(clone, output):
    assert (clone / "out" / "vocab.model").is_file()
    counts = _json(clone / "data" / "pretrain" / "pretraining_data.json")["counts"]
    assert counts["instances"] > 100
    assert len(list((clone / "data" / "pretrain").glob("*.tfrecord"))) == 4


def _check_finetuning(clone, output):
    for run, task in (("mrpc", "MRPC"), ("try", "SST-2")):
        results = _json(clone / "runs" / run / "eval_results.json")
        assert results["task"] == task and results["global_step"] == 2 and results["dev"]["examples"] == 4


def _check_model(clone, output):
    assert re.search(r"^albert_base_v2 .* 11,683,584 ", output, re.M)  # --sizes: the encoder's parameters
    assert "albert_models/albert_base_v2.tar.gz" in output  # the released checkpoints and their sources


def _check_ner(clone, output):
    results = _json(clone / "runs" / "ner" / "eval_results.json")
    assert results["task"] == "NER" and results["global_step"] == 2 and results["dev"]["examples"] == 4
    assert 0.0 <= results["dev"]["f1"] <= 1.0 and results["dev"]["entities"] > 0
    written = (clone / "runs" / "ner" / "predictions_dev.conll").read_text(encoding="utf-8")
    assert written.count("\n\n") == 4 and all(len(line.split("\t")) == 3 for line in written.splitlines() if line)


def _check_on_device(clone, output):
    folder = clone / "runs" / "demo" / "litert"
    assert (folder / "model.tflite").stat().st_size > 10_000
    assert _json(folder / "model_io.json")["quantization"] == "dynamic_int8"


def _check_presets(clone, output):
    assert "albert_models/albert_base_v2.tar.gz" in output


def _check_pretraining(clone, output):
    assert (clone / "out" / "run" / "checkpoint").is_file() and (clone / "out" / "run" / "export").is_dir()
    assert re.search(r"mlm_accuracy \d\.\d+", output)  # the held-out evaluation at the end


def _check_race(clone, output):
    results = _json(clone / "runs" / "race" / "eval_results.json")
    assert results["global_step"] == 2 and results["dev"]["num_questions"] == 4
    assert len((clone / "runs" / "race" / "predictions_dev.jsonl").read_text().splitlines()) == 4


def _check_serving(clone, output):
    for model in ("encoder", "pretrainer"):
        assert (clone / "exported" / model / "saved_model.pb").is_file()


def _check_squad(clone, output):
    answers = _json(clone / "runs" / "squad1" / "predictions.json")
    assert len(answers) == 4 and all(isinstance(answer, str) for answer in answers.values())
    assert "exact_match" in _json(clone / "runs" / "squad1" / "eval_results.json")["dev"]


CHECKS = {"data.md": _check_data, "finetuning.md": _check_finetuning, "model.md": _check_model,
          "ner.md": _check_ner, "on_device.md": _check_on_device, "presets.md": _check_presets,
          "pretraining.md": _check_pretraining, "race.md": _check_race, "serving.md": _check_serving,
          "squad.md": _check_squad}
# Over 30 s of CPU each: four tools and an export; two exports.
SLOW = {"pretraining.md", "serving.md"}


@pytest.mark.parametrize("doc", [pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else [])
                                 for name in sorted(CHECKS)])
def test_the_opening_commands_run_as_written(doc, demo_standin, tmp_path, warm_python):
    clone = _lay_out(tmp_path, demo_standin)
    blocks = [block for name, block in RUN if name == doc]
    # Each tool runs in a child of the warm Python (TensorFlow loaded already), the step flags after
    # the doc's own.
    tools = command_folder(tmp_path / "warm_tools", TOOLS, STEP_FLAGS)
    env = dict(os.environ, PATH=f"{tools}:{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
               TF_CPP_MIN_LOG_LEVEL="2")
    output = ""
    for block in blocks:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=clone, env=env,
                                capture_output=True, text=True, timeout=600)
        output += result.stdout + result.stderr
        assert result.returncode == 0, f"docs/{doc}:\n{block}\n{output[-3000:]}"
    CHECKS[doc](clone, output)
