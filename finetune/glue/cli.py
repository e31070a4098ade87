"""albert-finetune-glue: fine-tune ALBERT on a GLUE task, evaluate it, predict the test set, export it.

    albert-finetune-glue --task MRPC --data_dir glue_data --init_checkpoint pretrain_run \\
        --output_dir mrpc --do_train --do_eval --do_predict --max_seq_length 128

The learning rate, batch size, steps and warmup default to the task's preset of the paper
(finetune/glue/hparams.py); each flag overrides its value. The encoder starts from
`--init_checkpoint` (an albert-pretrain output_dir or checkpoint prefix, or an encoder or
pretrainer SavedModel of albert-export), from `--preset` (a preset folder of albert-convert), or
from random weights when only `--albert_config_file` is given. A rerun with the same `--output_dir`
resumes from its latest checkpoint.

Outputs in `--output_dir`: checkpoints, TensorBoard summaries, `eval_results.json` (the task's
metrics on each evaluation split), the GLUE submission files (`<TASK>.tsv`, official label
strings) and `export/`, a SavedModel whose `serve_text` signature takes raw sentences and returns
`probabilities`, the predicted `label` and the `label_names` (`score` for STS-B).
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags, logging

from albert_tf import strategies, training

# Its own FlagValues, as every console script here: one process (the tests) may import several.
FLAGS = flags.FlagValues()
flags.DEFINE_string("task", None, "GLUE task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE or WNLI.", flag_values=FLAGS)
flags.DEFINE_string("data_dir", None, "The GLUE data folder (holding <task>/train.tsv, ...) or the task's folder.", flag_values=FLAGS)
flags.DEFINE_string("init_checkpoint", None, "Encoder weights to start from: an albert-pretrain output_dir or "
                    "checkpoint prefix, or an encoder/pretrainer SavedModel of albert-export.", flag_values=FLAGS)
flags.DEFINE_string("preset", None, "Instead of --init_checkpoint: a preset folder (config.json, "
                    "model.weights.h5, spiece.model).", flag_values=FLAGS)
flags.DEFINE_string("albert_config_file", None, "The model's albert_config.json; needed when the checkpoint's "
                    "folder has none, with a SavedModel, and to start from random weights.", flag_values=FLAGS)
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (default: the preset's, or the one inside "
                    "a SavedModel).", flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Checkpoints, results, submission files and the SavedModel.", flag_values=FLAGS)
flags.DEFINE_string("cache_dir", None, "Where tokenized features are cached (default <output_dir>/features).", flag_values=FLAGS)
flags.DEFINE_bool("do_train", False, "Fine-tune on the train split.", flag_values=FLAGS)
flags.DEFINE_bool("do_eval", False, "Evaluate on the labelled dev split(s); writes eval_results.json.", flag_values=FLAGS)
flags.DEFINE_bool("do_predict", False, "Predict the test split(s); writes the GLUE submission files.", flag_values=FLAGS)
flags.DEFINE_integer("max_seq_length", None, "Tokens per example (preset: 512).", flag_values=FLAGS)
flags.DEFINE_integer("train_batch_size", None, "Global training batch (preset: the paper's).", flag_values=FLAGS)
flags.DEFINE_integer("eval_batch_size", 32, "Global batch of evaluation and prediction.", flag_values=FLAGS)
flags.DEFINE_float("learning_rate", None, "Peak AdamW learning rate (preset: the paper's).", flag_values=FLAGS)
flags.DEFINE_integer("num_train_steps", None, "Updates (preset: the paper's).", flag_values=FLAGS)
flags.DEFINE_integer("num_warmup_steps", None, "Updates of linear warmup (preset: the paper's).", flag_values=FLAGS)
flags.DEFINE_integer("max_train_examples", None, "Train on the first N examples only (short CPU runs).", flag_values=FLAGS)
flags.DEFINE_float("weight_decay", 0.01, "AdamW weight decay of the non-LayerNorm, non-bias weights.", flag_values=FLAGS)
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Updates between checkpoints.", flag_values=FLAGS)
flags.DEFINE_integer("keep_checkpoint_max", 3, "Checkpoints kept.", flag_values=FLAGS)
flags.DEFINE_integer("steps_per_loop", 50, "Updates per call to the compiled loop; also the interval of the "
                     "progress line and summaries.", flag_values=FLAGS)
flags.DEFINE_enum("strategy", "one_device", list(strategies.STRATEGIES), "The tf.distribute strategy.", flag_values=FLAGS)
flags.DEFINE_string("tpu", None, "For --strategy=tpu: a Cloud TPU name, grpc://host:port or 'local'.", flag_values=FLAGS)
flags.DEFINE_enum("mixed_precision", "none", list(training.MIXED_PRECISION_POLICIES),
                  training.MIXED_PRECISION_HELP, flag_values=FLAGS)
flags.DEFINE_bool("jit_compile", True, "Compile the forward and backward pass with XLA.", flag_values=FLAGS)
flags.DEFINE_bool("skip_bad_rows", False, "Count and skip malformed TSV rows instead of stopping at the first.", flag_values=FLAGS)
flags.DEFINE_integer("seed", 12345, "Seed of the head's initialisation (and the encoder's when it starts from random weights), dropout and shuffling.", flag_values=FLAGS)
flags.DEFINE_bool("export", True, "Export the classifier as a SavedModel to <output_dir>/export at the end.", flag_values=FLAGS)
flags.DEFINE_bool("progress_bar", True, "Show a progress bar (on the chief).", flag_values=FLAGS)

EVAL_RESULTS = "eval_results.json"
EXPORT_DIR = "export"


def model_source():
    """The config, the SentencePiece model and the encoder initialiser that the flags name."""
    from albert_tf.config import AlbertConfig
    from albert_tf.convert import PRESET_VOCAB, read_preset_config
    from finetune.glue import model

    if FLAGS.preset and FLAGS.init_checkpoint:
        raise app.UsageError("give at most one of --init_checkpoint and --preset")
    spm_model_file = FLAGS.spm_model_file
    if FLAGS.preset:
        config = read_preset_config(FLAGS.preset)
        if FLAGS.albert_config_file and AlbertConfig.from_json_file(FLAGS.albert_config_file) != config:
            raise ValueError(f"--albert_config_file differs from the config of --preset {FLAGS.preset}")
        spm_model_file = spm_model_file or os.path.join(FLAGS.preset, PRESET_VOCAB)
    else:
        config = model.init_config(FLAGS.init_checkpoint, FLAGS.albert_config_file)
        if not spm_model_file and FLAGS.init_checkpoint and model.is_saved_model(FLAGS.init_checkpoint):
            spm_model_file = model.saved_model_vocab_file(FLAGS.init_checkpoint)
    if not spm_model_file:
        raise app.UsageError("--spm_model_file is required (the vocabulary the model was pretrained with)")

    def initialize(classifier):
        return model.initialize_encoder(classifier, FLAGS.init_checkpoint, FLAGS.preset)

    return config, spm_model_file, initialize


def hparams_from_flags(task):
    from finetune.glue.hparams import glue_hparams

    return glue_hparams(
        task.name,
        learning_rate=FLAGS.learning_rate,
        batch_size=FLAGS.train_batch_size,
        train_steps=FLAGS.num_train_steps,
        warmup_steps=FLAGS.num_warmup_steps,
        max_seq_length=FLAGS.max_seq_length,
    )


def check_data_files(task, splits):
    """Fails before any model is built when a split's file is missing (the message names where)."""
    from finetune.glue.readers import split_path

    for split in splits:
        split_path(task, FLAGS.data_dir, split)


def export_classifier(classifier, task, spm_model_file, max_seq_length, export_dir):
    """The classifier as a SavedModel whose outputs are probabilities and label names (STS-B: the
    score), on every signature of albert_tf.export."""
    import tensorflow as tf

    from albert_tf.export import export_saved_model

    label_names = None if task.is_regression else tf.constant(task.labels)

    def outputs_fn(inputs, training):
        logits = classifier(inputs, training=training)
        if label_names is None:
            return {"score": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        batch = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "label": tf.gather(label_names, tf.argmax(probabilities, axis=-1)),
            # One row per example so that every output has the batch dimension (TF Serving's rows).
            "label_names": tf.tile(label_names[None, :], [batch, 1]),
        }

    if tf.io.gfile.exists(export_dir):
        tf.io.gfile.rmtree(export_dir)
    return export_saved_model(classifier, export_dir, spm_model_file, max_seq_length, outputs_fn=outputs_fn)


def finetune(argv) -> dict:
    """Runs the command line `argv` (argv[0] is the program name) in this process; returns a
    summary: `train` (the result of `trainer.train` or None), `eval` (what eval_results.json holds
    or None), `predictions` (submission file paths), `export_dir` and `model` (the classifier)."""
    FLAGS.unparse_flags()
    FLAGS(argv)
    for name in ("task", "data_dir", "output_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise app.UsageError("give at least one of --do_train, --do_eval and --do_predict")

    from finetune.glue.tasks import get_task

    task = get_task(FLAGS.task)
    hparams = hparams_from_flags(task)
    splits = (("train",) if FLAGS.do_train else ()) + (task.eval_splits if FLAGS.do_eval else ()) + (
        task.predict_splits if FLAGS.do_predict else ())
    check_data_files(task, splits)
    # Before any other TensorFlow op: multi-worker collectives are configured at startup.
    strategy = strategies.get_strategy(FLAGS.strategy, tpu=FLAGS.tpu)

    from albert_tf.tokenizer import AlbertTokenizer
    from finetune.glue import data, metrics, model, submission, trainer

    config, spm_model_file, initialize = model_source()
    tokenizer = AlbertTokenizer(spm_model_file)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{spm_model_file} has {tokenizer.vocab_size} pieces but the model's vocab_size is "
                         f"{config.vocab_size}: ids beyond the embedding table")
    if FLAGS.init_checkpoint:
        model.check_vocab_size(FLAGS.init_checkpoint, tokenizer.vocab_size, f"--spm_model_file {spm_model_file}")

    options = trainer.FinetuneOptions(
        output_dir=FLAGS.output_dir,
        train_batch_size=hparams.batch_size,
        eval_batch_size=FLAGS.eval_batch_size,
        max_seq_length=hparams.max_seq_length,
        learning_rate=hparams.learning_rate,
        num_train_steps=hparams.train_steps,
        num_warmup_steps=hparams.warmup_steps,
        weight_decay=FLAGS.weight_decay,
        classifier_dropout=hparams.classifier_dropout,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        steps_per_loop=FLAGS.steps_per_loop,
        mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile,
        max_train_examples=FLAGS.max_train_examples,
        seed=FLAGS.seed,
        progress_bar=FLAGS.progress_bar,
    )
    cache_dir = FLAGS.cache_dir or os.path.join(FLAGS.output_dir, "features")

    def features(split):
        cached = data.cache_features(task, FLAGS.data_dir, split, tokenizer, hparams.max_seq_length,
                                     cache_dir, skip_bad_rows=FLAGS.skip_bad_rows)
        if cached.num_skipped:
            logging.warning("%s %s: skipped %d malformed rows", task.name, split, cached.num_skipped)
        return cached

    run = trainer.GlueFinetuning(config, task, options, strategy)
    run.restore_or_initialize(initialize)
    summary = {"train": None, "eval": None, "predictions": [], "export_dir": None, "model": run.model}
    if FLAGS.do_train:
        summary["train"] = trainer.train(run, features("train"))
        logging.info("trained to step %d: %s", summary["train"]["step"],
                     training.format_metrics(summary["train"]["train"]))

    if FLAGS.do_eval:
        results = {"task": task.name, "global_step": run.current_step}
        for split in task.eval_splits:
            cached = features(split)
            outputs, label_ids, rate = run.predict(cached)
            sums = model.classifier_sums(outputs, label_ids, [1.0] * len(label_ids), task.is_regression)
            split_results = metrics.task_metrics(task, label_ids, outputs)
            split_results.update(loss=float(sums["loss"]) / len(label_ids), examples=len(label_ids),
                                 skipped_rows=cached.num_skipped, examples_per_second=rate)
            results[split] = split_results
            logging.info("%s %s: %s", task.name, split, json.dumps(split_results))
        if run.is_chief:
            with open(os.path.join(FLAGS.output_dir, EVAL_RESULTS), "w", encoding="utf-8") as f:
                f.write(json.dumps(results, indent=2) + "\n")
        summary["eval"] = results

    if FLAGS.do_predict:
        for split in task.predict_splits:
            cached = features(split)
            outputs, _, _ = run.predict(cached)
            if run.is_chief:
                summary["predictions"].append(str(submission.write_submission(
                    task, split, outputs, FLAGS.output_dir, num_examples=cached.num_examples)))

    if FLAGS.export and run.is_chief:
        summary["export_dir"] = export_classifier(run.model, task, spm_model_file, hparams.max_seq_length,
                                        os.path.join(FLAGS.output_dir, EXPORT_DIR))
        logging.info("exported the classifier to %s", summary["export_dir"])
    return summary


def main(argv):
    logging.set_verbosity(logging.INFO)
    summary = finetune(argv)
    if summary["eval"]:
        print(json.dumps(summary["eval"], indent=2), flush=True)
    for path in summary["predictions"]:
        print(f"wrote {path}", flush=True)


def run():
    """Console-script entry point: errors in the input are one line, not a traceback."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv
    if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
        print(__doc__)
        print(FLAGS.get_help())
        sys.exit(0)
    try:
        # absl's own flags (logging) stay at their defaults, parsed so that logging does not complain.
        flags.FLAGS([argv[0]])
        main(argv)
    except (flags.Error, app.UsageError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    run()
