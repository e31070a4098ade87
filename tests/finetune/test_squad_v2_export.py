"""albert-export of a SQuAD v2.0 run: the SavedModel the tool's --export wrote (issue 54, its last item).

The answerability head (`albert_tf.models.AlbertSquadV2`) and its serving module live in albert_tf,
so `albert-export --preset <the run's output_dir>` exports it as it exports the other task models. What
the run knows only after its evaluation, the null-score threshold, comes from the run folder's
eval_results.json; the run's own export took it from the same evaluation.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from finetune.squad import readers
from tests.finetune import squad_runs
from tests.helpers import console_script

SEQ = 128  # SQUAD_CHAIN_TRAINING's --max_seq_length


@pytest.fixture(scope="module")
def v2_run(tmp_path_factory, small_data_dir):
    """The 30-step v2.0 chain (tests/finetune/squad_runs.py, shared with test_squad_cli.py): the tiny
    chain model trained on the 208 questions of a v2.0 article (112 unanswerable), predicted (the
    threshold of best F1 chosen) and exported by albert-finetune-squad."""
    folder = squad_runs.v2_chain(tmp_path_factory, small_data_dir)
    return {"run": folder / "run", "data": small_data_dir / "squad" / squad_runs.V2_ARTICLE,
            "export": folder / "run" / "export"}


@pytest.mark.slow  # albert-export of the shared run, both exports loaded and served
def test_albert_export_of_a_v2_run_serves_what_its_export_does(v2_run, tmp_path, monkeypatch, capsys):
    """Same signatures; the same null odds (to 1e-5), answers and n-best lists on the run's 208
    questions; "" by the threshold the run's evaluation chose (eval_results.json), not by none."""
    from albert_tf.cli import export as export_cli

    again = tmp_path / "again"
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={v2_run['run']}",
                                                     f"--max_seq_length={SEQ}", f"--output_dir={again}"],
                                    monkeypatch, capsys)
    assert code == 0, err
    assert f"wrote the SQuAD-v2.0 SavedModel (float32) to {again}" in out

    examples = readers.read_squad(v2_run["data"], version_2_with_negative=True)
    assert len(examples) == 208 and sum(e.is_impossible for e in examples) == 112  # 96 answerable
    pairs = {"question": tf.constant([e.question for e in examples]),
             "context": tf.constant([e.context for e in examples])}
    tools, ours = (tf.saved_model.load(str(path)) for path in (v2_run["export"], again))
    assert sorted(ours.signatures) == sorted(tools.signatures) == ["serve_text", "serving_default"]
    for name in ours.signatures:
        assert ours.signatures[name].structured_outputs.keys() == tools.signatures[name].structured_outputs.keys()
    theirs = {k: v.numpy() for k, v in tools.signatures["serve_text"](**pairs).items()}
    got = {k: v.numpy() for k, v in ours.signatures["serve_text"](**pairs).items()}
    np.testing.assert_allclose(got["null_odds"], theirs["null_odds"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["score"], theirs["score"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["top_k_probability"], theirs["top_k_probability"], atol=1e-5, rtol=0)
    for name in ("answer_text", "top_k_text", "char_start", "char_end", "top_k_char_start", "top_k_char_end"):
        np.testing.assert_array_equal(got[name], theirs[name], err_msg=name)

    # The threshold travelled: the evaluation's, which answers "" where the null odds reach it (and
    # so differs from the n-best list's first answer there); an export with none would answer them.
    threshold = json.loads((v2_run["run"] / "eval_results.json").read_text())["dev"]["null_score_diff_threshold"]
    assert "null_score_diff_threshold" in json.loads((v2_run["run"] / "task.json").read_text())  # the flag's: None
    answered = got["answer_text"] != b""
    np.testing.assert_array_equal(answered, got["null_odds"] < np.float32(threshold))
    silenced = ~answered & (got["top_k_text"][:, 0] != b"")
    assert silenced.any()
    # The answers are the run's predictions.json's (the offline decoder, at the same threshold).
    predictions = json.loads((v2_run["run"] / "predictions.json").read_text())
    near_cut = np.abs(got["null_odds"] - threshold) < 1e-4  # a question on the cut itself: either side
    assert near_cut.sum() <= 1
    assert [a.decode() for a, cut in zip(got["answer_text"], near_cut) if not cut] == [
        predictions[e.qas_id] for e, cut in zip(examples, near_cut) if not cut]
