"""Faults, round five (issue 52): every poor answer becomes one line.

Each test gives a tool (or the Python API) a fault or bad input as a user would and asserts the line
the user sees, the exit code and what is left in the output folder. The entity tagger's
`serve_text` (items 1 and 2) is tests/albert_tf/serving/test_tagging_limits.py; `python -m pytest -q -m
faults` runs these with the others.
"""

import importlib
import json
import os
import re

import pytest

from finetune.ner import readers
from tests.conftest import REPO_ROOT
from tests.helpers import console_script
from tests.pretrained_runs import glue_mrpc_flags, glue_mrpc_two_steps
from tests.shared_builds import copy_of

pytestmark = pytest.mark.faults

CONFIG = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def _console(module, argv, monkeypatch, capsys):
    """`module`'s console script run on `argv` in this process: (exit code, its stderr's lines)."""
    code, _, err = console_script(importlib.import_module(module).run, argv, monkeypatch, capsys)
    return code, err.splitlines()


def _model_flags(tmp_path, small_data_dir):
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return [f"--albert_config_file={config}", f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
            f"--output_dir={tmp_path / 'run'}"]


# ---- item 3: CoNLL files whose lines disagree, a byte order mark ------------------------------------


def test_a_conll_line_of_other_columns_than_the_file_is_one_line_naming_it(tmp_path, small_data_dir, monkeypatch,
                                                                          capsys):
    """`New York<TAB>B-LOC` in a file of two columns trained on "New"; a 200,000-word line kept one word."""
    train = tmp_path / "train.conll"
    train.write_text("Ada\tB-PER\nlives\tO\nin\tO\nNew York\tB-LOC\n\n", encoding="utf-8")
    code, lines = _console("finetune.ner.cli", ["albert-finetune-ner", *_model_flags(tmp_path, small_data_dir),
                                                f"--train_file={train}", "--do_train"], monkeypatch, capsys)
    assert (code, lines[-1]) == (1, f"error: {train}:4: 3 fields where line 1 has 2: every line holds the same "
                                    "columns, the token first and its tag last (a token with a space in it?)")
    assert not (tmp_path / "run").exists()
    long = tmp_path / "long.conll"
    long.write_text("Ada O\n" + " ".join(["word"] * 200_000) + " O\n", encoding="utf-8")
    with pytest.raises(readers.UserError, match=rf"^{long}:2: 200001 fields where line 1 has 2: "):
        readers.read_conll(long)


def test_a_byte_order_mark_before_docstart_is_no_word(tmp_path):
    path = tmp_path / "bom.conll"
    path.write_bytes("\ufeff-DOCSTART- O\n\nAda B-PER\nlives O\n".encode("utf-8"))
    sentences = readers.read_conll(path)
    assert [(s.words, s.tags, s.line) for s in sentences] == [(("Ada", "lives"), ("B-PER", "O"), 3)]
    # Untagged files (--predict_file) may hold tokens alone beside tagged lines; the tagged agree.
    path.write_text("Ada\nlives O\nin O\n", encoding="utf-8")
    assert readers.read_conll(path, tagged=False)[0].words == ("Ada", "lives", "in")


# ---- item 4: flag values, exit code 2 and the flag's name -------------------------------------------


@pytest.mark.parametrize("module, program, flags, line", [
    ("finetune.ner.cli", "albert-finetune-ner", ["--labels=PER,PER"],
     "flag --labels=['PER', 'PER']: 'PER' is given twice"),
    ("finetune.ner.cli", "albert-finetune-ner", ["--labels=PER,,LOC"],
     "flag --labels=['PER', '', 'LOC']: name 2 of 3 is empty"),
    ("finetune.ner.cli", "albert-finetune-ner", ["--labels="],
     "flag --labels=[]: names nothing: give one or more, comma-separated"),
    ("finetune.ner.cli", "albert-finetune-ner", ["--max_seq_length=0"], "flag --max_seq_length=0: 0 is not a positive integer"),
    ("finetune.ner.cli", "albert-finetune-ner", ["--doc_stride=0"], "flag --doc_stride=0: 0 is not a positive integer"),
    ("finetune.glue.cli", "albert-finetune-glue", ["--task=MRPC", "--max_seq_length=-1"],
     "flag --max_seq_length=-1: -1 is not a positive integer"),
    ("finetune.glue.cli", "albert-finetune-glue", ["--task=MRPC", "--data_dir="], "flag --data_dir=: is empty: give a path"),
    ("finetune.race.cli", "albert-finetune-race", ["--data_dir="], "flag --data_dir=: is empty: give a path"),
    ("finetune.race.cli", "albert-finetune-race", ["--data_dir=RACE", "--max_train_examples=0"],
     "flag --max_train_examples=0: 0 is not a positive integer"),
    ("albert_tf.cli.pretrain", "albert-pretrain", ["--input_file=x", "--max_seq_length=0"],
     "flag --max_seq_length=0: 0 is not a positive integer"),
    ("albert_tf.cli.pretrain", "albert-pretrain", ["--input_file=x", "--train_batch_size=-3"],
     "flag --train_batch_size=-3: -3 is not a positive integer"),
    ("albert_tf.cli.convert", "albert-convert", ["--source=tf1", "--input="], "flag --input=: is empty: give a path"),
    ("albert_tf.cli.fill_mask", "albert-fill-mask", ["--saved_model=x", "--text=a [MASK]", "--top_k=0"],
     "flag --top_k=0: 0 is not a positive integer"),
])
def test_a_bad_flag_value_is_exit_2_naming_the_flag_before_anything_is_written(module, program, flags, line, tmp_path,
                                                                              small_data_dir, monkeypatch, capsys):
    argv = [program, *flags]
    if program.startswith(("albert-finetune", "albert-pretrain")):
        argv += _model_flags(tmp_path, small_data_dir)
    if program.startswith("albert-finetune"):
        argv.append("--do_train")
    if module == "finetune.ner.cli":
        argv.append(f"--train_file={small_data_dir / 'ner' / 'wnut17' / 'emerging.dev.conll'}")
    if program == "albert-convert":
        argv.append(f"--output_dir={tmp_path / 'run'}")
    code, lines = _console(module, argv, monkeypatch, capsys)
    assert (code, lines) == (2, [f"error: {line} (see --help)"])
    assert not (tmp_path / "run").exists()


def test_a_flagfile_that_cannot_be_read_is_one_line_without_absls_prefix(tmp_path, monkeypatch, capsys):
    code, lines = _console("albert_tf.cli.fill_mask", ["albert-fill-mask", f"--flagfile={tmp_path / 'none'}"],
                           monkeypatch, capsys)
    assert (code, lines) == (2, [f"error: Unable to open flagfile: [Errno 2] No such file or directory: "
                                 f"'{tmp_path / 'none'}' (see --help)"])


# ---- item 9: albert-train-vocab on a byte that is not UTF-8 -----------------------------------------


@pytest.mark.parametrize("good_lines", [2, 3000])
def test_train_vocab_names_the_line_that_is_not_utf8(good_lines, tmp_path, monkeypatch, capsys):
    """SentencePiece stopped reading at the bad line: before it, "Vocabulary size too high (500)" (the
    wrong fix) or a 41-line SystemError; after it, a vocabulary of the text before the line."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"".join(b"line %d of alpha beta gamma delta words\n" % i for i in range(good_lines))
                       + b"caf\xe9 au lait\n" + b"".join(b"more text %d epsilon\n" % i for i in range(200)))
    out = tmp_path / "vocab"
    code, lines = _console("data_prep.train_vocab", ["albert-train-vocab", f"--input_file={corpus}",
                                                     f"--model_prefix={out / 'v'}", "--vocab_size=100"],
                           monkeypatch, capsys)
    assert (code, lines[-1]) == (1, f"error: {corpus}:{good_lines + 1}: not valid UTF-8 (invalid continuation byte "
                                    "at byte 3 of the line); convert the file or pass --skip_bad_lines to skip "
                                    "such lines")
    assert not out.exists()  # made for the run, removed with it


# ---- item 5: the Python task API --------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder_preset(tmp_path_factory, small_data_dir):
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder

    keras.utils.set_random_seed(0)
    folder = tmp_path_factory.mktemp("encoder") / "preset"
    config = AlbertConfig(**{**CONFIG, "max_position_embeddings": 32})
    AlbertEncoder(config).save_to_preset(folder, small_data_dir / "albert" / "30k-clean.model")
    return folder


def test_the_entity_recognizer_refuses_what_it_cannot_learn_or_read_in_one_line(encoder_preset):
    import keras
    import numpy as np

    from albert_tf import AlbertEntityRecognizer
    from albert_tf.utils.errors import UserError

    for labels in ([], ["O"]):  # before: accepted, a tagger that can never find an entity
        with pytest.raises(UserError, match=rf"^labels {re.escape(str(labels))} name no entity type: give the types "):
            AlbertEntityRecognizer.from_preset(encoder_preset, labels=labels)
    recognizer = AlbertEntityRecognizer.from_preset(encoder_preset, labels=["person", "location"], sequence_length=16)
    with pytest.raises(UserError, match=r"^y\[0\] is 'B-person O', not a list of tags: give one tag a word"):
        recognizer.fit([["Ada", "lives"]], ["B-person O"], verbose=0)  # before: "2 words and y[0] 10 tags"
    for x, kind in ((5, "int"), (None, "NoneType")):  # before: a TypeError
        with pytest.raises(UserError, match=rf"^x is {x} \({kind}\): give a string or a list of strings$"):
            recognizer.predict(x)

    # A diverging optimizer: the fit stops at the first NaN, the weights put back (before: it trained
    # on NaN to the end, and predict then found nothing, without a word).
    expected = recognizer.predict(["Ada lives in Paris"])
    weights = [v.numpy().copy() for v in recognizer.weights]
    recognizer.compile(optimizer=keras.optimizers.SGD(learning_rate=1e30))
    with pytest.raises(UserError, match=r"^loss is nan at epoch 1, batch 2: training diverged \(the weights are put "
                                        r"back as they were before fit\); lower the learning rate or check the data$"):
        recognizer.fit([["Ada", "lives", "in", "Paris"]] * 8, [["B-person", "O", "O", "B-location"]] * 8, epochs=3,
                       batch_size=2, shuffle=False, verbose=0)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(weights, recognizer.weights))
    assert recognizer.predict(["Ada lives in Paris"]) == expected
    recognizer.tagger.classifier.kernel.assign(np.full(recognizer.tagger.classifier.kernel.shape, np.nan, np.float32))
    with pytest.raises(UserError, match=r"^the tagger's outputs are NaN: its weights are not finite"):
        recognizer.predict(["Ada lives in Paris"])


# ---- item 7: a checkpoint or SavedModel write the disk refuses ----------------------------------------

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
FILE_LIMIT = 128 * 1024  # a checkpoint's data (weights and Adam's two slots) is 204 KB, every other file under 64 KB


def _run_limited(warm_python, module, *args, limit=FILE_LIMIT):
    """`python -m module args...` in a child of the warm Python (TensorFlow loaded already) whose writes
    stop at `limit` bytes a file: the finished process."""
    code = ("import resource, runpy, signal, sys; "
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "  # a write then fails with EFBIG, as a full disk's does
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY)); "
            "sys.argv = sys.argv[1:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")
    return warm_python.run(["-c", code, module, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_a_checkpoint_the_disk_refuses_is_one_line_and_leaves_no_temp_folder(tmp_path, tmp_path_factory,
                                                                              small_data_dir, warm_python,
                                                                              monkeypatch, capsys):
    """A file size limit stands in for a full disk (tests/albert_tf/utils/test_full_disk.py). Before: TensorFlow's
    `SaveV2 ... ckpt-4_temp/part-00000-of-00001.data-00000-of-00001.tempstate...; File too large`, and
    `ckpt-4_temp/` left, which on a full disk made the rerun fail again."""
    # The first run, two steps of `--do_train --num_train_steps=2`, is the session's (tests/pretrained_runs.py).
    shared = glue_mrpc_two_steps(tmp_path_factory, small_data_dir / "glue")
    out = copy_of(shared / "run", tmp_path / "run")
    args = [*glue_mrpc_flags(small_data_dir / "glue", out, shared / "config.json"), "--do_train"]
    kept = sorted(os.listdir(out))
    assert "ckpt-2.index" in kept
    run = _run_limited(warm_python, "finetune.glue.cli", *args[1:], "--num_train_steps=4")
    assert (run.returncode, run.stderr.splitlines()[-1]) == (1, f"error: File too large: {out / 'ckpt-4'}"), run.stderr
    assert sorted(os.listdir(out)) == kept  # the checkpoint before, and no ckpt-4_temp/
    # A temp folder that a killed save left is removed when the run resumes, which then finishes.
    (out / "ckpt-3_temp").mkdir()
    (out / "ckpt-3_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"\0" * 1000)
    assert _console("finetune.glue.cli", [*args, "--num_train_steps=4"], monkeypatch, capsys)[0] == 0
    assert "ckpt-4.index" in os.listdir(out) and not any(name.endswith("_temp") for name in os.listdir(out))


def test_no_space_left_while_tensorflow_writes_is_the_documented_line(tmp_path):
    """The message of a full disk, as TensorFlow's SaveV2 words it (a real full disk is not made here)."""
    import tensorflow as tf

    from albert_tf.checkpoints.run_folder import disk_refusals_named
    from albert_tf.utils.errors import one_line

    prefix = str(tmp_path / "ckpt-7")
    os.makedirs(prefix + "_temp")
    with pytest.raises(OSError) as error:
        with disk_refusals_named(prefix):
            raise tf.errors.ResourceExhaustedError(None, None, "{{function_node __wrapped__SaveV2}} " + prefix +
                                                   "_temp/part-00000-of-00001.data-00000-of-00001.tempstate9; "
                                                   "No space left on device [Op:SaveV2]")
    assert one_line(error.value) == (f"no space left on the device writing {prefix}: free some space and rerun "
                                     "(finished work is kept)", 1)
    assert os.listdir(tmp_path) == []
    with pytest.raises(tf.errors.InvalidArgumentError):  # any other error is TensorFlow's, untouched
        with disk_refusals_named(prefix):
            raise tf.errors.InvalidArgumentError(None, None, "shapes differ")


def test_a_saved_model_the_disk_refuses_is_one_line_naming_the_export(tmp_path, warm_python):
    """Before: `SaveV2 ... variables/variables_temp/part-...tempstate...; File too large`."""
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder

    keras.utils.set_random_seed(0)
    config = AlbertConfig(**{**CONFIG, "vocab_size": 300, "max_position_embeddings": 32})
    AlbertEncoder(config).save_to_preset(tmp_path / "preset", TINY_VOCAB)  # its weights 68 KB
    out = tmp_path / "export"
    run = _run_limited(warm_python, "albert_tf.cli.export", f"--preset={tmp_path / 'preset'}", f"--output_dir={out}",
                   "--max_seq_length=16", limit=48 * 1024)
    assert (run.returncode, run.stderr.splitlines()[-1]) == (1, f"error: File too large: {out}"), run.stderr
    assert sorted(os.listdir(tmp_path)) == ["preset"]  # no export, no partial folder beside it
