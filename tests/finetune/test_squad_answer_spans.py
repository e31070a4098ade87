"""Answers are cut from the context where the release cuts them (its squad_utils.py).

The release lays a context's pieces end to end ("▁" read as a space), aligns that string with the
context by a longest-common-subsequence search (`release_alignment` restates it here, apart from
the package) and maps each piece to context characters with `_convert_index`; an n-best answer is
the context between a start piece's first and an end piece's last character, whitespace stripped.
`finetune.squad.features.release_answer_spans` must give the same answers: the same first and
last non-space character of every piece.
"""

import functools
import json
import unicodedata

import pytest

from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.squad import features


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


@functools.cache
def _preprocess(text, lower=True):
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if lower else text


def release_alignment(context, pieces):
    """Each piece's (first, last) context character as the release's convert_examples_to_features
    and write_predictions find them: [first, last] inclusive."""
    tok_cat = "".join(pieces).replace("▁", " ")
    starts, ends, position = [], [], 0
    for piece in pieces:
        starts.append(position)
        position += len(piece)
        ends.append(position - 1)
    n, m = len(context), len(tok_cat)
    chars = [_preprocess(c) for c in context]

    def lcs(max_dist):
        """The release's _lcs_match: its f[i, j] (a zero-filled array, refilled with zeros on each
        call: cells never written read 0) and g[(i, j)] (a dict: 0 up, 1 left, 2 diagonal; cells
        with no step are absent), for j from i - max_dist to i + max_dist - 1 within [0, m).

        Row i keeps that band only, cell j at k = j - (i - max_dist), so f[i - 1, j] is the row
        before's k + 1, f[i - 1, j - 1] its k, and f[i, j - 1] (`left`) this row's k - 1. The band's
        cells outside [0, m) are never written, nor is a row's one more cell that stands for
        f[i - 1, i + max_dist - 1] (k + 1 = width), and `left` starts at 0 for f[i, i - max_dist - 1]:
        all read 0 as the release's array's unwritten cells do. Returns f[n - 1, m - 1] and g's rows
        (None where g has no cell)."""
        width = 2 * max_dist
        f_before = [0] * (width + 1)  # row 0 reads 0 where the release, for i = 0, reads nothing
        g_rows = []
        for i in range(n):
            f_row = [0] * (width + 1)
            g_row = [None] * width
            char, lowest = chars[i], i - max_dist
            up_step = 0 if i > 0 else None  # the release sets g[(i, j)] = 0 only when i > 0
            first = max(0, -lowest)
            left = 0  # f[i, j - 1]: unwritten before the band's first cell
            for k, piece_char in enumerate(tok_cat[lowest + first : lowest + width], first):
                value, step = f_before[k + 1], up_step
                if left > value:
                    value, step = left, 1
                if char == piece_char and f_before[k] + 1 > value:
                    value, step = f_before[k] + 1, 2
                f_row[k] = left = value
                g_row[k] = step
            f_before = f_row
            g_rows.append(g_row)
        k = (m - 1) - (n - 1 - max_dist)
        return (f_before[k] if 0 <= k < width else 0), g_rows

    max_dist = abs(n - m) + 5
    for _ in range(2):
        band = max_dist  # g's band: max_dist doubles once more if the second search falls short too
        last, g_rows = lcs(max_dist)
        if last > 0.8 * n:
            break
        max_dist *= 2
    to_context = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        k = j - (i - band)
        step = g_rows[i][k] if 0 <= k < 2 * band else None
        if step is None:  # (i, j) not in g
            break
        if step == 2:
            to_context[j] = i
            i, j = i - 1, j - 1
        elif step == 1:
            j -= 1
        else:
            i -= 1
    firsts = [convert_index(to_context, s, n, True) for s in starts]
    lasts = [convert_index(to_context, e, n, False) for e in ends]
    return firsts, lasts


def convert_index(index, pos, m=None, is_start=True):
    """The release's _convert_index, as it is written there."""
    if index[pos] is not None:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    assert index[front] is not None or index[rear] is not None
    if index[front] is None:
        if index[rear] >= 1:
            if is_start:
                return 0
            else:
                return index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if m is not None and index[front] < m - 1:
            if is_start:
                return index[front] + 1
            else:
                return m - 1
        return index[front]
    if is_start:
        if index[rear] > index[front] + 1:
            return index[front] + 1
        else:
            return index[rear]
    else:
        if index[rear] > index[front] + 1:
            return index[rear] - 1
        else:
            return index[front]


def visible(context, start, end):
    """The first and one past the last non-space character of context[start:end] ((e, e) if none)."""
    text = context[start:end]
    stripped = text.lstrip()
    start += len(text) - len(stripped)
    return start, start + len(stripped.rstrip())


def differing_pieces(tokenizer, context, exact=False):
    """Pieces whose answer edges differ from the release's: their indices (with `exact`, those of
    the exact spans of `encode_with_offsets` instead of the answer spans), and those spans."""
    ids, starts, ends = tokenizer.encode_with_offsets(context)
    pieces = tokenizer.tokenize(context)  # unknown pieces as their text, as the release has them
    assert tokenizer.convert_tokens_to_ids(pieces) == ids
    spans = (starts, ends) if exact else features.release_answer_spans(context, pieces, starts, ends)
    return _differing(context, spans, release_visible(context, pieces)), (ids, starts, ends)


def release_visible(context, pieces):
    """The visible part of each piece's answer edges as the release finds them."""
    return [visible(context, first, last + 1) for first, last in zip(*release_alignment(context, pieces))]


def _differing(context, spans, theirs):
    wrong = []
    for k, (start, end, release) in enumerate(zip(*spans, theirs)):
        ours = visible(context, start, end)
        if ours != release and not (ours[0] >= ours[1] and release[0] >= release[1]):
            wrong.append(k)
    return wrong


EDGE_CASES = [
    "``Hello'' world",  # a lone "▁" opens the context
    "a\u200e b and c",  # U+200E before a space: dropped by SentencePiece
    "x \ufeff\u200eyes no",
    "\ufeffHello there",  # a byte-order mark opening the context
    "a\u200eb ﬁne Café ½ (1,666) !!!! 80888",
]


def test_the_edges_are_cut_as_the_release_cuts_them(tokenizer):
    for context in EDGE_CASES:
        wrong, (ids, starts, ends) = differing_pieces(tokenizer, context)
        assert wrong == [], context
    # The lone "▁" opening "``Hello'' world" stands for the first character, as in the release;
    # its exact span is empty, and gold answers still start on the "``" piece.
    context = EDGE_CASES[0]
    ids, starts, ends = tokenizer.encode_with_offsets(context)
    pieces = tokenizer.tokenize(context)
    answer_starts, answer_ends = features.release_answer_spans(context, pieces, starts, ends)
    assert pieces[:2] == ["▁", "``"] and (starts[0], ends[0]) == (0, 0)
    assert (answer_starts[0], answer_ends[0]) == (0, 1)
    # U+200E before " b": the exact span of "▁b" starts at it; the answer's span leaves it out.
    context = EDGE_CASES[1]
    ids, starts, ends = tokenizer.encode_with_offsets(context)
    pieces = tokenizer.tokenize(context)
    answer_starts, answer_ends = features.release_answer_spans(context, pieces, starts, ends)
    k = pieces.index("▁b")
    assert context[starts[k] : ends[k]] == "\u200e b"
    assert context[answer_starts[k] : answer_ends[k]].strip() == "b"
    # The exact spans alone differ from the release's on both.
    for context in EDGE_CASES[:2]:
        assert differing_pieces(tokenizer, context, exact=True)[0] != []


def squad_contexts(path):
    return [p["context"] for a in json.loads(path.read_text())["data"] for p in a["paragraphs"]]


def test_every_piece_of_the_carried_contexts_is_cut_as_the_release_cuts_it(small_data_dir, tokenizer):
    contexts = [c for path in sorted((small_data_dir / "squad").glob("*.json")) for c in squad_contexts(path)]
    assert len(contexts) > 50
    assert [k for c in contexts for k in differing_pieces(tokenizer, c)[0]] == []


@pytest.mark.parametrize("name, counts", [
    pytest.param("dev-v1.1.json", (2067, 0, 33), marks=pytest.mark.measure),  # 2,067 contexts: -m measure
    ("dev-v2.0.first16articles.json", (646, 0, 8)),
])
def test_every_piece_of_the_squad_dev_contexts_is_cut_as_the_release_cuts_it(data_dir, name, counts):
    tokenizer = AlbertTokenizer(data_dir / "albert" / "30k-clean.model")
    contexts = list(dict.fromkeys(squad_contexts(data_dir / "squad" / name)))
    ours = exact = 0
    for context in contexts:
        ids, starts, ends = tokenizer.encode_with_offsets(context)
        pieces = tokenizer.tokenize(context)
        theirs = release_visible(context, pieces)  # once for both comparisons
        answer_spans = features.release_answer_spans(context, pieces, starts, ends)
        ours += len(_differing(context, answer_spans, theirs))
        exact += len(_differing(context, (starts, ends), theirs))
    # Contexts, pieces whose answer edges differ from the release's, and pieces whose exact spans
    # would (the lone "▁"s and dropped characters behind the n-best entries that differed before).
    assert (len(contexts), ours, exact) == counts
