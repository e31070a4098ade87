"""The SQuAD SavedModel answers raw (question, context) pairs in a fresh process that imports only
tensorflow and tensorflow_text, with the answers of the Python pipeline (features -> model ->
post-processing), windows and all.

The random-weight models and their exports are tests/finetune/squad_runs.py's (`random_export`,
shared with tests/test_faults.py): built once, with the Python model's outputs on the questions'
windows beside each export."""

import json

import numpy as np
import pytest

from finetune.squad import postprocess
from tests.finetune import squad_runs
from tests.helpers import FRESH_SERVING_SCRIPT, attention_score_einsums


@pytest.mark.slow
def test_fresh_process_answers_like_the_python_pipeline(small_data_dir, tmp_path_factory, tmp_path, fresh_process):
    examples, records = squad_runs.serving_questions(small_data_dir, version_2=True)  # 100 of a v2.0 article
    assert len(records["input_ids"]) > 3 * len(examples)  # many windows
    built = squad_runs.random_export(tmp_path_factory, small_data_dir, version_2=True)
    # The AlbertSquadV2's outputs on those windows, and the median of its [CLS] logits, its threshold.
    outputs, threshold = built["outputs"], built["threshold"]
    assert threshold == float(np.median(outputs["cls_logits"]))
    expected = postprocess.postprocess_v2(examples, records, outputs, null_score_diff_threshold=threshold)

    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([[e.question, e.context] for e in examples]))
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SERVING_SCRIPT)
    got = json.loads(fresh_process.script(script, built["export"], pairs).strip().splitlines()[-1])

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


def test_served_probabilities_are_the_offline_n_best(small_data_dir, tmp_path_factory):
    import tensorflow as tf

    examples, records = squad_runs.serving_questions(small_data_dir, version_2=False)  # 30 v1.1 questions
    # A random AlbertSpanLabeler's outputs on their windows, and its export serving 3 answers a question.
    built = squad_runs.random_export(tmp_path_factory, small_data_dir, version_2=False)
    outputs = built["outputs"]
    expected = postprocess.postprocess_v1(examples, records, outputs["start_logits"], outputs["end_logits"])
    serve = squad_runs.serve_text(built["export"])  # loaded once in this process (test_faults.py serves it too)
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


@pytest.mark.parametrize("version_2", [False, True], ids=["v1.1", "v2.0"])
def test_the_export_holds_the_models_forward_pass_once(small_data_dir, tmp_path_factory, version_2):
    # serve_text and serving_default call one traced forward pass; each traced its own before.
    export = squad_runs.random_export(tmp_path_factory, small_data_dir, version_2=version_2)["export"]
    assert attention_score_einsums(export) == squad_runs.RANDOM_CONFIG["num_hidden_layers"] == 1


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
