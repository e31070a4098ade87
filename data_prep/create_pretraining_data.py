"""albert-create-pretraining-data: text corpus -> sharded TFRecords of masked SOP examples.

Example:
    albert-create-pretraining-data --input_file='corpus/*.txt' --output_dir=out \\
        --spm_model_file=30k-clean.model --max_seq_length=128 --dupe_factor=5 \\
        --num_output_shards=8 --num_workers=2

On Apache Beam (pip install 'albert_tf[beam]'), the same bytes; Beam's own options pass through:
    albert-create-pretraining-data --runner=DaskRunner --dask_client_address=tcp://scheduler:8786 \\
        --input_file='corpus/*.txt' --output_dir=/shared/data --spm_model_file=30k-clean.model
    albert-create-pretraining-data --runner=DataflowRunner --project=P --region=R \\
        --temp_location=gs://B/tmp --requirements_file=requirements-beam.txt \\
        --input_file='gs://B/corpus/*.txt.gz' --output_dir=gs://B/data \\
        --spm_model_file=gs://B/30k-clean.model --num_output_shards=1000
"""

from __future__ import annotations

import os

from absl import flags, logging

from albert_tf.cli.entry_point import run_main

# Its own FlagValues, so that the two console scripts (and tests importing both) never collide.
FLAGS = flags.FlagValues()

flags.DEFINE_string(
    "input_file", None, "Input text files: comma-separated globs (repeating one repeats its files).", flag_values=FLAGS
)
flags.DEFINE_string(
    "output_dir", None, "Folder for pretrain-NNNNN-of-MMMMM.tfrecord[.gz] and pretraining_data.json.", flag_values=FLAGS
)
flags.DEFINE_string(
    "spm_model_file", None, "SentencePiece model with <pad>=0, <unk>=1, [CLS], [SEP], [MASK].", flag_values=FLAGS
)
flags.DEFINE_enum(
    "input_format",
    "sentence_per_line",
    ["sentence_per_line", "document_per_line"],
    "sentence_per_line: one sentence a line, a blank line between documents. "
    "document_per_line: one document a line, split into sentences here.",
    flag_values=FLAGS,
)
flags.DEFINE_integer(
    "num_output_shards", 1, "Number of output files; the output does not depend on --num_workers.", flag_values=FLAGS
)
flags.DEFINE_integer(
    "num_workers", 1, "Processes writing shards in parallel (at most one per shard is used).", flag_values=FLAGS
)
flags.DEFINE_enum("compression", "none", ["none", "gzip"], "Compression of the TFRecord files.", flag_values=FLAGS)
flags.DEFINE_bool(
    "do_lower_case", True, "Lowercase the text (True for the released English models).", flag_values=FLAGS
)
flags.DEFINE_integer("max_seq_length", 512, "Tokens per example, [CLS] and [SEP]s included.", flag_values=FLAGS)
flags.DEFINE_integer("max_predictions_per_seq", 20, "Most masked positions per example.", flag_values=FLAGS)
flags.DEFINE_float(
    "masked_lm_prob", 0.15, "Fraction of tokens to mask (before the max_predictions_per_seq cap).", flag_values=FLAGS
)
flags.DEFINE_integer(
    "ngram", 3, "Longest masked n-gram, in words; p(n) is proportional to 1/n (a span is cut short at the "
    "sequence end).", flag_values=FLAGS
)
flags.DEFINE_bool(
    "favor_shorter_ngram",
    True,
    "p(n) proportional to 1/n; when False, n-grams are favoured in reverse order.",
    flag_values=FLAGS,
)
flags.DEFINE_bool("do_whole_word_mask", True, "Mask all pieces of a word together; n counts words.", flag_values=FLAGS)
flags.DEFINE_integer(
    "dupe_factor", 40, "Passes over each document, with different segmentation and masks.", flag_values=FLAGS
)
flags.DEFINE_float(
    "short_seq_prob",
    0.1,
    "Probability of a shorter target length, drawn from [2, max_seq_length - 3].",
    flag_values=FLAGS,
)
flags.DEFINE_integer(
    "random_seed", 12345, "Seed of the per-shard random generators: same seed and input, same bytes.", flag_values=FLAGS
)
flags.DEFINE_bool(
    "random_next_sentence",
    False,
    "BERT's next-sentence prediction (random-document B) instead of SOP.",
    flag_values=FLAGS,
)
flags.DEFINE_bool(
    "strict_sop",
    True,
    "Split a single-sentence chunk inside the sentence to keep it a sentence-order pair. "
    "--nostrict_sop keeps the original's behaviour: pair it with a random document, label 1.",
    flag_values=FLAGS,
)
flags.DEFINE_bool(
    "words_end_at_sep",
    False,
    "Start a new word after [SEP] always. By default, as the original, a B segment cut at its front "
    "that begins inside a word joins that piece to A's last word for whole-word masking.",
    flag_values=FLAGS,
)
flags.DEFINE_bool(
    "skip_bad_lines", False, "Skip (and count) input lines that are not UTF-8 instead of failing.", flag_values=FLAGS
)
flags.DEFINE_bool("progress", True, "Show a progress bar.", flag_values=FLAGS)
flags.DEFINE_enum(
    "runner",
    None,
    ["DirectRunner", "DaskRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"],
    "Run as an Apache Beam pipeline on this runner (Beam's own options pass through by their Beam names: "
    "--direct_num_workers, --dask_client_address, --project, --flink_master, ...; any other flag is an "
    "error). Unset: the local tool (--num_workers processes).",
    flag_values=FLAGS,
)


def main(argv) -> int:
    from albert_tf.utils.errors import FlagError
    from albert_tf.utils.files import files_for
    from albert_tf.utils.locks import locked_run_folder
    from albert_tf.utils.output_dirs import prepare_output_dir
    from data_prep.documents import beam_files
    from data_prep.shards import format_summary

    beam_args = list(argv[1:])
    if beam_args and FLAGS.runner is None:
        raise FlagError(f"unknown flag {beam_args[0]} (flags for Apache Beam need --runner; see --help)")
    for name in ("input_file", "output_dir", "spm_model_file"):
        if not getattr(FLAGS, name):
            raise FlagError(f"--{name} is required")
    if FLAGS.runner is not None:
        beam_args = [f"--runner={FLAGS.runner}", *beam_args]
        try:
            from data_prep.beam.pipeline import beam_options
        except ImportError as error:
            raise FlagError(f"--runner needs Apache Beam ({error}): pip install 'albert_tf[beam]'") from None
        beam_options(beam_args)  # before anything is read or written: a flag neither ours nor Beam's
    # Before the input is read and hashed: an unusable output_dir fails at once, naming the flag.
    prepare_output_dir(FLAGS.output_dir, fs=files_for(FLAGS.output_dir, beam_files), create=False)
    # One run a folder; a failed run keeps complete shards (its rerun makes the rest), else nothing.
    with locked_run_folder(FLAGS.output_dir, keep_on_failure=holds_shards):
        result = generate(beam_args)
    print(format_summary(result))
    logging.info("wrote %s", os.path.join(FLAGS.output_dir, "pretraining_data.json"))
    return 0


def holds_shards(folder: str) -> bool:
    """Whether a data-prep folder holds a complete shard or a finished run's description."""
    from albert_tf.utils.atomic import is_partial
    from albert_tf.utils.files import files_for
    from data_prep.documents import beam_files
    from data_prep.shards import METADATA_FILE

    names = [os.path.basename(path) for path in files_for(folder, beam_files).glob(os.path.join(folder, "*"))]
    return any(name.endswith((".tfrecord", ".tfrecord.gz")) or name == METADATA_FILE
               for name in names if not is_partial(name))


def generate(beam_args) -> dict:
    """Makes the shards the flags ask for in the locked --output_dir; returns the run's metadata."""
    from albert_tf.utils.errors import FlagError, UserError
    from albert_tf.utils.files import is_url
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from data_prep.documents import check_not_all_empty, expand_input_patterns
    from data_prep.shards import run_generation

    AlbertTokenizer(FLAGS.spm_model_file, FLAGS.do_lower_case)  # fails early on an unusable model (a URL's too)
    input_files = expand_input_patterns(FLAGS.input_file)
    check_not_all_empty(input_files)
    try:  # the flags' values, checked by the options: a usage error (exit code 2)
        config = generation_config(input_files)
    except UserError:
        raise
    except ValueError as error:
        raise FlagError(str(error)) from None
    if FLAGS.runner is None and is_url(FLAGS.output_dir):
        return generate_staged(config, FLAGS.output_dir)
    if FLAGS.runner is None:
        return run_generation(config, FLAGS.output_dir, FLAGS.num_workers, progress=FLAGS.progress)
    from data_prep.beam.pipeline import run_beam_generation

    return run_beam_generation(config, FLAGS.output_dir, beam_args)


def generate_staged(config, output_dir: str) -> dict:
    """The local tool's run for an --output_dir on an object store (gs://, which has no rename for
    the shards' write-aside): the shards made in a local temporary folder, then each file copied
    to `output_dir`, pretraining_data.json last (a reader takes the records as complete by it)."""
    import tempfile

    from albert_tf.utils.files import files_for
    from data_prep.documents import beam_files
    from data_prep.shards import METADATA_FILE, SPILL_DIR, run_generation

    fs = files_for(output_dir, beam_files)
    with tempfile.TemporaryDirectory(prefix="albert_tf-shards-") as staging:
        result = run_generation(config, staging, FLAGS.num_workers, progress=FLAGS.progress)
        made = [os.path.relpath(os.path.join(parent, name), staging) for parent, folders, names in os.walk(staging)
                if os.path.relpath(parent, staging).split(os.sep)[0] != SPILL_DIR for name in names]
        for name in sorted(made, key=lambda name: name == METADATA_FILE):
            target = "/".join((output_dir.rstrip("/"), *name.split(os.sep)))
            fs.makedirs(os.path.dirname(target))
            with open(os.path.join(staging, name), "rb") as source, fs.open(target, "wb") as out:
                while block := source.read(1 << 20):
                    out.write(block)
    return result


def generation_config(input_files):
    """The run's settings from the flags; a value the options refuse raises ValueError."""
    from data_prep.instances import InstanceOptions
    from data_prep.shards import GenerationConfig

    options = InstanceOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob,
        ngram=FLAGS.ngram,
        favor_shorter_ngram=FLAGS.favor_shorter_ngram,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        short_seq_prob=FLAGS.short_seq_prob,
        random_next_sentence=FLAGS.random_next_sentence,
        strict_sop=FLAGS.strict_sop,
        words_end_at_sep=FLAGS.words_end_at_sep,
    )
    return GenerationConfig(
        input_files=tuple(input_files),
        spm_model_file=FLAGS.spm_model_file,
        options=options,
        input_format=FLAGS.input_format,
        do_lower_case=FLAGS.do_lower_case,
        dupe_factor=FLAGS.dupe_factor,
        random_seed=FLAGS.random_seed,
        num_output_shards=FLAGS.num_output_shards,
        compression=FLAGS.compression,
        skip_bad_lines=FLAGS.skip_bad_lines,
    )


def run() -> None:
    """Console-script entry point: the readers' and checks' ValueErrors name the file or value."""
    run_main(main, FLAGS, __doc__, pass_unknown_flags=True, value_errors_are_users=True)


if __name__ == "__main__":
    run()
