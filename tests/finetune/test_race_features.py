"""RACE rows as the release builds them: cloze blanks filled, the qa part's tail kept, the article cut
to fit; the graph builder equal to the Python one id for id."""

import numpy as np
import pytest

from albert_tf.data import multiple_choice
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.race import features, readers


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


@pytest.fixture(scope="module")
def graph_tokenizer(small_data_dir):
    return AlbertGraphTokenizer(str(small_data_dir / "albert" / "30k-clean.model"))


def _question(question, options, article="Tom has a red ball. He plays with it every day.", answer="B"):
    return readers.Question("p-0", "middle", article, question, tuple(options), answer)


def _rows(tokenizer, question, **lengths):
    (result,) = features.convert_questions([question], tokenizer, **lengths)
    return result


def _segments(tokenizer, ids, segment_ids):
    """The article and qa pieces of one row (between [CLS] ... [SEP] and [SEP] ... [SEP])."""
    ids, segment_ids = np.asarray(ids), np.asarray(segment_ids)
    real = ids[ids != 0]
    assert real[0] == tokenizer.cls_id and real[-1] == tokenizer.sep_id
    first_sep = int(np.argmax(real == tokenizer.sep_id))
    assert list(segment_ids[: len(real)]) == [0] * (first_sep + 1) + [1] * (len(real) - first_sep - 1)
    return list(real[1:first_sep]), list(real[first_sep + 1 : -1])


def test_cloze_blank_takes_the_option_and_a_question_is_followed_by_it(tokenizer):
    assert features.qa_text("Tom has a  _  ball.", "Red", tokenizer) == "tom has a red ball."
    assert features.qa_text("_ is Tom's, and so is _ .", "The ball", tokenizer) == "the ball is tom's, and so is the ball ."
    assert features.qa_text("What does Tom have?", "A red ball", tokenizer) == "what does tom have? a red ball"
    rows = _rows(tokenizer, _question("Tom has a _ ball.", ["blue", "red", "big", "small"]))
    article = tokenizer.encode("Tom has a red ball. He plays with it every day.")
    for j, option in enumerate(["blue", "red", "big", "small"]):
        got_article, got_qa = _segments(tokenizer, rows["input_ids"][j], rows["segment_ids"][j])
        assert got_article == article
        assert got_qa == tokenizer.encode(f"tom has a {option} ball.")
    assert rows["label_ids"] == 1
    assert np.asarray(rows["input_ids"]).shape == (4, 512)


def test_long_article_is_cut_to_fit_and_qa_keeps_its_tail(tokenizer):
    long_article = " ".join(f"word{i}" for i in range(600))
    options = ["yes", "no " * 150, "a much longer option than the others, going on for a while", "maybe"]
    question = _question("Is the article long?", options, article=long_article)
    rows = _rows(tokenizer, question, max_seq_length=64, max_qa_length=16)
    article_ids = tokenizer.encode(long_article)
    assert len(article_ids) > 64
    for j, option in enumerate(options):
        got_article, got_qa = _segments(tokenizer, rows["input_ids"][j], rows["segment_ids"][j])
        full_qa = tokenizer.encode(f"is the article long? {option}")
        kept_qa = full_qa[-16:]
        assert got_qa == kept_qa
        # Every row is full: the article fills what the qa part leaves.
        assert got_article == article_ids[: 64 - 3 - len(kept_qa)]
        assert sum(rows["input_mask"][j]) == 64
    # Options of very different lengths: short ones leave the article more room.
    lengths = [sum(s == 1 for s in rows["segment_ids"][j]) for j in range(4)]
    assert lengths[0] == len(tokenizer.encode("is the article long? yes")) + 1
    assert lengths[1] == 16 + 1
    assert lengths[0] < lengths[2] <= 17


def test_truncation_is_reported(tokenizer):
    short = _question("Why?", ["a", "b", "c", "d"], article="Short.")
    long_option = _question("Why?", ["a", "b " * 20, "c", "d"], article="Short.")
    long_article = _question("Why?", ["a", "b", "c", "d"], article="word " * 40)
    flags = [t for _, t in features.convert_with_truncation([short, long_option, long_article], tokenizer, 32, 8)]
    assert flags == [False, True, True]


def test_short_input_is_padded_and_not_cut(tokenizer):
    rows = _rows(tokenizer, _question("Why?", ["a", "b", "c", "d"], article="Short."), max_seq_length=32, max_qa_length=8)
    for j in range(4):
        got_article, got_qa = _segments(tokenizer, rows["input_ids"][j], rows["segment_ids"][j])
        assert got_article == tokenizer.encode("Short.")
        assert got_qa == tokenizer.encode("why? " + "abcd"[j])
        mask = rows["input_mask"][j]
        assert mask == [1] * sum(mask) + [0] * (32 - sum(mask))


def test_bad_lengths_are_named(tokenizer):
    with pytest.raises(ValueError, match=r"max_qa_length=61 must be at most max_seq_length - 4 = 60:"):
        list(features.convert_questions([_question("q", "abcd")], tokenizer, max_seq_length=64, max_qa_length=61))
    with pytest.raises(ValueError, match="max_qa_length"):
        features.check_lengths(64, 0)


def test_graph_rows_equal_python_rows_on_real_questions(small_data_dir, tokenizer, graph_tokenizer):
    questions = readers.read_questions(small_data_dir / "race" / "dev" / "middle")[:40]
    extra = [
        _question("_ and _ went _", ["Tom", "Ann and Bob", "", "x_y"]),
        _question("", ["only option text", "b", "c", "d"]),
        _question("Caf\u00e9  \u00bfqu\u00e9?", ["\u00c9t\u00e9", "``quoted''", "b", "c"], article="   "),
        _question("long " * 80, ["tail " * 10, "b", "c", "d"], article="art " * 300),
    ]
    questions += extra
    for max_seq_length, max_qa_length in ((128, 32), (512, 128)):
        expected = list(features.convert_questions(questions, tokenizer, max_seq_length, max_qa_length))
        got = multiple_choice.graph_features(
            graph_tokenizer,
            [q.article for q in questions],
            [q.question for q in questions],
            [list(q.options) for q in questions],
            max_seq_length,
            max_qa_length,
        )
        for name in features.SEQUENCE_FEATURES:
            assert got[name].shape == (len(questions), 4, max_seq_length)
            np.testing.assert_array_equal(got[name].numpy(), np.asarray([e[name] for e in expected]), err_msg=name)
