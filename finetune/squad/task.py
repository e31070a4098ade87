"""SQuAD v1.1 and v2.0 on the shared fine-tuning layer (see finetune/task.py for the protocol).

Readers, features, post-processing, metrics and the losses are in this package; the models
(`albert_tf.models.AlbertSpanLabeler` for v1.1, `AlbertSquadV2` for v2.0) and their SavedModel
(`albert_tf.serving.question_answering`, what albert-export of a run writes too) are albert_tf's.
The split "train" is `train_file`, "dev" is `predict_file`, scored with the official metrics;
v2.0's no-answer threshold is the release's (the one that maximises F1 on the predicted file)
unless one is given.
"""

from __future__ import annotations

import os

from tqdm import tqdm

from albert_tf.utils.errors import UserError
from albert_tf.data.features import EXAMPLE_WEIGHT, span_feature_spec
from albert_tf.utils.atomic import write_json
from albert_tf.utils.validation import require_choice
from albert_tf.models import AlbertSpanLabeler, AlbertSquadV2
from finetune.cache import cache_features
from albert_tf.data.windows import ANSWER_RULE, ANSWER_RULES, HF_ANSWERS, RELEASE_ANSWERS
from albert_tf.serving.question_answering import EVALUATION, null_threshold, word_pieces
from albert_tf.serving.task_exports import export_task_saved_model
from finetune.squad import features, metrics, postprocess, readers
from finetune.squad.model import v1_loss_sums, v2_loss_sums
from finetune.task import FinetuningTask, Hparams, model_inputs

FEATURE_VERSION = 2  # 2: answers cut with the release's spans (features.release_answer_spans)

def _hparams(lr, bsz, albert_dr, classifier_dr, ts, ws, msl) -> Hparams:
    """One row of hyperparameters in the paper's column order."""
    return Hparams(learning_rate=lr, train_batch_size=bsz, encoder_dropout=albert_dr,
                   classifier_dropout=classifier_dr, num_train_steps=ts, num_warmup_steps=ws, max_seq_length=msl)


# HPARAMS[hparams][version 2]. "paper": the paper's Table 14 (appendix A.4):
#                      LR    BSZ  ALBERT DR  Classifier DR  TS    WS   MSL
# "release": the release's README commands for run_squad_v1/v2.py: 5e-5, batch 48, 2 epochs with
# 10% warmup (steps = int(train questions / 48 * 2), as run_squad_*.py count them: 87,599 questions
# in train-v1.1.json, 130,319 in train-v2.0.json), 384 tokens, the encoder's dropout from its config.
HPARAMS = {
    "paper": {
        False: _hparams(5e-5, 48, 0.0, 0.1, 3649, 365, 384),
        True: _hparams(3e-5, 48, 0.0, 0.1, 8144, 814, 512),
    },
    "release": {
        False: _hparams(5e-5, 48, None, 0.1, 3649, 364, 384),
        True: _hparams(5e-5, 48, None, 0.1, 5429, 542, 384),
    },
}


class SquadTask(FinetuningTask):
    """SQuAD v1.1, or v2.0 with `version_2_with_negative`, on `train_file` and `predict_file`;
    v1.1's answers by `answer_rule` (`hf_heads.ANSWER_RULES`: the release's, or transformers'
    pipeline's for a model trained there), offline and exported."""

    train_metric_names = ("loss",)
    best_metric = "f1"  # both official scripts report it
    prediction_features = ("example_index", "char_starts", "char_ends", "max_context")

    def __init__(self, train_file=None, predict_file=None, version_2_with_negative=False, doc_stride=128,
                 max_query_length=64, n_best_size=20, max_answer_length=30, start_n_top=5, end_n_top=5,
                 null_score_diff_threshold=None, hparams="paper", export_top_k=5, max_eval_examples=None,
                 answer_rule=RELEASE_ANSWERS):
        require_choice("hparams", hparams, HPARAMS)
        require_choice("answer_rule", answer_rule, ANSWER_RULES)
        if answer_rule != RELEASE_ANSWERS and version_2_with_negative:
            raise ValueError(f"answer_rule={answer_rule!r} reads a span head's start and end logits, not v2.0's beam")
        self.answer_rule = answer_rule
        if answer_rule == HF_ANSWERS:  # words and the windows' own [CLS] and context, from the records
            self.prediction_features = (*self.prediction_features, "input_ids", "p_mask")
        self._word_pieces = None  # HF_ANSWERS: the vocabulary's words (`features` reads them)
        if not 1 <= export_top_k <= n_best_size:
            raise ValueError(f"export_top_k ({export_top_k}) must be between 1 and n_best_size ({n_best_size})")
        self.export_top_k = export_top_k
        self.max_eval_examples = max_eval_examples
        self.hparams = hparams
        self.files = {"train": train_file, "dev": predict_file}
        self.version_2 = version_2_with_negative
        self.name = "SQuAD-v2.0" if self.version_2 else "SQuAD-v1.1"
        self.train_split = "train" if train_file else None
        self.eval_splits = ("dev",) if predict_file else ()
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.start_n_top, self.end_n_top = start_n_top, end_n_top
        self.null_score_diff_threshold = null_score_diff_threshold
        self._results: dict[str, tuple] = {}

    def examples(self, split):
        return self.first_examples(split, readers.read_squad(self.files[split], self.version_2))

    def dataset(self, split):
        """The official JSON's articles that the metrics score: with an example limit, only the
        questions read (the official scripts count a question without an answer as wrong)."""
        dataset = readers.load_json(self.files[split])["data"]
        if self.example_limit(split) is None:
            return dataset
        kept = {example.qas_id for example in self.examples(split)}
        return [{**article, "paragraphs": [{**paragraph, "qas": [qa for qa in paragraph["qas"] if qa["id"] in kept]}
                                           for paragraph in article["paragraphs"]]} for article in dataset]

    def check_data(self, splits):
        for split in splits:
            if not os.path.isfile(self.files[split] or ""):
                raise FileNotFoundError(f"no SQuAD file {self.files[split]} ({split})")
            if not self.examples(split):  # a bad file stops here, one line naming the question
                raise UserError(f"{self.files[split]} holds no question: nothing to "
                                f"{'train on' if split == 'train' else 'answer'}")

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        settings = features.FeatureSettings(max_seq_length, self.doc_stride, self.max_query_length)
        if self.answer_rule == HF_ANSWERS:
            self._word_pieces = word_pieces(tokenizer.model_proto)

        def convert(report):
            examples = self.examples(split)
            report.num_examples = len(examples)
            # A progress bar on a terminal: the train file is ~90k questions (a minute or so).
            progress = tqdm(examples, desc=f"{self.name} {split} features", unit="question", disable=None)
            yield from features.convert_examples(progress, tokenizer, settings)

        return cache_features(task=self.name, split=split, spec=span_feature_spec(max_seq_length),
                              max_seq_length=max_seq_length, sources=[self.files[split]],
                              settings=(FEATURE_VERSION, settings, *self.example_settings(split)),
                              tokenizer=tokenizer, convert=convert,
                              cache_dir=cache_dir)

    def build_model(self, config, options, dtype):
        if self.version_2:
            model = AlbertSquadV2(config, self.start_n_top, self.end_n_top, options.classifier_dropout, dtype=dtype)
        else:
            model = AlbertSpanLabeler(config, dtype=dtype)
        # Both heads read the sequence output, as the release's SQuAD models do: the pooler gets no
        # gradient, and Keras would warn of it at every run. Frozen, it is still saved and exported.
        model.encoder.pooler.trainable = False
        return model

    def _inputs(self, features_, with_start=False):
        inputs = model_inputs(features_)
        if self.version_2:
            inputs["p_mask"] = features_["p_mask"]
            if with_start:
                inputs["start_positions"] = features_["start_positions"]
        return inputs

    def loss_sums(self, model, features_, training):
        outputs = model(self._inputs(features_, with_start=True), training=training)
        if self.version_2:
            return {"loss": v2_loss_sums(outputs, features_, features_[EXAMPLE_WEIGHT])["loss"]}
        return v1_loss_sums(outputs["start_logits"], outputs["end_logits"], features_, features_[EXAMPLE_WEIGHT])

    def predict_outputs(self, model, features_):
        return dict(model(self._inputs(features_), training=False))

    def answers(self, split, predictions):
        """Post-processed answers of `split` and, v2.0, the threshold used."""
        examples = self.examples(split)
        if self.answer_rule == HF_ANSWERS:
            return postprocess.postprocess_hf(examples, predictions, predictions["start_logits"],
                                              predictions["end_logits"], self._word_pieces, self.n_best_size,
                                              self.max_answer_length), None
        if not self.version_2:
            return postprocess.postprocess_v1(examples, predictions, predictions["start_logits"],
                                              predictions["end_logits"], self.n_best_size,
                                              self.max_answer_length), None
        args = (examples, predictions, predictions, self.n_best_size, self.max_answer_length)
        threshold = self.null_score_diff_threshold
        if threshold is None:
            # The release: answer everything, take the threshold that maximises F1, answer again.
            first = postprocess.postprocess_v2(*args)
            threshold = metrics.evaluate_v2(self.dataset(split), first.answers, first.null_odds)["best_f1_thresh"]
        return postprocess.postprocess_v2(*args, null_score_diff_threshold=threshold), threshold

    def evaluate(self, split, predictions, cached):
        result, threshold = self.answers(split, predictions)
        dataset = self.dataset(split)
        if self.version_2:
            scores = metrics.evaluate_v2(dataset, result.answers, result.null_odds)
            scores["null_score_diff_threshold"] = threshold  # and the export's (`null_threshold`)
        else:
            scores = metrics.evaluate_v1(dataset, result.answers)
        self._results[split] = result
        return {**scores, "baseline": metrics.no_answer_baseline(dataset, self.version_2)}

    def write_predictions(self, split, predictions, cached, output_dir):
        result = self._results.pop(split, None) or self.answers(split, predictions)[0]
        files = {"predictions.json": result.answers, "nbest_predictions.json": result.nbest}
        if self.version_2:
            files["null_odds.json"] = result.null_odds
        paths = []
        for name, values in files.items():
            path = os.path.join(output_dir, name)
            write_json(path, values, sort_keys=False)
            paths.append(path)
        return paths

    def export_threshold(self, results) -> float | None:
        """v2.0: the null-score threshold the export answers "" at (`question_answering.null_threshold`,
        which albert-export of this run's folder reads too): the flag's, else the one this run's
        evaluation chose (the exported model then answers "" where those predictions do), else None
        (never)."""
        return null_threshold(self._export_info(results)) if self.version_2 else None

    def _export_info(self, results) -> dict:
        """What the export reads: this run's task.json and this invocation's evaluation `results`
        (albert-export reads the run folder's eval_results.json in their place)."""
        return {**self.run_info(), EVALUATION: results}

    def export_saved_model(self, model, spm_model_file, max_seq_length, export_dir, results):
        """The span labeler's or the answerability head's export (`task_exports`: what albert-export of
        this run writes), by this run's settings and threshold (`export_threshold`)."""
        return export_task_saved_model(model, export_dir, spm_model_file, max_seq_length, self._export_info(results))

    def litert_outputs(self, model, max_seq_length):
        from albert_tf.serving.litert import INPUTS, TaskOutputs

        if not self.version_2:  # end_logits, start_logits: BertQuestionAnswerer's order
            return TaskOutputs("squad", INPUTS, (1, max_seq_length), lambda inputs: dict(model(inputs, training=False)))
        # The answerability head's beam and answer-class logit, on p_mask beside the ids.
        return TaskOutputs("squad_v2", (*INPUTS, "p_mask"), (1, max_seq_length),
                           lambda inputs: model(inputs, training=False))

    def recipe(self):
        return HPARAMS[self.hparams][self.version_2]

    def run_info(self):
        """The task, and how it answers (`question_answering.QA_SETTINGS`, the answer rule): what an
        export of this run answers by, albert-export's too."""
        return {"task": self.name, "doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
                "n_best_size": self.n_best_size, "max_answer_length": self.max_answer_length,
                "null_score_diff_threshold": self.null_score_diff_threshold, "export_top_k": self.export_top_k,
                ANSWER_RULE: self.answer_rule}
