"""The SQuAD SavedModel answers raw (question, context) pairs in a fresh process that imports only
tensorflow and tensorflow_text, with the answers of the Python pipeline (features -> model ->
post-processing), windows and all."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.tokenizer import AlbertTokenizer
from finetune.squad import features, postprocess, readers, serving
from finetune.squad.model import AlbertSquadV2
from tests.helpers import FRESH_SERVING_SCRIPT

CONFIG = AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
# Short windows, so that most contexts need several.
SETTINGS = features.FeatureSettings(max_seq_length=64, doc_stride=16, max_query_length=16)

@pytest.mark.slow
def test_fresh_process_answers_like_the_python_pipeline(small_data_dir, tmp_path):
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

    serving.export_squad(model, tmp_path / "exported", spm_model, SETTINGS, version_2=True,
                         null_score_diff_threshold=threshold)
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([[e.question, e.context] for e in examples]))
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SERVING_SCRIPT)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "exported"), str(pairs)],
                         capture_output=True, text=True, check=True)
    got = json.loads(run.stdout.strip().splitlines()[-1])

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
