"""Unit behaviour of segmentation, truncation and masking on small hand-made inputs."""

import dataclasses
import math
import random

import pytest

from albert_tf.tokenizers.tokenizer import truncate_pair_lengths
from data_prep.instances import (
    InstanceOptions,
    MaskingVocab,
    create_instances_from_document,
    create_masked_lm_predictions,
    instance_features,
    truncate_seq_pair,
)

# ids: 0 pad, 1 unk, 2 [CLS], 3 [SEP], 4 [MASK]; even ids >= 10 start a word, odd ids continue one.
WORD_START = bytes(1 if i >= 10 and i % 2 == 0 else 0 for i in range(100))
VOCAB = MaskingVocab(cls_id=2, sep_id=3, mask_id=4, word_start=WORD_START, replacement_ids=tuple(range(5, 100)))


def test_truncation_cuts_the_longer_list_at_both_ends_at_random():
    rng = random.Random(0)
    fronts = cuts = 0
    for trial in range(400):
        a, b = list(range(100, 130)), list(range(200, 210))
        truncate_seq_pair(a, b, 25, rng)
        assert (len(a), len(b)) == truncate_pair_lengths(30, 10, 25) == (15, 10)
        assert b == list(range(200, 210))
        assert a == list(range(a[0], a[0] + 15))  # a contiguous slice of the original
        fronts += a[0] - 100
        cuts += 15
    # Each cut token is at the front with probability 1/2: 4 standard deviations of 6,000 cuts.
    assert abs(fronts / cuts - 0.5) <= 4 * math.sqrt(0.25 / cuts)


def test_truncation_leaves_short_pairs_alone():
    a, b = [1, 2], [3]
    truncate_seq_pair(a, b, 3, random.Random(0))
    assert (a, b) == ([1, 2], [3])


def test_masking_budget_and_whole_words():
    # [CLS] w(10,11,13) w(12) w(14,15) [SEP] w(16) w(18,19) [SEP]: 12 tokens, budget round(12 * 0.3) = 4
    tokens = [2, 10, 11, 13, 12, 14, 15, 3, 16, 18, 19, 3]
    boundary = [1] + [WORD_START[t] for t in tokens[1:-1]] + [1]
    options = InstanceOptions(max_seq_length=16, max_predictions_per_seq=5, masked_lm_prob=0.3)
    words = [{1, 2, 3}, {4}, {5, 6}, {8}, {9, 10}]
    for seed in range(50):
        _, positions, labels = create_masked_lm_predictions(tokens, boundary, random.Random(seed), VOCAB, options)
        assert len(positions) == round(len(tokens) * 0.3) == 4
        assert labels == [tokens[p] for p in positions]
        masked = set(positions)
        assert all(word <= masked or not word & masked for word in words), positions


def test_masking_piece_by_piece_when_whole_words_are_off():
    tokens = [2, 10, 11, 13, 11, 13, 3, 11, 13, 3]
    boundary = [1, 1, 0, 0, 0, 0, 1, 0, 0, 1]
    options = InstanceOptions(max_seq_length=16, masked_lm_prob=0.5, do_whole_word_mask=False, ngram=1)
    seen = set()
    for seed in range(100):
        _, positions, _ = create_masked_lm_predictions(tokens, boundary, random.Random(seed), VOCAB, options)
        assert len(positions) == 5
        seen.update(positions)
    assert seen == {1, 2, 3, 4, 5, 7, 8}  # every non-special position, never 0, 6 or 9


def test_ngram_length_near_the_end_keeps_one_over_n_and_cuts_the_span():
    """[CLS] w1 w2 [SEP], budget 3, ngram 3. When w2 (the last word) is visited first it is masked
    alone; then w1 draws n: n = 1 masks it, n >= 2 reaches the masked w2 and is skipped. As the
    release draws n from p(n) ∝ 1/n whatever the words left, w1 is skipped with 1/2 + 1/3 out of
    11/6, so one word alone ends masked with probability 1/2 * 5/11 (re-weighting p(n) over the
    lengths that fit would give 1/2 * 1/3)."""
    options = InstanceOptions(max_seq_length=8, masked_lm_prob=0.75, ngram=3)
    tokens, boundary = [2, 10, 12, 3], [1, 1, 1, 1]
    rng = random.Random(11)
    trials = 20_000
    alone = sum(len(create_masked_lm_predictions(tokens, boundary, rng, VOCAB, options)[1]) == 1
                for _ in range(trials))
    expected = 0.5 * 5 / 11
    assert abs(alone / trials - expected) <= 4 * math.sqrt(expected * (1 - expected) / trials)


def test_a_piece_after_sep_that_starts_no_word_joins_the_last_word_of_a_unless_asked():
    # [CLS] 10 11 [SEP] 13 [SEP]: B starts with a continuing piece (front-truncated), which the
    # release joins to A's last word: one word of 3 pieces, too long for a budget of 2.
    tokens, boundary = [2, 10, 11, 3, 13, 3], [1, 1, 0, 1, 0, 1]
    release = InstanceOptions(max_seq_length=8, max_predictions_per_seq=2, masked_lm_prob=0.5)
    bounded = dataclasses.replace(release, words_end_at_sep=True)
    for seed in range(20):
        assert create_masked_lm_predictions(tokens, boundary, random.Random(seed), VOCAB, release)[1] == []
        _, positions, _ = create_masked_lm_predictions(tokens, boundary, random.Random(seed), VOCAB, bounded)
        assert positions in ([1, 2], [4])


def test_no_masking_when_the_probability_is_zero():
    tokens = [2, 10, 3, 12, 3]
    out, positions, labels = create_masked_lm_predictions(
        tokens, [1, 1, 1, 1, 1], random.Random(0), VOCAB, InstanceOptions(masked_lm_prob=0.0)
    )
    assert (out, positions, labels) == (tokens, [], [])


def test_instances_are_padded_to_the_schema_lengths():
    document = [[10, 11, 12], [14, 16, 17], [18, 20, 22, 23], [24, 26]]
    options = InstanceOptions(max_seq_length=12, max_predictions_per_seq=4, short_seq_prob=0.0)
    instances = create_instances_from_document(document, random.Random(5), VOCAB, options)
    assert instances
    for instance in instances:
        features = instance_features(instance, options)
        assert {k: len(v) for k, v in features.items()} == {
            "input_ids": 12,
            "input_mask": 12,
            "segment_ids": 12,
            "token_boundary": 12,
            "masked_lm_positions": 4,
            "masked_lm_ids": 4,
            "masked_lm_weights": 4,
            "next_sentence_labels": 1,
        }
        n = len(instance.input_ids)
        assert features["input_mask"] == [1] * n + [0] * (12 - n)
        assert sum(features["masked_lm_weights"]) == len(instance.masked_lm_positions)


def test_options_are_validated():
    with pytest.raises(ValueError, match="max_seq_length must be at least 5"):
        InstanceOptions(max_seq_length=4)
    with pytest.raises(ValueError, match=r"masked_lm_prob must be in \[0, 1\], got 1.5"):
        InstanceOptions(masked_lm_prob=1.5)
