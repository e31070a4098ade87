"""The release's SentencePiece segmentation where current sentencepiece departs from it.

Segmentations of equal real score (`8` `88` and `88` `8`) are decided as the release's
sentencepiece decided them, on float32 path scores (`ReleaseViterbi`); `tie_runs` and `has_tie_run`
find the texts where that can matter, and `digit_comma_resplits` is the table of the release's
`encode_pieces` re-split (`▁2012,` -> `▁2012` `,`). Both tokenizers (`albert_tf.tokenizers.tokenizer` in Python,
`albert_tf.tokenizers.graph_tokenizer` in a graph) build on this module, so they give identical ids.

All of it depends on the vocabulary alone, so `release_tables` builds it once per distinct model
(from one read of its pieces, `Vocabulary`) and every tokenizer of that model shares it, read-only.
"""

from __future__ import annotations

import dataclasses
import functools
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np
import sentencepiece as spm
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SPIECE_UNDERLINE = "\u2581"
# sentencepiece's ModelProto.SentencePiece.Type.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


@functools.cache
def _pieces_message() -> type:
    """A protobuf message that reads a serialized ModelProto's pieces (field 1: piece 1, score 2,
    type 3) and skips the rest. It lives in a pool of its own: sentencepiece's `sentencepiece_model_pb2`
    registers the whole proto in protobuf's default pool (as transformers' copy of it does, under the
    same name), and its 0.2.2 and later copies refuse a protobuf runtime older than their generator."""
    proto = descriptor_pb2.FileDescriptorProto(name="albert_tf_sentencepiece_pieces.proto", package="albert_tf")
    model = proto.message_type.add(name="SentencePieceModel")
    model.field.add(name="pieces", number=1, label=3, type=11, type_name=".albert_tf.SentencePiece")
    piece = proto.message_type.add(name="SentencePiece")
    piece.field.add(name="piece", number=1, label=1, type=9)
    piece.field.add(name="score", number=2, label=1, type=2)
    piece.field.add(name="type", number=3, label=1, type=5, default_value=str(NORMAL))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("albert_tf.SentencePieceModel"))


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Every piece of a SentencePiece model by id, read in one pass of its serialized proto.

    Asking the processor instead costs a call per id and question (`IdToPiece`, `GetScore`,
    `IsControl`, ...: 330,000 calls for 30,000 pieces, most of the 0.3 s a tokenizer took to build).

    Attributes:
        pieces: each id's piece.
        scores: each id's score (float32 [vocab_size], read-only).
        types: each id's type (`NORMAL`, `UNKNOWN`, `CONTROL`, `USER_DEFINED`, `UNUSED`, `BYTE`).
        unk_id: the id of the unknown piece (a model has exactly one).
    """

    pieces: tuple[str, ...]
    scores: np.ndarray
    types: tuple[int, ...]
    unk_id: int

    @classmethod
    def read(cls, model_proto: bytes) -> "Vocabulary":
        """The vocabulary of a serialized SentencePiece model (`serialized_model_proto()`)."""
        entries = _pieces_message().FromString(model_proto).pieces
        scores = np.fromiter((entry.score for entry in entries), np.float32, len(entries))
        scores.flags.writeable = False
        kinds = tuple(entry.type for entry in entries)
        return cls(tuple(entry.piece for entry in entries), scores, kinds, kinds.index(UNKNOWN))


def _primitive_root(piece: str) -> str:
    """The shortest string that `piece` repeats ("6" for "666", "la" for "lala", "ab" for "ab")."""
    return piece[: (piece + piece).find(piece, 1)]


def tie_runs(vocabulary: Vocabulary) -> dict[str, tuple[str, int]]:
    """Pieces that can tie with a neighbour, each with the string it repeats and how many times.

    Two segmentations of a text tie when they hold the same pieces in another order (`666` as `6`
    `66` or `66` `6`: the same sum of scores). Two adjacent pieces can trade places, leaving the
    text as it is, only if both repeat one string (xy = yx holds exactly for powers of one word),
    so the pieces listed here are those without "▁" whose repeated string has at least two pieces.
    Which order wins is not a rule of lengths: it is whichever float32 path score is higher, and
    where the two are equal the segmentation whose last piece starts first (`ReleaseViterbi`).
    """
    by_root: dict[str, list[str]] = {}
    for piece, kind in zip(vocabulary.pieces, vocabulary.types):
        if kind not in (CONTROL, UNKNOWN, UNUSED) and SPIECE_UNDERLINE not in piece:
            by_root.setdefault(_primitive_root(piece), []).append(piece)
    return {
        piece: (root, len(piece) // len(root))
        for root, pieces in by_root.items()
        if len(pieces) > 1
        for piece in pieces
    }


class ReleaseViterbi:
    """SentencePiece's Viterbi search as the release's sentencepiece ran it, in float32.

    The lattice of the unigram model (sentencepiece's `Lattice::Viterbi`): a node for each
    vocabulary piece that starts at each character, an unknown node (`min_score - 10`) where no
    piece of one character does, a user-defined piece (one that scores 0, which no piece of a
    unigram model does: its scores are log-probabilities) scoring `length * max_score + 1`. Each
    node takes as its predecessor, among the nodes ending where it starts, the first in order of
    where they start whose float32 sum `path score + node score` is highest. That sum is rounded
    to float32 at every step, so two segmentations of equal real score (`8 88` and `88 8`) are
    rarely equal there: `▁80 88 8` (-29.093817) beats `▁80 8 88` (-29.093819).
    sentencepiece 0.2.0 and 0.2.1 compare an unrounded (double) sum with a rounded one and so
    break some of those ties the other way; `AlbertTokenizer` runs this search where they may.

    Args:
        vocabulary: the model's pieces (`Vocabulary`).

    Example:
        >>> ReleaseViterbi(Vocabulary.read(processor.serialized_model_proto()))(processor.normalize("80888"))
        [('▁80', 1234), ('88', 2345), ('8', 456)]
    """

    def __init__(self, vocabulary: Vocabulary):
        self.unk_id = vocabulary.unk_id
        entries = [
            (piece, piece_id, score)
            for piece_id, (piece, score, kind) in enumerate(zip(vocabulary.pieces, vocabulary.scores, vocabulary.types))
            if kind not in (CONTROL, UNKNOWN, UNUSED, BYTE)
        ]
        normal = [score for _, _, score in entries if score != 0]
        self.unk_score = np.float32(min(normal) - np.float32(10))
        max_score = max(normal)
        # Read-only: one search serves every tokenizer of the model (`release_tables`).
        self.pieces: Mapping[str, tuple[int, np.float32]] = MappingProxyType({
            piece: (piece_id, np.float32(len(piece) * max_score + np.float32(1)) if score == 0 else score)
            for piece, piece_id, score in entries
        })
        self.longest = max(len(piece) for piece in self.pieces)

    def scores_by_id(self, vocab_size: int) -> np.ndarray:
        """Each id's score in the search (float32 [vocab_size]): `<unk>` the unknown score, control
        pieces 0 (they never match text)."""
        scores = np.zeros(vocab_size, np.float32)
        for piece_id, score in self.pieces.values():
            scores[piece_id] = score
        scores[self.unk_id] = self.unk_score
        return scores

    def __call__(self, text: str) -> list[tuple[str, int]]:
        """The (piece, id) pairs of `text`, already normalised by SentencePiece (`processor.normalize`)."""
        length = len(text)
        # Node k: where it starts and ends, its id (-1 unknown), its path score and its predecessor.
        starts, ends, ids, paths, previous = [0], [0], [-1], [np.float32(0)], [-1]
        ending = [[] for _ in range(length + 1)]
        ending[0].append(0)
        for position in range(length + 1):
            if position == length:
                begins = [(length, -1, np.float32(0))]  # the end of the text
            else:
                begins = []
                for end in range(position + 1, min(position + self.longest, length) + 1):
                    found = self.pieces.get(text[position:end])
                    if found is not None:
                        begins.append((end, found[0], found[1]))
                if not begins or begins[0][0] != position + 1:
                    begins.insert(0, (position + 1, self.unk_id, self.unk_score))
            lefts = ending[position]
            # float32 sums of every (left, right) pair; argmax keeps the first left of the highest.
            totals = np.asarray([paths[k] for k in lefts], np.float32)[:, None] + np.asarray(
                [score for _, _, score in begins], np.float32
            )[None, :]
            best = totals.argmax(axis=0)
            for column, (end, piece_id, _) in enumerate(begins):
                starts.append(position)
                ends.append(end)
                ids.append(piece_id)
                paths.append(totals[best[column], column])
                previous.append(lefts[best[column]])
                ending[end].append(len(starts) - 1)
        pieces: list[tuple[str, int]] = []
        node, unknown_after = previous[-1], False
        while node > 0:
            piece, piece_id = text[starts[node] : ends[node]], ids[node]
            if piece_id == self.unk_id and unknown_after:  # unknowns next to each other are one piece
                pieces[-1] = (piece + pieces[-1][0], piece_id)
            else:
                pieces.append((piece, piece_id))
            unknown_after, node = piece_id == self.unk_id, previous[node]
        return pieces[::-1]


def has_tie_run(tokens: Sequence, runs: dict) -> bool:
    """Whether `tokens` (pieces or ids) hold adjacent pieces that repeat one string with different lengths.

    `runs` maps a token to (the string it repeats, its length), as `tie_runs` gives them. Only
    there can two segmentations of equal real score meet (`8` `88` against `88` `8`), so only
    there may sentencepiece 0.2.0 and 0.2.1 leave the release's choice.
    """
    before = None
    for token in tokens:
        run = runs.get(token)
        if run is not None and before is not None and run[0] == before[0] and run[1] != before[1]:
            return True
        before = run
    return False


def digit_comma_resplits(
    processor: spm.SentencePieceProcessor, vocabulary: Vocabulary, viterbi: ReleaseViterbi | None = None
) -> dict[str, tuple[str, ...]]:
    """Pieces that the release's `encode_pieces` re-splits, each with the pieces it becomes.

    A piece that ends in a digit followed by a comma is encoded again without its comma and without
    "▁" (`▁2012,` -> `▁2012` `,`; `2,` inside `$12,` -> `2` `,`); a leading "▁" that the re-encoding
    adds is dropped when the piece had none. The result depends on the piece alone, so one table
    built from the vocabulary serves every text. Unknown pieces never end in a comma (a comma is
    a piece of its own), so vocabulary pieces are the only ones that can match. The re-encoding is
    the release's search (`viterbi`: a `ReleaseViterbi` of `vocabulary`, when the caller has one).
    """
    viterbi = ReleaseViterbi(vocabulary) if viterbi is None else viterbi
    table = {}
    for piece in vocabulary.pieces:
        if len(piece) < 2 or piece[-1] != "," or not piece[-2].isdigit():
            continue
        pieces = [p for p, _ in viterbi(processor.normalize(piece[:-1].replace(SPIECE_UNDERLINE, "")))]
        if not piece.startswith(SPIECE_UNDERLINE) and pieces[0].startswith(SPIECE_UNDERLINE):
            pieces = pieces[1:] if pieces[0] == SPIECE_UNDERLINE else [pieces[0][1:], *pieces[1:]]
        table[piece] = (*pieces, piece[-1])
    return table


@functools.lru_cache(maxsize=8)
def sentencepiece_processor(model_proto: bytes) -> spm.SentencePieceProcessor:
    """The SentencePiece model of `model_proto` loaded, one per distinct model: every tokenizer of
    the model shares it, and only encodes and looks up with it (nothing sets its options).
    Raises sentencepiece's RuntimeError for bytes that are not a model."""
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(model_proto)
    return processor


@dataclasses.dataclass(frozen=True)
class ReleaseTables:
    """What the tokenizers need of this module for one model (`release_tables`), shared read-only.

    Attributes:
        vocabulary: the model's pieces (`Vocabulary`).
        viterbi: the release's search over them (`ReleaseViterbi`).
        piece_runs, id_runs: `tie_runs` by piece and by id.
        tie_prone_pieces, tie_prone_ids: the pieces of a tie run longer than the shortest of their
            string ("ee", "66", "!!"): rare in text, unlike "e" and "6", so a text without one
            cannot leave the release, which keeps the common case fast.
        piece_resplits, id_resplits: `digit_comma_resplits` by piece and by id.
    """

    vocabulary: Vocabulary
    viterbi: ReleaseViterbi
    piece_runs: Mapping[str, tuple[str, int]]
    id_runs: Mapping[int, tuple[str, int]]
    tie_prone_pieces: frozenset[str]
    tie_prone_ids: frozenset[int]
    piece_resplits: Mapping[str, tuple[str, ...]]
    id_resplits: Mapping[int, tuple[int, ...]]


@functools.lru_cache(maxsize=8)
def release_tables(model_proto: bytes) -> ReleaseTables:
    """The `ReleaseTables` of a serialized SentencePiece model, built once per distinct model.

    They depend on the vocabulary alone, and building them takes a tenth of a second for 30,000
    pieces: every tokenizer of a model (tests and tools make hundreds) shares the one built first.
    """
    processor = sentencepiece_processor(model_proto)
    vocabulary = Vocabulary.read(model_proto)
    viterbi = ReleaseViterbi(vocabulary)
    piece_runs = tie_runs(vocabulary)
    id_runs = {processor.PieceToId(piece): run for piece, run in piece_runs.items()}
    shortest: dict[str, int] = {}
    for root, length in piece_runs.values():
        shortest[root] = min(length, shortest.get(root, length))
    tie_prone_ids = frozenset(i for i, (root, length) in id_runs.items() if length > shortest[root])
    piece_resplits = digit_comma_resplits(processor, vocabulary, viterbi)
    id_resplits = {
        processor.PieceToId(piece): tuple(processor.PieceToId(p) for p in pieces)
        for piece, pieces in piece_resplits.items()
    }
    return ReleaseTables(
        vocabulary=vocabulary,
        viterbi=viterbi,
        piece_runs=MappingProxyType(piece_runs),
        id_runs=MappingProxyType(id_runs),
        tie_prone_pieces=frozenset(vocabulary.pieces[i] for i in tie_prone_ids),
        tie_prone_ids=tie_prone_ids,
        piece_resplits=MappingProxyType(piece_resplits),
        id_resplits=MappingProxyType(id_resplits),
    )
