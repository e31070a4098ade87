"""Small runs that several test modules make alike, each made once per test session
(`tests.shared_builds.shared_build`): whichever module asks first builds it, the others read it.

- `tiny_corpus_pretraining`: albert-create-pretraining-data on the tiny corpus, then albert-pretrain
  of a tiny model on its records (4 steps, an evaluation, the encoder's export), each a new process
  started as a user starts it, its exit code and output kept beside the folders it made.
  tests/albert_tf/cli/test_quiet_cli.py reads that output (the process is its subject),
  tests/albert_tf/cli/test_run_folders.py the run folder (what albert-export then needs of it), and
  tests/albert_tf/presets/test_model_sources.py takes the run and its export as two model sources.
- `glue_mrpc_two_steps`: albert-finetune-glue of a tiny model on MRPC, two steps and their
  checkpoint, no export: the run that tests/test_resume_flags.py resumes with other flags and
  tests/test_faults_five.py resumes on a disk that refuses the next checkpoint. Both write into it,
  so each takes a copy of the run (`tests.shared_builds.copy_of`).

A shared folder is read-only: a test that writes into one copies it first (`copy_of`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.shared_builds import shared_build

TINY = REPO_ROOT / "tests" / "fixtures" / "data_prep"
TINY_VOCAB = TINY / "tiny_vocab.model"
TINY_CONFIG = {"vocab_size": 300, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


# ---- the tiny corpus, its records and a pretraining run on them, as new processes ----------------


def new_process(name, *args, **env):
    """The console script `name` run on `args` in a new Python, as the installed script runs it, with
    the caller's environment but the log settings a user has not made (TF_CPP_MIN_LOG_LEVEL,
    ALBERT_TF_VERBOSE), `env` added: the finished process (its stdout and stderr as text)."""
    code = ("import sys; from importlib.metadata import entry_points; "
            f"(entry,) = entry_points(group='console_scripts', name={name!r}); "
            f"sys.argv = {[name, *args]!r}; sys.exit(entry.load()())")
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ALBERT_TF_VERBOSE")}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=dict(clean, **env),
                          capture_output=True, text=True, timeout=600)


def pretraining_flags(folder) -> list[str]:
    """albert-pretrain's flags for the tiny corpus's records in `folder` (without --output_dir): the
    sequence lengths come from the records' pretraining_data.json."""
    return [f"--input_file={folder / 'records'}/*.tfrecord", f"--eval_input_file={folder / 'records'}/*.tfrecord",
            f"--albert_config_file={folder / 'config.json'}", f"--spm_model_file={TINY_VOCAB}",
            "--train_batch_size=8", "--num_train_steps=4", "--num_warmup_steps=1", "--steps_per_loop=2",
            "--save_checkpoints_steps=2", "--learning_rate=3e-5", "--nojit_compile"]


def _made_by_processes(folder):
    made = new_process("albert-create-pretraining-data", f"--input_file={TINY / 'tiny_corpus.txt'}",
                       f"--output_dir={folder / 'records'}", f"--spm_model_file={TINY_VOCAB}",
                       "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2")
    outputs = {"albert-create-pretraining-data": made}
    if made.returncode == 0:
        (folder / "config.json").write_text(json.dumps(TINY_CONFIG))
        outputs["albert-pretrain"] = new_process("albert-pretrain", *pretraining_flags(folder),
                                                 f"--output_dir={folder / 'run'}")
    (folder / "outputs.json").write_text(json.dumps(
        {name: {"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr} for name, p in outputs.items()}))


def tiny_corpus_pretraining(tmp_path_factory):
    """The folder of the tiny corpus's records (records/), its pretraining run (run/, its config.json
    beside) and what each process printed (outputs.json: {console script: {returncode, stdout,
    stderr}}); a failed process's successors are not run."""
    return shared_build(tmp_path_factory, "tiny_corpus_pretraining", _made_by_processes)


def process_output(folder, name) -> subprocess.CompletedProcess:
    """The console script `name`'s process in `folder` (`tiny_corpus_pretraining`), as it ended."""
    ended = json.loads((folder / "outputs.json").read_text())[name]
    return subprocess.CompletedProcess(name, ended["returncode"], ended["stdout"], ended["stderr"])


# ---- a GLUE run of two steps, to resume ------------------------------------------------------------


def glue_mrpc_flags(data_dir, output_dir, config_file) -> list[str]:
    """albert-finetune-glue's command line for MRPC in `data_dir` (the tests' small GLUE), a tiny
    model, checkpoints every two steps, no export; without --do_* and --num_train_steps."""
    return ["albert-finetune-glue", "--task=MRPC", f"--data_dir={data_dir}", f"--output_dir={output_dir}",
            f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}", "--max_seq_length=32",
            "--train_batch_size=8", "--num_warmup_steps=0", "--max_train_examples=32", "--steps_per_loop=2",
            "--save_checkpoints_steps=2", "--progress_bar=false", "--nojit_compile", "--noexport"]


def glue_mrpc_two_steps(tmp_path_factory, data_dir):
    """A folder holding config.json (the tiny model, 32 positions) and run/: `glue_mrpc_flags`
    trained for two steps (`--do_train --num_train_steps=2`), its checkpoint ckpt-2."""

    def build(folder):
        from finetune.glue import cli as glue_cli

        (folder / "config.json").write_text(json.dumps({**TINY_CONFIG, "max_position_embeddings": 32}))
        glue_cli.finetune([*glue_mrpc_flags(data_dir, folder / "run", folder / "config.json"), "--do_train",
                           "--num_train_steps=2"])

    return shared_build(tmp_path_factory, "glue_mrpc_two_steps", build)
