"""The Apache Beam pipeline writes the local tool's bytes, and refuses the input the local tool refuses."""

import json

import pytest

pytest.importorskip("apache_beam", reason="Apache Beam is not installed: pip install -e '.[beam]'")

from data_prep.beam.pipeline import run_beam_generation  # noqa: E402
from data_prep.documents import BadInputError  # noqa: E402
from data_prep.instances import InstanceOptions  # noqa: E402
from data_prep.shards import METADATA_FILE, GenerationConfig, run_generation  # noqa: E402
from tests.helpers import run_create_pretraining_data  # noqa: E402

IN_MEMORY = ["--runner=DirectRunner"]
TWO_PROCESSES = ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


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
        options=InstanceOptions(max_seq_length=64, max_predictions_per_seq=10),
        dupe_factor=2,
        num_output_shards=3,
    )
    settings.update(overrides)
    return GenerationConfig(**settings)


def _shard_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.glob("pretrain-*"))}


@pytest.fixture(scope="module")
def local(tmp_path_factory, corpus, spm_model):
    directory = tmp_path_factory.mktemp("local")
    config = _config([corpus / "shakespeare-macbeth.txt", corpus / "blake-poems.txt"], spm_model)
    return config, directory, run_generation(config, str(directory), num_workers=2, progress=False)


@pytest.mark.parametrize("beam_args", [IN_MEMORY, TWO_PROCESSES], ids=["1 worker", "2 processes"])
def test_the_pipeline_writes_the_local_tools_bytes(local, tmp_path, beam_args):
    config, local_dir, local_result = local
    result = run_beam_generation(config, str(tmp_path), beam_args)
    expected = _shard_bytes(local_dir)
    assert len(expected) == 3 and all(len(b) > 10_000 for b in expected.values())
    assert _shard_bytes(tmp_path) == expected
    assert result["counts"] == local_result["counts"] and result["shards"] == local_result["shards"]
    saved = json.loads((tmp_path / METADATA_FILE).read_text())
    assert saved["complete"] is True and saved["settings"] == local_result["settings"]
    assert saved["runner"] == "DirectRunner"


def test_gzip_shards_and_a_rerun_that_remakes_a_missing_shard(local, tmp_path, corpus, spm_model):
    config, _, _ = local
    gzip_config = _config(config.input_files, spm_model, compression="gzip")
    local_dir = tmp_path / "local"
    run_generation(gzip_config, str(local_dir), progress=False)
    run_beam_generation(gzip_config, str(tmp_path / "beam"), IN_MEMORY)
    assert _shard_bytes(tmp_path / "beam") == _shard_bytes(local_dir)
    (tmp_path / "beam" / "pretrain-00001-of-00003.tfrecord.gz").unlink()
    again = run_beam_generation(gzip_config, str(tmp_path / "beam"), IN_MEMORY)
    assert again["generated_shards"] == 1
    assert _shard_bytes(tmp_path / "beam") == _shard_bytes(local_dir)


def test_a_line_that_is_not_utf8_is_named_and_nothing_is_written(tmp_path, corpus, spm_model):
    out = tmp_path / "out"
    message = r"^.*shakespeare-caesar\.txt:119: not valid UTF-8 .*--skip_bad_lines to skip such lines$"
    with pytest.raises(BadInputError, match=message):
        run_beam_generation(_config([corpus / "shakespeare-caesar.txt"], spm_model), str(out), IN_MEMORY)
    assert [p for p in out.rglob("*") if p.is_file()] == []


def test_an_output_dir_of_other_settings_or_input_is_refused_untouched(local, tmp_path, spm_model):
    config, local_dir, _ = local
    before = _shard_bytes(local_dir)
    with pytest.raises(BadInputError, match=r"other settings \(dupe_factor: 2 there, 3 now\)"):
        run_beam_generation(_config(config.input_files, spm_model, dupe_factor=3), str(local_dir), IN_MEMORY)
    with pytest.raises(BadInputError, match=r"made from other input"):
        run_beam_generation(_config(config.input_files[:1], spm_model), str(local_dir), IN_MEMORY)
    assert _shard_bytes(local_dir) == before


def test_the_command_line_runs_beam_and_refuses_a_vocabulary_without_albert_pieces(tmp_path, corpus, spm_model, capsys):
    import sentencepiece as spm

    common = [f"--input_file={corpus}/blake-poems.txt", "--max_seq_length=64", "--max_predictions_per_seq=10",
              "--dupe_factor=1", "--noprogress"]
    assert run_create_pretraining_data([*common, f"--output_dir={tmp_path}/a", f"--spm_model_file={spm_model}"]) == 0
    code = run_create_pretraining_data(
        [*common, f"--output_dir={tmp_path}/b", f"--spm_model_file={spm_model}", *TWO_PROCESSES]
    )
    assert code == 0
    assert _shard_bytes(tmp_path / "b") == _shard_bytes(tmp_path / "a")
    capsys.readouterr()
    spm.SentencePieceTrainer.Train(
        input=str(corpus / "blake-poems.txt"), model_prefix=str(tmp_path / "plain"), vocab_size=200, minloglevel=2
    )
    code = run_create_pretraining_data(
        [*common, f"--output_dir={tmp_path}/c", f"--spm_model_file={tmp_path}/plain.model", *IN_MEMORY]
    )
    assert code == 1 and "plain.model lacks the ALBERT special pieces" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
    code = run_create_pretraining_data([*common, f"--output_dir={tmp_path}/d", f"--spm_model_file={spm_model}",
                              "--direct_num_workers=2"])
    assert code == 2 and "unknown flag --direct_num_workers=2 (flags for Apache Beam need --runner" in (
        capsys.readouterr().err)


def test_more_shards_than_documents_is_refused_and_nothing_is_kept(tmp_path, spm_model):
    text = tmp_path / "two.txt"
    text.write_text("The first document has a sentence.\nAnd a second one here.\n\nThe other one too.\nIt ends.\n")
    out = tmp_path / "out"
    config = _config([text], spm_model, num_output_shards=4, dupe_factor=1)
    with pytest.raises(BadInputError, match=r"shards got no instance .*too few for --num_output_shards=4"):
        run_beam_generation(config, str(out), IN_MEMORY)
    assert [p for p in out.rglob("*") if p.is_file()] == []


def test_no_stage_takes_every_document_of_a_worker_at_once(spm_model, tmp_path):
    """The DirectRunner's engine materialises a Flatten of several inputs (CoGroupByKey has one) as a
    stage of its own, sent to each worker as one message: hundreds of MB a worker at 17 MB of text.
    The documents go from the reader straight into one GroupByKey."""
    import apache_beam as beam

    from data_prep.beam.pipeline import build_pipeline

    pipeline = beam.Pipeline()
    build_pipeline(pipeline, _config([tmp_path / "a.txt"], spm_model), str(tmp_path), [0, 1, 2])
    transforms = pipeline.to_runner_api().components.transforms.values()
    flattens = [t.unique_name for t in transforms if t.spec.urn == "beam:transform:flatten:v1" and len(t.inputs) > 1]
    groups = [t.unique_name for t in transforms if t.spec.urn == "beam:transform:group_by_key:v1"]
    assert flattens == []
    assert any(name.startswith("Group by shard") for name in groups)


def test_a_shards_documents_come_back_in_input_order_from_a_file(tmp_path):
    import marshal
    import random
    import zlib

    from data_prep.beam.pipeline import _DocumentsInInputOrder

    keyed = [((f, n), [f"file {f} document {n}", "é" * n]) for f in range(3) for n in range(50)]
    arriving = [(key, zlib.compress(marshal.dumps(sentences), 1)) for key, sentences in keyed]
    random.Random(0).shuffle(arriving)
    documents = _DocumentsInInputOrder(str(tmp_path))
    for key, packed in arriving:
        documents.add(key, packed)
    assert list(documents) == [sentences for _, sentences in keyed]
    assert (tmp_path / "documents").stat().st_size == sum(len(packed) for _, packed in arriving)  # held on disk


def test_the_direct_runners_worker_process_leaves_out_unused_connectors():
    """data_prep.beam.worker: Beam's harness without pyarrow and pymongo, tens of MB lighter."""
    import subprocess
    import sys

    probe = (
        "import sys\n{hide}"
        "import apache_beam.runners.worker.sdk_worker_main\n"
        "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]\n"
        "print(int(rss) // 1024, sys.modules.get('pyarrow') is not None, sys.modules.get('pymongo') is not None)\n"
    )

    def run(hide):
        out = subprocess.run([sys.executable, "-c", probe.format(hide=hide)], capture_output=True, text=True, check=True)
        mb, pyarrow, pymongo = out.stdout.split()
        return int(mb), pyarrow == "True", pymongo == "True"

    plain = run("")
    light = run("from data_prep.beam.worker import hide_unused_modules\nhide_unused_modules()\n")
    assert light[1:] == (False, False)
    if plain[1:] == (True, True):  # both installed here: the harness no longer pays for them
        assert light[0] < plain[0] - 20, (light, plain)
