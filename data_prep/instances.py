"""Pretraining instances: segmentation into sentence-order pairs and n-gram whole-word masking.

This follows the original ALBERT `create_pretraining_data.py` (ALBERT.md §3) step for step, with
its reproducibility bugs fixed: every random choice, the n-gram length included, comes from the one
`random.Random` passed in, so a seed fixes the output. Everything works on SentencePiece ids.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple, Sequence

from albert_tf.tokenizers.tokenizer import SPIECE_UNDERLINE, AlbertTokenizer, check_seq_length, truncate_pair_lengths

Document = Sequence[Sequence[int]]  # sentences of piece ids


MAX_SEQ_LENGTH = 8192  # far above any ALBERT's max_position_embeddings (512 in the released configs)


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How documents become instances (the original's flags, with its defaults).

    `strict_sop`: a chunk holding a single sentence is split inside that sentence, at a word
    boundary, so it still makes a sentence-order pair; the original paired it with a random document
    and labelled it 1 even in SOP mode (its issue 234). False restores that behaviour.
    `random_next_sentence`: BERT's next-sentence prediction instead of SOP (for ablations).
    `words_end_at_sep`: a piece right after [SEP] always starts a new word. The original lets a
    piece that does not start a word (B cut at its front by truncation) join the last word of A
    across the [SEP]; False (the default) keeps that behaviour.
    """

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    short_seq_prob: float = 0.1
    random_next_sentence: bool = False
    strict_sop: bool = True
    words_end_at_sep: bool = False

    def __post_init__(self):
        check_seq_length(self.max_seq_length)
        if self.max_seq_length > MAX_SEQ_LENGTH:
            # Every record is padded to this length: 100000 made 109 MB of records from 38 KB of text.
            raise ValueError(f"max_seq_length must be at most {MAX_SEQ_LENGTH} (the released models read 512 "
                             f"positions), got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if self.ngram < 1:
            raise ValueError(f"ngram must be at least 1, got {self.ngram}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")

    def ngram_cumulative(self) -> list[float]:
        """Unnormalised cumulative p(n) ∝ 1/n (reversed unless favouring shorter n-grams)."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights.reverse()
        return list(itertools.accumulate(weights))


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """The ids masking and layout need, taken from a tokenizer once (workers get a copy)."""

    cls_id: int
    sep_id: int
    mask_id: int
    word_start: bytes  # per id: 1 if a word starts at the piece (the release's rule, see AlbertTokenizer)
    replacement_ids: tuple[int, ...]  # ids a token may be replaced with: every non-special piece
    # per id: 1 if the piece begins with "▁" (a word of the text starts there): where strict SOP may
    # split a one-sentence chunk; None: word_start
    space_start: bytes | None = None

    @classmethod
    def from_tokenizer(cls, tokenizer: AlbertTokenizer) -> "MaskingVocab":
        special = {tokenizer.pad_id, tokenizer.unk_id}
        replacement = tuple(i for i in range(tokenizer.vocab_size) if i not in special and not tokenizer.is_control(i))
        return cls(
            cls_id=tokenizer.cls_id,
            sep_id=tokenizer.sep_id,
            mask_id=tokenizer.mask_id,
            word_start=bytes(tokenizer.word_start_flags()),
            replacement_ids=replacement,
            space_start=bytes(
                p.startswith(SPIECE_UNDERLINE) for p in tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
            ),
        )


class TrainingInstance(NamedTuple):
    """One example before padding: `input_ids` already holds the masked tokens."""

    input_ids: list[int]
    segment_ids: list[int]
    token_boundary: list[int]
    masked_lm_positions: list[int]
    masked_lm_ids: list[int]
    next_sentence_label: int


class InstanceStats:
    """Counters for the summary and the statistical tests (cheap enough to keep always)."""

    def __init__(self, ngram: int = 3):
        self.instances = 0
        self.tokens = 0
        self.masked = 0
        self.labels = [0, 0]
        self.replacements = [0, 0, 0]  # [MASK], kept, random id
        # n-gram lengths drawn (before a span is cut short by the sequence end or the budget)
        self.ngram_draws = [0] * (ngram + 1)
        self.single_sentence_splits = 0

    def merge(self, other: "InstanceStats | dict") -> None:
        other = other if isinstance(other, dict) else other.to_dict()
        self.instances += other["instances"]
        self.tokens += other["tokens"]
        self.masked += other["masked_tokens"]
        self.labels = [a + b for a, b in zip(self.labels, other["labels"])]
        self.replacements = [a + b for a, b in zip(self.replacements, other["replacements"])]
        self.ngram_draws = [a + b for a, b in zip(self.ngram_draws, other["ngram_draws"])]
        self.single_sentence_splits += other["single_sentence_splits"]

    def to_dict(self) -> dict:
        return {
            "instances": self.instances,
            "tokens": self.tokens,
            "masked_tokens": self.masked,
            "labels": list(self.labels),
            "replacements": list(self.replacements),
            "ngram_draws": list(self.ngram_draws),
            "single_sentence_splits": self.single_sentence_splits,
        }


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng) -> None:
    """Cuts the longer list one token at a time, at its front or back at random (in place).

    Which list loses how many tokens follows from the lengths alone (the longer one, B on ties),
    so each list's cuts are counted first and its front/back choices drawn as one random bit each,
    all at once: the same distribution as a token-by-token loop, without its cost on long text.
    """
    kept_a, kept_b = truncate_pair_lengths(len(tokens_a), len(tokens_b), max_num_tokens)
    for tokens, kept in ((tokens_a, kept_a), (tokens_b, kept_b)):
        cut = len(tokens) - kept
        if cut:
            front = rng.getrandbits(cut).bit_count()
            tokens[:] = tokens[front : len(tokens) - (cut - front)]


def create_instances_from_document(
    document: Document,
    rng,
    vocab: MaskingVocab,
    options: InstanceOptions,
    other_documents: Sequence[Document] = (),
    stats: InstanceStats | None = None,
) -> list[TrainingInstance]:
    """Splits one document into `[CLS] A [SEP] B [SEP]` instances and masks them.

    Sentences are gathered until a target length (shorter with probability short_seq_prob), the
    chunk is cut at a random sentence boundary, and A and B swap places with probability 0.5
    (label 1). `other_documents` supplies random B segments for NSP mode and for the original's
    single-sentence behaviour; when it is empty those cases fall back to the strict SOP split.
    """
    max_num_tokens = options.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    chunk: list[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        sentence = document[i]
        chunk.append(sentence)
        chunk_length += len(sentence)
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            pair = _split_chunk(chunk, target_seq_length, rng, vocab, options, other_documents, stats)
            if pair is not None:
                tokens_a, tokens_b, label, unused_sentences = pair
                i -= unused_sentences
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                instances.append(_make_instance(tokens_a, tokens_b, label, rng, vocab, options, stats))
            chunk = []
            chunk_length = 0
        i += 1
    return instances


def _split_chunk(chunk, target_seq_length, rng, vocab, options, other_documents, stats):
    """(A, B, label, sentences to put back) for one chunk, or None when it cannot make a pair."""
    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
    single = len(chunk) == 1
    if options.random_next_sentence:
        wants_random = single or rng.random() < 0.5
    else:
        wants_random = single and not options.strict_sop
    if wants_random and len(other_documents) > 0:
        tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
        target_b_length = target_seq_length - len(tokens_a)
        random_document = other_documents[rng.randrange(len(other_documents))]
        tokens_b: list[int] = []
        for sentence in random_document[rng.randrange(len(random_document)) :]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b_length:
                break
        # The B sentences of this chunk were not used: the next chunk starts with them.
        return tokens_a, tokens_b, 1, len(chunk) - a_end
    if single:
        sentence = chunk[0]
        # At a space between words: the release's broader word starts would cut before a final
        # "." and make one-piece segments.
        starts = vocab.word_start if vocab.space_start is None else vocab.space_start
        cuts = [k for k in range(1, len(sentence)) if starts[sentence[k]]]
        if not cuts:
            return None
        k = cuts[rng.randrange(len(cuts))]
        tokens_a, tokens_b = list(sentence[:k]), list(sentence[k:])
        if stats is not None:
            stats.single_sentence_splits += 1
    else:
        tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
        tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
    if not options.random_next_sentence and rng.random() < 0.5:
        return tokens_b, tokens_a, 1, 0
    return tokens_a, tokens_b, 0, 0


def _make_instance(tokens_a, tokens_b, label, rng, vocab, options, stats) -> TrainingInstance:
    tokens = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    word_start = vocab.word_start
    token_boundary = [word_start[t] for t in tokens]
    token_boundary[0] = 1
    token_boundary[len(tokens_a) + 1] = 1
    token_boundary[-1] = 1
    masked_tokens, positions, labels = create_masked_lm_predictions(tokens, token_boundary, rng, vocab, options, stats)
    if stats is not None:
        stats.instances += 1
        stats.tokens += len(tokens)
        stats.masked += len(positions)
        stats.labels[label] += 1
    return TrainingInstance(masked_tokens, segment_ids, token_boundary, positions, labels, label)


def create_masked_lm_predictions(
    tokens: list[int],
    token_boundary: list[int],
    rng,
    vocab: MaskingVocab,
    options: InstanceOptions,
    stats: InstanceStats | None = None,
) -> tuple[list[int], list[int], list[int]]:
    """Masks whole-word n-grams; returns (masked tokens, sorted positions, original ids there).

    As the original: words are runs of pieces from a word-start piece (`token_boundary`) to the
    next, [CLS] and [SEP] left out. Budget: round(len(tokens) * masked_lm_prob), at least 1, at most
    max_predictions_per_seq. Words are visited in random order; from each an n-gram length is drawn
    with p(n) ∝ 1/n over 1..ngram, and the span is cut short where the words run out (near the end
    of the sequence p(n) is not re-weighted). A span that would overshoot the budget is shortened,
    and skipped if even one word does not fit or it overlaps one already masked.
    """
    output = list(tokens)
    if options.masked_lm_prob == 0:
        return output, [], []
    cls_id, sep_id = vocab.cls_id, vocab.sep_id
    whole_words = options.do_whole_word_mask
    bounded = options.words_end_at_sep
    words: list[list[int]] = []
    after_special = False
    for i, t in enumerate(tokens):
        if t == cls_id or t == sep_id:
            after_special = True
            continue
        if whole_words and words and not token_boundary[i] and not (bounded and after_special):
            words[-1].append(i)
        else:
            words.append([i])
        after_special = False
    num_words = len(words)

    budget = min(options.max_predictions_per_seq, max(1, int(round(len(tokens) * options.masked_lm_prob))))
    cumulative = options.ngram_cumulative()
    total_weight = cumulative[-1]
    # Candidates in random order, drawn lazily (a Fisher-Yates shuffle stopped early): the budget is
    # usually met after a dozen words, and shuffling all of them dominated the run time.
    order = list(range(num_words))
    random_float = rng.random
    covered = bytearray(len(tokens))
    positions: list[int] = []
    for k in range(num_words):
        if len(positions) >= budget:
            break
        j = k + int(random_float() * (num_words - k))
        order[k], order[j] = order[j], order[k]
        start = order[k]
        draw = random_float() * total_weight
        n = 1
        while n < len(cumulative) and draw >= cumulative[n - 1]:
            n += 1
        if stats is not None:
            stats.ngram_draws[n] += 1
        room = budget - len(positions)
        while n > 1 and sum(len(w) for w in words[start : start + n]) > room:
            n -= 1
        chosen = [p for w in words[start : start + n] for p in w]
        if len(chosen) > room or any(covered[p] for p in chosen):
            continue
        for p in chosen:
            covered[p] = 1
            positions.append(p)
            if random_float() < 0.8:
                output[p] = vocab.mask_id
                kind = 0
            elif random_float() < 0.5:
                kind = 1
            else:
                output[p] = vocab.replacement_ids[int(random_float() * len(vocab.replacement_ids))]
                kind = 2
            if stats is not None:
                stats.replacements[kind] += 1
    positions.sort()
    return output, positions, [tokens[p] for p in positions]


def instance_features(instance: TrainingInstance, options: InstanceOptions) -> dict[str, list]:
    """The padded feature lists of `albert_tf.data.features.pretraining_feature_spec`."""
    seq_pad = options.max_seq_length - len(instance.input_ids)
    pred_pad = options.max_predictions_per_seq - len(instance.masked_lm_positions)
    if seq_pad < 0 or pred_pad < 0:
        raise ValueError("instance longer than max_seq_length or max_predictions_per_seq")
    n = len(instance.input_ids)
    return {
        "input_ids": instance.input_ids + [0] * seq_pad,
        "input_mask": [1] * n + [0] * seq_pad,
        "segment_ids": instance.segment_ids + [0] * seq_pad,
        "token_boundary": instance.token_boundary + [0] * seq_pad,
        "masked_lm_positions": instance.masked_lm_positions + [0] * pred_pad,
        "masked_lm_ids": instance.masked_lm_ids + [0] * pred_pad,
        "masked_lm_weights": [1.0] * len(instance.masked_lm_positions) + [0.0] * pred_pad,
        "next_sentence_labels": [instance.next_sentence_label],
    }
