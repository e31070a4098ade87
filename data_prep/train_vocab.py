"""albert-train-vocab: trains a unigram SentencePiece model with the ALBERT settings.

The settings are those of the released `30k-clean.model`: unigram, `<pad>`=0, `<unk>`=1, no
<s>/</s>, control symbols [CLS] [SEP] [MASK] at 2, 3, 4, the same user-defined punctuation pieces,
character coverage 0.99995. The text is normalised first (ALBERT's normalisation, see
`albert_tf.tokenizers.tokenizer.normalize_text`), exactly as it will be when the model is used.

Example:
    albert-train-vocab --input_file='corpus/*.txt' --model_prefix=out/30k --vocab_size=30000
"""

from __future__ import annotations

import io
import os
from typing import Iterator, Sequence

from absl import flags

from albert_tf.cli.entry_point import run_main
from albert_tf.utils.atomic import partial_path
from albert_tf.utils.output_dirs import prepare_output_dir

# Its own FlagValues, so that the two console scripts (and tests importing both) never collide.
FLAGS = flags.FlagValues()

# The released model's user-defined pieces: punctuation SentencePiece never merges into words.
RELEASED_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")

flags.DEFINE_string("input_file", None, "Input text files: comma-separated globs.", flag_values=FLAGS)
flags.DEFINE_string(
    "model_prefix", None, "Output path prefix: writes <prefix>.model and <prefix>.vocab.", flag_values=FLAGS
)
flags.DEFINE_enum(
    "input_format",
    "sentence_per_line",
    ["sentence_per_line", "document_per_line"],
    "Same meaning as in albert-create-pretraining-data.",
    flag_values=FLAGS,
)
flags.DEFINE_integer("vocab_size", 30000, "Number of pieces, the 5 special ones included.", flag_values=FLAGS)
flags.DEFINE_bool("do_lower_case", True, "Lowercase the text before training.", flag_values=FLAGS)
flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters the vocabulary covers.", flag_values=FLAGS)
flags.DEFINE_integer(
    "input_sentence_size", 10_000_000, "Most sentences sampled for training (0: all).", flag_values=FLAGS
)
flags.DEFINE_list(
    "user_defined_symbols",
    list(RELEASED_USER_DEFINED_SYMBOLS),
    "Pieces always kept whole (the released model's punctuation by default).",
    flag_values=FLAGS,
)
flags.DEFINE_bool(
    "hard_vocab_limit", True, "Fail if the corpus cannot fill vocab_size (False: use fewer pieces).", flag_values=FLAGS
)
flags.DEFINE_string(
    "normalization_rule_name",
    "nmt_nfkc",
    "SentencePiece's own normaliser, applied after ALBERT's (nmt_nfkc as released; identity "
    "makes a model some 240 KB smaller, which suits tiny test vocabularies).",
    flag_values=FLAGS,
)
flags.DEFINE_integer("num_threads", 0, "Training threads (0: all cores).", flag_values=FLAGS)
flags.DEFINE_bool("skip_bad_lines", False, "Skip input lines that are not UTF-8 instead of failing.", flag_values=FLAGS)


def normalized_sentences(
    files: Sequence[str], input_format: str, do_lower_case: bool, skip_bad_lines: bool
) -> Iterator[str]:
    """The training text as SentencePiece will see it at use time, one sentence at a time."""
    from albert_tf.tokenizers.tokenizer import normalize_text
    from data_prep.documents import iter_documents

    for document in iter_documents(files, input_format, skip_bad_lines):
        for sentence in document:
            text = normalize_text(sentence, do_lower_case)
            if text:
                yield text


def train_vocab(
    input_files: Sequence[str],
    model_prefix: str,
    *,
    vocab_size: int = 30000,
    input_format: str = "sentence_per_line",
    do_lower_case: bool = True,
    character_coverage: float = 0.99995,
    input_sentence_size: int = 10_000_000,
    user_defined_symbols: Sequence[str] = RELEASED_USER_DEFINED_SYMBOLS,
    hard_vocab_limit: bool = True,
    normalization_rule_name: str = "nmt_nfkc",
    num_threads: int = 0,
    skip_bad_lines: bool = False,
) -> str:
    """Trains the model, checks it has the ALBERT special pieces, and returns the .model path."""
    import sentencepiece as spm

    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    if vocab_size < 6:
        raise ValueError(f"vocab_size must leave room beyond the 5 special pieces, got {vocab_size}")
    folder = os.path.dirname(model_prefix) or "."
    made = not os.path.isdir(folder)  # made here: a failed training leaves no empty folder either
    prepare_output_dir(folder, flag="model_prefix")
    # Trained in memory, then written under a partial prefix and renamed (albert_tf.utils.atomic's rule):
    # an interrupted or refused training leaves no .model that a later tool would take for a
    # finished vocabulary. A model trained so records no prefix among its trainer's settings, so
    # the same training gives the same bytes wherever it is saved (data prep records the sha256).
    partial = partial_path(model_prefix)
    model = io.BytesIO()
    # SentencePiece stops reading at an error of the iterator (a byte that is not UTF-8) and trains
    # on what came before, or fails on the settings: the reader's error is kept, and raised instead.
    failures: list[BaseException] = []

    def sentences():
        try:
            yield from normalized_sentences(input_files, input_format, do_lower_case, skip_bad_lines)
        except BaseException as error:
            failures.append(error)
            raise

    try:
        try:
            spm.SentencePieceTrainer.Train(
                sentence_iterator=sentences(),
                model_writer=model,
                model_type="unigram",
                vocab_size=vocab_size,
                character_coverage=character_coverage,
                input_sentence_size=input_sentence_size,
                shuffle_input_sentence=True,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                user_defined_symbols=list(user_defined_symbols),
                hard_vocab_limit=hard_vocab_limit,
                normalization_rule_name=normalization_rule_name,
                num_threads=num_threads or os.cpu_count() or 1,
                minloglevel=1,
            )
        except (RuntimeError, SystemError):
            if failures:
                raise failures[0] from None
            raise
        if failures:
            raise failures[0]
        proto = model.getvalue()
        with open(partial + ".model", "wb") as f:
            f.write(proto)
        AlbertTokenizer(partial + ".model", do_lower_case)  # the model must load as an ALBERT vocabulary
        _write_vocab(proto, partial + ".vocab")
        for suffix in (".vocab", ".model"):  # the .model last: with it, the vocabulary is whole
            os.replace(partial + suffix, model_prefix + suffix)
    finally:
        for suffix in (".model", ".vocab"):
            if os.path.exists(partial + suffix):
                os.remove(partial + suffix)
        if made and not os.listdir(folder):
            os.rmdir(folder)
    return model_prefix + ".model"


def _write_vocab(model_proto: bytes, vocab_file: str) -> None:
    """The .vocab file SentencePiece's trainer writes beside a model it saves itself: each piece and
    its score, tab-separated, the score as C++ streams a float (six significant digits)."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    with open(vocab_file, "w", encoding="utf-8") as f:
        for i in range(processor.get_piece_size()):
            f.write(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n")


def main(argv) -> int:
    del argv
    from albert_tf.utils.errors import FlagError, UserError
    from data_prep.documents import check_not_all_empty, expand_input_patterns

    for name in ("input_file", "model_prefix"):
        if not getattr(FLAGS, name):
            raise FlagError(f"--{name} is required")
    prepare_output_dir(os.path.dirname(FLAGS.model_prefix) or ".", flag="model_prefix", create=False)
    files = expand_input_patterns(FLAGS.input_file)
    check_not_all_empty(files)
    try:
        model_file = train_vocab(
            files,
            FLAGS.model_prefix,
            vocab_size=FLAGS.vocab_size,
            input_format=FLAGS.input_format,
            do_lower_case=FLAGS.do_lower_case,
            character_coverage=FLAGS.character_coverage,
            input_sentence_size=FLAGS.input_sentence_size,
            user_defined_symbols=FLAGS.user_defined_symbols,
            hard_vocab_limit=FLAGS.hard_vocab_limit,
            normalization_rule_name=FLAGS.normalization_rule_name,
            num_threads=FLAGS.num_threads,
            skip_bad_lines=FLAGS.skip_bad_lines,
        )
    except RuntimeError as error:  # SentencePiece's trainer refusing the settings for this corpus
        raise UserError(str(error)) from None
    print(f"wrote {model_file} and {FLAGS.model_prefix}.vocab")
    return 0


def run() -> None:
    """Console-script entry point: the readers' and checks' ValueErrors name the file or value."""
    run_main(main, FLAGS, __doc__, value_errors_are_users=True)


if __name__ == "__main__":
    run()
