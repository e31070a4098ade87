"""Pretraining data on Apache Beam: the local tool's generation, on DirectRunner, Dask, Dataflow, Flink or Spark.

The pipeline, for the same inputs, flags and seed, writes the same bytes as the local tool:
  input files -> documents (each file read whole by one worker, keyed by (file, position)), and
  each file's counts for every shard -> keyed by `shard_of(document)` -> grouped by shard (one
  GroupByKey; the group is read as it comes, page by page where the runner pages it, into a local
  file, and read back in input order: neither a shard's documents nor its records are held)
  -> `ShardGenerator`, as the local tool runs it ->
  `pretrain-NNNNN-of-MMMMM.tfrecord[.gz]` written under a temporary name and renamed, its counts in
  `shard_stats/`; the launcher then writes `pretraining_data.json`.
Paths may be on any filesystem Beam knows (gs://, s3://, hdfs://, local). Nothing imports TensorFlow.

Example:
    albert-create-pretraining-data --runner=DirectRunner --direct_num_workers=2 \\
        --direct_running_mode=multi_processing --input_file='corpus/*.txt.gz' --output_dir=out \\
        --spm_model_file=30k-clean.model --num_output_shards=8
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import os
import shlex
import shutil
import sys
import tempfile
import time
import typing
import zlib
from collections.abc import Sequence

from data_prep.beam.files import BeamFiles, model_source, open_raw  # first: it imports Beam quietly

import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions  # noqa: E402

from albert_tf.utils.quiet import VERBOSE_ENV, verbose  # noqa: E402
from albert_tf.utils.errors import FlagError, UserError  # noqa: E402
from albert_tf.utils.atomic import PartialFile, remove_partials, write_json  # noqa: E402
from albert_tf.utils.files import files_for, is_url  # noqa: E402
from albert_tf.utils.output_dirs import prepare_output_dir  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from data_prep.documents import BadInputError, InputStats, iter_documents
from data_prep.generation import ShardGenerator, encode_documents, shard_of
from data_prep.instances import MaskingVocab
from data_prep.shards import (
    METADATA_FILE,
    STATS_DIR,
    TOKENIZER_BATCH_SENTENCES,
    GenerationConfig,
    finished_metadata,
    refuse_empty_shards,
    total_counts,
)

# A Beam worker holds at most this many bytes of a shard's records before they spill to its local
# disk (the local tool: 32 MB): a Beam worker already carries ~95 MB of harness.
WORKER_SHUFFLE_MEMORY_BYTES = 8 << 20
# Errors of the input raised on a worker reach the launcher inside the runner's own exception;
# this marker finds the one line to show.
ERROR_MARKER = "albert-data-prep input error: "


def beam_options(beam_args: Sequence[str]) -> PipelineOptions:
    """Beam's options of `beam_args`, by their Beam names: any other flag is a FlagError, where Beam
    itself would drop it with a warning (a mistyped flag of the tool would silently fall back to its
    default: `--num_output_shard=3` made the default's shards)."""
    options = PipelineOptions(list(beam_args))
    if options.view_as(StandardOptions).runner == "DaskRunner":
        _dask()  # DaskRunner's own options (--dask_client_address) exist once its module is imported
    known = options.get_all_options()
    unknown = [name for name in options.get_all_options(retain_unknown_options=True) if name not in known]
    if unknown:
        given = next((arg for arg in beam_args if arg.split("=", 1)[0].lstrip("-") == unknown[0]), f"--{unknown[0]}")
        raise FlagError(f"unknown flag {given}: neither this tool's nor one of Apache Beam's options (see --help)")
    return options


def _join(directory: str, *names: str) -> str:
    return FileSystems.join(directory, *names)


class _ReadDocuments(beam.DoFn):
    """(file number, path) -> (shard, ((file number, document number), packed sentences)), then
    (shard, the file's counts) for every shard.

    A document travels packed (marshal, then zlib at level 1: a third of the text's bytes), so
    the shuffle, and each worker's output buffers on the way to it, carry less.

    Each file's counts (documents, lines, bad lines: three numbers) go to every shard, so that each
    shard's group holds the whole input's counts, as the local tool records them, and is a group
    even when no document reaches it. So the pipeline is one chain, input files -> GroupByKey ->
    shards, with neither a second output nor a side input: the DaskRunner runs only the chain
    that ends in the last transform, and mixes a DoFn's tagged outputs into one. (A Flatten of the
    counts with the documents would cost the DirectRunner a stage through which every document
    passes, in one message a worker: hundreds of MB.) The cost is files x shards small elements.
    """

    def __init__(self, config: GenerationConfig, shard_ids: Sequence[int]):
        self._config = config
        self._shard_ids = list(shard_ids)

    def process(self, element):
        file_number, path = element
        stats = InputStats()
        try:
            documents = iter_documents([path], self._config.input_format, self._config.skip_bad_lines, stats, open_raw)
            for number, sentences in enumerate(documents):
                packed = zlib.compress(marshal.dumps(sentences), 1)
                yield shard_of(sentences, self._config.num_output_shards), ((file_number, number), packed)
        except BadInputError as error:
            raise BadInputError(ERROR_MARKER + str(error)) from None
        counts = _FileCounts(file_number, stats.documents, stats.lines, stats.bad_lines)
        for index in self._shard_ids:
            yield index, counts


class _FileCounts(typing.NamedTuple):
    """What the reader saw in one input file (`InputStats`), on its way to every shard."""

    file_number: int
    documents: int
    lines: int
    bad_lines: int


def _add_counts(counts: Sequence[_FileCounts]) -> dict:
    return {
        "documents": sum(c.documents for c in counts),
        "lines": sum(c.lines for c in counts),
        "bad_lines": sum(c.bad_lines for c in counts),
    }


def _unpack(packed: bytes) -> list[str]:
    return marshal.loads(zlib.decompress(packed))


class _DocumentsInInputOrder:
    """A shard's documents, which arrive in any order, given back in input order without holding them.

    Each arriving document (packed, as `_ReadDocuments` gives it) is written to a local file and
    only its key, offset and size stay in memory (three small numbers a document); `__iter__` sorts
    those and reads the documents back one at a time. So a worker's memory does not grow with a
    shard's size.
    """

    def __init__(self, directory: str):
        self._path = os.path.join(directory, "documents")
        self._file = open(self._path, "wb")
        self._index: list[tuple[tuple[int, int], int, int]] = []
        self._offset = 0

    def add(self, key: tuple[int, int], packed: bytes) -> None:
        self._file.write(packed)
        self._index.append((tuple(key), self._offset, len(packed)))
        self._offset += len(packed)

    def __iter__(self):
        self._file.close()
        self._index.sort()
        with open(self._path, "rb") as f:
            for _, offset, size in self._index:
                f.seek(offset)
                yield _unpack(f.read(size))


class _GenerateShard(beam.DoFn):
    """(shard, its documents keyed by input position, and every input file's counts) -> the shard's
    file and counts, as the local tool makes them."""

    def __init__(self, config: GenerationConfig, output_dir: str):
        self._config = config
        self._output_dir = output_dir

    def setup(self):
        self._tokenizer = AlbertTokenizer(model_source(self._config.spm_model_file), self._config.do_lower_case)
        self._vocab = MaskingVocab.from_tokenizer(self._tokenizer)

    def process(self, element):
        index, grouped = element
        config = self._config
        spill_dir = tempfile.mkdtemp(prefix=f"albert-shard-{index}-")
        try:
            documents = _DocumentsInInputOrder(spill_dir)
            file_counts = {}
            for value in grouped:  # a runner may page a large group in from its state, never all at once
                if isinstance(value, _FileCounts):
                    file_counts[value.file_number] = value  # once a file, even if a runner retried its reader
                else:
                    documents.add(*value)
            if len(file_counts) != len(config.input_files):
                raise RuntimeError(
                    f"shard {index} got the counts of {len(file_counts)} of {len(config.input_files)} input files"
                )
            input_counts = _add_counts(list(file_counts.values()))
            generator = ShardGenerator(
                index,
                config.options,
                self._vocab,
                config.dupe_factor,
                config.random_seed,
                os.path.join(spill_dir, ""),
                shuffle_memory_bytes=WORKER_SHUFFLE_MEMORY_BYTES,
            )
            batch, sentences = [], 0
            for document in documents:
                batch.append(document)
                sentences += len(document)
                if sentences >= TOKENIZER_BATCH_SENTENCES:
                    self._add(generator, batch)
                    batch, sentences = [], 0
            self._add(generator, batch)
            name = config.shard_name(index)
            shard = PartialFile(_join(self._output_dir, name), BeamFiles())
            try:
                generator.finish(shard.file, config.compression)
                record = {"shard": name, **generator.stats.to_dict(), "input": input_counts}
                _write_json(_join(self._output_dir, STATS_DIR, name + ".json"), record)
                shard.commit()  # after its counts: a shard without them is redone
            except BaseException:
                shard.discard()
                raise
            finally:
                generator.discard()
        finally:
            shutil.rmtree(spill_dir, ignore_errors=True)
        yield record

    def _add(self, generator: ShardGenerator, batch: list[list[str]]) -> None:
        for ids in encode_documents(self._tokenizer, batch):
            if ids:
                generator.add(ids)


def _write_json(path: str, value: dict) -> None:
    write_json(path, value, BeamFiles())


def _read_json(path: str) -> dict | None:
    if not FileSystems.exists(path):
        return None
    with open_raw(path) as f:
        return json.loads(f.read().decode())


class WorkersLostError(UserError):
    """The cluster lost the workers running the job (the machine's trouble, not a bug): one line."""

    def __init__(self, reason: str):
        super().__init__(
            f"the pipeline failed: {reason}; the shards finished before are kept: rerun the same command "
            "to make the rest"
        )


def _lost_workers(error: BaseException) -> str | None:
    """What the runner says of lost workers, in one line; None for any other failure.

    Dask retries a task whose worker died on another worker, up to
    `distributed.scheduler.allowed-failures` times (3 by default), then fails it with KilledWorker.
    """
    if type(error).__name__ == "KilledWorker":
        tries, worker = error.allowed_failures + 1, error.last_worker.address
        return (f"Dask workers died while running one of its tasks ({tries} {'try' if tries == 1 else 'tries'}, "
                f"the last on {worker}; distributed.scheduler.allowed-failures is {error.allowed_failures})")
    return None


def _cancel(pipeline: beam.Pipeline) -> None:
    """Stops what a cluster still runs of a failed job (the DaskRunner leaves its tasks running)."""
    result = getattr(pipeline, "result", None)
    if result is not None and type(result).__name__ == "DaskRunnerResult":
        try:
            result.cancel()
        except Exception as error:  # the cluster may be gone too: nothing left to stop
            logging.getLogger(__name__).debug("cancelling the Dask job: %s", error)


def _remove_partials(output_dir: str) -> None:
    fs = files_for(output_dir, BeamFiles)
    for folder in (output_dir, _join(output_dir, STATS_DIR)):
        remove_partials(folder, fs)


def _dask():
    """Beam's dask_runner module; a FlagError where dask.distributed is not installed."""
    try:
        import distributed  # noqa: F401 (what DaskRunner needs and imports only when it runs)
        from apache_beam.runners.dask import dask_runner
    except ImportError as error:
        raise FlagError(f"--runner=DaskRunner needs dask.distributed ({error}): pip install 'albert_tf[dask]'") from None
    return dask_runner


def _dask_runner(options: PipelineOptions):
    """Beam's DaskRunner on the cluster of --dask_client_address (or a local one), each input file
    a task of its own: Beam's default of 128 elements a partition would read every file in one."""
    dask_runner = _dask()
    dask_options = options.view_as(dask_runner.DaskOptions)
    if dask_options.npartitions is None and dask_options.partition_size is None:
        dask_options.partition_size = 1
    return dask_runner.DaskRunner()


def build_pipeline(pipeline: beam.Pipeline, config: GenerationConfig, output_dir: str, shard_ids: Sequence[int]):
    """Adds the generation of `shard_ids` to `pipeline`; returns the PCollection of shard counts."""
    wanted = set(shard_ids)
    return (
        pipeline
        | "Input files" >> beam.Create(list(enumerate(config.input_files)))
        | "Reshuffle files" >> beam.Reshuffle()
        | "Read documents" >> beam.ParDo(_ReadDocuments(config, shard_ids))
        | "Drop complete shards" >> beam.Filter(lambda keyed: keyed[0] in wanted).with_output_types(tuple[int, typing.Any])
        | "Group by shard" >> beam.GroupByKey()
        | "Generate" >> beam.ParDo(_GenerateShard(config, output_dir))
    )


def run_beam_generation(config: GenerationConfig, output_dir: str, beam_args: Sequence[str]) -> dict:
    """Runs the pipeline (the runner named in `beam_args`) and returns the metadata, as `run_generation`.

    Raises BadInputError, naming the file and line, for input the local tool refuses too; an
    output_dir holding shards of other settings or input is refused before anything runs.
    """
    from data_prep import shards as local

    prepare_output_dir(output_dir, fs=files_for(output_dir, BeamFiles))
    settings = config.settings()
    is_local = not is_url(output_dir)
    if is_local:
        saved = local.check_output_dir(output_dir, settings, config)
        os.makedirs(os.path.join(output_dir, STATS_DIR), exist_ok=True)  # after the check: a refused run adds nothing
        local.remove_incomplete(output_dir)
        done = local.complete_shards(output_dir, config)
    else:
        saved = _read_json(_join(output_dir, METADATA_FILE))
        if saved is not None and saved.get("settings") != settings:
            raise BadInputError(
                f"output_dir {output_dir} holds shards made with other settings or input; "
                "use another output_dir or delete the old shards"
            )
        done = {}
    metadata_path = _join(output_dir, METADATA_FILE)
    if saved is None:
        _write_json(metadata_path, {"settings": settings, "complete": False})
    pending = [i for i in range(config.num_output_shards) if i not in done]
    options = beam_options(beam_args)
    runner_name = options.get_all_options().get("runner") or "DirectRunner"
    runner = None
    if runner_name == "DirectRunner":
        # The DirectRunner's own engine, which honours --direct_num_workers and
        # --direct_running_mode; DirectRunner itself would first try Prism, which it downloads.
        from apache_beam.options.pipeline_options import DirectOptions
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner
        from apache_beam.transforms.environments import SubprocessSDKEnvironment

        # A shard's documents reach its worker through Beam's state API, page by page, as on
        # a cluster, not as one list.
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode == "multi_processing":
            # The same worker processes, started as data_prep.beam.worker: Beam's harness without
            # the libraries of connectors the pipeline never uses. An explicit environment replaces
            # the mode's own, which FnApiRunner would otherwise put back.
            direct.direct_running_mode = "in_memory"
            command = f"{shlex.quote(sys.executable)} -m data_prep.beam.worker"
            environment = SubprocessSDKEnvironment.from_command_string(command)
            runner = FnApiRunner(use_state_iterables=True, default_environment=environment)
        else:
            runner = FnApiRunner(use_state_iterables=True)
        # On this machine a worker's error is the user's: shown once, as one line, below. The
        # worker processes keep their logs (Beam's start-up, each retry's traceback) to themselves
        # unless --verbose (data_prep.beam.worker reads it from the environment).
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
        if verbose():
            os.environ[VERBOSE_ENV] = "1"
    elif runner_name == "DaskRunner":
        runner = _dask_runner(options)
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)  # errors: one line, below
    else:
        logging.getLogger("apache_beam").setLevel(logging.INFO)  # the job's progress
    started = time.monotonic()
    if pending:
        pipeline = beam.Pipeline(runner=runner, options=options)
        try:
            with pipeline:
                build_pipeline(pipeline, config, output_dir, pending)
        except Exception as error:  # the runner wraps a worker's error in its own
            _cancel(pipeline)
            _remove_partials(output_dir)
            lost = _lost_workers(error)
            # A task already running on a worker still finishes (and writes its shard) after the
            # job failed: the folder then keeps its settings, so that a rerun may use it.
            if lost is None and saved is None and not any(
                FileSystems.exists(_join(output_dir, config.shard_name(i))) for i in range(config.num_output_shards)
            ):
                FileSystems.delete([metadata_path])
                if is_local:
                    with contextlib.suppress(OSError):  # when empty: no complete shard to describe
                        os.rmdir(os.path.join(output_dir, STATS_DIR))
            text = str(error)
            if ERROR_MARKER in text:
                message = text.split(ERROR_MARKER, 1)[1].splitlines()[0].split(" [while running")[0]
                raise BadInputError(message.rstrip("'\"")) from None
            if lost is not None:
                raise WorkersLostError(lost) from None
            raise
        # A worker killed while writing leaves its partial file; the runner redid its work elsewhere.
        _remove_partials(output_dir)
    elapsed = time.monotonic() - started
    records = {}
    for index in range(config.num_output_shards):
        name = config.shard_name(index)
        record = _read_json(_join(output_dir, STATS_DIR, name + ".json"))
        if record is None:
            raise RuntimeError(f"the pipeline finished without writing {name}")
        records[index] = record
    counts = total_counts(config, records)
    # No instance at all, or an empty shard: refused and removed as the local tool does.
    refuse_empty_shards(output_dir, config, records, counts, files_for(output_dir, BeamFiles))
    result = finished_metadata(config, settings, records, counts, len(pending), elapsed, runner=runner_name)
    _write_json(metadata_path, result)
    return result
