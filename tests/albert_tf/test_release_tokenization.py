"""The tokenizers give the ids of the release's algorithm (google-research/albert tokenization.py).

`release_ids` restates that algorithm independently of the package, text by text: the release's
`preprocess_text` (whitespace, NFKD without combining marks, lowercase; quotes untouched) and
`encode_pieces` (SentencePiece, then a piece ending in a digit and a comma is encoded again
without the comma and "▁", the comma appended). The released models were pretrained on these ids.

Segmentations that score the same (`666` as `6` `66` or `66` `6`) are a tie, and the sentencepiece
package has broken ties two ways: the lattice Viterbi of the release's time and sentencepiece
>= 0.2.2 keep `6` `66`, versions 0.1.9x to 0.2.1 keep `66` `6`. `ReleaseViterbi` restates the
release's search, so where the installed sentencepiece and the graph tokenizer disagree it says
which is the release's. Both tokenizers must give the release's order on any sentencepiece version.
"""

import json
import re
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from albert_tf.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.tokenizer import AlbertTokenizer, normalize_text, release_tie_order
from finetune.glue.readers import read_examples

UNDERLINE = "\u2581"


SENTENCEPIECE_BREAKS_TIES_AS_THE_RELEASE = tuple(map(int, spm.__version__.split(".")[:3])) >= (0, 2, 2)


class ReleaseViterbi:
    """SentencePiece's `EncodeAsPieces` as the lattice Viterbi of the release's time decided it.

    Float32 scores; a piece of `user_defined` type scores `length * max_score + 1`; a character no
    piece of one character covers is an unknown node scoring `min_score - 10`, and unknowns next to
    each other become one piece. At each position the best left neighbour is the first, in order
    of where it starts, with the highest sum: that is the release's tie-break. The pieces are read
    through the processor (sentencepiece's own model_pb2 refuses protobuf < 7 from 0.2.2 on): a
    user-defined piece is one that scores 0, which no piece of a unigram model does (a log-probability).
    """

    def __init__(self, sp: spm.SentencePieceProcessor):
        special = [sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i) or sp.IsByte(i) for i in range(sp.GetPieceSize())]
        scores = {sp.IdToPiece(i): np.float32(sp.GetScore(i)) for i in range(sp.GetPieceSize()) if not special[i]}
        normal = [score for score in scores.values() if score != 0]
        self.sp, self.unk_score = sp, np.float32(min(normal) - np.float32(10))
        self.scores = {
            piece: np.float32(len(piece) * max(normal) + np.float32(1)) if score == 0 else score
            for piece, score in scores.items()
        }
        self.longest = max(map(len, self.scores))

    def __call__(self, text: str) -> list[str]:
        text = self.sp.normalize(text)
        # A node is [start, end, score, unknown, path score, previous node]; a list of those
        # ending at each position keeps the release's order of insertion: by start.
        starting = [[] for _ in range(len(text) + 1)]
        ending = [[] for _ in range(len(text) + 1)]
        ending[0].append([0, 0, np.float32(0), False, np.float32(0), None])
        for start in range(len(text)):
            for end in range(start + 1, min(start + self.longest, len(text)) + 1):
                if text[start:end] in self.scores:
                    starting[start].append([start, end, self.scores[text[start:end]], False, None, None])
            if not any(node[1] == start + 1 for node in starting[start]):
                starting[start].append([start, start + 1, self.unk_score, True, None, None])
            for node in starting[start]:
                ending[node[1]].append(node)
        eos = [len(text), len(text), np.float32(0), False, None, None]
        starting[len(text)].append(eos)
        for pos in range(len(text) + 1):
            for right in starting[pos]:
                for left in ending[pos]:
                    total = left[4] + right[2]
                    if right[5] is None or total > right[4]:
                        right[4], right[5] = total, left
        pieces, unknown_before = [], False
        node = eos[5]
        while node[5] is not None:
            piece = text[node[0] : node[1]]
            if node[3] and unknown_before:  # unknown pieces next to each other become one
                pieces[-1] = piece + pieces[-1]
            else:
                pieces.append(piece)
            unknown_before, node = node[3], node[5]
        return pieces[::-1]


def release_ids(sp: spm.SentencePieceProcessor, text: str, lower: bool = True, encode=None) -> list[int]:
    encode = encode or sp.EncodeAsPieces
    text = " ".join(text.strip().split())
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    pieces = []
    for piece in encode(text):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            again = encode(piece[:-1].replace(UNDERLINE, ""))
            if piece[0] != UNDERLINE and again[0][0] == UNDERLINE:
                again = again[1:] if len(again[0]) == 1 else [again[0][1:], *again[1:]]
            pieces += [*again, ","]
        else:
            pieces.append(piece)
    return [sp.PieceToId(p) for p in pieces]


@pytest.fixture(scope="module")
def model_path(small_data_dir):
    return small_data_dir / "albert" / "30k-clean.model"


@pytest.fixture(scope="module")
def sp(model_path):
    return spm.SentencePieceProcessor(model_file=str(model_path))


@pytest.fixture(scope="module")
def tokenizers(model_path):
    return AlbertTokenizer(model_path), AlbertGraphTokenizer(model_path.read_bytes())


def squad_texts(data_dir) -> list[str]:
    texts = []
    for article in json.loads((data_dir / "squad" / "dev-v1.1.json").read_text())["data"]:
        for paragraph in article["paragraphs"]:
            texts.append(paragraph["context"])
            texts += [qa["question"] for qa in paragraph["qas"]]
    return texts


def glue_texts(data_dir) -> list[str]:
    texts = []
    for task_dir in sorted((data_dir / "glue").iterdir()):
        for split_file in sorted(task_dir.glob("*.tsv")):
            for example in read_examples(task_dir.name, data_dir / "glue", split_file.stem).examples:
                texts += [example.text_a] + ([] if example.text_b is None else [example.text_b])
    return texts


def corpus_lines(data_dir) -> list[str]:
    lines = []
    for path in sorted((data_dir / "corpus").glob("*/*")):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:  # two Gutenberg files are Latin-1
            text = raw.decode("latin-1")
        lines += text.split("\n")
    return lines


@pytest.fixture(scope="module")
def release_viterbi(sp):
    return ReleaseViterbi(sp)


def differences(texts, tokenizers, sp, release_viterbi, batch=4096):
    """Indices of texts where the Python or the graph tokenizer differs from the release's ids.

    The release's ids are `release_ids` with the installed sentencepiece, or with `ReleaseViterbi`
    where that disagrees with either tokenizer (module docstring). Returns (Python differences,
    graph differences, the texts where the installed sentencepiece broke a tie the other way).
    """
    python_tokenizer, graph_tokenizer = tokenizers
    tokenize = tf.function(graph_tokenizer.tokenize)
    python_wrong, graph_wrong, ties = [], [], []
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        python_got = python_tokenizer.encode_batch(chunk, num_threads=1)
        graph_got = tokenize(tf.constant(chunk)).to_list()
        for i, (text, python_ids, graph_ids) in enumerate(zip(chunk, python_got, graph_got)):
            expected = release_ids(sp, text)
            if expected != graph_ids or expected != python_ids:
                installed, expected = expected, release_ids(sp, text, encode=release_viterbi)
                if installed != expected:
                    ties.append(start + i)
            if python_ids != expected:
                python_wrong.append(start + i)
            if graph_ids != expected:
                graph_wrong.append(start + i)
    return python_wrong, graph_wrong, ties


def test_a_digit_followed_by_a_comma_is_split_off(tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    text = "In 2012, 7, and $12,000 people"
    pieces = python_tokenizer.tokenize(text)
    # Plain SentencePiece gives ▁2012, and ▁7, as single pieces; 2,000 ends in a digit: kept.
    assert pieces == ["▁in", "▁2012", ",", "▁7", ",", "▁and", "▁$1", "2,000", "▁people"]
    ids = python_tokenizer.encode(text)
    assert ids == python_tokenizer.convert_tokens_to_ids(pieces)
    assert graph_tokenizer.tokenize(tf.constant([text])).to_list() == [ids]


def test_double_backquotes_and_double_apostrophes_are_kept(tokenizers):
    python_tokenizer, _ = tokenizers
    assert normalize_text("``Quoted'' words") == "``quoted'' words"
    assert python_tokenizer.tokenize("``hello''") == ["▁", "``", "hello", "'", "'"]


# Real texts (SST-2, MRPC) where two segmentations tie: the release's pieces there, the characters
# they take, and the other segmentation (what sentencepiece 0.1.9x to 0.2.1 give).
TIES = [
    ("rated eee for excitement", ["▁", "e", "ee"], ["", "e", "ee"], ["▁", "ee", "e"]),
    (
        "The technology-laced Nasdaq Composite Index .IXIC climbed 40.09 points, or 2.46 percent, to "
        "1,666.58, based on the latest data, and marking its highest close since May 23, 2002.",
        ["▁1", ",", "6", "66"],  # ▁1, is re-split: a digit and a comma
        ["1", ",", "6", "66"],
        ["▁1", ",", "66", "6"],
    ),
    (
        "Now, for the first time, those without Internet access can sign up by phone by making a single "
        "toll-free call to (888) 382-1222.",
        ["(", "8", "88", ")"],
        ["(", "8", "88", ")"],
        ["(", "88", "8", ")"],
    ),
]


def test_ties_are_broken_as_the_release_broke_them(tokenizers, sp, release_viterbi):
    python_tokenizer, graph_tokenizer = tokenizers
    texts = [text for text, _, _, _ in TIES]
    graph_ids = graph_tokenizer.tokenize(tf.constant(texts)).to_list()
    ids, starts, ends = graph_tokenizer.tokenize_with_offsets(tf.constant(texts))
    for k, (text, tie, tie_chars, other) in enumerate(TIES):
        release = release_ids(sp, text, encode=release_viterbi)
        pieces = python_tokenizer.convert_ids_to_tokens(release)
        at = next(i for i in range(len(pieces)) if pieces[i : i + len(tie)] == tie)
        if not SENTENCEPIECE_BREAKS_TIES_AS_THE_RELEASE:  # the installed one keeps the other order
            swapped = pieces[:at] + other + pieces[at + len(tie) :]
            assert release_ids(sp, text) == python_tokenizer.convert_tokens_to_ids(swapped)
        # The tokenizers give the release's order on any sentencepiece version.
        assert graph_ids[k] == ids[k].numpy().tolist() == release
        assert python_tokenizer.encode(text) == python_tokenizer.encode_batch([text])[0] == release
        assert python_tokenizer.tokenize(text) == pieces
        python_ids, python_starts, python_ends = python_tokenizer.encode_with_offsets(text)
        assert python_ids == release
        assert (python_starts, python_ends) == (starts[k].numpy().tolist(), ends[k].numpy().tolist())
        spans = list(zip(python_starts, python_ends))[at : at + len(tie)]
        assert [text[begin:end] for begin, end in spans] == tie_chars


def test_a_run_of_repeated_pieces_goes_in_ascending_length(tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    runs = {"6": ("6", 1), "66": ("6", 2), "666": ("6", 3), "la": ("la", 1), "lala": ("la", 2)}
    tokens = ["x", "66", "6", "666", "6", "lala", "la", "6", "66", "y", "66", "6"]
    # Runs: 66 6 666 6 (out of order), lala la (out of order), 6 66 (in order), 66 6 (out of order).
    assert release_tie_order(tokens, runs) == [(1, [2, 4, 1, 3]), (5, [6, 5]), (10, [11, 10])]
    assert release_tie_order(["6", "66", "la", "lala"], runs) == []
    # The real vocabulary: "e" "ee" and "!" "!!" "!!!" repeat one string; "▁6" and "e," do not.
    table = python_tokenizer.id_tie_runs
    to_id = python_tokenizer.convert_tokens_to_ids
    assert [table.get(i) for i in to_id(["e", "ee", "!!!", "lala", "▁6", "e,"])] == [
        ("e", 1), ("e", 2), ("!", 3), ("la", 2), None, None
    ]
    text = "eeeee, 66666 !!!!! lalala"
    ids, starts, ends = python_tokenizer.encode_with_offsets(text)
    pieces = python_tokenizer.convert_ids_to_tokens(ids)
    assert pieces == python_tokenizer.tokenize(text) == [
        "▁", "e", "ee", "ee", ",", "▁6", "66", "66", "▁", "!!", "!!!", "▁la", "lala"
    ]
    assert [text[a:b] for a, b in zip(starts, ends)] == [p.lstrip("▁") for p in pieces]
    assert starts[1:4] == [0, 1, 3]
    # The graph's span kernel keeps sentencepiece 0.2.1's order; its spans follow the same sort.
    graph = graph_tokenizer.tokenize_with_offsets(tf.constant([text, "", "666 and 1,666"]))
    assert [t[0].numpy().tolist() for t in graph] == [ids, starts, ends]
    assert [t[1].numpy().tolist() for t in graph] == [[], [], []]
    assert [t[2].numpy().tolist() for t in graph] == list(python_tokenizer.encode_with_offsets("666 and 1,666"))
    assert python_tokenizer.tokenize("666 and 1,666") == ["▁6", "66", "▁and", "▁1", ",", "6", "66"]


def test_each_rule_on_the_real_texts_that_need_it(small_data_dir, tokenizers, sp, release_viterbi):
    texts = glue_texts(small_data_dir) + corpus_lines(small_data_dir)
    with_digit_comma = [t for t in texts if re.search(r"\d,", t)][:300]
    with_quotes = [t for t in texts if "``" in t or "''" in t]
    assert len(with_digit_comma) == 300 and len(with_quotes) >= 30
    for rule_texts in (with_digit_comma, with_quotes):
        # The rule matters on these texts: plain SentencePiece on the old normalisation differs.
        old = [sp.encode(normalize_text(t).replace("``", '"').replace("''", '"')) for t in rule_texts]
        assert sum(o != release_ids(sp, t) for o, t in zip(old, rule_texts)) > len(rule_texts) / 3
        python_wrong, graph_wrong, _ = differences(rule_texts, tokenizers, sp, release_viterbi)
        assert (python_wrong, graph_wrong) == ([], [])


@pytest.mark.slow
def test_zero_differences_on_every_text_of_the_shared_data(data_dir, tokenizers, sp, release_viterbi):
    squad, glue = squad_texts(data_dir), glue_texts(data_dir)
    assert (len(squad), len(glue)) == (12_637, 118_337)  # SQuAD v1.1 dev contexts and questions; GLUE
    corpus = list(dict.fromkeys(corpus_lines(data_dir)))  # every distinct corpus line once
    assert len(corpus) > 150_000
    texts = squad + glue + corpus
    python_wrong, graph_wrong, ties = differences(texts, tokenizers, sp, release_viterbi)
    assert python_wrong == [], f"{len(python_wrong)} of {len(texts)} differ, first {texts[python_wrong[0]]!r}"
    assert graph_wrong == [], f"{len(graph_wrong)} of {len(texts)} differ, first {texts[graph_wrong[0]]!r}"
    # Where the installed sentencepiece breaks ties the other way (13 texts, runs such as 666 or
    # eee, on sentencepiece 0.2.0 and 0.2.1; none on 0.2.2 and later), the spans agree too.
    assert len(ties) == (0 if SENTENCEPIECE_BREAKS_TIES_AS_THE_RELEASE else 13)
    tie_texts = [texts[i] for i in ties]
    graph_ids, starts, ends = tokenizers[1].tokenize_with_offsets(tf.constant(tie_texts + ["padding"]))
    for k, text in enumerate(tie_texts):
        expected = (graph_ids[k].numpy().tolist(), starts[k].numpy().tolist(), ends[k].numpy().tolist())
        assert tokenizers[0].encode_with_offsets(text) == expected
