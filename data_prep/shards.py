"""Streaming, sharded, parallel and resumable writing of pretraining TFRecords (the local tool).

How a shard is made (documents assigned by a hash of their text, a seeded generator per shard,
windows, records written in a shuffled order) lives in `data_prep.generation`, shared with the Beam
pipeline; the output does not depend on the number of workers. A worker owns some shards and reads
the whole input once, tokenizing only its own documents. Each shard is written to
`<name>.incomplete` and renamed when complete, after its counts are saved under `shard_stats/`; a
rerun keeps complete shards and makes only the missing ones. Input files are identified by a hash
of their bytes: a rerun after an input changed is refused, naming the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import json
import multiprocessing
import os
import queue as queue_module
import shutil
import time
import traceback
from collections.abc import Callable, Sequence

from absl import logging

from albert_tf.utils.errors import one_line
from albert_tf.data.features import PRETRAINING_METADATA_FILE, read_pretraining_metadata
from albert_tf.utils.atomic import PartialFile, is_partial, remove_partials, write_json
from albert_tf.utils.compression import compression_suffix
from albert_tf.utils.files import files_for, is_url
from albert_tf.utils.output_dirs import prepare_output_dir
from albert_tf.utils.validation import require_choice
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from data_prep.documents import BadInputError, InputStats, iter_documents, open_raw
from data_prep.generation import ShardGenerator, encode_documents, shard_of
from data_prep.instances import InstanceOptions, InstanceStats, MaskingVocab

METADATA_FILE = PRETRAINING_METADATA_FILE  # the training reader checks its "complete"
STATS_DIR = "shard_stats"
SPILL_DIR = "spill"
COMPRESSIONS = ("none", "gzip")
_PROGRESS_INTERVAL_S = 0.5
TOKENIZER_BATCH_SENTENCES = 2048


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """Everything that determines the output bytes (the worker count does not)."""

    input_files: tuple[str, ...]
    spm_model_file: str
    options: InstanceOptions = InstanceOptions()
    input_format: str = "sentence_per_line"
    do_lower_case: bool = True
    dupe_factor: int = 40
    random_seed: int = 12345
    num_output_shards: int = 1
    compression: str = "none"
    skip_bad_lines: bool = False

    def __post_init__(self):
        require_choice("compression", self.compression, COMPRESSIONS)
        if self.num_output_shards < 1:
            raise ValueError(f"num_output_shards must be positive, got {self.num_output_shards}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be positive, got {self.dupe_factor}")

    def settings(self) -> dict:
        """The JSON-able description saved with the shards, compared on a rerun.

        `skip_bad_lines` is left out: a run either skips the same lines or fails and writes nothing.
        """
        return {
            "input_files": [{"path": _absolute(f), "sha256": file_sha256(f)} for f in self.input_files],
            "spm_model_sha256": file_sha256(self.spm_model_file),
            **dataclasses.asdict(self.options),
            "input_format": self.input_format,
            "do_lower_case": self.do_lower_case,
            "dupe_factor": self.dupe_factor,
            "random_seed": self.random_seed,
            "num_output_shards": self.num_output_shards,
            "compression": self.compression,
        }

    def shard_name(self, index: int) -> str:
        suffix = compression_suffix(self.compression)
        return f"pretrain-{index:05d}-of-{self.num_output_shards:05d}.tfrecord{suffix}"


def _absolute(path: str) -> str:
    return path if is_url(path) else os.path.abspath(path)


def file_sha256(path: str) -> str:
    """sha256 of the file's bytes (a path with a scheme, gs://..., is read through Beam)."""
    digest = hashlib.sha256()
    with open_raw(path) as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class _ShardWriter:
    """One shard being written by the local tool: a ShardGenerator, its file names and counts."""

    def __init__(self, index: int, config: GenerationConfig, output_dir: str, vocab: MaskingVocab, record_hook=None):
        self.config = config
        self.path = os.path.join(output_dir, config.shard_name(index))
        self.stats_path = os.path.join(output_dir, STATS_DIR, config.shard_name(index) + ".json")
        # Records that do not fit in memory wait in spill/ until the shard is written in order; a
        # rerun after a crash empties it.
        os.makedirs(os.path.join(output_dir, SPILL_DIR), exist_ok=True)
        self.generator = ShardGenerator(
            index,
            config.options,
            vocab,
            config.dupe_factor,
            config.random_seed,
            spill_prefix=os.path.join(output_dir, SPILL_DIR, config.shard_name(index) + "."),
            record_hook=record_hook,
        )
        self.add = self.generator.add
        self._out = PartialFile(self.path)  # records arrive, shuffled, at the end

    def finish(self, input_stats: InputStats) -> int:
        made = self.generator.finish(self._out.file, self.config.compression)
        record = {
            "shard": os.path.basename(self.path),
            **self.generator.stats.to_dict(),
            "input": input_stats.to_dict(),
            "bytes": os.path.getsize(self._out.partial),  # a rerun checks the shard it keeps against it
        }
        write_json(self.stats_path, record)  # before the shard: a shard without counts is redone
        self._out.commit()
        return made

    def abort(self) -> None:
        self.generator.discard()
        self._out.discard()


def generate_shards(
    config: GenerationConfig,
    output_dir: str,
    shard_ids: Sequence[int],
    report: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    record_hook: Callable[[int, int, bytes], None] | None = None,
) -> None:
    """Writes the given shards, reading the input once.

    `report(documents, instances)` gets progress deltas; `should_stop()`, asked between batches,
    abandons the work (partial files removed) when it returns True. `record_hook(shard, document,
    record)` sees every record as it is made (see `ShardGenerator`).
    """
    tokenizer = AlbertTokenizer(config.spm_model_file, config.do_lower_case)
    vocab = MaskingVocab.from_tokenizer(tokenizer)
    input_stats = InputStats()
    writers: dict[int, _ShardWriter] = {}
    try:
        for index in shard_ids:
            hook = None if record_hook is None else functools.partial(record_hook, index)
            writers[index] = _ShardWriter(index, config, output_dir, vocab, hook)
        pending_documents = pending_instances = 0
        last_report = time.monotonic()
        # Documents are tokenized in batches: one SentencePiece call per document costs more than
        # the encoding itself. Each shard still receives its documents in input order.
        batch: list[tuple[_ShardWriter, list[str]]] = []
        batch_sentences = 0

        def tokenize_batch() -> int:
            written = 0
            for (writer, _), ids in zip(batch, encode_documents(tokenizer, [sentences for _, sentences in batch])):
                if ids:
                    written += writer.add(ids)
            batch.clear()
            return written

        documents = iter_documents(config.input_files, config.input_format, config.skip_bad_lines, input_stats)
        for sentences in documents:
            writer = writers.get(shard_of(sentences, config.num_output_shards))
            if writer is None:
                continue
            if should_stop is not None and should_stop():
                raise _ParentGone()
            batch.append((writer, sentences))
            batch_sentences += len(sentences)
            pending_documents += 1
            if batch_sentences >= TOKENIZER_BATCH_SENTENCES:
                pending_instances += tokenize_batch()
                batch_sentences = 0
                if report is not None and time.monotonic() - last_report > _PROGRESS_INTERVAL_S:
                    report(pending_documents, pending_instances)
                    pending_documents = pending_instances = 0
                    last_report = time.monotonic()
        pending_instances += tokenize_batch()
        if should_stop is not None and should_stop():
            raise _ParentGone()
        for writer in writers.values():
            pending_instances += writer.finish(input_stats)
        writers.clear()
        if report is not None:
            report(pending_documents, pending_instances)
    finally:
        for writer in writers.values():
            writer.abort()


class _ParentGone(Exception):
    """The process that started this worker died: stop, leaving no partial shard."""


def _worker_main(config, output_dir, shard_ids, messages, parent_alive) -> None:
    # `parent_alive` is the read end of a pipe whose write end only the parent holds: it turns
    # readable (EOF) when the parent dies, even by SIGKILL, so an orphan never keeps writing.
    def report(documents: int, instances: int) -> None:
        if parent_alive.poll():
            raise _ParentGone()
        messages.put(("progress", documents, instances))

    try:
        generate_shards(config, output_dir, shard_ids, report, should_stop=parent_alive.poll)
        messages.put(("done", None, None))
    except _ParentGone:
        pass
    except BaseException as error:  # the parent must learn why, whatever it was
        described = one_line(error)  # the user's or the machine's (bad input, a full disk): one line
        if described is not None:
            messages.put(("error", described[0], None))
        else:  # a bug of ours: its traceback
            messages.put(("bug", traceback.format_exc(), None))


def check_output_dir(output_dir: str, settings: dict, config: GenerationConfig) -> dict | None:
    """Returns the saved metadata if `output_dir` may be (re)used with `settings`, else raises."""
    metadata_path = os.path.join(output_dir, METADATA_FILE)
    shards = sorted(
        os.path.basename(p)
        for p in glob.glob(os.path.join(output_dir, "pretrain-*.tfrecord*"))
        if not is_partial(p)
    )
    metadata = None
    if os.path.exists(metadata_path):
        metadata = read_pretraining_metadata(metadata_path)
    if not shards and metadata is None:
        return None
    if metadata is None:
        raise BadInputError(
            f"output_dir {output_dir} holds shards ({shards[0]}, ...) but no {METADATA_FILE} saying how they "
            "were made; use an empty output_dir"
        )
    saved = metadata.get("settings", {})
    if saved.get("input_files") != settings.get("input_files"):
        raise BadInputError(
            f"output_dir {output_dir} holds shards made from other input ({_input_change(saved, settings)}); "
            "the shards would mix two datasets: use another output_dir or delete the old shards"
        )
    differences = [
        f"{key}: {saved.get(key)!r} there, {settings.get(key)!r} now"
        for key in sorted(set(saved) | set(settings))
        if saved.get(key) != settings.get(key)
    ]
    if differences:
        raise BadInputError(
            f"output_dir {output_dir} holds shards made with other settings ({'; '.join(differences)}); "
            "use another output_dir or delete the old shards"
        )
    expected = {config.shard_name(i) for i in range(config.num_output_shards)}
    strangers = [s for s in shards if s not in expected]
    if strangers:
        raise BadInputError(f"output_dir {output_dir} holds shards of another run: {', '.join(strangers)}")
    return metadata


def _input_change(saved: dict, settings: dict) -> str:
    """What differs between the input files of the saved run and of this one, in a few words."""
    before, now = saved.get("input_files") or [], settings["input_files"]
    if [f.get("path") for f in before] != [f["path"] for f in now]:
        return f"{len(before)} input files there, {len(now)} now, or other paths"
    old, new = next((f, g) for f, g in zip(before, now) if f != g)
    digest = old.get("sha256", "not recorded")[:12]
    return f"{new['path']} changed since: sha256 {digest} there, {new['sha256'][:12]} now"


def complete_shards(output_dir: str, config: GenerationConfig, warn: bool = False) -> dict[int, dict]:
    """The shards that are complete, by index: their file and counts are there, and the file has the
    size its counts recorded (a shard cut short or changed since is made again; `warn` says so)."""
    complete = {}
    for index in range(config.num_output_shards):
        name = config.shard_name(index)
        path, stats_path = os.path.join(output_dir, name), os.path.join(output_dir, STATS_DIR, name + ".json")
        if not (os.path.exists(path) and os.path.exists(stats_path)):
            continue
        with open(stats_path) as f:
            record = json.load(f)
        size = os.path.getsize(path)
        if record.get("bytes", size) != size:
            if warn:
                logging.warning("%s is %s bytes, %s when it was made (cut short or changed since): making it again",
                                path, f"{size:,}", f"{record['bytes']:,}")
            continue
        complete[index] = record
    return complete


def remove_incomplete(output_dir: str) -> None:
    """Removes what a killed run left half-made: spilled records and partial files."""
    shutil.rmtree(os.path.join(output_dir, SPILL_DIR), ignore_errors=True)
    remove_partials(output_dir)
    remove_partials(os.path.join(output_dir, STATS_DIR))


def run_generation(config: GenerationConfig, output_dir: str, num_workers: int = 1, progress: bool = True) -> dict:
    """Makes every missing shard of `config` in `output_dir` and returns the run's metadata.

    Raises BadInputError (leaving no partial shard) when the input or output_dir is unusable.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be positive, got {num_workers}")
    prepare_output_dir(output_dir)
    settings = config.settings()
    metadata = check_output_dir(output_dir, settings, config)
    os.makedirs(os.path.join(output_dir, STATS_DIR), exist_ok=True)  # after the check: a refused run adds nothing
    created_metadata = metadata is None
    metadata_path = os.path.join(output_dir, METADATA_FILE)
    remove_incomplete(output_dir)
    if created_metadata:
        write_json(metadata_path, {"settings": settings, "complete": False})

    complete = complete_shards(output_dir, config, warn=True)
    pending = [i for i in range(config.num_output_shards) if i not in complete]
    started = time.monotonic()
    try:
        if pending:
            _run_workers(config, output_dir, pending, min(num_workers, len(pending)), progress)
    except BaseException:
        remove_incomplete(output_dir)
        if created_metadata and not complete_shards(output_dir, config):
            os.remove(metadata_path)
        with contextlib.suppress(OSError):  # when empty: no complete shard to describe
            os.rmdir(os.path.join(output_dir, STATS_DIR))
        raise
    elapsed = time.monotonic() - started
    shutil.rmtree(os.path.join(output_dir, SPILL_DIR), ignore_errors=True)

    shard_records = complete_shards(output_dir, config)
    counts = total_counts(config, shard_records)
    refuse_empty_shards(output_dir, config, shard_records, counts)
    result = finished_metadata(config, settings, shard_records, counts, len(pending), elapsed, num_workers=num_workers)
    write_json(metadata_path, result)
    return result


def total_counts(config: GenerationConfig, shard_records: dict[int, dict]) -> dict:
    """The counts of all shards (instances, tokens, masks, labels) and of the input they read."""
    totals = InstanceStats(config.options.ngram)
    for record in shard_records.values():
        totals.merge(record)
    return {**totals.to_dict(), **next(iter(shard_records.values()))["input"]}


def finished_metadata(config, settings, shard_records, counts, generated_shards, seconds, **run) -> dict:
    """What `pretraining_data.json` says of a finished run (`run`: how it ran, workers or runner)."""
    return {
        "settings": settings,
        "complete": True,
        "counts": counts,
        "shards": {config.shard_name(i): shard_records[i]["instances"] for i in sorted(shard_records)},
        **run,
        "generated_shards": generated_shards,
        "seconds": round(seconds, 3),
    }


def refuse_empty_shards(output_dir: str, config: GenerationConfig, shard_records: dict, counts: dict,
                        fs=None) -> None:
    """An output with no instances, or with a shard without any, is an error, and is removed
    (through `fs`, `albert_tf.utils.files`' filesystem interface: the Beam pipeline passes Beam's).

    Training on it would hang (no records) or read empty files; the fix is in the flags or input.
    """
    empty = [config.shard_name(i) for i, record in sorted(shard_records.items()) if not record["instances"]]
    if not empty:
        return
    if len(empty) == config.num_output_shards:
        message = (
            f"the input's {_count(counts['documents'], 'document')} ({_count(counts['lines'], 'line')}) made no "
            f"instance: too little text for --max_seq_length={config.options.max_seq_length}, or the wrong "
            f"--input_format (now {config.input_format})"
        )
    else:
        message = (
            f"{len(empty)} of {config.num_output_shards} shards got no instance ({empty[0]}, ...): the input's "
            f"{_count(counts['documents'], 'document')} are too few for --num_output_shards="
            f"{config.num_output_shards} (documents are dealt to shards by a hash of their text); give fewer shards"
        )
    fs = fs or files_for(output_dir)
    for name in [config.shard_name(i) for i in shard_records]:
        fs.remove(os.path.join(output_dir, name))
        fs.remove(os.path.join(output_dir, STATS_DIR, name + ".json"))
    fs.remove(os.path.join(output_dir, METADATA_FILE))
    stats_dir = os.path.join(output_dir, STATS_DIR)
    if not is_url(output_dir) and not os.listdir(stats_dir):
        os.rmdir(stats_dir)
    raise BadInputError(f"{message}; nothing was written to {output_dir}")


def _worker_context():
    """Where worker processes come from.

    Not a plain fork of this process: it may have TensorFlow threads running (holding locks that a
    fork would copy held). A fork server imports this module, and with it TensorFlow, once in a
    fresh process and forks every worker from there, which is much faster than spawning each.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


def _run_workers(config, output_dir, pending, num_workers, progress) -> None:
    from tqdm import tqdm

    bar = tqdm(unit=" docs", disable=not progress, smoothing=0.1)
    started = time.monotonic()
    totals = {"instances": 0}

    def report(documents: int, instances: int) -> None:
        totals["instances"] += instances
        rate = totals["instances"] / max(time.monotonic() - started, 1e-9)
        bar.set_postfix(instances=totals["instances"], instances_per_s=f"{rate:.0f}", refresh=False)
        bar.update(documents)

    try:
        if num_workers == 1:
            generate_shards(config, output_dir, pending, report)
            return
        context = _worker_context()
        messages = context.Queue()
        alive_read, alive_write = context.Pipe(duplex=False)
        workers = [
            context.Process(
                target=_worker_main,
                args=(config, output_dir, pending[w::num_workers], messages, alive_read),
                daemon=True,
            )
            for w in range(num_workers)
        ]
        for worker in workers:
            worker.start()
        alive_read.close()
        finished, error, bug = 0, None, False
        try:
            while finished < num_workers and error is None:
                try:
                    kind, first, second = messages.get(timeout=1.0)
                except queue_module.Empty:
                    dead = [w for w in workers if w.exitcode not in (None, 0)]
                    if dead:
                        error = f"a worker process exited with code {dead[0].exitcode} before finishing"
                    continue
                if kind == "progress":
                    report(first, second)
                elif kind == "done":
                    finished += 1
                else:
                    error, bug = first, kind == "bug"
        finally:
            # Stopped early (an error, or Ctrl-C / SIGINT in this loop): the workers stop too.
            for worker in workers:
                if worker.is_alive() and finished < num_workers:
                    worker.terminate()
            for worker in workers:
                worker.join()
            alive_write.close()
        if bug:
            raise RuntimeError(f"a worker process failed:\n{error}")
        if error is not None:
            raise BadInputError(error)
    finally:
        bar.close()


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def format_summary(result: dict) -> str:
    """The end-of-run report: documents, instances, masked tokens, label balance."""
    c = result["counts"]
    instances = max(c["instances"], 1)
    replaced = max(sum(c["replacements"]), 1)
    lines = [
        f"documents:        {c['documents']:,} ({c['lines']:,} lines, {c['bad_lines']:,} skipped as not UTF-8)",
        f"instances:        {c['instances']:,} in {_count(len(result['shards']), 'shard')}",
        f"masked tokens:    {c['masked_tokens']:,} ({c['masked_tokens'] / max(c['tokens'], 1):.2%} of "
        f"{c['tokens']:,} tokens; [MASK]/kept/random {c['replacements'][0] / replaced:.1%}/"
        f"{c['replacements'][1] / replaced:.1%}/{c['replacements'][2] / replaced:.1%})",
        f"labels:           0 (in order) {c['labels'][0] / instances:.1%}, 1 (swapped or random) "
        f"{c['labels'][1] / instances:.1%}",
    ]
    if result["seconds"] > 0 and result["generated_shards"]:
        new_shards = _count(result["generated_shards"], "new shard")
        lines.append(f"time:             {result['seconds']:.1f} s for {new_shards}")
    return "\n".join(lines)
