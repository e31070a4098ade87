"""Decisions that every tool shares, written once and called everywhere (issue 51 item 4): the
shortest sequence, the check of a named choice (hparams and kin), where a run exports, and whether
a path is a URL."""

import ast
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.test_import_graph import PACKAGES

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"


def _module_assignments(name: str) -> list[str]:
    """The modules of the house that assign `name` at their top level."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    found.append(str(path.relative_to(REPO_ROOT)))
    return found


def test_every_tool_refuses_a_sequence_too_short_for_a_pair_with_one_message():
    """The release's data tool asserts that both segments of a pair keep a token; 4 positions would
    leave the second segment none. Export, the raw-text preprocessor, fine-tuning's hparams and the
    pretraining data refused 4 and 5 differently; now one rule."""
    from albert_tf.serving.export import check_length
    from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
    from albert_tf.tokenizers.tokenizer import MIN_SEQ_LENGTH, AlbertTokenizer
    from data_prep.instances import InstanceOptions
    from finetune.glue.hparams import glue_hparams

    assert MIN_SEQ_LENGTH == 5
    refusals = {
        "export": lambda n: check_length(None, n),
        "preprocessor": lambda n: AlbertTextPreprocessor(str(TINY_VOCAB), sequence_length=n),
        "fine-tuning": lambda n: glue_hparams("MRPC", max_seq_length=n),
        "data prep": lambda n: InstanceOptions(max_seq_length=n),
    }
    for tool, make in refusals.items():
        with pytest.raises(ValueError, match=r"length must be at least 5, got 4 \(room for \[CLS\] a \[SEP\] b \[SEP\]\)$"):
            make(4)
    with pytest.raises(ValueError, match="^max_seq_length must be an integer, got 5.0$"):
        check_length(None, 5.0)
    # At 5 every tool's pair keeps one token of each segment, as the Python tokenizer packs it.
    preprocessor = AlbertTextPreprocessor(str(TINY_VOCAB), sequence_length=5)
    packed = preprocessor((["the cat sat"], ["a dog ran"]))
    assert packed["segment_ids"].numpy().tolist() == [[0, 0, 0, 1, 1]]
    tokenizer = AlbertTokenizer(str(TINY_VOCAB))
    a, b = tokenizer.encode("the cat sat"), tokenizer.encode("a dog ran")
    assert packed["input_ids"].numpy().tolist()[0] == tokenizer.pack(a, b, max_seq_length=5)["input_ids"]
    assert glue_hparams("MRPC", max_seq_length=5).max_seq_length == 5
    assert InstanceOptions(max_seq_length=5).max_seq_length == 5


def test_every_task_refuses_unknown_hparams_with_one_message():
    from finetune.glue.hparams import glue_hparams
    from finetune.ner.task import NerTask
    from finetune.race.task import RaceTask
    from finetune.squad.task import SquadTask

    makers = {"glue": lambda h: glue_hparams("MRPC", h), "squad": lambda h: SquadTask(hparams=h),
              "race": lambda h: RaceTask(hparams=h), "ner": lambda h: NerTask(hparams=h)}
    choices = {"glue": "paper, release", "squad": "paper, release", "race": "v2, v1", "ner": "hf"}
    for task, make in makers.items():
        with pytest.raises(ValueError, match=f"^hparams must be one of {choices[task]}, got 'tuned'$"):
            make("tuned")


def test_a_run_exports_to_one_folder_name():
    from albert_tf.training import pretraining
    from albert_tf.training.options import EXPORT_DIR
    from finetune import cli

    assert _module_assignments("EXPORT_DIR") == ["albert_tf/training/options.py"]
    assert pretraining.EXPORT_DIR == cli.EXPORT_DIR == EXPORT_DIR == "export"


def test_whether_a_path_is_a_url_is_decided_in_one_place():
    """`is_url` (albert_tf.utils.files) and the filesystem `files_for` picks from it; the TPU
    master's address (`grpc://`) is not a path."""
    written = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"""["']://["']""", line):
                    written.append(f"{path.relative_to(REPO_ROOT)}:{number}")
    assert [w.rsplit(":", 1)[0] for w in written] == ["albert_tf/training/strategies.py", "albert_tf/utils/files.py"], written


def test_must_be_one_of_is_written_once():
    """Every check of a named choice (an optimizer, a precision, an export format, hparams) goes
    through `albert_tf.utils.validation.require_choice`, so they all read alike."""
    from albert_tf.serving.formats import check_export_settings
    from albert_tf.training.options import PretrainingOptions
    from albert_tf.utils.errors import FlagError

    written = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if "must be one of" in path.read_text(encoding="utf-8"):
                written.append(str(path.relative_to(REPO_ROOT)))
    assert written == ["albert_tf/utils/validation.py"]
    with pytest.raises(FlagError, match="^--format must be one of saved_model, litert, got 'onnx'$"):
        check_export_settings(format="onnx")
    with pytest.raises(FlagError, match="^optimizer must be one of .*, got 'sgd'$"):
        PretrainingOptions(output_dir="x", optimizer="sgd")


def test_one_trainer_and_one_evaluation_protocol():
    """Issue 51 item 2: pretraining and every fine-tuning task run on `loop.Trainer` itself (no
    subclass), and evaluate through its one protocol: the task's `validation_step` on each replica,
    gathered by the trainer, `aggregate_logs` and `reduce_aggregated_logs`; only the loop hands work
    to the replicas."""
    subclasses, replica_calls = [], []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef) and any(ast.unparse(base).split(".")[-1] == "Trainer" for base in node.bases):
                    subclasses.append(f"{path.relative_to(REPO_ROOT)}:{node.name}")
            if re.search(r"strategy\.(run|gather)\(", source):
                replica_calls.append(str(path.relative_to(REPO_ROOT)))
    assert subclasses == []
    # preemption.py asks every replica one flag (a SIGTERM seen anywhere), not a task's step.
    assert replica_calls == ["albert_tf/training/loop.py", "albert_tf/training/preemption.py"]

    from albert_tf.training.pretraining import PretrainingTask
    from albert_tf.training.task import TrainingTask
    from finetune.glue.task import GlueTask
    from finetune.ner.task import NerTask
    from finetune.race.task import RaceTask
    from finetune.squad.task import SquadTask

    protocol = ("validation_step", "aggregate_logs", "reduce_aggregated_logs")
    for task in (PretrainingTask, GlueTask, SquadTask, RaceTask, NerTask):
        assert all(getattr(task, name) is not getattr(TrainingTask, name) or name == "aggregate_logs"
                   for name in protocol), task
        assert not hasattr(task, "validation_sums") and not hasattr(task, "metrics_from_sums")
