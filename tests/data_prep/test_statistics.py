"""Statistics of generated instances on the real corpus, against ALBERT.md §3.

Tolerances are written next to each assertion and derived from the sample size: 4 standard
deviations of the binomial or multinomial count (a false failure has probability < 1e-4), or an
exact bound where the quantity is not random.
"""

import math
import random

import pytest

from albert_tf.tokenizers.tokenizer import SPIECE_UNDERLINE, AlbertTokenizer
from data_prep.documents import iter_documents
from data_prep.instances import (
    InstanceOptions,
    InstanceStats,
    MaskingVocab,
    create_instances_from_document,
)

P = 0.15
SEQ = 128
SIGMAS = 4


@pytest.fixture(scope="module")
def tokenizer(data_dir):
    return AlbertTokenizer(data_dir / "albert" / "30k-clean.model")


@pytest.fixture(scope="module")
def documents(data_dir, tokenizer):
    # One novel (about 105k tokens) is enough for every tolerance below to be a few percent.
    path = data_dir / "corpus" / "gutenberg" / "austen-persuasion.txt"
    docs = [[s for s in tokenizer.encode_batch(d, num_threads=1) if s] for d in iter_documents([str(path)])]
    return [d for d in docs if d]


def _generate(documents, tokenizer, options, dupe_factor=3, seed=7):
    vocab = MaskingVocab.from_tokenizer(tokenizer)
    rng = random.Random(seed)
    stats = InstanceStats(options.ngram)
    generated = []  # (document index, instance)
    for _ in range(dupe_factor):
        for index, document in enumerate(documents):
            others = (
                documents[:index] + documents[index + 1 :]
                if not options.strict_sop or options.random_next_sentence
                else ()
            )
            for instance in create_instances_from_document(document, rng, vocab, options, others, stats):
                generated.append((index, instance))
    return generated, stats


@pytest.fixture(scope="module")
def uncapped(documents, tokenizer):
    return _generate(documents, tokenizer, InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=20))


def _original_tokens(instance):
    tokens = list(instance.input_ids)
    for position, token in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        tokens[position] = token
    return tokens


def _segments(instance, tokenizer):
    tokens = _original_tokens(instance)
    first_sep = tokens.index(tokenizer.sep_id)
    assert tokens[0] == tokenizer.cls_id and tokens[-1] == tokenizer.sep_id
    return tokens[1:first_sep], tokens[first_sep + 1 : -1]


def _as_text(ids):
    return "," + ",".join(map(str, ids)) + ","


def test_masked_fraction_is_masked_lm_prob_when_the_cap_does_not_bind(uncapped):
    generated, _ = uncapped
    n = len(generated)
    tokens = sum(len(i.input_ids) for _, i in generated)
    masked = sum(len(i.masked_lm_positions) for _, i in generated)
    budgets = [max(1, round(len(i.input_ids) * P)) for _, i in generated]
    assert all(b <= 20 for b in budgets)  # at length 128 the cap of 20 never binds
    short = [b - len(i.masked_lm_positions) for b, (_, i) in zip(budgets, generated)]
    assert min(short) >= 0
    # An instance masks fewer than its budget only when every word left is longer than the room
    # left: rare (a few per thousand) on real text.
    assert sum(s > 0 for s in short) <= 0.01 * n
    # Rounding each instance's budget moves it by at most 0.5 token: an exact bound, not a sample one.
    tolerance = (0.5 * n + sum(short)) / tokens
    assert abs(masked / tokens - P) <= tolerance, (masked / tokens, tolerance)
    assert tolerance < 0.01


def test_masked_count_is_the_cap_when_it_binds(documents, tokenizer):
    cap = 6  # binds from 37 tokens on
    generated, _ = _generate(
        documents, tokenizer, InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=cap), dupe_factor=1
    )
    bound = [i for _, i in generated if round(len(i.input_ids) * P) > cap]
    assert len(bound) > 500  # enough instances where the cap binds for the 1% below to mean something
    at_cap = sum(len(i.masked_lm_positions) == cap for i in bound)
    assert at_cap >= 0.99 * len(bound)
    assert all(len(i.masked_lm_positions) <= cap for _, i in generated)


def test_ngram_lengths_follow_one_over_n(uncapped):
    _, stats = uncapped
    draws = stats.ngram_draws[1:]
    total = sum(draws)
    for n, count in enumerate(draws, start=1):
        expected = (1 / n) / (1 + 1 / 2 + 1 / 3)  # 6/11, 3/11, 2/11
        tolerance = SIGMAS * math.sqrt(expected * (1 - expected) / total)
        assert abs(count / total - expected) <= tolerance, (n, count / total, expected, tolerance)


def test_replacements_are_80_10_10(uncapped, tokenizer):
    generated, _ = uncapped
    counts = [0, 0, 0]
    for _, instance in generated:
        for position, original in zip(instance.masked_lm_positions, instance.masked_lm_ids):
            shown = instance.input_ids[position]
            counts[0 if shown == tokenizer.mask_id else 1 if shown == original else 2] += 1
    total = sum(counts)
    # A random replacement equal to the original (p = 1/29995) counts as kept: far below tolerance.
    for count, expected in zip(counts, (0.8, 0.1, 0.1)):
        tolerance = SIGMAS * math.sqrt(expected * (1 - expected) / total)
        assert abs(count / total - expected) <= tolerance, (counts, tolerance)


def test_sentence_order_labels_are_balanced(uncapped):
    generated, _ = uncapped
    n = len(generated)
    swapped = sum(i.next_sentence_label for _, i in generated)
    tolerance = SIGMAS * math.sqrt(0.25 / n)
    assert abs(swapped / n - 0.5) <= tolerance, (swapped / n, tolerance)


def test_pairs_are_consecutive_text_of_their_document_in_label_order(uncapped, documents, tokenizer):
    generated, _ = uncapped
    for index, instance in generated:
        first, second = _segments(instance, tokenizer)
        assert first and second
        text = _as_text([t for sentence in documents[index] for t in sentence])
        # Label 0: the first segment comes first in the document; 1: the second one does.
        earlier, later = (first, second) if instance.next_sentence_label == 0 else (second, first)
        start = text.find(_as_text(earlier))
        assert start >= 0, "a segment is not text of its own document"
        end = start + len(_as_text(earlier)) - 1
        assert text.find(_as_text(later), end) >= 0, "the segments are not in the labelled order"


def test_no_special_or_padding_position_is_masked(uncapped, tokenizer):
    generated, _ = uncapped
    specials = {tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id}
    for _, instance in generated:
        tokens = _original_tokens(instance)
        assert len(tokens) <= SEQ
        for position in instance.masked_lm_positions:
            assert 0 < position < len(tokens) and tokens[position] not in specials
        assert instance.masked_lm_positions == sorted(set(instance.masked_lm_positions))


def release_word_start(piece: str) -> bool:
    """The release's `_is_start_piece_sp`, restated: ▁ or <unk>, one punctuation character, or
    any character besides English letters and that punctuation (which lacks ' < = >)."""
    punctuation = set("!\"#$%&()*+,-./:;?@[\\]^_`{|}~")
    letters = set("abcdefghijklmnopqrstuvwxyz")
    if piece[0] in (SPIECE_UNDERLINE, "<") or piece in punctuation:
        return True
    return any(c.lower() not in letters | punctuation for c in piece)


def test_whole_words_are_masked_whole(uncapped, tokenizer):
    generated, _ = uncapped
    partial = multi_piece_masked = 0
    for _, instance in generated:
        tokens = _original_tokens(instance)
        pieces = tokenizer.convert_ids_to_tokens(tokens)
        masked = set(instance.masked_lm_positions)
        words, previous_special = [], True
        for position, piece in enumerate(pieces):
            if tokens[position] in (tokenizer.cls_id, tokenizer.sep_id):
                previous_special = True
                continue
            # The release's rule, restated: a piece after [SEP] that starts no word joins the last
            # word of A (only [CLS] opens the first word unconditionally).
            if not words or release_word_start(piece):
                words.append([position])
            else:
                words[-1].append(position)
            previous_special = False
        for word in words:
            hit = sum(p in masked for p in word)
            partial += 0 < hit < len(word)
            multi_piece_masked += hit == len(word) > 1
    assert partial == 0
    assert multi_piece_masked > 100  # the property was exercised, not vacuous


def test_single_sentence_chunks_stay_in_their_document_unless_asked(data_dir, tokenizer):
    # wikitext read as sentence_per_line makes every paragraph a one-"sentence" document.
    path = data_dir / "corpus" / "wikitext-2-raw" / "wiki.valid.raw"
    docs = [[s for s in tokenizer.encode_batch(d, num_threads=1) if s] for d in iter_documents([str(path)])][:300]
    strict, stats = _generate(docs, tokenizer, InstanceOptions(max_seq_length=64), dupe_factor=1)
    assert stats.single_sentence_splits > 0
    legacy, _ = _generate(docs, tokenizer, InstanceOptions(max_seq_length=64, strict_sop=False), dupe_factor=1)

    def foreign(generated):
        count = 0
        for index, instance in generated:
            first, second = _segments(instance, tokenizer)
            text = _as_text([t for s in docs[index] for t in s])
            count += text.find(_as_text(first)) < 0 or text.find(_as_text(second)) < 0
        return count

    assert foreign(strict) == 0
    # The original's behaviour: single-sentence chunks get a random-document B, always labelled 1.
    legacy_foreign = [i for index, i in legacy if foreign([(index, i)])]
    assert len(legacy_foreign) > 0.5 * len(legacy)
    assert all(i.next_sentence_label == 1 for i in legacy_foreign)


def test_next_sentence_prediction_mode_pairs_random_documents(documents, tokenizer):
    options = InstanceOptions(max_seq_length=SEQ, random_next_sentence=True)
    generated, _ = _generate(documents, tokenizer, options, dupe_factor=1)
    in_order = [(index, i) for index, i in generated if i.next_sentence_label == 0]
    random_next = [(index, i) for index, i in generated if i.next_sentence_label == 1]
    assert len(in_order) > 200 and len(random_next) > 200
    for index, instance in in_order:  # label 0: the actual next text, never swapped
        first, second = _segments(instance, tokenizer)
        text = _as_text([t for s in documents[index] for t in s])
        start = text.find(_as_text(first))
        assert start >= 0 and text.find(_as_text(second), start + len(_as_text(first)) - 1) >= 0
    foreign = 0
    for index, instance in random_next:
        _, second = _segments(instance, tokenizer)
        foreign += _as_text([t for s in documents[index] for t in s]).find(_as_text(second)) < 0
    # A random B can only be found in its own document when the same words occur there too: rare.
    assert foreign >= 0.95 * len(random_next)
