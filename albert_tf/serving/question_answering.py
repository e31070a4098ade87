"""The span labeler's SavedModel (SQuAD's, and a Hugging Face AlbertForQuestionAnswering's): it
answers raw (question, context) strings, windowing inside the graph.

`export_recorded` is the export map's entry (`albert_tf.serving.task_exports`: albert-export of
any source holding a span labeler or SQuAD v2.0's answerability head, albert-finetune-squad
--export): the settings a SQuAD run records in its task.json (`QA_SETTINGS`), v2.0's null-score
threshold (the run's flag, else its evaluation's: `null_threshold`), the answer rule its source
records (`hf_heads.answer_rule`), the question-answering pipeline's defaults for a model of
transformers (`HF_DEFAULTS`). `export_squad`
writes a SavedModel whose `serve_text` signature takes `question` and `context`
string tensors [B] and returns, per pair:

- `answer_text` [B] string: the answer cut from the context ("" for a v2.0 "no answer" when the
  model was exported with a null threshold; "empty" when a v1.1 window held no span, as the
  release writes),
- `char_start`, `char_end` [B] int64: its characters (code points) `[start, end)` in the context,
- `score` [B] float32: start + end logit (v1.1) or log probability (v2.0) of the answer,
- `probability` [B] float32: the answer span's probability in the n-best list (the release's
  softmax over the scores of the `n_best_size` best distinct answer texts; 1 where there is no
  candidate span), what `nbest_predictions.json` gives offline,
- `top_k_text` [B, k] string, `top_k_probability` [B, k] float32, `top_k_char_start`,
  `top_k_char_end` [B, k] int64: the first k answers of that n-best list, best first (k set at
  export, default 5; "", 0 and -1 past the end of a shorter list); the first is `answer_text`
  except where v2.0's threshold answered "",
- v2.0 only: `null_odds` [B] (the smallest answer-class logit over the windows) and
  `no_answer_probability` [B] (its sigmoid: the head's probability that the question has no
  answer in its most answerable window).

A span labeler trained in transformers answers by its rule (`answer_rule="huggingface"`, what
`albert_tf.presets.hf_heads` records in the task.json of an `AlbertForQuestionAnswering`): the
question-answering pipeline's `select_starts_ends` (transformers v4's pipelines/question_answering.py,
kept in v5 by document_question_answering.py). Each window's start and end logits are a softmax
over its context pieces and [CLS]; a span's score is its start x end probability (`score`, and its
rank); the answer is widened to the whole words it touches (the pipeline's `align_to_words`, words
as transformers' ALBERT tokenizer makes them: `SquadServer._words`);
`no_answer_probability` is the smallest [CLS] start x end probability over the windows, and with
`handle_impossible_answer` the answer is "" (offsets 0, `score` that probability) where it is
higher than the best span's. Windows are cut as the release cuts them (`doc_stride` pieces between
starts; the pipeline overlaps windows by `doc_stride` and does not keep a piece to the window of its
maximum context), so the answers are the pipeline's for a context that fits one window.

Inside the graph the question keeps its first `max_query_length` pieces, the context is cut into
windows exactly as `finetune.squad.features` cuts it (stride, max-context rule), every window
runs through the model, and post-processing is the one of `finetune.squad.postprocess`: the
n-best list, its first answer the answer. The consumer needs only tensorflow and tensorflow_text.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from albert_tf.data.windows import ANSWER_RULES, HF_ANSWERS, RELEASE_ANSWERS, FeatureSettings
from albert_tf.presets import hf_heads
from albert_tf.serving import export
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.utils import ragged


def _release_first_piece(starts: tf.RaggedTensor, ends: tf.RaggedTensor):
    """Answer spans as the release maps a context's first piece: from the context's first character,
    a lone "▁" there up to the next piece (at least the first character); see
    `finetune.squad.features.release_answer_spans`, which also leaves out of a piece a character
    SentencePiece dropped before a space (not done here)."""
    (first,) = ragged.masked(starts.row_lengths() > 0, starts.row_starts())
    flat_starts, flat_ends = starts.flat_values, ends.flat_values
    following = tf.gather(tf.concat([flat_starts, [0]], axis=0), first + 1)
    rows = ragged.row_ids(starts.row_splits)
    has_following = tf.gather(tf.concat([rows, [-1]], axis=0), first + 1) == tf.gather(rows, first)
    empty = tf.gather(flat_starts, first) >= tf.gather(flat_ends, first)
    first_end = tf.where(empty, tf.maximum(tf.where(has_following, following, 0), 1), tf.gather(flat_ends, first))
    return (starts.with_flat_values(tf.tensor_scatter_nd_update(flat_starts, first[:, None], tf.zeros_like(first))),
            ends.with_flat_values(tf.tensor_scatter_nd_update(flat_ends, first[:, None], first_end)))


def _column(value, rows, dtype=tf.int64):
    return ragged.from_row_lengths(tf.fill([rows], tf.cast(value, dtype)), tf.ones([rows], tf.int64))


def word_pieces(model_proto: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Per piece id of a SentencePiece model (its serialized proto): whether it starts a word ("▁"
    first) and whether it is user-defined (transformers splits those off as added tokens)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
    user_defined = proto.SentencePiece.Type.USER_DEFINED
    return (np.array([p.piece.startswith("\u2581") for p in proto.pieces]),
            np.array([p.type == user_defined for p in proto.pieces]))


def word_bounds(input_ids, in_context, word_initial, user_defined):
    """Each position's word [R, T] (its first and its last position) in records `input_ids` [R, T]
    whose context pieces are `in_context` [R, T], by `word_pieces`'s tables. A word is what
    transformers' ALBERT tokenizer calls one (`token_to_word`): it starts at a piece that starts
    with "▁", at a user-defined piece of the SentencePiece model and after one; every position
    outside the context is a word of its own. Serving and the offline decoder
    (finetune.squad.postprocess) widen answers by it."""
    input_ids, in_context = tf.convert_to_tensor(input_ids), tf.convert_to_tensor(in_context, tf.bool)
    user = tf.gather(user_defined, input_ids)
    after = lambda t: tf.pad(t[:, :-1], [[0, 0], [1, 0]], constant_values=True)  # noqa: E731
    begins = tf.gather(word_initial, input_ids) | user | after(user) | ~in_context | after(~in_context)
    rows = tf.shape(input_ids, out_type=tf.int64)[0]
    length = tf.shape(input_ids, out_type=tf.int64)[1]
    key = tf.range(rows)[:, None] * length + tf.cumsum(tf.cast(begins, tf.int64), axis=1) - 1
    position = tf.broadcast_to(tf.range(length)[None], tf.shape(key))
    first = tf.math.unsorted_segment_min(position, key, rows * length)
    last = tf.math.unsorted_segment_max(position, key, rows * length)
    return tf.gather(first, key), tf.gather(last, key)


def hf_span_scores(start_logits, end_logits, p_mask, max_answer_length: int):
    """transformers' scores of the spans of records [R, T] (`select_starts_ends`): each record's
    start and end logits a log-softmax over its context and [CLS] (`p_mask` 0 there); every span of
    at most `max_answer_length` pieces starting after [CLS] (the pipeline's argmax is over all of
    them; the caller keeps those inside the window). Returns `starts`, `ends` [R, P] int64, their
    `start_scores`, `end_scores` [R, P] (log probabilities; a span's is their sum) and the null
    answer's [R] ([CLS]'s start + end). Serving and the offline decoder score by it."""
    masked = tf.convert_to_tensor(p_mask) == 1
    start_log_probs = tf.nn.log_softmax(tf.where(masked, -10000.0, tf.cast(start_logits, tf.float32)), axis=-1)
    end_log_probs = tf.nn.log_softmax(tf.where(masked, -10000.0, tf.cast(end_logits, tf.float32)), axis=-1)
    rows = tf.shape(start_log_probs, out_type=tf.int64)[0]
    length = start_log_probs.shape[1]
    width = min(max_answer_length, length)
    # [CLS] is the null answer, never a span's end (past the end: the last place, never context).
    first = tf.range(1, length, dtype=tf.int64)
    starts = tf.tile(tf.repeat(first, width)[None], [rows, 1])
    ends = tf.minimum(starts + tf.tile(tf.range(width, dtype=tf.int64), [length - 1])[None], length - 1)
    start_scores = tf.gather(start_log_probs, starts, batch_dims=1)
    end_scores = tf.gather(end_log_probs, ends, batch_dims=1)
    return starts, ends, start_scores, end_scores, start_log_probs[:, 0] + end_log_probs[:, 0]


class SquadServer(export.ServingModule):
    """Windows, model and post-processing of raw SQuAD questions in one graph (see the module):
    SQuAD's serving module (`albert_tf.serving.export.ServingModule`).

    Args:
        outputs_fn: the model on a dict of int32 [R, T] `input_ids`, `input_mask`,
            `segment_ids`, `p_mask` -> `start_logits`, `end_logits` (v1.1) or the v2.0 beam.
        tokenizer: the graph tokenizer.
        settings: how records are cut (`FeatureSettings`).
        version_2: whether `outputs_fn` is the v2.0 answerability head.
        n_best_size, max_answer_length: post-processing's settings.
        null_score_diff_threshold: v2.0: answer "" where the null odds reach it (None: never).
        top_k: the answers of the n-best list returned (`top_k_*`), at most `n_best_size`.
        answer_rule: the release's ("release") or transformers' pipeline's ("huggingface", a
            v1.1-style span head; see the module).
        handle_impossible_answer: "huggingface": answer "" where [CLS] scores above the best span.
    """

    def __init__(self, outputs_fn, tokenizer: AlbertGraphTokenizer, settings: FeatureSettings,
                 version_2: bool, n_best_size: int = 20, max_answer_length: int = 30,
                 null_score_diff_threshold: float | None = None, top_k: int = 5,
                 answer_rule: str = RELEASE_ANSWERS, handle_impossible_answer: bool = False):
        super().__init__()
        if not 1 <= top_k <= n_best_size:
            raise ValueError(f"top_k must be between 1 and n_best_size ({n_best_size}), got {top_k}")
        if answer_rule not in ANSWER_RULES:
            raise ValueError(f"answer_rule {answer_rule!r} is none of {list(ANSWER_RULES)}")
        if answer_rule == HF_ANSWERS and version_2:
            raise ValueError("transformers' answer rule reads a start and an end logit (AlbertForQuestionAnswering), "
                             "not the v2.0 answerability head's beam")
        if handle_impossible_answer and answer_rule != HF_ANSWERS:
            raise ValueError("handle_impossible_answer is transformers' null rule: v2.0's is null_score_diff_threshold")
        self._hf = answer_rule == HF_ANSWERS
        if self._hf:  # per piece id: does it start a word (see `word_bounds`)
            self._pieces = word_pieces(tf.io.read_file(tokenizer.model_asset.asset_path).numpy())
        self._handle_impossible_answer = handle_impossible_answer
        self._top_k = top_k
        self._outputs_fn = outputs_fn
        self._tokenizer = tokenizer
        self.vocab_file = tokenizer.model_asset
        self._settings = settings
        self._version_2 = version_2
        self._n_best_size = n_best_size
        self._max_answer_length = max_answer_length
        self._threshold = null_score_diff_threshold

    def stored(self):
        return {"max_seq_length": self._settings.max_seq_length}

    def signatures(self):
        """`serve_text` (question, context) -> answers; `serving_default` on the model's int32 inputs."""
        text_specs = (tf.TensorSpec([None], tf.string, name="question"),
                      tf.TensorSpec([None], tf.string, name="context"))
        input_specs = {k: tf.TensorSpec([None, None], tf.int32, name=k)
                       for k in ("input_ids", "input_mask", "segment_ids", "p_mask")}
        # The model traced once, called by both signatures (each tracing it cost an export a trace).
        outputs_fn = tf.function(lambda inputs: self._outputs_fn(inputs), autograph=False,
                                 input_signature=[input_specs])
        serve_text = tf.function(lambda question, context: self.answer(question, context, outputs_fn), autograph=False)
        serving_default = tf.function(lambda **inputs: outputs_fn(inputs), autograph=False)
        return {
            "serve_text": serve_text.get_concrete_function(*text_specs),
            "serving_default": serving_default.get_concrete_function(**input_specs),
        }

    def records(self, question, context):
        """The records of a batch of pairs, and for each: its example, char spans, max context."""
        s = self._settings
        length = s.max_seq_length
        tok = self._tokenizer
        question_ids = tf.cast(tok.tokenize(question), tf.int64)[:, : s.max_query_length]
        ids, starts, ends = tok.tokenize_with_offsets(context)
        ids = tf.cast(ids, tf.int64)
        starts, ends = _release_first_piece(starts, ends)
        batch = tf.shape(question, out_type=tf.int64)[0]
        len_q = question_ids.row_lengths()
        num_pieces = ids.row_lengths()
        max_pieces = length - len_q - 3
        step = tf.minimum(tf.constant(s.doc_stride, tf.int64), max_pieces)
        extra = tf.maximum(num_pieces - max_pieces, 0)
        num_windows = 1 + (extra + step - 1) // step
        example = ragged.lengths_row_ids(num_windows)
        window = tf.ragged.range(num_windows).flat_values
        rows = tf.shape(example, out_type=tf.int64)[0]
        window_start = window * tf.gather(step, example)
        window_length = tf.minimum(tf.gather(num_pieces, example) - window_start, tf.gather(max_pieces, example))
        piece = tf.ragged.range(window_start, window_start + window_length)  # [R, L] piece indices
        first = window_start + tf.gather(ids.row_starts(), example)
        flat = tf.ragged.range(first, first + window_length)  # [R, L] indices of ids.flat_values
        context_ids = tf.gather(ids.flat_values, flat)
        q = tf.gather(question_ids, example)
        zeros_q = tf.zeros_like(q)
        zeros_c = tf.zeros_like(context_ids)
        cls, sep = _column(tok.cls_id, rows), _column(tok.sep_id, rows)
        zero, minus = _column(0, rows), _column(-1, rows)
        # Max context: a piece's score in each window of its example; the first best window wins.
        windows_of = tf.gather(num_windows, example)
        max_windows = tf.maximum(tf.reduce_max(num_windows), 1)  # 1 for a batch of 0 (no window at all)
        other = tf.range(max_windows)[None, None, :]  # [1, 1, W]
        other_start = other * tf.gather(step, example)[:, None, None]
        other_length = tf.minimum(tf.gather(num_pieces, example)[:, None, None] - other_start,
                                  tf.gather(max_pieces, example)[:, None, None])
        p = piece.to_tensor(-1)[:, :, None]  # [R, L, 1]
        inside = (p >= other_start) & (p < other_start + other_length) & (other < windows_of[:, None, None])
        score = tf.cast(tf.minimum(p - other_start, other_start + other_length - 1 - p), tf.float64)
        score = tf.where(inside, score + 0.01 * tf.cast(other_length, tf.float64), -1e9)
        best_score = tf.reduce_max(score, axis=-1, keepdims=True)
        best = tf.reduce_min(tf.where(score >= best_score, other, max_windows), axis=-1)  # [R, L]
        own = tf.cast(best == window[:, None], tf.int64)
        own = ragged.from_tensor(own, piece.row_lengths())
        # Each record: [CLS] question [SEP] context [SEP].
        input_ids, segment_ids, in_window, char_starts, char_ends, max_context = ragged.concat_rows(
            [cls, q, sep, context_ids, sep],
            [zero, zeros_q, zero, zeros_c + 1, zero + 1],
            [zero, zeros_q, zero, zeros_c + 1, zero],
            [minus, zeros_q - 1, minus, tf.gather(starts.flat_values, flat), minus],
            [minus, zeros_q - 1, minus, tf.gather(ends.flat_values, flat), minus],
            [zero, zeros_q, zero, own, zero])

        shape = [None, length]
        positions = tf.range(length, dtype=tf.int64)[None]
        window_mask = in_window.to_tensor(0, shape=shape)
        features = {
            "input_ids": tf.cast(input_ids.to_tensor(0, shape=shape), tf.int32),
            "input_mask": tf.cast(tf.ones_like(input_ids).to_tensor(0, shape=shape), tf.int32),
            "segment_ids": tf.cast(segment_ids.to_tensor(0, shape=shape), tf.int32),
            "p_mask": tf.cast(tf.where(positions == 0, tf.zeros_like(window_mask), 1 - window_mask), tf.int32),
        }
        spans = {
            "example": example,
            "char_starts": char_starts.to_tensor(-1, shape=shape),
            "char_ends": char_ends.to_tensor(-1, shape=shape),
            "max_context": max_context.to_tensor(0, shape=shape),
        }
        return features, spans, batch

    def _span_text(self, context, char_start, char_end):
        """The answer texts [C] cut from `context` [C], stripped as Python strips (a lone "▁" piece
        at the end points past the spaces before it), with their stripped offsets."""
        text = tf.strings.substr(context, char_start, char_end - char_start, unit="UTF8_CHAR")
        whitespace = self._tokenizer._whitespace
        unpadded = tf.strings.regex_replace(text, "^" + whitespace, "")
        char_start += tf.cast(tf.strings.length(text, "UTF8_CHAR") - tf.strings.length(unpadded, "UTF8_CHAR"), tf.int64)
        text = tf.strings.regex_replace(unpadded, whitespace + "$", "")
        return text, char_start, char_start + tf.cast(tf.strings.length(text, "UTF8_CHAR"), tf.int64)

    def _nbest(self, context, spans, batch, starts, ends, start_scores, end_scores):
        """Every example's n-best list as `finetune.squad.postprocess` makes it: the valid (start,
        end) pairs [R, P] of its records sorted by score (ties: record, then pair order), the first
        `n_best_size` distinct texts kept, their probabilities a softmax of their scores. Returns
        the kept candidates, flat and by example then rank: `example`, `rank`, `text`,
        `char_start`, `char_end`, `score`, `probability`."""
        in_window = spans["char_starts"] >= 0
        valid = (
            tf.gather(in_window, starts, batch_dims=1)
            & tf.gather(in_window, ends, batch_dims=1)
            & (tf.gather(spans["max_context"], starts, batch_dims=1) == 1)
            & (ends >= starts)
            & (ends - starts + 1 <= self._max_answer_length)
        )
        where = tf.where(valid)  # [C, 2]: (record, pair), in record then pair order
        record = where[:, 0]
        start, end = tf.gather_nd(starts, where), tf.gather_nd(ends, where)
        score = tf.gather_nd(start_scores + end_scores, where)
        example = tf.gather(spans["example"], record)
        # Stable sorts: by score, then by example (records are in example order already).
        order = tf.argsort(score, direction="DESCENDING", stable=True)
        order = tf.gather(order, tf.argsort(tf.gather(example, order), stable=True))
        record, start, end, score, example = (tf.gather(t, order) for t in (record, start, end, score, example))
        if self._hf:  # the span widened to the whole words it touches (the pipeline's align_to_words)
            start = tf.gather_nd(spans["word_first"], tf.stack([record, start], 1))
            end = tf.gather_nd(spans["word_last"], tf.stack([record, end], 1))
        text, char_start, char_end = self._span_text(
            tf.gather(context, example),
            tf.gather_nd(spans["char_starts"], tf.stack([record, start], 1)),
            tf.gather_nd(spans["char_ends"], tf.stack([record, end], 1)))
        # An example's text is kept at its first (best) candidate only.
        keys, key = tf.unique(tf.strings.join([tf.strings.as_string(example), text], "\n"), out_idx=tf.int64)
        position = tf.range(tf.size(key, out_type=tf.int64))
        first = tf.math.unsorted_segment_min(position, key, tf.size(keys, out_type=tf.int64))
        distinct = tf.equal(tf.gather(first, key), position)
        example, text, char_start, char_end, score = ragged.masked(distinct, example, text, char_start, char_end, score)
        # A candidate's rank: its place after the first of its example's (examples are sorted).
        first_of_example = tf.searchsorted(example[None], example[None], out_type=tf.int64)[0]
        rank = tf.range(tf.size(example, out_type=tf.int64)) - first_of_example
        kept = rank < self._n_best_size
        example, rank, text, char_start, char_end, score = ragged.masked(
            kept, example, rank, text, char_start, char_end, score)
        exp = tf.exp(score - tf.gather(tf.math.unsorted_segment_max(score, example, batch), example))
        probability = exp / tf.gather(tf.math.unsorted_segment_sum(exp, example, batch), example)
        return {"example": example, "rank": rank, "text": text, "char_start": char_start, "char_end": char_end,
                "score": score, "probability": probability}

    def _top(self, nbest, batch, fills):
        """`nbest[name]` as [batch, top_k] by (example, rank), `fill` where an example has fewer,
        for each `name: fill` of `fills`."""
        k = self._top_k
        indices, *values = ragged.masked(nbest["rank"] < k, tf.stack([nbest["example"], nbest["rank"]], 1),
                                         *(nbest[name] for name in fills))
        shape = tf.stack([batch, tf.constant(k, tf.int64)])
        return {name: tf.tensor_scatter_nd_update(tf.fill(shape, fill), indices, value)
                for (name, fill), value in zip(fills.items(), values)}

    @staticmethod
    def _checked(question, context):
        """The inputs, once their sizes agree (one context for each question), else one clear error."""
        sizes = [tf.shape(question)[0], tf.shape(context)[0]]
        same = tf.debugging.Assert(tf.equal(sizes[0], sizes[1]), [tf.strings.format(
            "SQuAD serve_text got {} questions and {} contexts: give one context for each question", sizes)])
        with tf.control_dependencies([same]):
            return tf.identity(question), tf.identity(context)

    def answer(self, question, context, outputs_fn=None):
        """The outputs of `serve_text` (see the module) for `question` and `context` [B]; `outputs_fn`:
        the model's function (the one given to the constructor where None)."""
        question = tf.convert_to_tensor(question, tf.string)
        context = tf.convert_to_tensor(context, tf.string)
        question, context = self._checked(question, context)
        features, spans, batch = self.records(question, context)
        # A context of no piece (empty, or only spaces) holds no answer: "" (v2.0: no answer).
        empty = tf.equal(tf.math.unsorted_segment_max(tf.reduce_max(spans["char_starts"], axis=1), spans["example"],
                                                      batch), -1)
        outputs = (self._outputs_fn if outputs_fn is None else outputs_fn)(features)
        length = self._settings.max_seq_length
        if not self._version_2:  # the records' length (a function traced for any length gives [R, None])
            outputs = {k: tf.ensure_shape(outputs[k], [None, length]) for k in ("start_logits", "end_logits")}
        if self._version_2:
            k = tf.shape(outputs["start_top_index"])[1]
            e = tf.shape(outputs["end_top_index"])[1] // k
            starts = tf.cast(tf.repeat(outputs["start_top_index"], e, axis=1), tf.int64)
            start_scores = tf.repeat(outputs["start_top_log_probs"], e, axis=1)
            ends = tf.cast(outputs["end_top_index"], tf.int64)
            end_scores = outputs["end_top_log_probs"]
        elif self._hf:
            spans["word_first"], spans["word_last"] = word_bounds(features["input_ids"], spans["char_starts"] >= 0,
                                                                  *self._pieces)
            starts, ends, start_scores, end_scores, null_log_probs = hf_span_scores(
                outputs["start_logits"], outputs["end_logits"], features["p_mask"], self._max_answer_length)
        else:
            n = min(self._n_best_size, length)
            top_starts = tf.math.top_k(outputs["start_logits"], k=n).indices
            top_ends = tf.math.top_k(outputs["end_logits"], k=n).indices
            starts = tf.cast(tf.repeat(top_starts, n, axis=1), tf.int64)
            ends = tf.cast(tf.tile(top_ends, [1, n]), tf.int64)
            start_scores = tf.gather(outputs["start_logits"], starts, batch_dims=1)
            end_scores = tf.gather(outputs["end_logits"], ends, batch_dims=1)
        nbest = self._nbest(context, spans, batch, starts, ends, start_scores, end_scores)
        found = tf.math.unsorted_segment_sum(tf.ones_like(nbest["rank"]), nbest["example"], batch) > 0
        zero, none = tf.constant(0, tf.int64), tf.constant(-1, tf.int64)
        # The n-best's first k, once; the answer is their first column.
        top = self._top(nbest, batch, {"text": "", "char_start": none, "char_end": none, "probability": 0.0,
                                       "score": 0.0})
        text = top["text"][:, 0]
        char_start = tf.where(found, top["char_start"][:, 0], zero)
        char_end = tf.where(found, top["char_end"][:, 0], zero)
        score = top["score"][:, 0]
        result = {"char_start": char_start, "char_end": char_end}
        if self._version_2:
            null_odds = tf.math.unsorted_segment_min(outputs["cls_logits"], spans["example"], batch)
            null_odds = tf.where(empty, float("inf"), null_odds)
            score = tf.where(found, score, -2e6)
            top_text = text
            if self._threshold is not None:
                text = tf.where(null_odds < self._threshold, text, "")
            result.update(null_odds=null_odds, no_answer_probability=tf.sigmoid(null_odds))
        elif self._hf:
            # The pipeline's min_null_score: the smallest [CLS] start x end probability of the windows.
            null = tf.exp(tf.math.unsorted_segment_min(null_log_probs, spans["example"], batch))
            score = tf.where(found, tf.exp(score), 0.0)
            text = top_text = tf.where(found, text, "")
            if self._handle_impossible_answer:
                no_answer = null > score
                text = tf.where(no_answer, "", text)
                char_start, char_end = tf.where(no_answer, zero, char_start), tf.where(no_answer, zero, char_end)
                score = tf.where(no_answer, null, score)
                result.update(char_start=char_start, char_end=char_end)
            result.update(no_answer_probability=null)
        else:
            text = tf.where(found, text, tf.where(empty, "", "empty"))
            top_text = text
        # The n-best's first k; an example without a candidate has the release's one ("empty", or
        # "" for v2.0 and an empty context) of probability 1, as the offline n-best list has.
        alone = (tf.range(self._top_k) == 0)[None, :] & ~found[:, None]
        result.update(
            probability=tf.where(found, top["probability"][:, 0], 1.0),
            top_k_text=tf.where(alone, top_text[:, None], top["text"]),
            top_k_probability=tf.where(alone, 1.0, top["probability"]),
            top_k_char_start=tf.where(alone, zero, top["char_start"]),
            top_k_char_end=tf.where(alone, zero, top["char_end"]),
        )
        result.update(answer_text=text, score=tf.cast(score, tf.float32))
        return result


def export_squad(model, output_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                 settings: FeatureSettings, version_2: bool, n_best_size: int = 20,
                 max_answer_length: int = 30, null_score_diff_threshold: float | None = None,
                 do_lower_case: bool = True, top_k: int = 5, answer_rule: str = RELEASE_ANSWERS,
                 handle_impossible_answer: bool = False) -> str:
    """Writes the SQuAD model as a SavedModel with `serve_text(question, context)`, answering by
    `answer_rule` (a source's: `hf_heads.answer_rule(task_exports.run_info(source))`).

    Besides `serve_text` it has `serving_default` on int32 `input_ids`, `input_mask`,
    `segment_ids`, `p_mask` [B, T] (the model's raw outputs). The SentencePiece model is stored as
    the asset `vocab_file`. Returns the output directory.
    """
    tokenizer = export.prepare(model, spm_model_file, settings.max_seq_length, do_lower_case)

    def outputs_fn(inputs):
        if version_2:
            outputs = model(inputs, training=False)
        else:
            outputs = model({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}, training=False)
        return {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v for k, v in outputs.items()}

    server = SquadServer(outputs_fn, tokenizer, settings, version_2, n_best_size, max_answer_length,
                         null_score_diff_threshold, top_k, answer_rule, handle_impossible_answer)
    return export.write(model, output_dir, server, tokenizer)


# What a SQuAD run's task.json records of how it answers (`finetune.squad.task.SquadTask.run_info`),
# and what the export takes of it; a source that records none answers by its rule's defaults.
QA_SETTINGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "null_score_diff_threshold",
               "export_top_k")
# Where `info` carries a run's evaluation results by split (`task_exports.run_info`: the run folder's
# eval_results.json; the fine-tuning tool's --export: its own evaluation's), v2.0's threshold read there.
EVALUATION = "eval_results"
# transformers' question-answering pipeline's defaults (v4's QuestionAnsweringPipeline:
# max_answer_len=15, handle_impossible_answer=False), for a model of transformers that records none.
HF_DEFAULTS = {"max_answer_length": 15}


def null_threshold(info: dict) -> float | None:
    """The null-score threshold a SQuAD v2.0 run's export answers "" at (`info` as
    `export_recorded` takes it): the run's --null_score_diff_threshold (task.json's), else the one its
    evaluation chose (the first split of `info[EVALUATION]` that records one: the threshold of best
    F1 on the predicted file, so the export answers "" where predictions.json does), else None (never)."""
    if info.get("null_score_diff_threshold") is not None:
        return float(info["null_score_diff_threshold"])
    for split in (info.get(EVALUATION) or {}).values():
        if isinstance(split, dict) and split.get("null_score_diff_threshold") is not None:
            return float(split["null_score_diff_threshold"])
    return None


def export_recorded(model, output_dir: str | os.PathLike, spm_model_file: str | os.PathLike,
                    max_seq_length: int, info: dict, version_2: bool = False, do_lower_case: bool = True) -> str:
    """`export_squad` of a v1.1 span labeler (`AlbertSpanLabeler`) or, `version_2`, of the v2.0
    answerability head (`AlbertSquadV2`) with the settings of `info` (its source's task.json, as
    `task_exports.run_info` reads it): the answer rule, the windows (`FeatureSettings`), the answer
    settings (`QA_SETTINGS`), v2.0's threshold (`null_threshold`); where it records none, its rule's
    defaults. albert-export of a run and the run's own --export both come here."""
    rule = hf_heads.answer_rule(info)
    recorded = {**(HF_DEFAULTS if rule == HF_ANSWERS else {}),
                **{k: info[k] for k in QA_SETTINGS if info.get(k) is not None}}
    windows = {k: recorded.pop(k) for k in ("doc_stride", "max_query_length") if k in recorded}
    if "export_top_k" in recorded:
        recorded["top_k"] = recorded.pop("export_top_k")
    recorded["null_score_diff_threshold"] = null_threshold(info) if version_2 else None
    settings = FeatureSettings(max_seq_length, **windows)
    return export_squad(model, output_dir, spm_model_file, settings, version_2=version_2,
                        do_lower_case=do_lower_case, answer_rule=rule, **recorded)
