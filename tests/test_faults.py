"""Faults, round three (issue 29): one run a folder, no silent loss, one line for every user error.

Each test gives the tools a fault or bad input as a user would and asserts the exact line the user
sees and what is left in the output folder. `python -m pytest -q -m faults` runs these with the
other bad-input tests.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from albert_tf.utils.errors import UserError
from albert_tf.utils.locks import LOCK_FILE, locked_run_folder

pytestmark = pytest.mark.faults

HOST = socket.gethostname()
CONFIG = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def _holder(folder, *, write_after_lock=None):
    """A second Python process holding the lock of `folder` until killed; returns it once it holds it."""
    code = textwrap.dedent(f"""
        import sys, time
        from albert_tf.utils.locks import locked_run_folder
        with locked_run_folder({str(folder)!r}):
            {f"open({str(write_after_lock)!r}, 'w').write('mine')" if write_after_lock else "pass"}
            print("locked", flush=True)
            time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


# ---- 1. one run a folder ---------------------------------------------------------------------------


def test_a_second_run_into_a_locked_folder_is_refused_naming_the_holder(tmp_path, small_data_dir, warm_python):
    """Two real processes: the second tool run is refused in one line (exit 1) and writes nothing."""
    out = tmp_path / "sqc"
    holder = _holder(out, write_after_lock=out / "first.txt")
    try:
        config = tmp_path / "albert_config.json"
        config.write_text(json.dumps(CONFIG))
        second = warm_python.run(
            ["-m", "finetune.squad.cli", f"--albert_config_file={config}",
             f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
             f"--train_file={small_data_dir / 'squad' / 'train-v1.1.articles2-3.json'}",
             f"--output_dir={out}", "--do_train", "--seed=7"],
            capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr[-2000:]
        assert second.stderr.splitlines()[-1] == (
            f"error: --output_dir {out} is in use by another run (pid {holder.pid} on host {HOST}): wait for it to "
            "finish, or use another --output_dir")
        assert sorted(os.listdir(out)) == [LOCK_FILE, "first.txt"]  # the first run's, untouched
        assert json.loads((out / LOCK_FILE).read_text()) == {"pid": holder.pid, "host": HOST}
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    holder = _holder(out)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid  # left behind
    with locked_run_folder(out):
        assert json.loads((out / LOCK_FILE).read_text()) == {"pid": os.getpid(), "host": HOST}
        (out / "result.json").write_text("{}")
    assert sorted(os.listdir(out)) == ["result.json"]  # the lock goes with the run


def test_one_process_may_hold_its_folder_twice_but_a_refused_or_failed_run_leaves_it_as_it_was(tmp_path):
    out = tmp_path / "run"
    with locked_run_folder(out):
        with locked_run_folder(out):  # a tool calling another
            pass
        assert (out / LOCK_FILE).exists()
    assert not out.exists()  # made and left empty: removed
    out.mkdir()
    (out / "old.txt").write_text("kept")
    with pytest.raises(RuntimeError):
        with locked_run_folder(out):
            (out / "new.txt").write_text("half")
            (out / "features").mkdir()
            raise RuntimeError("failed")
    assert sorted(os.listdir(out)) == ["old.txt"]
    with pytest.raises(RuntimeError):
        with locked_run_folder(out, keep_on_failure=lambda folder: True):  # work worth keeping
            (out / "ckpt-1.index").write_text("")
            raise RuntimeError("failed")
    assert sorted(os.listdir(out)) == ["ckpt-1.index", "old.txt"]


def test_the_workers_of_a_cluster_leave_the_lock_to_the_chief(tmp_path, monkeypatch):
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        cluster = {"worker": ["localhost:1", "localhost:2"]}
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
        with locked_run_folder(out):  # worker 1 writes beside worker 0 (the chief), which holds it
            pass
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
        with pytest.raises(UserError, match=f"is in use by another run \\(pid {holder.pid} on host"):
            with locked_run_folder(out):
                pass
    finally:
        holder.kill()
        holder.wait()


# ---- fine-tuning's console scripts -----------------------------------------------------------------


def _console(tool, args, monkeypatch, capsys):
    """Runs `albert-finetune-<tool> args` as its console script in this process: (exit code, last line)."""
    import importlib

    from tests.helpers import console_script

    module = importlib.import_module(f"finetune.{tool}.cli")
    code, _, err = console_script(module.run, [f"albert-finetune-{tool}", *args], monkeypatch, capsys)
    return code, err.splitlines()[-1]


def _squad_args(tmp_path, small_data_dir, *flags):
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return [f"--albert_config_file={config}", f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
            f"--output_dir={tmp_path / 'run'}", "--max_seq_length=64", "--max_query_length=16", *flags]


def _squad_file(path, data):
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path


def test_duplicate_squad_question_ids_are_an_error_naming_them(tmp_path, small_data_dir, monkeypatch, capsys):
    """Item 2: predictions.json and the official scores are keyed by id; a repeated id was collapsed."""
    source = json.loads((small_data_dir / "squad" / "dev-v1.1.articles1-2.json").read_text())["data"]
    first, second = source[0]["paragraphs"][0], source[1]["paragraphs"][2]
    repeated = first["qas"][1]["id"]
    second["qas"][0]["id"] = repeated
    dev = _squad_file(tmp_path / "dev.json", source)
    code, line = _console("squad", _squad_args(tmp_path, small_data_dir, f"--predict_file={dev}",
                                              f"--train_file={dev}", "--do_train", "--do_predict"),
                          monkeypatch, capsys)
    assert (code, line) == (1, (
        f"error: {dev}: article {source[1]['title']!r}, question {repeated!r}: the id is also that of question 1 of "
        f"article {source[0]['title']!r}, paragraph 0; ids must be unique (predictions.json and the official scores "
        "are keyed by id)"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("tool", ["squad", "race"])
def test_a_split_without_questions_is_one_line_and_leaves_no_cache(tool, tmp_path, small_data_dir, monkeypatch,
                                                                  capsys):
    """Item 6: `{"data": []}` and empty RACE folders were End-of-sequence tracebacks and empty caches."""
    if tool == "squad":
        empty = _squad_file(tmp_path / "empty.json", [])
        args = _squad_args(tmp_path, small_data_dir, f"--train_file={empty}", "--do_train")
        expected = f"error: {empty} holds no question: nothing to train on"
    else:
        for level in ("middle", "high"):
            (tmp_path / "RACE" / "train" / level).mkdir(parents=True)
        config = tmp_path / "albert_config.json"
        config.write_text(json.dumps(CONFIG))
        args = [f"--albert_config_file={config}", f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
                f"--output_dir={tmp_path / 'run'}", f"--data_dir={tmp_path / 'RACE'}", "--max_seq_length=64",
                "--max_qa_length=16", "--do_train"]
        expected = (f"error: RACE data {tmp_path / 'RACE' / 'train'} holds no question (train split; the levels read: "
                    "middle/ and high/): nothing to train on")
    assert _console(tool, args, monkeypatch, capsys) == (1, expected)
    assert not (tmp_path / "run").exists()


def test_a_refused_fine_tuning_run_leaves_nothing_in_a_new_output_dir(tmp_path, small_data_dir, monkeypatch, capsys):
    """Item 7: --max_seq_length 16 left albert_config.json, spiece.model and task.json behind."""
    train = small_data_dir / "squad" / "train-v1.1.articles2-3.json"
    args = _squad_args(tmp_path, small_data_dir, f"--train_file={train}", "--do_train", "--max_query_length=16")
    code, line = _console("squad", [*args, "--max_seq_length=16"], monkeypatch, capsys)
    assert (code, line) == (2, "error: max_seq_length=16 leaves no room for the context after a question of "
                               "max_query_length=16 pieces and 3 special tokens")
    assert not (tmp_path / "run").exists()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    assert _console("squad", [*args, "--max_seq_length=16"], monkeypatch, capsys) == (code, line)
    assert sorted(os.listdir(tmp_path / "run")) == ["notes.txt"]  # a folder it did not make: as it was


def test_fine_tuning_from_a_checkpoint_of_another_width_leaves_nothing_in_a_new_output_dir(
        tmp_path, small_data_dir, monkeypatch, capsys):
    """Item 7: the refusal came after albert_config.json, spiece.model and task.json were written."""
    from albert_tf.training import pretraining
    from albert_tf.training import loop
    from albert_tf.checkpoints import run_folder
    from tests.helpers import pretraining_options
    from tests.albert_tf.tiny import TINY

    narrow = TINY.replace(vocab_size=300)
    pretrained = tmp_path / "pretrained"
    run_folder.check_output_dir(str(pretrained), narrow, write=True)
    loop.Trainer(narrow, pretraining.PretrainingTask(), pretraining_options(pretrained)).save()
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(narrow.replace(hidden_size=32, intermediate_size=64).to_dict()))
    vocab = pathlib.Path(__file__).parent / "fixtures" / "data_prep" / "tiny_vocab.model"
    train = small_data_dir / "squad" / "train-v1.1.articles2-3.json"
    out = tmp_path / "run"
    code, line = _console("squad", [f"--init_checkpoint={pretrained}", f"--albert_config_file={wide}",
                                    f"--spm_model_file={vocab}", f"--train_file={train}", f"--output_dir={out}",
                                    "--max_seq_length=32", "--max_query_length=8", "--do_train"], monkeypatch, capsys)
    assert code == 1 and line == f"error: {pretrained} holds an encoder with hidden_size=16, the model has hidden_size=32"
    assert not out.exists()


def test_squad_predict_without_a_model_names_do_predict(tmp_path, small_data_dir, monkeypatch, capsys):
    """Item 9: it said `--do_eval without --do_train ...` though --do_eval was not given."""
    dev = small_data_dir / "squad" / "dev-v1.1.articles1-2.json"
    out = tmp_path / "run"
    assert _console("squad", _squad_args(tmp_path, small_data_dir, f"--predict_file={dev}", "--do_predict"),
                    monkeypatch, capsys) == (1, (
        f"error: --do_predict without --do_train needs a fine-tuned model, and --output_dir {out} holds no "
        "checkpoint: add --do_train, or give the output_dir of a fine-tuning run"))
    assert not out.exists()


def test_a_litert_format_without_an_export_is_refused_before_anything_is_done(tmp_path, small_data_dir,
                                                                             monkeypatch, capsys):
    """Issue 40: `--format=litert --noexport` trained and exported nothing without a word."""
    out = tmp_path / "run"
    args = ["--task=MRPC", f"--data_dir={small_data_dir / 'glue'}", *_squad_args(tmp_path, small_data_dir)[:3],
            "--do_train", "--noexport"]
    assert _console("glue", [*args, "--format=litert"], monkeypatch, capsys) == (
        2, "error: --format=litert is for the export, and --noexport exports nothing: drop one of them")
    assert _console("glue", [*args, "--format=litert", "--quantization=float16"], monkeypatch, capsys) == (
        2, "error: --format=litert and --quantization=float16 are for the export, and --noexport exports nothing: "
           "drop one of them")
    assert not out.exists()


# ---- the SavedModels' serve_text -------------------------------------------------------------------


@pytest.fixture(scope="module")
def race_export(tmp_path_factory, small_data_dir):
    import keras

    from albert_tf import AlbertConfig
    from albert_tf.models import AlbertMultipleChoice
    from albert_tf.serving.multiple_choice import export_multiple_choice

    keras.utils.set_random_seed(0)
    model = AlbertMultipleChoice(AlbertConfig(**CONFIG), 4)
    path = tmp_path_factory.mktemp("race") / "export"
    export_multiple_choice(model, path, small_data_dir / "albert" / "30k-clean.model", max_seq_length=32,
                           max_qa_length=16)
    return path


def _serve_error(serve, **inputs):
    import tensorflow as tf

    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        serve(**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    return error.value.message


def test_race_serve_text_refuses_mismatched_batches_and_other_than_four_options(race_export):
    """Items 3 and 5: article=[A, B, C] with two questions answered 2; three options hit BroadcastTo."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(race_export)).signatures["serve_text"]
    options = [["a", "b", "c", "d"]] * 2
    assert ("RACE serve_text got 3 articles, 2 questions and 2 rows of options: give one article, one question and "
            "one row of options for each question") in _serve_error(
        serve, article=["A.", "B.", "C."], question=["q1?", "q2?"], options=options)
    assert "RACE serve_text got 2 articles, 2 questions and 3 rows of options" in _serve_error(
        serve, article=["A.", "B."], question=["q1?", "q2?"], options=[["a", "b", "c", "d"]] * 3)
    assert "RACE serve_text got 3 options for each question: give 4 (A-D)" in _serve_error(
        serve, article=["A."], question=["q1?"], options=[["a", "b", "c"]])
    out = serve(article=tf.constant(["A.", "B."]), question=tf.constant(["q1?", "q2?"]), options=tf.constant(options))
    assert out["probabilities"].shape == (2, 4)
    assert np_allclose_rows(out["probabilities"].numpy().sum(axis=1), 1.0)


def np_allclose_rows(values, target):
    return all(abs(float(v) - target) < 1e-5 for v in values)


@pytest.mark.parametrize("version_2", [False, True])
def test_squad_serve_text_answers_empty_contexts_and_batches_and_refuses_a_mismatch(version_2, tmp_path_factory,
                                                                                   small_data_dir):
    """Item 4: an empty context, a batch of 0 and 2 questions with 1 context were internal errors."""
    import tensorflow as tf

    from tests.finetune import squad_runs

    # A random-weight model's SQuAD export (v2.0: with a null threshold), shared with test_squad_serving.py.
    serve = squad_runs.serve_text(squad_runs.random_export(tmp_path_factory, small_data_dir, version_2)["export"])
    out = serve(question=tf.constant(["What?", "Who?", "Where?"]), context=tf.constant(["", "   ", "The cat sat."]))
    assert [t.decode() for t in out["answer_text"].numpy()[:2]] == ["", ""]
    assert out["char_start"].numpy()[:2].tolist() == [0, 0] and out["char_end"].numpy()[:2].tolist() == [0, 0]
    alone = serve(question=tf.constant(["Where?"]), context=tf.constant(["The cat sat."]))
    for key, value in alone.items():  # the third answered as if alone
        assert out[key].numpy().tolist()[2] == pytest.approx(value.numpy().tolist()[0], abs=1e-5), key
    if version_2:
        assert out["no_answer_probability"].numpy()[:2].tolist() == [1.0, 1.0]
    # Issue 40 item 1: a context starting with NUL was served as an empty one.
    nul = serve(question=tf.constant(["Where?"]), context=tf.constant(["\x00The cat sat."]))
    assert 0 <= nul["char_start"].numpy()[0] < nul["char_end"].numpy()[0] <= 13
    if version_2:
        assert nul["no_answer_probability"].numpy()[0] < 1.0
    none = serve(question=tf.constant([], tf.string), context=tf.constant([], tf.string))
    assert {k: tuple(v.shape) for k, v in none.items()} == {k: (0, *out[k].shape[1:]) for k in out}  # [0] and [0, k]
    assert "SQuAD serve_text got 2 questions and 1 contexts: give one context for each question" in _serve_error(
        serve, question=["a?", "b?"], context=["The cat sat."])


# ---- pretraining and export ------------------------------------------------------------------------


@pytest.fixture
def run_tool(warm_python):
    """run_tool(module, *args) runs a console script in a child process of the warm Python (TensorFlow
    loaded already): (exit code, stderr's last line, stderr's line count)."""

    def run(module, *args):
        ran = warm_python.run(["-m", module, *args], capture_output=True, text=True, timeout=180)
        lines = ran.stderr.splitlines()
        return ran.returncode, lines[-1] if lines else "", len(lines)

    return run


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A pretraining run folder of the tiny config: albert_config.json and one checkpoint, no vocabulary."""
    from albert_tf.training import pretraining
    from albert_tf.training import loop
    from albert_tf.checkpoints import run_folder
    from tests.helpers import pretraining_options
    from tests.albert_tf.tiny import TINY

    folder = tmp_path_factory.mktemp("pretrain") / "run"
    run = loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(folder))
    run_folder.check_output_dir(str(folder), TINY, write=True)
    return folder, run.save()


def test_pretraining_from_a_checkpoint_of_another_model_is_one_line_and_leaves_nothing(tmp_path, tiny_run, run_tool):
    """Item 8: a 30-line ValueError traceback, and albert_config.json left behind."""
    from tests.helpers import PRETRAINING_PREDICTIONS, PRETRAINING_SEQ, write_pretraining_records
    from tests.albert_tf.tiny import TINY

    folder, checkpoint = tiny_run
    records = write_pretraining_records(tmp_path / "train.tfrecord", 8)
    config = tmp_path / "wide.json"
    config.write_text(json.dumps(TINY.replace(hidden_size=32, intermediate_size=64).to_dict()))
    out = tmp_path / "run"
    code, line, count = run_tool(
        "albert_tf.cli.pretrain", f"--input_file={records}", f"--output_dir={out}", f"--albert_config_file={config}",
        f"--init_checkpoint={folder}", f"--max_seq_length={PRETRAINING_SEQ}",
        f"--max_predictions_per_seq={PRETRAINING_PREDICTIONS}", "--train_batch_size=4", "--num_train_steps=2",
        "--nojit_compile", "--noprogress_bar")
    assert code == 1 and count == 1, line
    # The config is checked before any weight (the one source rule), naming the first field that differs.
    assert line == f"error: {folder} holds an encoder with hidden_size=16, the model has hidden_size=32"
    assert not out.exists()


def test_pretraining_refused_for_another_config_keeps_the_folders_vocabulary(tmp_path, tiny_run, small_data_dir,
                                                                             monkeypatch, capsys):
    """Issue 39: the run's spiece.model was overwritten by --spm_model_file before the folder's
    config refused the run."""
    import shutil

    from albert_tf.cli import pretrain
    from tests.helpers import PRETRAINING_PREDICTIONS, PRETRAINING_SEQ, console_script, write_pretraining_records
    from tests.albert_tf.tiny import TINY

    folder = tmp_path / "run"
    shutil.copytree(tiny_run[0], folder)
    (folder / "spiece.model").write_bytes(b"the run's own vocabulary")
    before = sorted(p.name for p in folder.iterdir())
    records = write_pretraining_records(tmp_path / "train.tfrecord", 8)
    config = tmp_path / "wide.json"
    config.write_text(json.dumps(TINY.replace(hidden_size=32, intermediate_size=64).to_dict()))
    try:
        code, _, err = console_script(pretrain.run, [
            "albert-pretrain", f"--input_file={records}", f"--output_dir={folder}", f"--albert_config_file={config}",
            f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}", f"--max_seq_length={PRETRAINING_SEQ}",
            f"--max_predictions_per_seq={PRETRAINING_PREDICTIONS}", "--train_batch_size=4", "--num_train_steps=2",
            "--nojit_compile", "--noprogress_bar"], monkeypatch, capsys)
    finally:
        pretrain.FLAGS.unparse_flags()
    assert (code, err.splitlines()[-1]) == (1, (
        f"error: output_dir {folder} holds checkpoints of another config: hidden_size 16 there vs 32 here, "
        "intermediate_size 32 there vs 64 here; use a fresh output_dir or the same config"))
    assert (folder / "spiece.model").read_bytes() == b"the run's own vocabulary"
    assert sorted(p.name for p in folder.iterdir()) == before


def test_export_of_a_missing_checkpoint_without_a_vocabulary_names_the_checkpoint(tmp_path, run_tool):
    """Item 10: it said the folder held no spiece.model, when there was no folder."""
    missing = tmp_path / "nope"
    code, line, lines = run_tool("albert_tf.cli.export", f"--init_checkpoint={missing}", f"--output_dir={tmp_path / 'out'}")
    assert (code, lines) == (1, 1) and line.startswith(f"error: {missing}: no such folder or file, nor a released name")
    assert not (tmp_path / "out").exists()


def test_export_with_a_vocabulary_larger_than_the_model_is_one_line(tmp_path, tiny_run, small_data_dir, run_tool):
    """Item 11: a 23-line traceback."""
    folder, _ = tiny_run
    spm = small_data_dir / "albert" / "30k-clean.model"
    assert run_tool("albert_tf.cli.export", f"--init_checkpoint={folder}", f"--spm_model_file={spm}",
                 f"--output_dir={tmp_path / 'out'}", "--max_seq_length=16") == (
        1, f"error: the SentencePiece model {spm} has 30000 pieces, more than the model's vocab_size (97)", 1)
    assert not (tmp_path / "out").exists()


# ---- data prep on Beam, the tokenizers, the exit codes ---------------------------------------------


def test_a_corpus_byte_that_is_not_utf8_under_beam_is_one_line_and_leaves_nothing(tmp_path, small_data_dir, run_tool):
    """Item 12: the right last line after 285 lines of worker logs and 10 tracebacks; an empty shard_stats/."""
    text = (small_data_dir / "corpus" / "gutenberg" / "blake-poems.txt").read_bytes()[:3000]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(text + b"\nA bad \xff byte here.\n" + text)
    line_number = (text + b"\n").count(b"\n") + 1
    spm = small_data_dir / "albert" / "30k-clean.model"
    common = [f"--input_file={corpus}", f"--spm_model_file={spm}", "--max_seq_length=64",
              "--max_predictions_per_seq=10", "--dupe_factor=1", "--noprogress"]
    expected = (f"error: {corpus}:{line_number}: not valid UTF-8 (invalid start byte at byte 6 of the line); "
                "convert the file or pass --skip_bad_lines to skip such lines")
    beam = ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    assert run_tool("data_prep.create_pretraining_data", *common, f"--output_dir={tmp_path / 'beam'}", *beam) == (
        1, expected, 1)
    assert not (tmp_path / "beam").exists()
    (tmp_path / "local").mkdir()  # a folder the user made: left as it was, without shard_stats/
    assert run_tool("data_prep.create_pretraining_data", *common, f"--output_dir={tmp_path / 'local'}") == (
        1, expected, 1)
    assert os.listdir(tmp_path / "local") == []


@pytest.mark.parametrize("raw", [b"caf\xc3\xa9 \xff bar", b"ab\xffcd", b"na\xefve caf\xe9", b"\xff\xfe", b"x\xc3",
                                 b"\xed\xa0\x80z", b"\xc0\xafq", "a\ufffdb".encode()])
def test_bytes_that_are_not_utf8_read_as_u_fffd_by_both_tokenizers(raw, small_data_dir):
    """Item 13: the graph tokenizer (every serve_text) reads each bad byte as U+FFFD, as Python's
    bytes.decode("utf-8", "replace") does before the Python tokenizer: same ids, same offsets."""
    import tensorflow as tf

    from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    spm = small_data_dir / "albert" / "30k-clean.model"
    text = raw.decode("utf-8", "replace")
    python, graph = AlbertTokenizer(spm), AlbertGraphTokenizer(str(spm))
    assert graph.normalize(tf.constant([raw])).numpy()[0].decode("utf-8") == python.normalize(text)
    assert graph.tokenize(tf.constant([raw])).to_list()[0] == python.encode(text)
    ids, starts, ends = graph.tokenize_with_offsets(tf.constant([raw]))
    expected = tuple(map(list, python.encode_with_offsets(text)))
    assert (ids.to_list()[0], starts.to_list()[0], ends.to_list()[0]) == expected


def test_one_exit_code_convention_2_usage_1_run_time(tmp_path, small_data_dir, monkeypatch, capsys, run_tool):
    """Item 14: a bad SQuAD file exited 2 where a bad GLUE file exited 1; several missing flags
    were several lines."""
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [')
    assert _console("squad", _squad_args(tmp_path, small_data_dir, f"--train_file={broken}", "--do_train"),
                    monkeypatch, capsys) == (1, f"error: {broken}: not valid JSON: Expecting value at line 1 column 11")
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "train.tsv").write_text("1\t1\t2\tThe cat sat.\tA cat sat.\n")
    code, line = _console("glue", ["--task=MRPC", f"--data_dir={tmp_path}", *_squad_args(tmp_path, small_data_dir)[:4],
                                   "--do_train"], monkeypatch, capsys)
    assert code == 1 and line.startswith(f"error: {tmp_path / 'MRPC' / 'train.tsv'}:1: the first row is a data row")
    assert _console("squad", ["--do_train", "--learning_rate=abc"], monkeypatch, capsys)[0] == 2
    assert run_tool("albert_tf.cli.convert") == (2, (
        "error: flag --source=None: Flag --source must have a value other than None.; flag --input=None: Flag --input "
        "must have a value other than None.; flag --output_dir=None: Flag --output_dir must have a value other than "
        "None. (see --help)"), 1)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("module, args, line", [
    ("albert_tf.cli.export", ["--output_dir=OUT"], "give exactly one of --preset and --init_checkpoint"),
    ("albert_tf.cli.export", ["--output_dir=OUT", "--preset=p", "--init_checkpoint=c"],
     "give exactly one of --preset and --init_checkpoint"),
    ("albert_tf.cli.pretrain", ["--output_dir=OUT", "--input_file=x", "--size=albert_base_v2", "--preset=p",
                                "--init_checkpoint=c"], "give at most one of --preset and --init_checkpoint"),
    ("finetune.glue.cli", ["--output_dir=OUT", "--task=MRPC", "--data_dir=d", "--do_train", "--preset=p",
                           "--init_checkpoint=c"], "give at most one of --preset and --init_checkpoint"),
])
def test_preset_or_init_checkpoint_is_one_check_for_every_tool(module, args, line, tmp_path, monkeypatch, capsys):
    """Issue 39: the same question was asked in four places, in three wordings and two exit codes."""
    import importlib

    from tests.helpers import console_script

    tool = importlib.import_module(module)
    out = tmp_path / "out"
    try:
        code, _, err = console_script(tool.run, ["tool", *(arg.replace("OUT", str(out)) for arg in args)],
                                      monkeypatch, capsys)
    finally:
        tool.FLAGS.unparse_flags()
    assert (code, err.splitlines()[-1]) == (2, f"error: {line}")
    assert list(tmp_path.iterdir()) == []
