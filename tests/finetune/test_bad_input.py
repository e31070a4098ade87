"""Fine-tuning given bad input (issue 19): no results from a random head, GLUE rows named by file and line."""

import pathlib
import sys

import pytest

from albert_tf.utils.errors import UserError
from finetune.glue import cli
from finetune.glue.readers import MalformedRowError, read_examples

pytestmark = pytest.mark.faults  # python -m pytest -q -m faults: the fault and bad-input tests

MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def _mrpc(tmp_path, *rows, header=True, encoding="utf-8"):
    folder = tmp_path / "MRPC"
    folder.mkdir(exist_ok=True)
    path = folder / "dev.tsv"
    text = (MRPC_HEADER if header else "") + "".join(rows)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_eval_or_predict_without_a_fine_tuned_model_is_refused(tmp_path, small_data_dir, monkeypatch, capsys):
    out = tmp_path / "out"
    args = ["albert-finetune-glue", "--task=RTE", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={out}",
            "--preset=albert_base_v2", "--do_eval", "--do_predict"]
    with pytest.raises(UserError) as error:
        cli.finetune(args)
    assert str(error.value) == (
        f"--do_eval and --do_predict without --do_train needs a fine-tuned model, and --output_dir {out} holds no "
        "checkpoint: add --do_train, or give the output_dir of a fine-tuning run"
    )
    assert not out.exists()  # no eval_results.json, no submission, no export
    monkeypatch.setattr(sys, "argv", args[:-1])
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: --do_eval without --do_train needs a fine-tuned model, and --output_dir {out} holds no "
        "checkpoint: add --do_train, or give the output_dir of a fine-tuning run"
    )


def test_a_byte_that_is_not_utf8_is_named_with_file_and_line_and_can_be_skipped(tmp_path):
    good = "1\t1\t2\tThe cat sat.\tA cat sat.\n"
    path = _mrpc(tmp_path, good, "0\t3\t4\tbad \xff byte\tanother\n", good)
    path.write_bytes(path.read_bytes().replace("\xff".encode("utf-8"), b"\xff"))
    with pytest.raises(MalformedRowError) as error:
        read_examples("MRPC", tmp_path, "dev")
    assert str(error.value) == (
        f"{path}:3: not valid UTF-8 (invalid start byte at byte 10 of the line) (skip_bad_rows counts and skips "
        "such rows)"
    )
    read = read_examples("MRPC", tmp_path, "dev", skip_bad_rows=True)
    assert len(read.examples) == 2 and [str(row) for row in read.skipped] == [
        f"{path}:3: not valid UTF-8 (invalid start byte at byte 10 of the line)"]


def test_a_tsv_without_its_header_row_is_refused(tmp_path):
    path = _mrpc(tmp_path, "1\t1\t2\tThe cat sat.\tA cat sat.\n", "0\t3\t4\tOne.\tTwo.\n", header=False)
    with pytest.raises(MalformedRowError) as error:
        read_examples("MRPC", tmp_path, "dev")
    assert str(error.value) == (
        f"{path}:1: the first row is a data row, not the header of the MRPC dev layout: the file lacks its header "
        "row; add it (the GLUE download script's files have one)"
    )


@pytest.mark.parametrize("filesystem", ["local", "ram"])
def test_a_feature_cache_left_half_written_is_never_trusted(tmp_path, caplog, filesystem):
    """On the local disk and on TensorFlow's ram:// (no folder rename, like gs://, where a pod's run
    keeps its cache): a killed write leaves nothing at the cache's names, a record file without its
    description (written last) is made again, a truncated one is named and rebuilt."""
    import uuid

    import tensorflow as tf

    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune.cache import cache_features

    tokenizer = AlbertTokenizer(str(pathlib.Path(__file__).parents[1] / "fixtures" / "data_prep" / "tiny_vocab.model"))
    source = tmp_path / "train.tsv"
    source.write_text("a\tb\n")
    cache_dir = str(tmp_path / "cache") if filesystem == "local" else f"ram://cache-{uuid.uuid4().hex[:8]}"
    spec = {"input_ids": tf.io.FixedLenFeature([4], tf.int64)}
    conversions = []

    def convert(report, killed_at=None):
        conversions.append(1)
        for i in range(50):
            if i == killed_at:
                raise KeyboardInterrupt
            yield {"input_ids": [i, 1, 2, 3]}

    def cached(killed_at=None):
        return cache_features(task="toy", split="train", spec=spec, max_seq_length=4, sources=[source], settings=(),
                              tokenizer=tokenizer, convert=lambda report: convert(report, killed_at),
                              cache_dir=cache_dir)

    def read(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()

    with pytest.raises(KeyboardInterrupt):
        cached(killed_at=20)
    assert tf.io.gfile.listdir(cache_dir) == []
    first = cached()
    assert first.path.startswith(cache_dir) and first.num_records == 50 and len(conversions) == 2
    description = first.path[: -len(".tfrecord")] + ".json"
    assert sorted(tf.io.gfile.listdir(cache_dir)) == [pathlib.PurePath(p).name for p in (description, first.path)]
    data = read(first.path)

    tf.io.gfile.remove(description)  # a run killed between the record file and its description
    assert cached() == first and len(conversions) == 3 and read(first.path) == data

    tf.io.gfile.remove(first.path)  # a copy cut short (ram://'s "wb" would append to the file)
    with tf.io.gfile.GFile(first.path, "wb") as f:
        f.write(data[: len(data) // 2])
    with caplog.at_level("WARNING"):
        again = cached()
    assert len(conversions) == 4 and again == first and read(first.path) == data
    assert f"feature cache {first.path} is damaged (25 records, its description says 50): rebuilding it" in caplog.text
    cached()
    assert len(conversions) == 4  # an intact cache is reused


@pytest.mark.parametrize("tool", ["glue", "squad", "race"])
def test_an_unusable_output_or_cache_dir_is_refused_up_front_naming_the_flag(tmp_path, small_data_dir, tool):
    """Through albert_tf.utils.output_dirs' one rule, before data is read or a model built."""
    import importlib

    from albert_tf.utils.errors import FlagError

    module = importlib.import_module(f"finetune.{tool}.cli")
    (tmp_path / "a_file").write_text("x")
    inputs = {
        "glue": ["--task=RTE", f"--data_dir={small_data_dir / 'glue'}"],
        "squad": [f"--train_file={tmp_path / 'missing.json'}"],
        "race": [f"--data_dir={tmp_path / 'missing'}"],
    }[tool]
    common = [f"albert-finetune-{tool}", *inputs, "--preset=albert_base_v2", "--do_train"]
    out = tmp_path / "a_file" / "run"
    with pytest.raises(FlagError) as error:
        module.finetune([*common, f"--output_dir={out}"])
    assert str(error.value) == f"--output_dir {out} cannot be created (a part of the path is a file)"
    with pytest.raises(FlagError) as error:
        module.finetune([*common, f"--output_dir={tmp_path / 'run'}", f"--cache_dir={tmp_path / 'a_file'}"])
    assert str(error.value) == f"--cache_dir {tmp_path / 'a_file'} is a file, not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_a_max_seq_length_over_the_models_positions_is_a_flag_error(tmp_path, small_data_dir, monkeypatch, capsys):
    """Issue 40: it exited 1 and spelled the flag without its dashes."""
    import json

    from albert_tf.utils import quiet
    from tests.albert_tf.tiny import TINY

    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(TINY.replace(vocab_size=30000).to_dict()))  # max_position_embeddings 32
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", [
        "albert-finetune-glue", "--task=MRPC", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={out}",
        f"--albert_config_file={config}", f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
        "--max_seq_length=48", "--do_train"])
    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert (exited.value.code, capsys.readouterr().err.splitlines()[-1]) == (
        2, "error: --max_seq_length 48 exceeds the model's max_position_embeddings (32)")
    assert not out.exists()


def test_the_in_process_door_parses_as_the_console_script(tmp_path, monkeypatch, capsys):
    """Issue 51: `finetune(argv)` was a second parser without --help, --verbose or the one-line
    error; now both doors parse through albert_tf.cli.entry_point.parse_command_line."""
    from albert_tf.utils import quiet
    from albert_tf.utils.errors import FlagError

    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    with pytest.raises(SystemExit) as exited:
        cli.finetune(["albert-finetune-glue", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(cli.__doc__)  # the script's doc, then its flags
    with pytest.raises(FlagError) as error:
        cli.finetune(["albert-finetune-glue", "--task=RTE", "--num_train_steps=many"])
    assert str(error.value).startswith("flag --num_train_steps=many: invalid literal for int()")
    assert "\n" not in str(error.value)
    with pytest.raises(FlagError, match=r"^unexpected arguments: \['stray'\]$"):
        cli.finetune(["albert-finetune-glue", "--verbose", "stray"])
    assert quiet.verbose()  # --verbose is the in-process door's too
