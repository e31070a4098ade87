"""AlbertTokenizer: normalisation, special ids, round trips and packing."""

import copy
import pathlib
import pickle
import random
import sys
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf.tokenizers.segmentation import BYTE, CONTROL, UNKNOWN, UNUSED, USER_DEFINED, Vocabulary
from albert_tf.tokenizers.tokenizer import AlbertTokenizer, normalize_text, truncate_pair_lengths


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


def test_normalize_text_applies_each_albert_rule():
    assert normalize_text("  Hello\t\u00a0 World \n") == "hello world"
    assert normalize_text("``quoted''") == "``quoted''"  # kept, as the release's preprocess_text does
    assert normalize_text("Café Ångström naïve") == "cafe angstrom naive"
    assert normalize_text("Café", do_lower_case=False) == "Cafe"
    # NFKD also unfolds compatibility characters: the ligature ﬁ becomes "fi".
    assert normalize_text("\ufb01ne") == "fine"


def test_special_ids_of_the_released_model(tokenizer):
    assert tokenizer.vocab_size == 30000
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


def test_text_to_pieces_to_ids_and_back(tokenizer, small_data_dir):
    text = "The European lobster is a species of clawed lobster."
    pieces = tokenizer.tokenize(text)
    ids = tokenizer.encode(text)
    assert pieces[0] == "\u2581the" and len(pieces) == len(ids)
    assert tokenizer.convert_tokens_to_ids(pieces) == ids
    assert tokenizer.convert_ids_to_tokens(ids) == pieces
    assert tokenizer.decode(ids) == normalize_text(text)
    assert tokenizer.decode([tokenizer.cls_id, *ids, tokenizer.sep_id, 0, 0]) == normalize_text(text)
    # Independent check: plain SentencePiece on the normalised text gives the same ids.
    plain = spm.SentencePieceProcessor(model_file=str(small_data_dir / "albert" / "30k-clean.model"))
    assert plain.encode(normalize_text(text)) == ids


def test_pack_layout_of_two_segments(tokenizer):
    packed = tokenizer.pack([10, 11, 12], [20, 21], max_seq_length=10)
    assert packed["input_ids"] == [2, 10, 11, 12, 3, 20, 21, 3, 0, 0]
    assert packed["input_mask"] == [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    assert packed["segment_ids"] == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
    single = tokenizer.pack([10, 11], max_seq_length=6)
    assert single == {"input_ids": [2, 10, 11, 3, 0, 0], "input_mask": [1, 1, 1, 1, 0, 0], "segment_ids": [0] * 6}


def test_pack_truncates_the_longer_segment_from_its_end(tokenizer):
    packed = tokenizer.pack(list(range(10, 20)), [50, 51], max_seq_length=9)  # room for 6 tokens
    assert packed["input_ids"] == [2, 10, 11, 12, 13, 3, 50, 51, 3]
    tie = tokenizer.pack([10, 11, 12], [20, 21, 22], max_seq_length=8)  # 5 tokens: B loses on ties
    assert tie["input_ids"] == [2, 10, 11, 12, 3, 20, 21, 3]
    single = tokenizer.pack(list(range(10, 20)), max_seq_length=5)
    assert single["input_ids"] == [2, 10, 11, 12, 3]
    with pytest.raises(ValueError, match="max_seq_length=4"):
        tokenizer.pack([1], [2], max_seq_length=4)


def test_closed_form_truncation_equals_the_token_by_token_loop():
    rng = random.Random(0)
    for _ in range(2000):
        len_a, len_b, budget = rng.randint(0, 40), rng.randint(0, 40), rng.randint(2, 50)
        a, b = len_a, len_b
        while a + b > budget:
            if a > b:
                a -= 1
            else:
                b -= 1
        assert truncate_pair_lengths(len_a, len_b, budget) == (a, b), (len_a, len_b, budget)


def test_a_model_without_albert_pieces_is_refused_by_name(tmp_path):
    corpus = tmp_path / "text.txt"
    corpus.write_text("\n".join(f"line {i} of some plain text words here" for i in range(200)))
    spm.SentencePieceTrainer.Train(
        input=str(corpus), model_prefix=str(tmp_path / "plain"), vocab_size=40, minloglevel=2
    )  # SentencePiece's defaults: <unk>=0, <s>=1, </s>=2, no [CLS]/[SEP]/[MASK]
    with pytest.raises(ValueError, match=r"plain\.model lacks the ALBERT special pieces.*\[CLS\] is missing"):
        AlbertTokenizer(tmp_path / "plain.model")


def test_a_file_that_is_not_a_sentencepiece_model_is_refused_by_name(tmp_path):
    bogus = tmp_path / "bogus.model"
    bogus.write_bytes(b"this is not a protobuf")
    with pytest.raises(ValueError, match="bogus.model is not a readable SentencePiece model"):
        AlbertTokenizer(bogus)
    with pytest.raises(ValueError, match="missing.model is not a readable SentencePiece model"):
        AlbertTokenizer(tmp_path / "missing.model")


def test_word_starts_follow_the_release_rule(tokenizer):
    from albert_tf.tokenizers.tokenizer import is_word_start_piece

    starts = {"▁new": True, "york": False, "York": False, "s.": False, "``": False, "99": True,
              ".": True, "'s": True, "<unk>": True, "é": True, "x=": True}
    assert {piece: is_word_start_piece(piece) for piece in starts} == starts
    flags = tokenizer.word_start_flags()
    pieces = tokenizer.tokenize("The U.S. spent $1,995 in 2012.")
    ids = tokenizer.convert_tokens_to_ids(pieces)
    # Digits and punctuation start words, not only "▁" pieces.
    assert [p for p, i in zip(pieces, ids) if flags[i] and not p.startswith("▁")]
    assert all(flags[i] for p, i in zip(pieces, ids) if p.startswith("▁"))


TINY_VOCAB = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "data_prep" / "tiny_vocab.model"


@pytest.mark.parametrize("model", ["30k-clean", "tiny_vocab"])
def test_the_one_pass_vocabulary_is_what_sentencepiece_answers_id_by_id(model, small_data_dir):
    path = small_data_dir / "albert" / "30k-clean.model" if model == "30k-clean" else TINY_VOCAB
    sp = spm.SentencePieceProcessor(model_file=str(path))
    vocabulary = Vocabulary.read(path.read_bytes())
    ids = range(sp.GetPieceSize())
    assert vocabulary.pieces == tuple(sp.IdToPiece(i) for i in ids)
    assert vocabulary.scores.dtype == np.float32 and vocabulary.scores.tolist() == [sp.GetScore(i) for i in ids]
    kinds = {CONTROL: sp.IsControl, UNKNOWN: sp.IsUnknown, UNUSED: sp.IsUnused, BYTE: sp.IsByte}
    assert all(is_kind(i) == (vocabulary.types[i] == kind) for kind, is_kind in kinds.items() for i in ids)
    assert vocabulary.unk_id == sp.unk_id() == 1 and USER_DEFINED in vocabulary.types  # "(" ")": score 0


def test_tokenizers_of_one_model_share_its_tables_and_another_model_has_its_own(tokenizer, small_data_dir):
    """Issue 53: the tables drawn from the vocabulary (a tenth of a second for 30,000 pieces) are built
    once per model, whether it comes as a path or as bytes, and shared read-only."""
    path = small_data_dir / "albert" / "30k-clean.model"
    again = AlbertTokenizer(path.read_bytes(), do_lower_case=False)
    assert again._sp is tokenizer._sp and again.release_viterbi is tokenizer.release_viterbi
    assert again.id_resplits is tokenizer.id_resplits and again.id_tie_runs is tokenizer.id_tie_runs
    tiny = AlbertTokenizer(TINY_VOCAB)
    assert tiny.release_viterbi is not tokenizer.release_viterbi and tiny.vocab_size == 300
    assert len(tiny.release_viterbi.pieces) == 295  # all but <pad>, <unk>, [CLS], [SEP], [MASK]
    text = "Emma Woodhouse, handsome, clever, and rich (she said)."
    for model, shared in ((path, tokenizer), (TINY_VOCAB, tiny)):
        plain = spm.SentencePieceProcessor(model_file=str(model))
        assert shared.encode(text) == plain.encode(normalize_text(text)) and len(set(shared.encode(text))) > 10
    assert again.encode("emma") == tokenizer.encode("Emma") != again.encode("Emma")  # its own case
    # Nothing a tokenizer hands out can change the tables the others use.
    with pytest.raises(TypeError):
        tokenizer.id_resplits[5] = (5,)
    with pytest.raises(TypeError):
        tokenizer.release_viterbi.pieces["x"] = (5, np.float32(0))
    with pytest.raises(ValueError):
        Vocabulary.read(path.read_bytes()).scores[0] = 1
    # A pickle or a deep copy (Beam ships DoFns pickled) carries the model and finds its tables.
    for copied in (pickle.loads(pickle.dumps(tiny)), copy.deepcopy(tiny)):
        assert copied.release_viterbi is tiny.release_viterbi and copied.spm_model_file == TINY_VOCAB
        assert copied.encode(text) == tiny.encode(text) and copied.do_lower_case


def test_character_ranges_hold_exactly_the_code_points_of_their_definition():
    """The graph tokenizer's regex classes come from these ranges (found with numpy over one string
    of every code point): each holds exactly what its definition picks (`str.isspace`, as `str.split`
    uses it; a non-zero `unicodedata.combining`), checked here one `chr` at a time."""
    from albert_tf.tokenizers.tokenizer import combining_ranges, whitespace_ranges

    definitions = ((whitespace_ranges(), str.isspace), (combining_ranges(), lambda c: unicodedata.combining(c) != 0))
    for ranges, is_member in definitions:
        members = [code for code in range(sys.maxunicode + 1) if is_member(chr(code))]
        assert [code for first, last in ranges for code in range(first, last + 1)] == members
    assert whitespace_ranges()[:2] == [(9, 13), (28, 32)] and (0x300, 0x34E) in combining_ranges()
