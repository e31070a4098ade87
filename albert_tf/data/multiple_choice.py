"""Multiple-choice rows as the release builds RACE's: `[CLS] article [SEP] question+option [SEP]`,
one row an option, four options (A-D) a question.

For every option the question and the option become one text: a cloze question (one with "_",
after normalisation) has each "_" replaced by the option, any other question is followed by a
space and the option. That text keeps its last `max_qa_length` pieces (the option sits at its
end); the article then keeps its first pieces up to what fills `max_seq_length` with the three
special tokens. The rule runs in Python (`qa_text`, `fit`: RACE's cached records,
`finetune.race.features`) and in the graph (`graph_features`: the multiple-choice SavedModel's
raw-text signature, `albert_tf.serving.multiple_choice`); a test holds them id for id.

TensorFlow is imported by the graph functions only: the fine-tuning tool's flags check their
lengths (`check_lengths`) and RACE's readers take the letters without it.
"""

from __future__ import annotations

from typing import Sequence

from albert_tf.utils.validation import require_positive_ints

LETTERS = ("A", "B", "C", "D")
NUM_OPTIONS = len(LETTERS)
# The release's RACE lengths (run_race.py): 512 positions a row, the question+option's last 128 pieces.
MAX_SEQ_LENGTH = 512
MAX_QA_LENGTH = 128
BLANK = "_"
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")


def check_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """Raises ValueError unless both lengths are positive and leave the article at least one piece."""
    require_positive_ints({"max_seq_length": max_seq_length, "max_qa_length": max_qa_length})
    if max_qa_length > max_seq_length - 4:
        raise ValueError(
            f"max_qa_length={max_qa_length} must be at most max_seq_length - 4 = {max_seq_length - 4}: "
            "the three special tokens and at least one piece of the article need the rest"
        )


def default_qa_length(max_seq_length: int) -> int:
    """The question+option's pieces for rows of `max_seq_length` where a source records none: the
    release's share of the row (128 of 512, a quarter), at least one."""
    return max(1, max_seq_length * MAX_QA_LENGTH // MAX_SEQ_LENGTH)


def qa_text(question: str, option: str, tokenizer) -> str:
    """The second segment of one option's row: the normalised question with the option in its
    blanks, or followed by the option when it has none (`tokenizer`: an
    `albert_tf.tokenizers.tokenizer.AlbertTokenizer`)."""
    question, option = tokenizer.normalize(question), tokenizer.normalize(option)
    if BLANK in question:
        return question.replace(BLANK, option)
    return f"{question} {option}"


def fit(article_ids: Sequence[int], qa_ids: Sequence[int], max_seq_length: int, max_qa_length: int):
    """The release's truncation: the qa part keeps its last `max_qa_length` pieces, the article its
    first pieces up to `max_seq_length - 3` in all. Returns the two kept lists."""
    qa = list(qa_ids[-max_qa_length:]) if len(qa_ids) > max_qa_length else list(qa_ids)
    return list(article_ids[: max_seq_length - 3 - len(qa)]), qa


def _checked_batch(articles, questions, options):
    """The three inputs, once their sizes agree: one article, one question and one row of four
    options per question; a mismatch is one clear error, not a tensor that loses the surplus."""
    import tensorflow as tf

    articles, questions, options = (tf.convert_to_tensor(x, tf.string) for x in (articles, questions, options))
    sizes = [tf.shape(articles)[0], tf.shape(questions)[0], tf.shape(options)[0]]
    same = tf.logical_and(tf.equal(sizes[0], sizes[1]), tf.equal(sizes[1], sizes[2]))
    batch = tf.debugging.Assert(same, [tf.strings.format(
        "RACE serve_text got {} articles, {} questions and {} rows of options: give one article, one "
        "question and one row of options for each question", sizes)])
    width = tf.shape(options)[-1]
    four = tf.debugging.Assert(tf.equal(width, NUM_OPTIONS), [tf.strings.format(
        "RACE serve_text got {} options for each question: give " + str(NUM_OPTIONS) + " (A-D)", [width])])
    with tf.control_dependencies([batch, four]):
        return tf.identity(articles), tf.identity(questions), tf.identity(options)


def graph_features(tokenizer, articles, questions, options, max_seq_length: int = MAX_SEQ_LENGTH,
                   max_qa_length: int = MAX_QA_LENGTH) -> dict:
    """The rows of the module docstring built in a TensorFlow graph from raw strings.

    Args:
        tokenizer: an `albert_tf.tokenizers.graph_tokenizer.AlbertGraphTokenizer`.
        articles, questions: string tensors [B].
        options: strings [B, 4], the options A-D of each question.
    Returns int32 `input_ids`, `input_mask`, `segment_ids` [B, 4, max_seq_length].
    """
    import tensorflow as tf

    check_lengths(max_seq_length, max_qa_length)
    articles, questions, options = _checked_batch(articles, questions, options)
    articles = tokenizer.normalize(tf.convert_to_tensor(articles, tf.string))
    questions = tokenizer.normalize(tf.convert_to_tensor(questions, tf.string))
    options = tokenizer.normalize(tf.convert_to_tensor(options, tf.string))
    batch = tf.shape(questions)[0]
    # One row per (question, option), question-major like `options`' flattening.
    row_question = tf.repeat(tf.range(batch), NUM_OPTIONS)
    question_rows = tf.gather(questions, row_question)
    option_rows = tf.reshape(options, [-1])
    # Every blank takes the option: split at the blanks, append the option to every part, join,
    # and cut the one option too many from the end.
    parts = tf.strings.split(question_rows, BLANK)
    filled = parts.with_flat_values(parts.flat_values + tf.repeat(option_rows, parts.row_lengths()))
    joined = tf.strings.reduce_join(filled, axis=1)
    kept = tf.strings.length(joined) - tf.strings.length(option_rows)
    replaced = tf.strings.substr(joined, tf.zeros_like(kept), kept)
    has_blank = parts.row_lengths() > 1
    qa = tf.where(has_blank, replaced, tf.strings.join([question_rows, option_rows], separator=" "))

    # Both in one pass: a traced function (the export's serve_text) holds one tokenizer, not two.
    ids = tokenizer.tokenize(tf.concat([qa, articles], axis=0))
    qa_ids = ids[: batch * NUM_OPTIONS]
    qa_length = qa_ids.row_lengths()
    qa_ids = tf.ragged.boolean_mask(qa_ids, tf.ragged.range(qa_length) >= (qa_length - max_qa_length)[:, None])
    article_ids = tf.gather(ids[batch * NUM_OPTIONS :], row_question)
    article_room = max_seq_length - 3 - qa_ids.row_lengths()
    article_ids = tf.ragged.boolean_mask(article_ids, tf.ragged.range(article_ids.row_lengths()) < article_room[:, None])
    packed = tokenizer.pack(article_ids, qa_ids, max_seq_length=max_seq_length)
    return {name: tf.reshape(packed[name], [-1, NUM_OPTIONS, max_seq_length]) for name in SEQUENCE_FEATURES}
