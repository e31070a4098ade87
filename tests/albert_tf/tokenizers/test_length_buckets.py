"""The lengths batches are padded to: powers of two, or finer steps within each octave."""

import math

import pytest

from albert_tf.tokenizers.length_buckets import bucket_length, bucket_lengths


def test_powers_of_two_then_the_maximum():
    assert bucket_lengths(512) == (16, 32, 64, 128, 256, 512)
    assert bucket_lengths(200) == (16, 32, 64, 128, 200)
    assert bucket_lengths(10) == (10,)


def test_steps_within_each_octave():
    assert bucket_lengths(512, steps_per_octave=2) == (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
    assert bucket_lengths(100, steps_per_octave=4) == (16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 100)
    assert bucket_lengths(512, steps_per_octave=1) == bucket_lengths(512)


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_a_row_is_padded_by_at_most_one_step_of_its_octave(steps):
    lengths = bucket_lengths(512, steps_per_octave=steps)
    assert list(lengths) == sorted(set(lengths)) and lengths[-1] == 512
    worst = max(bucket_length(n, lengths) / n for n in range(16, 513))
    # The worst row is a power of two plus one (257 -> 256 + ceil(256 / steps)): just under 1 + 1/steps.
    assert worst == pytest.approx((256 + math.ceil(256 / steps)) / 257)
    assert 1 + 1 / steps - 0.01 < worst < 1 + 1 / steps


def test_bad_steps_are_refused():
    with pytest.raises(ValueError, match="steps_per_octave must be a positive integer, got 0"):
        bucket_lengths(512, steps_per_octave=0)
