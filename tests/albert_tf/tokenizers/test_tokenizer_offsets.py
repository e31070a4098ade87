"""Character offsets of pieces through ALBERT's normalisation (whitespace, NFKD, accents, case)."""

import json

import pytest

from albert_tf.tokenizers.tokenizer import AlbertTokenizer, normalize_text, normalize_with_offsets


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


def test_normalize_with_offsets_points_at_the_source_characters():
    text = "  Ca\u0301fe\u0301 \t\n \ufb01ne\u00bd  "
    normalized, origins = normalize_with_offsets(text)
    assert normalized == normalize_text(text) == "cafe fine1\u20442"
    # The accents are dropped; the space stands for the run's first character; the letters of
    # the ligature and the three characters of one half point at their source.
    assert origins == [2, 3, 5, 6, 8, 12, 12, 13, 14, 15, 15, 15]


def test_normalize_with_offsets_keeps_case_when_asked():
    normalized, _ = normalize_with_offsets("Ærø ΑΣ", do_lower_case=False)
    assert normalized == normalize_text("Ærø ΑΣ", do_lower_case=False)
    # Lower case is applied to the whole string, so a final sigma is lowered by its context.
    assert normalize_with_offsets("ΑΣ")[0] == normalize_text("ΑΣ") == "ας"


def test_piece_spans_of_a_messy_string(tokenizer):
    text = "  Héllo   World, in  2012,\tthe café \ufb01 \u201cquoted\u201d ``x''"
    ids, starts, ends = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    pieces = tokenizer.convert_ids_to_tokens(ids)
    spans = {}
    for piece, s, e in zip(pieces, starts, ends):
        spans.setdefault(piece, text[s:e])
    assert spans["\u2581hello"] == "Héllo"
    assert spans["\u2581world"] == "World"
    assert spans["\u2581cafe"] == "café"
    assert spans["\u2581fi"] == "\ufb01"
    # `` is kept (an unknown piece of 30k-clean) and '' is two pieces, as in the release.
    assert [(p, text[s:e]) for p, s, e in zip(pieces, starts, ends)][-4:] == [
        ("<unk>", "``"), ("x", "x"), ("'", "'"), ("'", "'")
    ]
    # The release's re-split of "▁2012,": each new piece covers its own characters.
    year = pieces.index("\u2581in") + 1
    assert pieces[year : year + 2] == ["\u25812012", ","]
    assert [text[s:e] for s, e in zip(starts[year : year + 2], ends[year : year + 2])] == ["2012", ","]
    # A lone "▁" covers nothing and sits where the next word starts.
    lone = pieces.index("\u2581")
    assert starts[lone] == ends[lone] == text.index("\u201c")


def test_piece_spans_on_real_contexts(tokenizer, data_dir):
    """Every piece of 300 SQuAD contexts covers the characters it was made of."""
    with open(data_dir / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        contexts = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]][:300]
    checked = matched = 0
    for context in contexts:
        ids, starts, ends = tokenizer.encode_with_offsets(context)
        assert ids == tokenizer.encode(context)
        assert all(0 <= s <= e <= len(context) for s, e in zip(starts, ends))
        assert all(a <= b for a, b in zip(starts, starts[1:]))
        # Pieces overlap only on a character that NFKD expands into several ("½" -> "1⁄2").
        for end, start in zip(ends, starts[1:]):
            assert end <= start or (end == start + 1 and len(normalize_text(context[start])) > 1)
        for piece, s, e in zip(tokenizer.convert_ids_to_tokens(ids), starts, ends):
            if piece in ("<unk>", "\u2581"):
                continue
            checked += 1
            matched += normalize_text(context[s:e]) == piece.lstrip("\u2581")
    # SentencePiece's own NFKC normaliser may still change a character (e.g. a full-width
    # sign); nearly every piece spells exactly its characters.
    assert checked > 35000
    assert matched / checked > 0.999
