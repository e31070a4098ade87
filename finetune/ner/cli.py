"""albert-finetune-ner: fine-tune ALBERT to tag named entities, evaluate it, predict, export it.

    albert-finetune-ner --train_file wnut17train.conll --eval_file emerging.dev.conll \\
        --preset albert_base_v2 --output_dir ner --do_train --do_eval

The files are CoNLL-style: a token and its tag a line (tab- or space-separated, the tag last), a
blank line between sentences, `-DOCSTART-` lines skipped; `--tag_scheme` says how their tags are
written (bio, iob1 or bioes; the model learns BIO). The entity types are those of `--train_file`
unless `--labels` names them; a type that only the evaluation file holds is an error naming its
line. The learning rate, batch, steps, warmup, length and optimizer default to Hugging Face's
token-classification guide (`--hparams hf`: 2e-5, 16, 424 steps = 2 epochs of WNUT-17, no warmup,
128 tokens, on torch's bias-corrected AdamW: `--optimizer=adamw`); each flag overrides its value
(`--optimizer=adamw_release`: the release's AdamW, without bias correction).

Outputs in `--output_dir`: checkpoints, TensorBoard summaries, curves.png, `eval_results.json`
(entity precision, recall and F1 overall and per type, as conlleval and seqeval count them, and
token accuracy), `predictions_<split>.conll` (each word with its tags, the predicted one last) and
`export/`, a SavedModel whose `serve_text` takes raw text and returns its entities (text, type,
character start and end, score) and its words' tags.
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli.option_flags import check_values
from albert_tf.data.tagging import DOC_STRIDE
from finetune import cli as skeleton

FLAGS = flags.FlagValues()
flags.DEFINE_string("train_file", None, "CoNLL file to train on.", flag_values=FLAGS)
flags.DEFINE_string("eval_file", None, "CoNLL file to evaluate on (--do_eval).", flag_values=FLAGS)
flags.DEFINE_string("predict_file", None, "CoNLL file to tag (--do_predict); its tags may be missing.",
                    flag_values=FLAGS)
flags.DEFINE_enum("tag_scheme", "bio", ["bio", "iob1", "bioes"], "How the files' tags are written: bio (IOB2), "
                  "iob1 (CoNLL-2003's original) or bioes (IOBES; BILOU too); converted to BIO.", flag_values=FLAGS)
flags.DEFINE_list("labels", None, "The entity types (default: those of --train_file, else those the run in "
                  "--output_dir was trained with).", flag_values=FLAGS)
flags.DEFINE_integer("doc_stride", DOC_STRIDE, "Pieces between the starts of two windows of a long sentence.",
                     lower_bound=1, flag_values=FLAGS)
skeleton.define_flags(FLAGS, hparams=("hf",), hparams_help=(
    "Hugging Face's token-classification guide: learning rate 2e-5, batch 16, 424 steps (2 epochs of "
    "WNUT-17), no warmup, 128 tokens, torch's bias-corrected AdamW (--optimizer=adamw)."))
check_values(FLAGS, paths=("train_file", "eval_file", "predict_file"), names=("labels",))


def make_task(flag_values):
    from albert_tf.utils.errors import FlagError
    from finetune.ner.task import NerTask

    F = flag_values
    for action, name in (("do_train", "train_file"), ("do_eval", "eval_file"), ("do_predict", "predict_file")):
        if F[action].value and not F[name].value:
            raise FlagError(f"--{action} needs --{name}")
    return NerTask(F.train_file if F.do_train else None, F.eval_file if F.do_eval else None,
                   F.predict_file if F.do_predict else None, tag_scheme=F.tag_scheme, labels=F.labels,
                   output_dir=F.output_dir, doc_stride=F.doc_stride, hparams=F.hparams,
                   **skeleton.example_limits(F))


# `finetune(argv)`: the command line in this process (returns the summary: `train`, `eval`,
# `predictions`, `export_dir`, `model`); `run()`: the console script. One parser, one main.
finetune, run = skeleton.entry_points(__doc__, FLAGS, make_task)


if __name__ == "__main__":
    run()
