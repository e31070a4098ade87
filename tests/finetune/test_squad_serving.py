"""The SQuAD SavedModel answers raw (question, context) pairs in a fresh process that imports only
tensorflow and tensorflow_text, with the answers of the Python pipeline (features -> model ->
post-processing), windows and all."""

import json

import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.serving.question_answering import export_squad
from finetune.squad import features, postprocess, readers
from finetune.squad.model import AlbertSquadV2
from tests.helpers import FRESH_SERVING_SCRIPT

CONFIG = AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
# Short windows, so that most contexts need several.
SETTINGS = features.FeatureSettings(max_seq_length=64, doc_stride=16, max_query_length=16)

@pytest.mark.slow
def test_fresh_process_answers_like_the_python_pipeline(small_data_dir, tmp_path, fresh_process):
    spm_model = small_data_dir / "albert" / "30k-clean.model"
    tokenizer = AlbertTokenizer(spm_model)
    examples = readers.read_squad(small_data_dir / "squad" / "dev-v2.0.article0.json", True)[:100]
    records = features.stack_records(features.convert_examples(examples, tokenizer, SETTINGS))
    assert len(records["input_ids"]) > 3 * len(examples)  # many windows
    keras.utils.set_random_seed(0)
    model = AlbertSquadV2(CONFIG)
    outputs = {k: v.numpy() for k, v in model({k: records[k] for k in ("input_ids", "input_mask", "segment_ids", "p_mask")}).items()}
    threshold = float(np.median(outputs["cls_logits"]))
    expected = postprocess.postprocess_v2(examples, records, outputs, null_score_diff_threshold=threshold)

    export_squad(model, tmp_path / "exported", spm_model, SETTINGS, version_2=True,
                 null_score_diff_threshold=threshold)
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([[e.question, e.context] for e in examples]))
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SERVING_SCRIPT)
    got = json.loads(fresh_process.script(script, tmp_path / "exported", pairs).strip().splitlines()[-1])

    answers = [expected.answers[e.qas_id] for e in examples]
    assert got["answer_text"] == answers
    assert 0 < answers.count("") < len(answers)  # the threshold left some unanswered
    best = [expected.best(e.qas_id) for e in examples]
    assert got["char_start"] == [b["char_start"] for b in best]
    assert got["char_end"] == [b["char_end"] for b in best]
    np.testing.assert_allclose(got["score"], [b["start_log_prob"] + b["end_log_prob"] for b in best], atol=1e-4)
    np.testing.assert_allclose(got["null_odds"], [expected.null_odds[e.qas_id] for e in examples], atol=1e-5)
    np.testing.assert_allclose(got["no_answer_probability"],
                               1 / (1 + np.exp(-np.array(got["null_odds"]))), rtol=1e-5)
    for e, b, text in zip(examples, best, got["answer_text"]):
        if text:
            assert e.context[b["char_start"] : b["char_end"]] == text
    # The served n-best: the offline list's first 5 answers and probabilities; the no-answer
    # probability beside them.
    for i, e in enumerate(examples):
        nbest = expected.nbest[e.qas_id][:5]
        assert got["top_k_text"][i][: len(nbest)] == [c["text"] for c in nbest]
        np.testing.assert_allclose(got["top_k_probability"][i][: len(nbest)], [c["probability"] for c in nbest],
                                   atol=1e-5)
        assert got["top_k_char_start"][i][: len(nbest)] == [c["char_start"] for c in nbest]
        assert sum(got["top_k_probability"][i]) <= 1 + 1e-6
    assert got["probability"] == [row[0] for row in got["top_k_probability"]]


def test_served_probabilities_are_the_offline_n_best(small_data_dir, tmp_path):
    import tensorflow as tf

    from albert_tf.models import AlbertSpanLabeler

    spm_model = small_data_dir / "albert" / "30k-clean.model"
    examples = readers.read_squad(small_data_dir / "squad" / "dev-v1.1.articles1-2.json", False)[:30]
    records = features.stack_records(features.convert_examples(examples, AlbertTokenizer(spm_model), SETTINGS))
    keras.utils.set_random_seed(0)
    model = AlbertSpanLabeler(CONFIG)
    outputs = model({k: records[k] for k in ("input_ids", "input_mask", "segment_ids")})
    expected = postprocess.postprocess_v1(examples, records, outputs["start_logits"].numpy(),
                                          outputs["end_logits"].numpy())
    export_squad(model, tmp_path / "exported", spm_model, SETTINGS, version_2=False, top_k=3)
    serve = tf.saved_model.load(str(tmp_path / "exported")).signatures["serve_text"]
    got = {k: v.numpy() for k, v in serve(question=tf.constant([e.question for e in examples]),
                                          context=tf.constant([e.context for e in examples])).items()}

    assert [t.decode() for t in got["answer_text"]] == [expected.answers[e.qas_id] for e in examples]
    assert [t.decode() for t in got["top_k_text"][:, 0]] == [t.decode() for t in got["answer_text"]]
    np.testing.assert_array_equal(got["probability"], got["top_k_probability"][:, 0])
    assert (got["top_k_probability"].sum(-1) <= 1 + 1e-6).all()
    for i, e in enumerate(examples):
        nbest = expected.nbest[e.qas_id][:3]
        assert [t.decode() for t in got["top_k_text"][i, : len(nbest)]] == [c["text"] for c in nbest]
        np.testing.assert_allclose(got["top_k_probability"][i, : len(nbest)], [c["probability"] for c in nbest],
                                   atol=1e-5, err_msg=e.qas_id)
        assert got["top_k_char_start"][i, : len(nbest)].tolist() == [c["char_start"] for c in nbest]
        assert got["top_k_char_end"][i, : len(nbest)].tolist() == [c["char_end"] for c in nbest]
        assert (got["top_k_probability"][i, len(nbest):] == 0).all()
    # A random model spreads its belief: the answers' probabilities are well inside (0, 1).
    assert 0.01 < got["probability"].min() and got["probability"].max() < 0.99


def test_the_v2_exports_threshold_is_the_flags_else_this_runs_evaluations_not_state_left_on_the_task():
    from finetune.squad.task import SquadTask

    results = {"dev": {"exact": 80.0, "null_score_diff_threshold": -1.25}}
    task = SquadTask(train_file="t.json", predict_file="d.json", version_2_with_negative=True)
    assert task.export_threshold(results) == -1.25
    assert task.export_threshold({}) is None  # no evaluation in this run: never answers ""
    given = SquadTask(predict_file="d.json", version_2_with_negative=True, null_score_diff_threshold=0.5)
    assert given.export_threshold(results) == 0.5
    assert SquadTask(predict_file="d.json").export_threshold(results) is None  # v1.1 has no threshold
    assert not hasattr(task, "_export_threshold")
