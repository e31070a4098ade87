"""ALBERT's SentencePiece tokenizer: normalisation, text <-> pieces <-> ids, and segment packing.

Both steps are the release's (google-research/albert `tokenization.py`), so that fine-tuning and
serving see the ids the released models were pretrained on: `preprocess_text`'s normalisation
(collapse whitespace, NFKD with combining marks dropped, lowercase; `` and '' are kept), then
SentencePiece, then `encode_pieces`' re-split of a piece that ends in a digit and a comma
(`▁2012,` -> `▁2012` `,`). Segmentations of equal real score (`8` `88` and `88` `8`) are decided as
the release's sentencepiece decided them, on float32 path scores (`ReleaseViterbi`): sentencepiece
0.2.0 and 0.2.1 decide some of them the other way, so texts where that can happen are searched
again here (`albert_tf.tokenizers.segmentation`).
`albert_tf.tokenizers.graph_tokenizer.AlbertGraphTokenizer` does the same in a TensorFlow graph; the two must
give identical ids, so both take their character sets and the re-split table from this module.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import unicodedata
from typing import Mapping, Sequence

import numpy as np
import sentencepiece as spm

from albert_tf.utils.errors import reason
from albert_tf.utils.files import files_for, is_url
from albert_tf.tokenizers.segmentation import (
    SPIECE_UNDERLINE,
    ReleaseViterbi,
    has_tie_run,
    release_tables,
    sentencepiece_processor,
)
PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CLS_PIECE, SEP_PIECE, MASK_PIECE = "[CLS]", "[SEP]", "[MASK]"
CONTROL_PIECES = (CLS_PIECE, SEP_PIECE, MASK_PIECE)
# The shortest packed sequence any tool accepts: [CLS] a [SEP] b [SEP], one token of each segment. The
# release's create_pretraining_data asserts that both segments keep a token after truncation, and
# `AlbertTokenizer.pack` refuses a pair with less room: an export or a fine-tuning run at 4 would
# truncate every pair's second segment away.
MIN_SEQ_LENGTH = 5


def check_seq_length(value, name: str = "max_seq_length") -> None:
    """Raises ValueError naming `name` unless `value` is an integer of at least MIN_SEQ_LENGTH."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < MIN_SEQ_LENGTH:
        raise ValueError(f"{name} must be at least {MIN_SEQ_LENGTH}, got {value} (room for [CLS] a [SEP] b [SEP])")


def _code_point_ranges(predicate) -> list[tuple[int, int]]:
    """(first, last) code point of each run where `predicate` of the character is true (non-zero)."""
    # Every code point in one string (lone surrogates too), so that `map` calls the predicate with
    # no Python loop and no `chr` per code point: 0.11 s for both sets of characters, not 0.18 s.
    every = np.arange(sys.maxunicode + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    flags = np.fromiter(map(predicate, every), bool, len(every))
    edges = np.flatnonzero(np.diff(flags, prepend=False, append=False))
    return [(int(first), int(end) - 1) for first, end in zip(edges[::2], edges[1::2])]


# `str.split()` and `unicodedata.combining` define the Python side; the graph tokenizer turns these
# exact sets into regex classes, because RE2's `\s` is ASCII-only and `\p{Mn}` is not the set of
# characters with a non-zero combining class (the released models strip the latter).
@functools.cache
def whitespace_ranges() -> list[tuple[int, int]]:
    """Code point ranges that `str.split()` treats as whitespace."""
    return _code_point_ranges(str.isspace)


@functools.cache
def combining_ranges() -> list[tuple[int, int]]:
    """Code point ranges with a non-zero combining class (dropped after NFKD)."""
    return _code_point_ranges(unicodedata.combining)


def normalize_text(text: str, do_lower_case: bool = True) -> str:
    """Applies ALBERT's normalisation to one string (the release's `preprocess_text`).

    Whitespace runs become one space (ends stripped), accents are stripped (NFKD, then characters
    with a combining class are dropped) and, if asked, text is lowercased. Quotes are left alone:
    the release keeps `` and '' (XLNet's version of this function turned them into ").
    """
    text = " ".join(text.split())
    # ASCII is NFKD-stable and has no combining marks: skipping it keeps the common case fast.
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        if not text.isascii():
            text = "".join(c for c in text if not unicodedata.combining(c))
    if do_lower_case:
        text = text.lower()
    return text


_WORD = re.compile(r"\S+")  # \s is exactly str.isspace for str patterns, as str.split uses


def normalize_with_offsets(text: str, do_lower_case: bool = True) -> tuple[str, list[int]]:
    """`normalize_text` that also says where each normalised character came from.

    Returns the normalised string and, per normalised character, the index of the original
    character that made it: the space that stands for a whitespace run points at the run's first
    character, and the characters of an NFKD expansion (the "f" and "i" of "\ufb01", the "1", "⁄"
    and "2" of "½") all point at the character they came from.
    """
    parts: list[str] = []
    origins: list[int] = []
    previous_end = None
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        if previous_end is not None:
            parts.append(" ")
            origins.append(previous_end)
        previous_end = match.end()
        if word.isascii():
            parts.append(word)
            origins.extend(range(start, previous_end))
            continue
        for position, char in enumerate(word, start):
            if char.isascii():
                expansion = char
            else:
                expansion = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
            parts.append(expansion)
            origins.extend([position] * len(expansion))
    normalized = "".join(parts)
    if do_lower_case:
        # Lower case as one string: Python lowercases a final sigma by its context, one for one.
        normalized = normalized.lower()
    return normalized, origins


# The release's whole-word rule (`_is_start_piece_sp` in its create_pretraining_data.py) lets a
# piece continue a word only if it is made of English letters and this punctuation; note that the
# apostrophe, "<", "=" and ">" are not in it.
_RELEASE_PUNCTUATION = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
_WORD_CONTINUATION_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz") | _RELEASE_PUNCTUATION


def is_word_start_piece(piece: str) -> bool:
    """Whether whole-word masking starts a new word at `piece`, as the release decides.

    A piece starts a word when it begins with "▁" or "<" (`<unk>`), is one punctuation character,
    or holds any character (lowercased) that is not an English letter or that punctuation: digits,
    apostrophes and non-English letters included. So `▁new` `york` is one word, `▁1` `99` two and
    `▁u` `.` `s` `.` three (`.` alone starts one; `s.` would continue it).
    """
    if piece.startswith((SPIECE_UNDERLINE, "<")) or piece in _RELEASE_PUNCTUATION:
        return True
    return not all(c.lower() in _WORD_CONTINUATION_CHARACTERS for c in piece)


@functools.cache
def _proto_by_return_type(encode) -> bool:
    return "return_type" in inspect.signature(encode).parameters


def _encode_with_spans(processor: spm.SentencePieceProcessor, text: str):
    """SentencePiece's pieces of `text` with their spans, and whether the spans count UTF-8 bytes.

    sentencepiece 0.2.2 and later ask for `return_type="proto"` and give byte offsets; earlier 0.2
    releases (the Beam extras pin one) ask for `out_type="immutable_proto"` and give characters.
    """
    if _proto_by_return_type(type(processor).Encode):
        return processor.encode(text, return_type="proto").pieces, True
    return processor.encode(text, out_type="immutable_proto").pieces, False


def _url_bytes(path: str) -> bytes:
    try:
        with files_for(path).open(path, "rb") as f:
            return f.read()
    except Exception as error:  # TensorFlow's filesystem errors are not OSErrors
        raise OSError(reason(error)) from error


def _model_proto(model: str | os.PathLike | bytes, name: str) -> bytes:
    """The serialized model: `model` itself, or the file or URL it names."""
    try:
        if isinstance(model, bytes):
            return model
        if is_url(model):  # gs://...
            return _url_bytes(os.fspath(model))
        with open(os.fspath(model), "rb") as f:
            return f.read()
    except (OSError, TypeError) as error:
        raise ValueError(f"{name} is not a readable SentencePiece model: {error}") from error


def _load_processor(model_proto: bytes, name: str) -> spm.SentencePieceProcessor:
    """The model's shared processor (`sentencepiece_processor`), or ValueError naming `name`."""
    try:
        return sentencepiece_processor(model_proto)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{name} is not a readable SentencePiece model: {error}") from error


def check_albert_pieces(processor: spm.SentencePieceProcessor, name: str) -> None:
    """Raises ValueError unless the model has `<pad>`=0, `<unk>`=1 and [CLS], [SEP], [MASK]."""
    problems = []
    size = processor.GetPieceSize()
    for expected_id, piece in ((0, PAD_PIECE), (1, UNK_PIECE)):
        actual = processor.IdToPiece(expected_id) if expected_id < size else None
        if actual != piece:
            problems.append(f"id {expected_id} is {actual!r}, expected {piece!r}")
    for piece in CONTROL_PIECES:
        piece_id = processor.PieceToId(piece)
        if processor.IdToPiece(piece_id) != piece:
            problems.append(f"{piece} is missing")
        elif not processor.IsControl(piece_id):
            problems.append(f"{piece} (id {piece_id}) is not a control symbol")
    if problems:
        raise ValueError(
            f"{name} lacks the ALBERT special pieces ({'; '.join(problems)}); train one with "
            "albert-train-vocab, which reserves <pad>=0, <unk>=1, [CLS], [SEP], [MASK]"
        )


def truncate_pair_lengths(len_a: int, len_b: int, max_tokens: int) -> tuple[int, int]:
    """Lengths left after cutting one token at a time from the end of the longer segment.

    Ties cut segment B, as BERT's fine-tuning code does. The closed form lets the graph tokenizer
    apply the same rule without a loop; `AlbertTokenizer.pack` is tested against the loop.
    """
    if len_a + len_b <= max_tokens:
        return len_a, len_b
    kept_a = min(len_a, max(-(-max_tokens // 2), max_tokens - len_b))
    return kept_a, min(len_b, max_tokens - kept_a)


def _unpickled(cls, model_proto: bytes, spm_model_file, do_lower_case: bool) -> "AlbertTokenizer":
    tokenizer = cls(model_proto, do_lower_case)
    tokenizer.spm_model_file = spm_model_file
    return tokenizer


class AlbertTokenizer:
    """SentencePiece tokenizer with ALBERT's normalisation and special ids.

    Args:
        spm_model_file: path of a SentencePiece model with `<pad>`=0, `<unk>`=1 and the control
            symbols [CLS], [SEP], [MASK] (the released `30k-clean.model`, or one made with
            `albert-train-vocab`). Serialized model bytes are accepted too.
        do_lower_case: lowercase after stripping accents (True for the released English models).

    Example:
        >>> tokenizer = AlbertTokenizer("30k-clean.model")
        >>> tokenizer.pack(tokenizer.encode("Hello"), tokenizer.encode("World"), max_seq_length=8)
    """

    def __init__(self, spm_model_file: str | os.PathLike | bytes, do_lower_case: bool = True):
        self.spm_model_file = spm_model_file
        self.do_lower_case = do_lower_case
        name = "the given SentencePiece model bytes" if isinstance(spm_model_file, bytes) else str(spm_model_file)
        model_proto = _model_proto(spm_model_file, name)
        self._sp = _load_processor(model_proto, name)
        check_albert_pieces(self._sp, name)
        self._cls_id = self._sp.PieceToId(CLS_PIECE)
        self._sep_id = self._sp.PieceToId(SEP_PIECE)
        self._mask_id = self._sp.PieceToId(MASK_PIECE)
        # The release's search first, where the installed sentencepiece may leave it, then the
        # re-split: the release re-split what its sentencepiece gave. Built once per model and
        # shared with every other tokenizer of it (`release_tables`): only read here.
        tables = release_tables(model_proto)
        self._viterbi = tables.viterbi
        self._piece_runs, self._id_runs = tables.piece_runs, tables.id_runs
        self._tie_prone_pieces, self._tie_prone_ids = tables.tie_prone_pieces, tables.tie_prone_ids
        self._piece_resplits, self._id_resplits = tables.piece_resplits, tables.id_resplits

    def __reduce__(self):
        """A pickle (or deep copy) holds the model's bytes; its tokenizer shares the model's tables."""
        return _unpickled, (type(self), self._sp.serialized_model_proto(), self.spm_model_file, self.do_lower_case)

    @property
    def vocab_size(self) -> int:
        return self._sp.GetPieceSize()

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @property
    def cls_id(self) -> int:
        return self._cls_id

    @property
    def sep_id(self) -> int:
        return self._sep_id

    @property
    def mask_id(self) -> int:
        return self._mask_id

    @property
    def model_proto(self) -> bytes:
        """The serialized SentencePiece model (what `AlbertGraphTokenizer` takes)."""
        return self._sp.serialized_model_proto()

    def normalize(self, text: str) -> str:
        return normalize_text(text, self.do_lower_case)

    @property
    def id_resplits(self) -> Mapping[int, tuple[int, ...]]:
        """The digit-comma re-split (see `digit_comma_resplits`) as id -> ids (read-only)."""
        return self._id_resplits

    @property
    def release_viterbi(self) -> ReleaseViterbi:
        """The release's search over this vocabulary (`ReleaseViterbi`)."""
        return self._viterbi

    @property
    def id_tie_runs(self) -> Mapping[int, tuple[str, int]]:
        """`tie_runs` as id -> (the string the piece repeats, its length) (read-only)."""
        return self._id_runs

    def _may_leave_release(self, tokens, prone: frozenset, runs: dict) -> bool:
        return not prone.isdisjoint(tokens) and has_tie_run(tokens, runs)

    def _release_pieces(self, normalized: str) -> list[tuple[str, int]]:
        return self._viterbi(self._sp.normalize(normalized))

    def tokenize(self, text: str) -> list[str]:
        normalized = self.normalize(text)
        pieces = self._sp.EncodeAsPieces(normalized)
        if self._may_leave_release(pieces, self._tie_prone_pieces, self._piece_runs):
            pieces = [piece for piece, _ in self._release_pieces(normalized)]
        return [p for piece in pieces for p in self._piece_resplits.get(piece, (piece,))]

    def encode(self, text: str) -> list[int]:
        normalized = self.normalize(text)
        return self._resplit(self._sp.EncodeAsIds(normalized), normalized)

    def _resplit(self, ids: list[int], normalized: str) -> list[int]:
        """The release's search where SentencePiece may have left it, then the digit-comma re-split."""
        if self._may_leave_release(ids, self._tie_prone_ids, self._id_runs):
            ids = [piece_id for _, piece_id in self._release_pieces(normalized)]
        table = self._id_resplits
        if table.keys().isdisjoint(ids):
            return ids
        return [i for piece_id in ids for i in table.get(piece_id, (piece_id,))]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int], list[int]]:
        """The ids of `text` (as `encode` gives them) and each piece's character span in `text`.

        Returns `ids, starts, ends`: piece `i` covers `text[starts[i]:ends[i]]`, the characters of
        the original string it was made from, whatever the normalisation changed (collapsed
        whitespace, NFKD, dropped accents, lower case). A piece's leading "▁" stands for the space
        before it, which its span leaves out; a piece that is nothing but "▁" gets an empty span
        where the next word starts.
        """
        normalized, origins = normalize_with_offsets(text, self.do_lower_case)
        pieces, in_bytes = _encode_with_spans(self._sp, normalized)
        ids = [piece.id for piece in pieces]
        release = None
        if self._may_leave_release(ids, self._tie_prone_ids, self._id_runs):
            release = self._release_pieces(normalized)
        begins = np.fromiter((piece.begin for piece in pieces), np.int64, len(pieces))
        ends = np.fromiter((piece.end for piece in pieces), np.int64, len(pieces))
        if in_bytes and not normalized.isascii():
            # SentencePiece's offsets are bytes of the UTF-8 text: map them to characters.
            widths = np.fromiter((len(c.encode("utf-8")) for c in normalized), np.int64, len(normalized))
            byte_to_char = np.repeat(np.arange(len(normalized) + 1), np.append(widths, 1))
            begins, ends = byte_to_char[begins], byte_to_char[ends]
        # A piece's leading "▁" is the space before it (one at most: runs are collapsed).
        chars = np.frombuffer(normalized.encode("utf-32-le"), np.uint32) if normalized else np.zeros(0, np.uint32)
        padded = np.append(chars, 0)
        begins = begins + ((padded[np.minimum(begins, len(chars))] == 32) & (begins < ends))
        if release is not None:
            ids, begins, ends = self._release_spans([piece.piece for piece in pieces], ids, begins, ends, release)
        if self._id_resplits.keys() & set(ids):
            ids, begins, ends = self._resplit_spans(ids, begins, ends)
        origin = np.append(np.asarray(origins, np.int64), len(text.rstrip()))
        empty = begins >= ends
        starts = origin[begins]
        stops = np.where(empty, starts, origin[np.maximum(ends - 1, 0)] + 1)
        return ids, starts.tolist(), stops.tolist()

    @staticmethod
    def _release_spans(pieces, ids, begins, ends, release):
        """The release's pieces with spans, where they replace SentencePiece's (`pieces`, `ids`, spans).

        Both tile the same normalised text, so they part and meet again at common boundaries; in
        between (a tie run: `8` `88` for `88` `8`), each of the release's pieces takes the width
        the same piece had there, laid from where the stretch starts.
        """
        new_ids, new_begins, new_ends = [], [], []
        ours = theirs = 0
        while ours < len(pieces):
            # The shortest stretch from here after which both have used the same characters.
            ours_end, theirs_end = ours + 1, theirs + 1
            ours_length, theirs_length = len(pieces[ours]), len(release[theirs][0])
            while ours_length != theirs_length:
                if ours_length < theirs_length:
                    ours_length += len(pieces[ours_end])
                    ours_end += 1
                else:
                    theirs_length += len(release[theirs_end][0])
                    theirs_end += 1
            stretch = [piece_id for _, piece_id in release[theirs:theirs_end]]
            if stretch == ids[ours:ours_end]:
                new_ids += stretch
                new_begins += begins[ours:ours_end].tolist()
                new_ends += ends[ours:ours_end].tolist()
            else:
                widths: dict[int, list[int]] = {}
                for k in range(ours, ours_end):
                    widths.setdefault(ids[k], []).append(int(ends[k] - begins[k]))
                at, stop = int(begins[ours]), int(ends[ours_end - 1])
                for piece, piece_id in release[theirs:theirs_end]:
                    width = widths[piece_id].pop() if widths.get(piece_id) else len(piece.lstrip(SPIECE_UNDERLINE))
                    new_ids.append(piece_id)
                    new_begins.append(min(at, stop))
                    at = min(at + width, stop)
                    new_ends.append(at)
            ours, theirs = ours_end, theirs_end
        return new_ids, np.asarray(new_begins, np.int64), np.asarray(new_ends, np.int64)

    def _resplit_spans(self, ids, begins, ends):
        """The release's digit-comma re-split with spans: each part takes its piece's next characters."""
        new_ids, new_begins, new_ends = [], [], []
        for piece_id, begin, end in zip(ids, begins.tolist(), ends.tolist()):
            for part in self._id_resplits.get(piece_id, (piece_id,)):
                width = len(self._sp.IdToPiece(part).lstrip(SPIECE_UNDERLINE)) if piece_id in self._id_resplits else end - begin
                new_ids.append(part)
                new_begins.append(min(begin, end))
                begin = min(begin + width, end)
                new_ends.append(begin)
        return new_ids, np.asarray(new_begins, np.int64), np.asarray(new_ends, np.int64)

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """`encode` for many strings in one SentencePiece call (much faster than a loop).

        `num_threads=-1` lets SentencePiece use every core; callers that already run one process
        per core pass 1.
        """
        normalized = [self.normalize(t) for t in texts]
        encoded = self._sp.Encode(normalized, out_type=int, num_threads=num_threads)
        return [self._resplit(ids, text) for ids, text in zip(encoded, normalized)]

    def convert_tokens_to_ids(self, pieces: Sequence[str]) -> list[int]:
        return [self._sp.PieceToId(p) for p in pieces]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self._sp.IdToPiece(int(i)) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; padding and control symbols ([CLS], [SEP], [MASK]) are dropped."""
        return self._sp.DecodeIds([int(i) for i in ids])

    def is_control(self, piece_id: int) -> bool:
        return self._sp.IsControl(piece_id)

    def word_start_flags(self) -> bytearray:
        """Per id: 1 if whole-word masking starts a word at the piece (`is_word_start_piece`).

        An unknown piece is `<unk>` here, so it starts a word. The release judged the unknown text
        itself, which also starts a word unless it is made of English letters and punctuation only
        (`` is such a text for 30k-clean.model); none of the 6,440 unknown pieces of the release's
        reference corpus is.
        """
        return bytearray(is_word_start_piece(self._sp.IdToPiece(i)) for i in range(self.vocab_size))

    def pack(
        self,
        a_ids: Sequence[int],
        b_ids: Sequence[int] | None = None,
        *,
        max_seq_length: int,
    ) -> dict[str, list[int]]:
        """Lays out `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `max_seq_length`.

        Too-long input loses tokens from the end of the longer segment, one at a time (B on ties).
        Returns int lists `input_ids`, `input_mask`, `segment_ids`.
        """
        specials = 2 if b_ids is None else 3
        if max_seq_length < specials + (0 if b_ids is None else 1) + 1:
            raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the segments")
        a = list(a_ids)
        b = [] if b_ids is None else list(b_ids)
        budget = max_seq_length - specials
        while len(a) + len(b) > budget:
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
        input_ids = [self.cls_id, *a, self.sep_id]
        segment_ids = [0] * len(input_ids)
        if b_ids is not None:
            input_ids += [*b, self.sep_id]
            segment_ids += [1] * (len(b) + 1)
        padding = max_seq_length - len(input_ids)
        return {
            "input_ids": input_ids + [self.pad_id] * padding,
            "input_mask": [1] * len(input_ids) + [0] * padding,
            "segment_ids": segment_ids + [0] * padding,
        }
