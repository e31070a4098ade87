"""SQuAD features (windows, max context, gold spans, p_mask) and post-processing back to text."""

import numpy as np
import pytest

from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.squad import features, postprocess
from finetune.squad.readers import Answer, Example


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


def test_windows_and_max_context_follow_the_release():
    spans = features.window_spans(10, 4, 3)
    assert spans == [(0, 4), (3, 4), (6, 4)]
    # Piece 3 has one side of 0 in windows 0 and 1: the tie goes to the first window.
    assert features.max_context_windows(spans, 10).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert features.window_spans(3, 4, 3) == [(0, 3)]
    assert features.window_spans(0, 4, 3) == [(0, 0)]
    assert features.window_spans(9, 6, 4) == [(0, 6), (4, 5)]
    # Piece 4: min(4, 1) in the first window beats min(0, 4) in the second.
    assert features.max_context_windows([(0, 6), (4, 5)], 9).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def _example(context, question, answer=None, qid="q"):
    answers = () if answer is None else (Answer(answer, context.index(answer)),)
    return Example(qid, "t", question, context, answers, is_impossible=answer is None)


def _gold_logits(records):
    """Logits that point at each record's gold span (where the record has it)."""
    n, length = records["input_ids"].shape
    start = np.full((n, length), -10.0, np.float32)
    end = start.copy()
    rows = np.nonzero(records["is_impossible"] == 0)[0]
    start[rows, records["start_positions"][rows]] = 10.0
    end[rows, records["end_positions"][rows]] = 10.0
    return start, end


def test_long_context_many_windows_and_a_long_question(tokenizer):
    words = [f"w{i}" for i in range(300)]
    context = " ".join(words)
    question = "which " + " ".join(words[:40]) + "?"
    settings = features.FeatureSettings(max_seq_length=64, doc_stride=16, max_query_length=8)
    example = _example(context, question, "w250 w251")
    records = features.stack_records(features.convert_examples([example], tokenizer, settings))
    pieces = features.tokenize_context(tokenizer, context)
    question_ids = tokenizer.encode(question)[:8]  # the question keeps its first 8 pieces
    window = 64 - 8 - 3
    spans = features.window_spans(len(pieces.ids), window, 16)
    assert len(records["input_ids"]) == len(spans) > 10
    for number, (start, count) in enumerate(spans):
        ids = records["input_ids"][number]
        assert ids[: 10].tolist() == [tokenizer.cls_id, *question_ids, tokenizer.sep_id]
        assert ids[10 : 10 + count].tolist() == pieces.ids[start : start + count].tolist()
        assert ids[10 + count] == tokenizer.sep_id
        assert records["segment_ids"][number].tolist() == [0] * 10 + [1] * (count + 1) + [0] * (64 - 11 - count)
        assert records["p_mask"][number].tolist() == [0] + [1] * 9 + [0] * count + [1] * (64 - 10 - count)
        assert records["input_mask"][number].sum() == 11 + count
    # Each context piece has its maximum context in exactly one window.
    flags = np.zeros(len(pieces.ids), int)
    for number, (start, count) in enumerate(spans):
        flags[start : start + count] += records["max_context"][number][10 : 10 + count]
    assert (flags == 1).all()
    # The gold span is labelled in the windows that hold it whole, and gives back its text.
    holding = records["is_impossible"] == 0
    assert 1 <= holding.sum() < len(spans)
    for number in np.nonzero(holding)[0]:
        s, e = records["start_positions"][number], records["end_positions"][number]
        # The release's answer spans: a piece's "▁" takes the space before it, which answers strip.
        assert context[records["char_starts"][number][s] : records["char_ends"][number][e]] == " w250 w251"
    result = postprocess.postprocess_v1([example], records, *_gold_logits(records))
    assert result.answers == {"q": "w250 w251"}


def test_answer_in_the_overlap_of_two_windows(tokenizer):
    context = " ".join(f"x{i}" for i in range(60))
    example = _example(context, "where?", "x24")
    settings = features.FeatureSettings(max_seq_length=64, doc_stride=40, max_query_length=8)
    records = features.stack_records(features.convert_examples([example], tokenizer, settings))
    holding = np.nonzero(records["is_impossible"] == 0)[0]
    assert len(holding) == 2  # both windows hold it
    # Post-processing takes it from the window where its start has the most context.
    start_logits, end_logits = _gold_logits(records)
    (first, second) = holding
    start_logits[first] *= 2  # the other window would rank higher if max context were ignored
    windows = [records["max_context"][n][records["start_positions"][n]] for n in holding]
    assert sorted(windows) == [0, 1]
    result = postprocess.postprocess_v1([example], records, start_logits, end_logits)
    assert result.answers["q"] == "x24"
    chosen = holding[windows.index(1)]
    assert result.best("q")["start_log_prob"] == pytest.approx(float(start_logits[chosen].max()))


def test_unanswerable_question_without_context(tokenizer):
    example = Example("q", "t", "Is anything here?", "", (), is_impossible=True)
    records = features.stack_records(features.convert_examples([example], tokenizer))
    assert len(records["input_ids"]) == 1
    assert records["is_impossible"].tolist() == [1]
    assert records["start_positions"].tolist() == records["end_positions"].tolist() == [0]
    assert (records["char_starts"] == -1).all()
    k = 5
    outputs = {
        "start_top_log_probs": np.zeros((1, k), np.float32),
        "start_top_index": np.zeros((1, k), np.int32),
        "end_top_log_probs": np.zeros((1, k * k), np.float32),
        "end_top_index": np.zeros((1, k * k), np.int32),
        "cls_logits": np.array([2.5], np.float32),
    }
    result = postprocess.postprocess_v2([example], records, outputs)
    assert result.answers == {"q": ""} and result.null_odds == {"q": 2.5}


def _records(char_spans, length=8, max_context=None):
    """One record whose positions 2.. hold pieces with the given character spans."""
    starts = np.full((1, length), -1, np.int32)
    ends = starts.copy()
    for i, (s, e) in enumerate(char_spans):
        starts[0, 2 + i], ends[0, 2 + i] = s, e
    flags = (starts >= 0).astype(np.int32) if max_context is None else np.array([max_context], np.int32)
    return {"example_index": np.array([0]), "char_starts": starts, "char_ends": ends, "max_context": flags}


def test_postprocess_v1_nbest_filters_and_text():
    context = "The  big cat sat."
    example = Example("q", "t", "?", context, (Answer("big cat", 5),))
    records = _records([(0, 3), (5, 8), (9, 12), (13, 16), (16, 17)])
    start = np.array([[5.0, 0, 1, 3, 2, 0, 0, 0]], np.float32)  # position 0 ([CLS]) never starts
    end = np.array([[0.0, 9, 0, 1, 4, 2, 0, 0]], np.float32)  # position 1 (question) never ends
    result = postprocess.postprocess_v1([example], records, start, end, n_best_size=3, max_answer_length=2)
    texts = [c["text"] for c in result.nbest["q"]]
    # The 3 best starts (positions 0, 3, 4) and ends (1, 4, 5) pair into big..cat 3+4, cat 2+4
    # and cat..sat 2+2; big..sat (3 pieces) is too long, [CLS] and the question are no answer.
    assert texts == ["big cat", "cat", "cat sat"]
    assert result.answers["q"] == "big cat"
    best = result.best("q")
    assert (best["char_start"], best["char_end"]) == (5, 12)
    probabilities = [c["probability"] for c in result.nbest["q"]]
    scores = np.array([7.0, 6.0, 4.0])
    assert probabilities == pytest.approx((np.exp(scores) / np.exp(scores).sum()).tolist())
    # A start without its maximum context in this record is not a candidate.
    records["max_context"][0, 3] = 0
    result = postprocess.postprocess_v1([example], records, start, end, n_best_size=3, max_answer_length=2)
    assert result.answers["q"] == "cat"


def test_postprocess_v2_threshold():
    context = "Paris is big."
    example = Example("q", "t", "?", context, (Answer("Paris", 0),))
    records = _records([(0, 5), (6, 8), (9, 13)])
    outputs = {
        "start_top_log_probs": np.log(np.array([[0.6, 0.4]], np.float32)),
        "start_top_index": np.array([[2, 4]], np.int32),
        "end_top_log_probs": np.log(np.array([[0.7, 0.3, 0.9, 0.1]], np.float32)),
        "end_top_index": np.array([[2, 3, 4, 2]], np.int32),  # (4, 2) ends before its start
        "cls_logits": np.array([-1.0], np.float32),
    }
    result = postprocess.postprocess_v2([example], records, outputs)
    assert [c["text"] for c in result.nbest["q"]] == ["Paris", "big.", "Paris is"]
    assert result.best("q")["start_log_prob"] + result.best("q")["end_log_prob"] == pytest.approx(np.log(0.42))
    assert result.null_odds == {"q": -1.0}
    assert postprocess.postprocess_v2([example], records, outputs, null_score_diff_threshold=-0.5).answers == {"q": "Paris"}
    assert postprocess.postprocess_v2([example], records, outputs, null_score_diff_threshold=-1.0).answers == {"q": ""}
