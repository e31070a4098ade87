"""albert-export: any model source (a preset, a released name, a run's output_dir, ...) -> a SavedModel
for serving and reuse.

    albert-export --preset albert_base_v2 --model encoder --output_dir DIR [--max_seq_length 128]
    albert-export --preset runs/demo/model --model pretrainer --output_dir DIR
    albert-export --preset runs/rte --output_dir DIR

exports a fine-tuning run's task model (GLUE's classifier, NER's tagger, SQuAD v1.1's span labeler,
SQuAD v2.0's answerability head, RACE's multiple choice) as its fine-tuning tool's --export does,
through the same function (`albert_tf.serving.task_exports`); give the run's --max_seq_length. A
SQuAD v2.0 run answers "" by its --null_score_diff_threshold, else by the threshold its last
evaluation chose (eval_results.json in its folder), as its tool's export does.

    albert-export --preset hf://<an AlbertForQuestionAnswering> --output_dir serving/qa --serving_version 1
    albert-export --preset hf://<an AlbertForTokenClassification> --output_dir serving/ner --serving_version 1
    albert-export --preset hf://<an AlbertForMultipleChoice> --output_dir serving/race --serving_version 1

A source that holds a span labeler, a token classifier or a multiple-choice model exports it by
default (--model=task): the question answerer's serve_text(question, context) answering by the rule
its source records (transformers' pipeline's for a Hugging Face model), the tagger's
serve_text(text) its entities, the multiple-choice model's serve_text(article, question, options)
the four options' probabilities on RACE's rows.

    albert-export --preset albert_base_v2 --precision bfloat16 --output_dir DIR

serves bf16 weights and matmuls (1.5-2x faster where the CPU has AVX512_BF16 or AMX; docs/serving.md).

    albert-export --preset albert_base_v2 --format litert --quantization dynamic_int8 --output_dir DIR
    albert-export --preset albert_base_v2 --format litert --quantization full_int8 \
        --representative_texts train_texts.txt --output_dir DIR

writes a LiteRT model instead (DIR/model.tflite, model_io.json, spiece.model; `albert_tf.serving.litert`,
docs/on_device.md): int32 ids [1, max_seq_length] in, builtin ops only; the encoder, or a text
classifier (a fine-tuning run's other tasks come from its tool's --format=litert).

    albert-export --preset hf://<a sequence classifier> --output_dir serving/sst2 --serving_version 1
    albert-export --preset hf://<a sequence classifier> --output_dir on_device/sst2 --format=litert \
        --quantization=dynamic_int8

A source that holds a text classifier (a Hugging Face AlbertForSequenceClassification, a Keras
classifier's preset) exports it by default (--model=text_classifier): its head and its labels.

    albert-export --preset albert_base_v2 --output_dir serving/albert --serving_version 1

writes TF Serving's layout: version 1 of the model at serving/albert (serving/albert/1/, beside the
versions there, never over one) with its warmup file (`albert_tf.serving.tf_serving`, docs/serving.md).

The SavedModel's signatures are `serving_default` (token ids), `serve_examples` (serialized
tf.Examples), `serve_text` (raw strings) and `tokenize`; see `albert_tf.serving.export`.
"""

import os

from absl import flags

from albert_tf.cli.option_flags import (check_serving_version, define_serving_version_flag,
                                       define_weights_source_flags, weights_source)
from albert_tf.cli.entry_point import run_main
from albert_tf.serving.formats import EXPORT_FORMATS, PRECISIONS, QUANTIZATIONS, check_export_settings
from albert_tf.utils.errors import FlagError
from albert_tf.utils.locks import locked_run_folder
from albert_tf.utils.output_dirs import prepare_output_dir

FLAGS = flags.FlagValues()  # its own: other scripts define the same names (see entry_point)
define_weights_source_flags(FLAGS, "The model")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model to put inside (default: the one the source "
                    "holds).", flag_values=FLAGS)
flags.DEFINE_enum("model", None, ["encoder", "pretrainer", "task", "text_classifier"], "Which model to export: "
                  "task is the fine-tuned model a fine-tuning run's output_dir holds, or a Hugging Face question "
                  "answerer, token classifier or multiple-choice model (the default there; elsewhere the encoder); text_classifier: the "
                  "sequence classifier the source holds, e.g. a Hugging Face AlbertForSequenceClassification, "
                  "serving probabilities and labels (the default for a source that holds one).",
                  flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Output folder of the SavedModel (must not exist or be empty).",
                    flag_values=FLAGS)
flags.DEFINE_integer("max_seq_length", 128, "Length serve_text pads/truncates to and serve_examples parses.",
                     flag_values=FLAGS)
flags.DEFINE_integer("max_predictions_per_seq", 20, "Length of masked_lm_positions in serve_examples "
                     "(pretrainer only).", flag_values=FLAGS)
flags.DEFINE_enum("format", "saved_model", list(EXPORT_FORMATS), "saved_model, or litert: a LiteRT "
                  "(TFLite) model of the encoder or a text classifier for phones (albert_tf.serving.litert).",
                  flag_values=FLAGS)
flags.DEFINE_enum("quantization", "none", list(QUANTIZATIONS), "--format=litert: "
                  "the weights' (and for full_int8 the activations') type.", flag_values=FLAGS)
flags.DEFINE_enum("precision", "float32", list(PRECISIONS), "The SavedModel's weights and matmuls: bfloat16 "
                  "serves 1.5-2x faster where the CPU has AVX512_BF16 or AMX (docs/serving.md); LiteRT "
                  "models are float32, made smaller by --quantization.", flag_values=FLAGS)
flags.DEFINE_string("representative_texts", None, "--quantization=full_int8: a text file of training texts to "
                    "calibrate on, one a line (a tab between the two texts of a pair).", flag_values=FLAGS)
define_serving_version_flag(FLAGS, "--output_dir")
flags.DEFINE_bool("do_lower_case", True, "Lowercase in the tokenizer (True for the released English models).",
                  flag_values=FLAGS)


_LITERT_ENCODER_ONLY = ("--format=litert exports the encoder or a text classifier (--model=encoder, "
                        "text_classifier); a fine-tuning run's other tasks' LiteRT model comes from its tool's "
                        "--format=litert")
_LITERT_MODELS = ("encoder", "text_classifier")


def _check_litert_flags():
    if FLAGS.format != "litert" and (FLAGS.quantization != "none" or FLAGS.representative_texts):
        raise FlagError("--quantization and --representative_texts are for --format=litert")
    check_export_settings(FLAGS.format, FLAGS.quantization, FLAGS.precision)
    if FLAGS.format != "litert":
        return
    if FLAGS.model not in (None, *_LITERT_MODELS):
        raise FlagError(_LITERT_ENCODER_ONLY)
    if (FLAGS.quantization == "full_int8") != bool(FLAGS.representative_texts):
        raise FlagError("--representative_texts goes with --quantization=full_int8, which needs it (training "
                        "texts to calibrate the activations on)")
    if FLAGS.representative_texts:
        _representative_texts(FLAGS.representative_texts)  # before the model is built


def _representative_texts(path: str) -> list:
    """The calibration texts of --representative_texts: one a line, a tab between a pair's two."""
    flag = f"--representative_texts {path}"
    if os.path.isdir(path):
        raise FlagError(f"{flag} is a folder: give a text file of training texts, one a line")
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except FileNotFoundError:
        raise FlagError(f"{flag}: no such file") from None
    except UnicodeDecodeError as error:
        line = error.object[:error.start].count(b"\n") + 1
        raise FlagError(f"{flag}: line {line} is not UTF-8 (byte 0x{error.object[error.start]:02x}); "
                        "save the texts as UTF-8") from None
    if not lines:
        raise FlagError(f"{flag} holds no text: full int8 calibrates on training texts, one a line")
    return [tuple(line.split("\t", 1)) if "\t" in line else line for line in lines]


def main(argv):
    del argv
    weights_source(FLAGS, required=True)
    if not FLAGS.output_dir:
        raise FlagError("--output_dir is required")
    _check_litert_flags()
    if FLAGS.model == "text_classifier" and (FLAGS.precision != "float32" or FLAGS.spm_model_file):
        raise FlagError("--model=text_classifier exports the classifier as it is, with its own vocabulary: drop "
                        "--precision and --spm_model_file")
    if FLAGS.serving_version is not None:
        prepare_output_dir(FLAGS.output_dir, create=False)  # the model base: other versions may be there
        check_serving_version(FLAGS, FLAGS.output_dir)
    else:
        prepare_output_dir(FLAGS.output_dir, create=False, empty=True)  # before the model is built
    with locked_run_folder(FLAGS.output_dir):  # one run a folder; a failed one leaves nothing
        export()


def _which_model(source) -> str:
    """--model, or by default the text classifier a source holds, the fine-tuned task model a run
    holds or that albert-export exports (a Hugging Face question answerer or token classifier), else
    the encoder."""
    from albert_tf.presets.folder import TEXT_CLASSIFIER_TASK
    from albert_tf.presets.hf_heads import MULTIPLE_CHOICE_TASK, SPAN_LABELER_TASK
    from albert_tf.serving.task_exports import SAVED_MODELS, check_exportable, exported_class, is_task_model, run_info

    task_class = source.task["class"] if source.task else None
    info = run_info(source)
    # A run's output_dir, or a source recording what its model's export needs: nothing for a span
    # labeler (its answer rule, the release's by default) or a multiple-choice model (RACE's rows),
    # the labels for a tagger (a Hugging Face one's).
    self_described = exported_class(task_class) in SAVED_MODELS and (
        task_class in (SPAN_LABELER_TASK, MULTIPLE_CHOICE_TASK) or bool(info.get("labels")))
    fine_tuned = is_task_model(task_class) and (bool(info.get("task")) or self_described)
    default = "text_classifier" if task_class == TEXT_CLASSIFIER_TASK else "task" if fine_tuned else "encoder"
    which = FLAGS.model or default
    if which == "task":
        if task_class is None:
            raise FlagError(f"--model=task: {source.name} holds an encoder, no fine-tuned model")
        check_exportable(task_class)  # a class with no SavedModel here: one line naming those there are
    if which not in _LITERT_MODELS and FLAGS.format == "litert":
        raise FlagError(_LITERT_ENCODER_ONLY)
    return which


def export():
    """The SavedModel (or LiteRT model) the flags ask for, written into the locked --output_dir."""
    from albert_tf import models
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.serving.export import at_precision
    from albert_tf.serving.task_exports import export_task_saved_model, exported_class, run_info
    from albert_tf.presets.loader import open_source

    source = open_source(weights_source(FLAGS))
    which = _which_model(source)
    if which == "text_classifier":
        return _export_text_classifier(source)
    model_class = {"encoder": AlbertEncoder, "pretrainer": AlbertPretrainer}.get(which)
    model_class = model_class or getattr(models, exported_class(source.task["class"]))
    model = at_precision(model_class.from_preset(source), FLAGS.precision)
    spm_model_file = FLAGS.spm_model_file or source.vocabulary()
    if FLAGS.format == "litert":
        return _export_litert(model, which, spm_model_file)
    info = run_info(source) if which == "task" else {}

    def write(folder):
        export_task_saved_model(model, folder, spm_model_file, FLAGS.max_seq_length, info,
                                max_predictions_per_seq=FLAGS.max_predictions_per_seq,
                                do_lower_case=FLAGS.do_lower_case)

    what = info.get("task") or source.task["class"] if which == "task" else which
    print(f"wrote the {what} SavedModel ({FLAGS.precision}) to {_write(write)}")


def _export_litert(model, which: str, spm_model_file: str):
    """`model` as a LiteRT model into --output_dir, calibrated on --representative_texts for full int8."""
    from albert_tf.serving.litert import export_litert, tokenized_texts

    calibration = None
    if FLAGS.representative_texts:
        texts = _representative_texts(FLAGS.representative_texts)
        calibration = lambda: tokenized_texts(texts, spm_model_file, FLAGS.max_seq_length,  # noqa: E731
                                              FLAGS.do_lower_case)
    export_litert(model, FLAGS.output_dir, spm_model_file, FLAGS.max_seq_length, quantization=FLAGS.quantization,
                  representative_data=calibration, do_lower_case=FLAGS.do_lower_case)
    print(f"wrote the {which} LiteRT model ({FLAGS.quantization}) to {FLAGS.output_dir}")


def _export_text_classifier(source):
    """The text classifier a source holds (its head and labels, by the task rule), exported with
    `AlbertTextClassifier.export` (serve_text gives `probabilities` and `label`; a regressor: `score`)
    or as a LiteRT model (`logits`, `probability`; its labels in model_io.json)."""
    from albert_tf.tasks.text_classifier import AlbertTextClassifier

    if FLAGS.precision != "float32" or FLAGS.spm_model_file:
        raise FlagError("--model=text_classifier exports the classifier as it is, with its own vocabulary: drop "
                        "--precision and --spm_model_file")
    model = AlbertTextClassifier.from_preset(weights_source(FLAGS), sequence_length=FLAGS.max_seq_length)
    if FLAGS.format == "litert":
        return _export_litert(model, "text classifier", source.vocabulary())
    print(f"wrote the text classifier SavedModel ({model.num_classes} classes) to {_write(model.export)}")


def _write(write) -> str:
    """`write(folder)` into --output_dir, or as version --serving_version of TF Serving's layout there."""
    if FLAGS.serving_version is None:
        write(FLAGS.output_dir)
        return FLAGS.output_dir
    from albert_tf.serving.tf_serving import write_version

    return write_version(FLAGS.output_dir, FLAGS.serving_version, write)


def run():
    # The export's checks (the vocabulary against the model, the lengths) raise ValueErrors that name
    # the file or value: the user's, one line.
    run_main(main, FLAGS, __doc__, value_errors_are_users=True)


if __name__ == "__main__":
    run()
