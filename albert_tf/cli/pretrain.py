"""albert-pretrain: masked-LM + sentence-order pretraining on TFRecords, under any tf.distribute strategy.

    albert-pretrain --input_file 'data/train-*.tfrecord' --eval_input_file data/eval.tfrecord \\
        --output_dir run --size albert_base_v2 --train_batch_size 4096 --max_seq_length 512 \\
        --num_train_steps 125000 --num_warmup_steps 3125 --learning_rate 0.00176 \\
        --strategy tpu --tpu my-tpu --mixed_precision bf16

Flags keep the names of the original `run_pretraining.py` where it had them. A rerun with the same
`--output_dir` resumes from its latest checkpoint. SIGTERM (a preemption) saves a checkpoint at the
next loop boundary, on every worker, and exits with 143; a lost worker stops the others with one
line (exit 1). At the end the encoder is exported as a SavedModel under `<output_dir>/export` (when
the run knows its vocabulary: --spm_model_file, once), `<output_dir>/curves.png` is drawn, and one
line sums the run up: its metrics, where it started (fresh, or resumed from which checkpoint at
which step), the curves and the export.
"""

import os

from absl import flags

from albert_tf.training import options
from albert_tf.cli.entry_point import run_main
from albert_tf.utils.quiet import cpp_lines_kept, set_tensorflow_log_level, verbose
from albert_tf.cli.option_flags import (define_allow_changed_flags, define_option_flags, define_strategy_flags,
                                        define_weights_source_flags, option_values, weights_source)
from albert_tf.utils.errors import FlagError
from albert_tf.utils.files import files_for
from albert_tf.utils.locks import locked_run_folder
from albert_tf.utils.output_dirs import prepare_output_dir
from albert_tf.utils.patterns import expand_patterns

# Its own FlagValues: data_prep's scripts define --input_file too, and one process may import both.
FLAGS = flags.FlagValues()
# The help of this tool's own meaning of a field; the others are the fields' (albert_tf.training.options).
_OPTION_HELP = {
    "output_dir": "Where checkpoints, TensorBoard summaries, albert_config.json and the exported SavedModel go. "
                  "A rerun resumes from its latest checkpoint.",
    "max_seq_length": "Sequence length the records were written with (default: read from the "
                      "pretraining_data.json beside them).",
    "max_predictions_per_seq": "Masked positions per record, as written (default: read from the "
                               "pretraining_data.json beside them).",
    "num_warmup_steps": "Updates of linear warmup (default: the paper's 3,125 of 125,000, scaled to "
                        "--num_train_steps).",
}
# Where the command line's default differs from the field's: read from the records, or scaled.
_CLI_DEFAULTS = {"input_file": None, "eval_input_file": None, "max_seq_length": None,
                 "max_predictions_per_seq": None, "num_warmup_steps": None, "progress_bar": True}
OPTION_FLAGS = define_option_flags(FLAGS, options.PretrainingOptions, _OPTION_HELP, _CLI_DEFAULTS)
flags.DEFINE_string("albert_config_file", None, "An albert_config.json (or give --size or --preset).", flag_values=FLAGS)
flags.DEFINE_string("size", None, "A released size without weights, such as albert_base_v2 (albert-presets --sizes): "
                    "pretraining from scratch.", flag_values=FLAGS)
define_weights_source_flags(FLAGS, "The encoder, its pretraining heads and its config (start from its weights)")
define_strategy_flags(FLAGS, worker_timeout=True)
define_allow_changed_flags(FLAGS)


def load_config():
    from albert_tf.config import AlbertConfig

    given = [f"--{name}" for name in ("albert_config_file", "size", "preset") if FLAGS[name].value]
    if len(given) > 1:
        raise FlagError(f"give one of {' and '.join(given)}")
    if FLAGS.size:
        return AlbertConfig.named(FLAGS.size)
    if FLAGS.albert_config_file:
        return AlbertConfig.from_json_file(FLAGS.albert_config_file)
    if weights_source(FLAGS):
        from albert_tf.presets.loader import open_source

        return open_source(weights_source(FLAGS)).config
    raise FlagError("give one of --albert_config_file, --size and --preset")


def record_lengths() -> tuple[int, int]:
    """--max_seq_length and --max_predictions_per_seq, each read from the records' own
    pretraining_data.json (written by albert-create-pretraining-data) when not given."""
    from albert_tf.data.features import PRETRAINING_METADATA_FILE, read_pretraining_metadata

    given = {"max_seq_length": FLAGS.max_seq_length, "max_predictions_per_seq": FLAGS.max_predictions_per_seq}
    if None not in given.values():
        return given["max_seq_length"], given["max_predictions_per_seq"]
    files = expand_patterns(FLAGS.input_file, flag="input_file")
    metadata = os.path.join(os.path.dirname(files[0]), PRETRAINING_METADATA_FILE)
    if not files_for(metadata).exists(metadata):
        missing = [f"--{name}" for name, value in given.items() if value is None]
        raise FlagError(f"give {' and '.join(missing)}: no {PRETRAINING_METADATA_FILE} beside the records of "
                        f"--input_file={FLAGS.input_file} to read it from")
    settings = read_pretraining_metadata(metadata)["settings"]
    return tuple(settings[name] if value is None else value for name, value in given.items())


def run_vocabulary() -> str | None:
    """--spm_model_file (the run keeps it in its folder once the folder is its own); or the one a
    previous run of the folder kept."""
    from albert_tf.checkpoints.run_folder import RUN_VOCAB

    if FLAGS.spm_model_file:
        return FLAGS.spm_model_file
    kept = os.path.join(FLAGS.output_dir, RUN_VOCAB)
    return kept if files_for(kept).exists(kept) else None


def warmup_steps() -> int:
    """--num_warmup_steps, or the paper's warmup ratio applied to --num_train_steps."""
    steps, warmup = FLAGS.num_train_steps, FLAGS.num_warmup_steps
    if warmup is None:
        return options.scaled_warmup_steps(steps, options.PRETRAINING_STEPS, options.PRETRAINING_WARMUP_STEPS)
    options.check_warmup(steps, warmup, prefix="--")
    return warmup


def main(argv):
    if FLAGS.strategy == "multi_worker" and not verbose():
        # When a worker is lost, TensorFlow's runtime logs every aborted collective as an ERROR of
        # its own; the one line that says what happened is ours (strategies.lost_workers_named).
        # Read once, when TensorFlow loads, which is below.
        set_tensorflow_log_level("3", override=True)
    from albert_tf.training import pretraining  # here, not above: --help must not load TensorFlow
    from albert_tf.training import strategies

    if len(argv) > 1:
        raise FlagError(f"unexpected arguments: {argv[1:]}")
    for name in ("input_file", "output_dir"):
        if not FLAGS[name].value:
            raise FlagError(f"--{name} is required")
    weights_source(FLAGS)
    # Before anything is read or written: an unusable folder is one line naming the flag.
    prepare_output_dir(FLAGS.output_dir, create=False)
    # One run a folder; a run refused or failed before its first checkpoint leaves it as it was.
    import tensorflow as tf  # loaded by the import above

    with locked_run_folder(FLAGS.output_dir, keep_on_failure=tf.train.latest_checkpoint):
        pretrain(strategies, pretraining)


def pretrain(strategies, pretraining):
    """The pretraining run the flags ask for, in the locked --output_dir."""
    config = load_config()
    max_seq_length, max_predictions_per_seq = record_lengths()
    values = option_values(FLAGS, OPTION_FLAGS)
    values.update(eval_input_file=FLAGS.eval_input_file or "", max_seq_length=max_seq_length,
                  max_predictions_per_seq=max_predictions_per_seq, num_warmup_steps=warmup_steps(),
                  spm_model_file=run_vocabulary())
    run_options = options.PretrainingOptions(**values)
    # First, before any other TensorFlow op: multi-worker collectives must be configured at startup.
    try:
        with cpp_lines_kept():
            strategy = strategies.get_strategy(FLAGS.strategy, tpu=FLAGS.tpu, cpu_devices=FLAGS.cpu_devices,
                                               worker_timeout_s=FLAGS.worker_timeout_s)
    except ValueError as error:
        raise FlagError(f"--strategy={FLAGS.strategy}: {error}") from error
    source = weights_source(FLAGS)
    initialize = None
    if source:
        from albert_tf.presets.loader import initialize_pretrainer

        initialize = lambda model: initialize_pretrainer(model, source)  # noqa: E731
    result = pretraining.run_pretraining(config, run_options, strategy=strategy, initialize=initialize,
                                         export_fn=encoder_export(run_options),
                                         allow_changed_flags=FLAGS.allow_changed_flags)
    for line in [*eval_lines(result, run_options.spm_model_file), summary_line(result)]:
        print(line, flush=True)


def encoder_export(run_options):
    """The end of the run: the encoder's SavedModel (token ids, serialized examples and raw text
    in), or nothing without a vocabulary (a SavedModel that could not tokenize text is not written;
    the summary line gives the albert-export command that exports the checkpoint later)."""
    def export(model, export_dir: str) -> str | None:
        if not run_options.spm_model_file:
            return None
        from albert_tf.serving.export import export_encoder
        from albert_tf.utils.atomic import atomic_folder

        # The run's own export, as every tool's: the previous one is replaced once this one is complete.
        with atomic_folder(export_dir, replace=True) as folder:
            export_encoder(model.encoder, folder, run_options.spm_model_file, run_options.max_seq_length)
        return export_dir

    return export


def summary_line(result: dict) -> str:
    """The run in one line: "finished at step N: train <metrics>; <how it started>; curves <png>;
    exported to <dir>" (or why it was not); a rerun with no step left says so in place of the
    train metrics. The held-out figures are `eval_lines`'."""
    from albert_tf.training.summaries import train_summary

    parts = [f"finished at step {result['step']}: {train_summary(result['train'], result['step'])}", result["started"]]
    if result["curves"]:
        parts.append(f"curves {result['curves']}")
    if result["export_dir"]:
        parts.append(f"exported to {result['export_dir']}")
    else:
        parts.append(f"not exported: no vocabulary (--spm_model_file); albert-export "
                     f"--init_checkpoint={FLAGS.output_dir} --spm_model_file=... exports it")
    return "; ".join(parts)


def eval_lines(result: dict, vocabulary: str | None) -> list[str]:
    """The held-out figures beside their baselines (`pretraining.eval_baselines`), then one line on
    what they show, from the evaluations of the whole run (its eval/ event files)."""
    from albert_tf.training.summaries import read_scalars

    metrics, base = result["eval"], result["eval_baselines"]
    if not metrics or not base:
        return []
    piece = f"piece {base['mlm_piece']}"
    if vocabulary:
        from albert_tf.tokenizers.tokenizer import AlbertTokenizer

        piece = f'"{AlbertTokenizer(vocabulary).convert_ids_to_tokens([base["mlm_piece"]])[0]}"'
    order = ("in order", "swapped")[base["sop_label"]]
    figures = (f"held-out at step {result['step']} ({base['examples']:,} records): masked-LM accuracy "
               f"{metrics['mlm_accuracy']:.1%} (the most frequent masked piece, {piece}, every time: "
               f"{base['mlm_accuracy']:.1%}), sentence order {metrics['sop_accuracy']:.1%} (the majority "
               f"order, {order}, every time: {base['sop_accuracy']:.1%})")
    history = read_scalars(os.path.join(FLAGS.output_dir, "eval"))
    trained = read_scalars(os.path.join(FLAGS.output_dir, "train"))  # a rerun with no step left trains nothing
    heads = [("masked-LM", "mlm", base["mlm_predictions"]), ("sentence-order", "sop", base["examples"])]
    return [figures, "so: " + "; ".join(
        head_finding(name, metrics[f"{key}_accuracy"], base[f"{key}_accuracy"], count, history.get(f"{key}_loss", []),
                     (trained.get(f"{key}_accuracy") or [(None, None)])[-1][1])
        for name, key, count in heads)]


def head_finding(name: str, accuracy: float, baseline: float, count: int, losses: list, train_accuracy) -> str:
    """What one head's held-out figures show: above its baseline or not (by more than two standard
    errors of `count` predictions), and its held-out loss from the first evaluation to the last;
    a rising loss while the training records' accuracy is far above the held-out one is memorising."""
    error = (baseline * (1 - baseline) / count) ** 0.5
    above = accuracy - baseline > 2 * error
    finding = f"the {name} head {'learnt beyond' if above else 'is not above'} its baseline"
    if len(losses) < 2:
        return finding
    (first_step, first), (last_step, last) = losses[0], losses[-1]
    finding += f" (held-out loss {first:.2f} at step {first_step} -> {last:.2f} at step {last_step}"
    if last > first * 1.05 and train_accuracy is not None and train_accuracy > accuracy + 0.1:
        return finding + (f", while {train_accuracy:.0%} right on the training records): it memorises the "
                          "training text rather than learning what holds beyond it")
    return finding + ")"


def run():
    """Console-script entry point."""
    run_main(main, FLAGS, __doc__)


if __name__ == "__main__":
    run()
