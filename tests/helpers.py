"""Helpers that more than one test module uses (import them from here, not from another test)."""

import numpy as np

FILLER = "the a of house river king night long old little man came went saw there".split()


def good_bad_sentences(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """`n` sentences of filler words with "good" (label 1) or "bad" (label 0) somewhere in them: a
    task a tiny classifier learns in seconds."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        label = int(rng.integers(0, 2))
        words = list(rng.choice(FILLER, size=5))
        words.insert(int(rng.integers(0, 6)), "good" if label else "bad")
        texts.append(" ".join(words).capitalize() + ".")
        labels.append(label)
    return texts, np.array(labels)
