"""The shard writer: reproducible bytes, parallel and resumable runs, readable output, bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.datasets import pretraining_dataset
from albert_tf.data.features import pretraining_feature_spec
from data_prep.documents import BadInputError, check_not_all_empty, expand_input_patterns
from data_prep.instances import InstanceOptions
from data_prep.shards import METADATA_FILE, GenerationConfig, run_generation
from tests.data_prep.paused_generation import PAUSED_ENV
from tests.helpers import process_group_states

OPTIONS = InstanceOptions(max_seq_length=64, max_predictions_per_seq=10)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def corpus(small_data_dir):
    return small_data_dir / "corpus" / "gutenberg"


@pytest.fixture(scope="module")
def spm_model(small_data_dir):
    return str(small_data_dir / "albert" / "30k-clean.model")


def _config(files, spm_model, **overrides):
    settings = dict(
        input_files=tuple(str(f) for f in files),
        spm_model_file=spm_model,
        options=OPTIONS,
        dupe_factor=2,
        num_output_shards=3,
    )
    settings.update(overrides)
    return GenerationConfig(**settings)


def _shard_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.glob("pretrain-*"))}


def _leftovers(directory):
    return sorted(p.name for p in directory.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus, spm_model):
    """One run with one worker: the bytes every other run must reproduce."""
    directory = tmp_path_factory.mktemp("reference")
    config = _config([corpus / "shakespeare-macbeth.txt", corpus / "blake-poems.txt"], spm_model)
    result = run_generation(config, str(directory), num_workers=1, progress=False)
    return config, directory, result


def test_same_bytes_for_two_workers_and_for_a_fresh_rerun(reference, tmp_path):
    config, directory, result = reference
    expected = _shard_bytes(directory)
    assert list(expected) == [f"pretrain-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert all(len(b) > 10_000 for b in expected.values())
    two = run_generation(config, str(tmp_path / "two"), num_workers=2, progress=False)
    assert _shard_bytes(tmp_path / "two") == expected
    assert two["counts"] == result["counts"]
    run_generation(config, str(tmp_path / "again"), num_workers=1, progress=False)
    assert _shard_bytes(tmp_path / "again") == expected


def test_a_rerun_skips_complete_shards_and_remakes_missing_ones(reference, tmp_path):
    config, directory, _ = reference
    expected = _shard_bytes(directory)
    work = tmp_path / "work"
    run_generation(config, str(work), progress=False)
    assert run_generation(config, str(work), progress=False)["generated_shards"] == 0
    (work / "pretrain-00001-of-00003.tfrecord").unlink()
    again = run_generation(config, str(work), progress=False)
    assert again["generated_shards"] == 1
    assert _shard_bytes(work) == expected


def test_a_run_killed_with_sigkill_then_rerun_gives_the_same_bytes(tmp_path, data_dir, spm_model):
    files = [data_dir / "corpus" / "gutenberg" / "austen-persuasion.txt"]  # long enough to be killed midway
    config = _config(files, spm_model, num_output_shards=2, dupe_factor=4)
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    reference_result = run_generation(config, str(reference_dir), progress=False)
    flags = [f"--input_file={files[0]}", f"--output_dir={killed_dir}", f"--spm_model_file={spm_model}",
             "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=4", "--num_output_shards=2",
             "--num_workers=2", "--noprogress"]
    # The tool with workers that wait partway through their input (tests/data_prep/paused_generation.py):
    # the parent is killed while both are known to be midway, however far a loaded machine let the
    # run go while this process polled (the run used to be killed once a shard was begun, and could
    # have finished both shards by then). In a process group of its own, which its workers (and
    # their fork server) share.
    paused = tmp_path / "paused"
    paused.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "tests.data_prep.paused_generation", *flags], cwd=REPO_ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, PAUSED_ENV: str(paused)})
    try:
        deadline = time.monotonic() + 120
        while len(list(paused.iterdir())) < 2:
            assert process.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
        (paused / "go").write_text("")  # the workers go on (to stop, their parent gone)
    assert process.returncode == -signal.SIGKILL
    # The workers notice that their parent died and stop: every process of the run ends (waited for,
    # not guessed from files that stopped growing for a while: a descheduled orphan writes nothing
    # either, and would then write beside the rerun), and neither finishes its shard.
    deadline = time.monotonic() + 120
    while any(state != "Z" for state in process_group_states(process.pid)):  # a zombie has ended
        assert time.monotonic() < deadline, "the workers outlived their parent"
        time.sleep(0.05)
    assert not list(killed_dir.glob("*.incomplete-*"))  # each stopped worker removed its partial file
    assert not list(killed_dir.glob("pretrain-*.tfrecord"))
    rerun = run_generation(config, str(killed_dir), progress=False)
    assert _shard_bytes(killed_dir) == _shard_bytes(reference_dir)
    assert not [name for name in _leftovers(killed_dir) if ".incomplete" in name]
    assert rerun["counts"] == reference_result["counts"]


def test_the_reader_reads_what_the_writer_wrote(reference):
    config, directory, result = reference
    counts = result["counts"]
    dataset = pretraining_dataset(
        str(directory / "pretrain-*"), batch_size=1, max_seq_length=64, max_predictions_per_seq=10, is_training=False
    )
    from_reader = [{k: v.numpy()[0] for k, v in batch.items()} for batch in dataset]
    assert len(from_reader) == counts["instances"] == sum(result["shards"].values())
    spec = pretraining_feature_spec(64, 10)
    raw = []
    for index in range(3):  # the reader interleaves the files record by record
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(directory / config.shard_name(index)))]
        parsed = {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}
        raw.append([{k: v[i] for k, v in parsed.items()} for i in range(len(records))])
    interleaved = [shard[i] for i in range(max(map(len, raw))) for shard in raw if i < len(shard)]
    assert len(interleaved) == len(from_reader)
    for got, expected in zip(from_reader, interleaved):
        for name in spec:
            assert np.array_equal(got[name], expected[name]), name
    assert sum(int(r["next_sentence_labels"][0]) for r in from_reader) == counts["labels"][1]
    assert sum(float(r["masked_lm_weights"].sum()) for r in from_reader) == counts["masked_tokens"]
    assert sum(int(r["input_mask"].sum()) for r in from_reader) == counts["tokens"]


def test_gzip_shards_are_reproducible_and_hold_the_same_records(reference, tmp_path):
    config, directory, _ = reference
    gzip_config = _config(config.input_files, config.spm_model_file, compression="gzip")
    run_generation(gzip_config, str(tmp_path / "a"), progress=False)
    run_generation(gzip_config, str(tmp_path / "b"), num_workers=1, progress=False)
    compressed = _shard_bytes(tmp_path / "a")
    assert list(compressed) == [f"pretrain-0000{i}-of-00003.tfrecord.gz" for i in range(3)]
    assert compressed == _shard_bytes(tmp_path / "b")
    for name in compressed:
        plain = [r.numpy() for r in tf.data.TFRecordDataset(str(directory / name[:-3]))]
        unzipped = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "a" / name), compression_type="GZIP")]
        assert plain == unzipped


def test_metadata_records_settings_counts_and_the_model_checksum(reference, spm_model):
    import hashlib

    _, directory, result = reference
    saved = json.loads((directory / METADATA_FILE).read_text())
    assert saved["complete"] is True
    assert saved["settings"]["spm_model_sha256"] == hashlib.sha256(open(spm_model, "rb").read()).hexdigest()
    assert saved["settings"]["max_seq_length"] == 64 and saved["settings"]["dupe_factor"] == 2
    assert saved["counts"] == result["counts"]
    assert sum(saved["counts"]["labels"]) == saved["counts"]["instances"] > 1000


def test_output_dir_with_shards_made_with_other_flags_is_refused_untouched(reference, tmp_path, corpus, spm_model):
    config, directory, _ = reference
    before = _shard_bytes(directory)
    other = _config(config.input_files, spm_model, dupe_factor=3)
    with pytest.raises(BadInputError, match=r"other settings \(dupe_factor: 2 there, 3 now\)"):
        run_generation(other, str(directory), progress=False)
    assert _shard_bytes(directory) == before
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "pretrain-00000-of-00001.tfrecord").write_bytes(b"")
    with pytest.raises(BadInputError, match=r"holds shards .* but no pretraining_data\.json"):
        run_generation(config, str(stray), progress=False)


def test_input_glob_matching_nothing_is_named(tmp_path, corpus):
    with pytest.raises(BadInputError, match=r"input pattern '.*/missing-\*\.txt' matches no file"):
        expand_input_patterns(f"{corpus}/blake-poems.txt,{tmp_path}/missing-*.txt")
    assert (
        expand_input_patterns(f"{corpus}/blake-poems.txt,{corpus}/blake-poems.txt")
        == [str(corpus / "blake-poems.txt")] * 2
    )


def test_empty_files_are_reported(tmp_path, corpus, spm_model):
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("")
    blank.write_text("\n  \n\t\n")
    with pytest.raises(BadInputError, match=r"the input files hold no text: .*empty\.txt, .*blank\.txt"):
        check_not_all_empty([str(empty), str(blank)])
    assert check_not_all_empty([str(empty), str(corpus / "blake-poems.txt")]) == [str(empty)]
    result = run_generation(
        _config([empty, corpus / "blake-poems.txt"], spm_model, num_output_shards=1),
        str(tmp_path / "out"),
        progress=False,
    )
    assert result["counts"]["instances"] > 0


def _non_utf8_lines(path):
    count = 0
    for line in path.read_bytes().split(b"\n"):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            count += 1
    return count


def test_a_file_that_is_not_utf8_is_named_with_its_line_and_nothing_is_written(tmp_path, corpus, spm_model):
    caesar = corpus / "shakespeare-caesar.txt"  # Latin-1: "Cæsar" first appears on line 119
    out = tmp_path / "out"
    with pytest.raises(BadInputError, match=r"shakespeare-caesar\.txt:119: not valid UTF-8 .*--skip_bad_lines"):
        run_generation(_config([caesar], spm_model, num_output_shards=2), str(out), progress=False)
    assert _leftovers(out) == []
    skipped = run_generation(
        _config([caesar], spm_model, num_output_shards=2, skip_bad_lines=True), str(out), progress=False
    )
    assert skipped["counts"]["bad_lines"] == _non_utf8_lines(caesar) == 2
    assert skipped["counts"]["instances"] > 0


def _run_command_line(args):
    """Runs the console script's main in this process (a subprocess would re-import TensorFlow)."""
    from tests.helpers import run_create_pretraining_data

    return run_create_pretraining_data(args)


def test_the_command_line_reports_bad_input_and_exits_nonzero(tmp_path, corpus, spm_model, capsys):
    out = tmp_path / "out"
    code = _run_command_line(
        [
            f"--input_file={corpus}/chesterton-ball.txt",
            f"--output_dir={out}",
            f"--spm_model_file={spm_model}",
            "--noprogress",
        ]
    )
    assert code == 1
    assert "error: " in capsys.readouterr().err
    assert _leftovers(out) == []
    code = _run_command_line(
        [f"--input_file={tmp_path}/none-*.txt", f"--output_dir={out}", f"--spm_model_file={spm_model}"]
    )
    assert code == 1 and "none-*.txt' matches no file" in capsys.readouterr().err


def test_the_command_line_prints_the_summary(tmp_path, corpus, spm_model, capsys):
    code = _run_command_line(
        [
            f"--input_file={corpus}/blake-poems.txt",
            f"--output_dir={tmp_path}",
            f"--spm_model_file={spm_model}",
            "--max_seq_length=64",
            "--max_predictions_per_seq=10",
            "--dupe_factor=1",
            "--noprogress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    counts = json.loads((tmp_path / METADATA_FILE).read_text())["counts"]
    assert f"instances:        {counts['instances']:,} in 1 shard\n" in printed
    assert f"masked tokens:    {counts['masked_tokens']:,}" in printed


def test_a_model_without_albert_pieces_writes_nothing(tmp_path, corpus):
    import sentencepiece as spm

    spm.SentencePieceTrainer.Train(
        input=str(corpus / "blake-poems.txt"), model_prefix=str(tmp_path / "plain"), vocab_size=200, minloglevel=2
    )
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"plain\.model lacks the ALBERT special pieces"):
        run_generation(_config([corpus / "blake-poems.txt"], str(tmp_path / "plain.model")), str(out), progress=False)
    assert _leftovers(out) == []
