"""Data prep given bad input or faults: one clear error, nothing half-written, no silent empty output."""

import json
import re

import pytest

from data_prep.documents import BadInputError
from data_prep.instances import InstanceOptions
from data_prep.shards import METADATA_FILE, GenerationConfig, run_generation

pytestmark = pytest.mark.faults  # python -m pytest -q -m faults: the fault and bad-input tests

OPTIONS = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5)


@pytest.fixture(scope="module")
def spm_model(data_dir):
    return str(data_dir / "albert" / "30k-clean.model")


def _config(path, spm_model, **overrides):
    return GenerationConfig(input_files=(str(path),), spm_model_file=spm_model, options=OPTIONS,
                            dupe_factor=1, **overrides)


def _files(directory):
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_an_input_that_makes_no_instance_is_an_error_not_empty_shards(tmp_path, spm_model):
    (tmp_path / "one.txt").write_text("hi\n")
    out = tmp_path / "out"
    with pytest.raises(BadInputError) as error:
        run_generation(_config(tmp_path / "one.txt", spm_model), str(out), progress=False)
    assert str(error.value) == (
        "the input's 1 document (1 line) made no instance: too little text for --max_seq_length=64, or the "
        f"wrong --input_format (now sentence_per_line); nothing was written to {out}"
    )
    assert _files(out) == []


def test_more_shards_than_documents_is_an_error_not_zero_byte_shards(tmp_path, spm_model):
    text = ("the cat sat on the mat. it was a fine day.\nthe dog barked at the cat all day long.\n\n"
            "another document here.\nwith two lines of text.\n")
    (tmp_path / "two.txt").write_text(text)
    out = tmp_path / "out"
    with pytest.raises(BadInputError) as error:
        run_generation(_config(tmp_path / "two.txt", spm_model, num_output_shards=4), str(out), progress=False)
    assert re.fullmatch(
        r"[23] of 4 shards got no instance \(pretrain-0000[0-3]-of-00004\.tfrecord, \.\.\.\): the input's 2 documents "
        r"are too few for --num_output_shards=4 \(documents are dealt to shards by a hash of their text\); give "
        rf"fewer shards; nothing was written to {re.escape(str(out))}",
        str(error.value),
    )
    assert _files(out) == []
    result = run_generation(_config(tmp_path / "two.txt", spm_model, num_output_shards=1), str(out), progress=False)
    assert all(n > 0 for n in result["shards"].values())
    assert json.loads((out / METADATA_FILE).read_text())["complete"] is True


def test_a_huge_line_read_as_one_sentence_is_an_error(tmp_path, spm_model):
    from data_prep.documents import MAX_SENTENCE_CHARS

    (tmp_path / "a.txt").write_text("a first sentence.\n")
    (tmp_path / "book.txt").write_text("one short line.\n" + "word " * (MAX_SENTENCE_CHARS // 5 + 1) + "\n")
    config = GenerationConfig(input_files=(str(tmp_path / "a.txt"), str(tmp_path / "book.txt")),
                              spm_model_file=spm_model, options=OPTIONS, dupe_factor=1)
    with pytest.raises(BadInputError) as error:
        run_generation(config, str(tmp_path / "out"), progress=False)
    assert str(error.value) == (
        f"{tmp_path / 'book.txt'}:2: a line of 1,000,004 characters read as one sentence "
        "(--input_format=sentence_per_line allows 1,000,000); is the file one document a line "
        "(--input_format=document_per_line)?"
    )
    assert _files(tmp_path / "out") == []


def test_an_absurd_max_seq_length_is_refused():
    with pytest.raises(ValueError, match=r"^max_seq_length must be at most 8192 \(the released models read 512 "
                                         r"positions\), got 100000$"):
        InstanceOptions(max_seq_length=100000)


@pytest.mark.slow  # a subprocess with two workers: about a minute on a shared 2-core machine
def test_sigint_to_the_parent_stops_its_workers_and_leaves_no_partial_shard(tmp_path, data_dir, spm_model):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    command = [sys.executable, "-m", "data_prep.create_pretraining_data",
               f"--input_file={data_dir / 'corpus' / 'gutenberg' / 'austen-persuasion.txt'}", f"--output_dir={out}",
               f"--spm_model_file={spm_model}", "--max_seq_length=64", "--max_predictions_per_seq=5",
               "--dupe_factor=40", "--num_output_shards=2", "--num_workers=2", "--noprogress"]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Ctrl-C's SIGINT reaches a command in the foreground, where its default action holds; a test run
    # started in the background (`pytest &`) has it ignored, and the child would inherit that.
    process = subprocess.Popen(command, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not list(out.glob("*.incomplete-*")):
            time.sleep(0.01)
        assert process.poll() is None, "the run ended before it could be interrupted"
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and stderr.splitlines()[-1] == "error: interrupted"
    # Before, the parent waited for its workers to write every shard (about a minute here), which
    # then stayed: neither a complete nor a partial shard shows that it stopped them at once.
    assert not list(out.glob("pretrain-*"))


def test_a_full_disk_loses_no_finished_shard_and_a_rerun_completes_the_same_bytes(tmp_path, spm_model, monkeypatch,
                                                                                 data_dir):
    import errno

    from albert_tf.utils.errors import one_line
    from data_prep import shards

    corpus = data_dir / "corpus" / "gutenberg" / "blake-poems.txt"
    config = _config(corpus, spm_model, num_output_shards=2)
    reference = tmp_path / "reference"
    run_generation(config, str(reference), progress=False)
    out = tmp_path / "out"
    write_json = shards.write_json

    def full_at_the_second_shard(path, value):
        if path.endswith("pretrain-00001-of-00002.tfrecord.json"):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        write_json(path, value)

    monkeypatch.setattr(shards, "write_json", full_at_the_second_shard)
    with pytest.raises(OSError) as error:
        run_generation(config, str(out), progress=False)
    assert one_line(error.value) == (
        f"no space left on the device writing {out}/shard_stats/pretrain-00001-of-00002.tfrecord.json: free some "
        "space and rerun (finished work is kept)", 1)
    assert sorted(p.name for p in out.glob("pretrain-*")) == ["pretrain-00000-of-00002.tfrecord"]
    assert json.loads((out / METADATA_FILE).read_text())["complete"] is False  # the reader refuses it
    monkeypatch.setattr(shards, "write_json", write_json)
    assert run_generation(config, str(out), progress=False)["generated_shards"] == 1
    assert {p.name: p.read_bytes() for p in out.glob("pretrain-*")} == {
        p.name: p.read_bytes() for p in reference.glob("pretrain-*")}


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_an_unusable_output_dir_is_refused_up_front_naming_the_flag(tmp_path, spm_model, capsys, runner):
    from tests.helpers import run_create_pretraining_data

    (tmp_path / "a_file").write_text("x")
    beam = [f"--runner={runner}"] if runner else []
    # The input glob matches nothing too: the output_dir is checked first, before any input is read.
    for output_dir, message in [
        (tmp_path / "a_file", f"--output_dir {tmp_path / 'a_file'} is a file, not a folder"),
        (tmp_path / "a_file" / "out", f"--output_dir {tmp_path / 'a_file' / 'out'} cannot be created "
                                      "(a part of the path is a file)"),
    ]:
        code = run_create_pretraining_data([f"--input_file={tmp_path}/none-*.txt", f"--output_dir={output_dir}",
                                  f"--spm_model_file={spm_model}", "--noprogress", *beam])
        assert (code, capsys.readouterr().err.splitlines()) == (2, [f"error: {message}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_a_read_only_output_dir_is_refused_before_the_input_is_read(spm_model):
    from tests.helpers import as_another_user, world_readable_folder

    with world_readable_folder() as top:
        (top / "out").mkdir(mode=0o555)
        (top / "out").chmod(0o555)
        config = _config(top / "missing.txt", spm_model)  # never opened: the output_dir fails first
        assert as_another_user(lambda: run_generation(config, str(top / "out"), progress=False)) == (
            f"--output_dir {top / 'out'} is not writable (Permission denied)")


@pytest.mark.parametrize("content, problem", [
    ("[]", "holds list, not what albert-create-pretraining-data writes (an object of settings, counts and complete)"),
    ("{", ": not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
])
def test_a_description_that_is_not_an_object_is_named_and_nothing_is_added(content, problem, tmp_path, spm_model,
                                                                         data_dir, capsys):
    """Issue 40: `[]` gave a 29-34 line traceback and bad JSON named no file; the refused run left an
    empty shard_stats/."""
    from albert_tf.data.datasets import check_complete
    from albert_tf.utils.errors import UserError
    from tests.helpers import run_create_pretraining_data

    out = tmp_path / "out"
    out.mkdir()
    (out / METADATA_FILE).write_text(content)
    corpus = data_dir / "corpus" / "gutenberg" / "blake-poems.txt"
    expected = f"{out / METADATA_FILE}{'' if problem.startswith(':') else ' '}{problem}"
    code = run_create_pretraining_data([f"--input_file={corpus}", f"--output_dir={out}",
                                        f"--spm_model_file={spm_model}", "--noprogress"])
    assert (code, capsys.readouterr().err.splitlines()) == (1, [f"error: {expected}"])
    assert _files(out) == [METADATA_FILE] and (out / METADATA_FILE).read_text() == content
    with pytest.raises(UserError) as error:  # albert-pretrain reading records beside it
        check_complete([str(out / "pretrain-00000-of-00001.tfrecord")])
    assert str(error.value) == expected


def test_a_rerun_makes_again_a_shard_cut_short_since_saying_so(tmp_path, spm_model, data_dir, caplog):
    """Issue 40: a rerun reported success over a truncated shard, whose size nothing checked."""
    corpus = data_dir / "corpus" / "gutenberg" / "blake-poems.txt"
    config = _config(corpus, spm_model, num_output_shards=2)
    out = tmp_path / "out"
    run_generation(config, str(out), progress=False)
    made = {p.name: p.read_bytes() for p in out.glob("pretrain-*")}
    cut = out / "pretrain-00001-of-00002.tfrecord"
    cut.write_bytes(made[cut.name][:-100])
    result = run_generation(config, str(out), progress=False)
    assert result["generated_shards"] == 1
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{cut} is {len(made[cut.name]) - 100:,} bytes, {len(made[cut.name]):,} when it was made (cut short or "
        "changed since): making it again"]
    assert {p.name: p.read_bytes() for p in out.glob("pretrain-*")} == made
    assert run_generation(config, str(out), progress=False)["generated_shards"] == 0  # whole: kept


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_a_mistyped_flag_is_an_error_with_or_without_a_runner(tmp_path, spm_model, capsys, runner):
    """Issue 40: with --runner, Beam dropped what it could not parse, so `--num_output_shard=3` made
    the default's one shard without a word."""
    from tests.helpers import run_create_pretraining_data

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence here.\nAnother one there.\n")
    out = tmp_path / "out"
    beam = [f"--runner={runner}"] if runner else []
    code = run_create_pretraining_data([f"--input_file={corpus}", f"--output_dir={out}", f"--spm_model_file={spm_model}",
                                        "--noprogress", *beam, "--num_output_shard=3"])
    reason = ("neither this tool's nor one of Apache Beam's options (see --help)" if runner
              else "(flags for Apache Beam need --runner; see --help)")
    assert (code, capsys.readouterr().err.splitlines()) == (
        2, [f"error: unknown flag --num_output_shard=3{':' if runner else ''} {reason}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_beams_own_options_pass_by_their_beam_names_only():
    from albert_tf.utils.errors import FlagError
    from data_prep.beam.pipeline import beam_options

    options = beam_options(["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"])
    assert (options.get_all_options()["direct_num_workers"], options.get_all_options()["direct_running_mode"]) == (
        2, "multi_processing")
    with pytest.raises(FlagError, match=r"^unknown flag --direct_num_work=2: neither this tool's nor one of Apache "
                                        r"Beam's options \(see --help\)$"):
        beam_options(["--runner=DirectRunner", "--direct_num_work=2"])  # an abbreviation is not Beam's name
    # A runner's own options are Beam's too, though they exist only once the runner's module is imported.
    options = beam_options(["--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:1"])
    assert options.get_all_options()["address"] == "tcp://127.0.0.1:1"  # its Beam name (dest)


def test_a_folder_given_as_input_file_is_named_a_folder(tmp_path, spm_model, capsys):
    from tests.helpers import run_create_pretraining_data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("One sentence here.\n")
    out = tmp_path / "out"
    code = run_create_pretraining_data([f"--input_file={corpus}", f"--output_dir={out}", f"--spm_model_file={spm_model}",
                                        "--noprogress"])
    assert (code, capsys.readouterr().err.splitlines()) == (
        1, [f"error: input pattern '{corpus}' is a folder: give a glob of its files, such as '{corpus}/*'"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
