"""The release's SentencePiece segmentation where current sentencepiece departs from it.

Segmentations of equal real score (`8` `88` and `88` `8`) are decided as the release's
sentencepiece decided them, on float32 path scores (`ReleaseViterbi`); `tie_runs` and `has_tie_run`
find the texts where that can matter, and `digit_comma_resplits` is the table of the release's
`encode_pieces` re-split (`▁2012,` -> `▁2012` `,`). Both tokenizers (`albert_tf.tokenizers.tokenizer` in Python,
`albert_tf.tokenizers.graph_tokenizer` in a graph) build on this module, so they give identical ids.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"


def _primitive_root(piece: str) -> str:
    """The shortest string that `piece` repeats ("6" for "666", "la" for "lala", "ab" for "ab")."""
    return piece[: (piece + piece).find(piece, 1)]


def tie_runs(processor: spm.SentencePieceProcessor) -> dict[str, tuple[str, int]]:
    """Pieces that can tie with a neighbour, each with the string it repeats and how many times.

    Two segmentations of a text tie when they hold the same pieces in another order (`666` as `6`
    `66` or `66` `6`: the same sum of scores). Two adjacent pieces can trade places, leaving the
    text as it is, only if both repeat one string (xy = yx holds exactly for powers of one word),
    so the pieces listed here are those without "▁" whose repeated string has at least two pieces.
    Which order wins is not a rule of lengths: it is whichever float32 path score is higher, and
    where the two are equal the segmentation whose last piece starts first (`ReleaseViterbi`).
    """
    by_root: dict[str, list[str]] = {}
    for piece_id in range(processor.GetPieceSize()):
        if processor.IsControl(piece_id) or processor.IsUnknown(piece_id) or processor.IsUnused(piece_id):
            continue
        piece = processor.IdToPiece(piece_id)
        if SPIECE_UNDERLINE not in piece:
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
        processor: the loaded SentencePiece model.

    Example:
        >>> ReleaseViterbi(processor)(processor.normalize("80888"))
        [('▁80', 1234), ('88', 2345), ('8', 456)]
    """

    def __init__(self, processor: spm.SentencePieceProcessor):
        self.unk_id = processor.unk_id()
        special = (processor.IsControl, processor.IsUnknown, processor.IsUnused, processor.IsByte)
        entries = [
            (processor.IdToPiece(i), i, np.float32(processor.GetScore(i)))
            for i in range(processor.GetPieceSize())
            if not any(is_kind(i) for is_kind in special)
        ]
        normal = [score for _, _, score in entries if score != 0]
        self.unk_score = np.float32(min(normal) - np.float32(10))
        max_score = max(normal)
        self.pieces = {
            piece: (piece_id, np.float32(len(piece) * max_score + np.float32(1)) if score == 0 else score)
            for piece, piece_id, score in entries
        }
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
    processor: spm.SentencePieceProcessor, viterbi: ReleaseViterbi | None = None
) -> dict[str, list[str]]:
    """Pieces that the release's `encode_pieces` re-splits, each with the pieces it becomes.

    A piece that ends in a digit followed by a comma is encoded again without its comma and without
    "▁" (`▁2012,` -> `▁2012` `,`; `2,` inside `$12,` -> `2` `,`); a leading "▁" that the re-encoding
    adds is dropped when the piece had none. The result depends on the piece alone, so one table
    built from the vocabulary serves every text. Unknown pieces never end in a comma (a comma is
    a piece of its own), so vocabulary pieces are the only ones that can match. The re-encoding is
    the release's search (`viterbi`: a `ReleaseViterbi` of `processor`, when the caller has one).
    """
    viterbi = ReleaseViterbi(processor) if viterbi is None else viterbi
    table = {}
    for piece_id in range(processor.GetPieceSize()):
        piece = processor.IdToPiece(piece_id)
        if len(piece) < 2 or piece[-1] != "," or not piece[-2].isdigit():
            continue
        pieces = [p for p, _ in viterbi(processor.normalize(piece[:-1].replace(SPIECE_UNDERLINE, "")))]
        if not piece.startswith(SPIECE_UNDERLINE) and pieces[0].startswith(SPIECE_UNDERLINE):
            pieces = pieces[1:] if pieces[0] == SPIECE_UNDERLINE else [pieces[0][1:], *pieces[1:]]
        table[piece] = [*pieces, piece[-1]]
    return table
