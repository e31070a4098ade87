"""RACE on the shared fine-tuning layer: the chain learns, the CLI's files, the raw-text SavedModel
answering in a process that imports only tensorflow and tensorflow_text, bad input named."""

import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.race import cli, features, readers, task
from finetune.task import HPARAM_FIELDS, Hparams

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
RUNNER = FIXTURES / "export" / "run_saved_model.py"
SEQ, QA = 48, 16


def _tiny_config(path, vocab_size):
    config = {"vocab_size": vocab_size, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": SEQ}
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def spm_model(small_data_dir):
    return small_data_dir / "albert" / "30k-clean.model"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_dir, spm_model):
    """A tiny model fine-tuned on the questions of the first 35 dev/middle passages, evaluated on
    the same questions."""
    root = tmp_path_factory.mktemp("race")
    passages = root / "train" / "middle"
    passages.mkdir(parents=True)
    for file in sorted((data_dir / "race" / "dev" / "middle").glob("*.txt"))[:35]:
        shutil.copy(file, passages)
    config = _tiny_config(root / "albert_config.json", AlbertTokenizer(spm_model).vocab_size)
    out = root / "out"
    summary = cli.finetune([
        "albert-finetune-race", f"--train_data={passages}", f"--eval_data={passages}",
        f"--albert_config_file={config}", f"--spm_model_file={spm_model}", f"--output_dir={out}",
        "--do_train", "--do_eval", f"--max_seq_length={SEQ}", f"--max_qa_length={QA}",
        "--learning_rate=3e-3", "--num_train_steps=120", "--num_warmup_steps=20", "--train_batch_size=16",
        "--eval_batch_size=32", "--classifier_dropout=0", "--steps_per_loop=60", "--noprogress_bar",
        "--nojit_compile",  # 14 s -> 10 s; dev accuracy 0.993 (0.9 needed); XLA: the SQuAD chains
    ])
    return {"root": root, "passages": passages, "out": out, "summary": summary}


@pytest.mark.slow
def test_the_chain_learns_the_questions_it_saw(trained):
    questions = readers.read_questions(trained["passages"])
    assert len(questions) == 149
    results = json.loads((trained["out"] / "eval_results.json").read_text())
    dev = results["dev"]
    assert dev["num_questions"] == dev["num_middle"] == len(questions)
    assert dev["accuracy"] >= 0.9, dev
    assert dev["accuracy_middle"] == dev["accuracy"]
    # The best checkpoint is kept by dev accuracy, as for GLUE's first metric.
    best = json.loads((trained["out"] / "best_checkpoint.json").read_text())
    assert (best["metric"], best["split"]) == ("accuracy", "dev") and best["value"] >= dev["accuracy"]
    assert list(trained["out"].glob("model.ckpt-best*"))
    # The predictions file agrees with the metrics, question by question.
    lines = [json.loads(line) for line in (trained["out"] / "predictions_dev.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [q.qid for q in questions]
    hits = [line["prediction"] == q.answer for line, q in zip(lines, questions)]
    assert np.mean(hits) == pytest.approx(dev["accuracy"])
    for line in lines:
        assert len(line["probabilities"]) == 4 and abs(sum(line["probabilities"]) - 1) < 1e-4
        assert line["prediction"] == "ABCD"[int(np.argmax(line["probabilities"]))]


@pytest.mark.slow
def test_exported_model_answers_raw_text_in_a_fresh_process(trained, spm_model, tmp_path, fresh_process):
    questions = readers.read_questions(trained["passages"])[:6]
    questions.append(readers.Question("x-0", "", "Tom's ball is red.", "Tom has a _ ball.",
                                      ("red", "blue", "a very long option " * 10, ""), "A"))
    model = trained["summary"]["model"]
    rows = list(features.convert_questions(questions, AlbertTokenizer(spm_model), SEQ, QA))
    batch = {k: np.asarray([r[k] for r in rows], np.int32) for k in features.SEQUENCE_FEATURES}
    logits = np.asarray(model(batch, training=False), np.float64)
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)

    jobs = [{
        "saved_model": str(trained["out"] / "export"),
        "output": str(tmp_path / "out.npz"),
        "calls": {"text": {"signature": "serve_text", "inputs": {
            "article": {"text": [q.article for q in questions]},
            "question": {"text": [q.question for q in questions]},
            "options": {"text": [list(q.options) for q in questions]},
        }}, "ids": {"signature": "serving_default", "inputs": {k: v.tolist() for k, v in batch.items()}}},
    }]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    fresh_process.script(RUNNER, tmp_path / "jobs.json")
    got = np.load(tmp_path / "out.npz", allow_pickle=True)
    assert list(got["__modules__/albert_tf"]) == []
    np.testing.assert_allclose(got["text/probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(got["ids/probabilities"], expected, atol=1e-5)
    assert [p.decode() for p in got["text/prediction"]] == ["ABCD"[i] for i in expected.argmax(-1)]


@pytest.mark.slow
def test_albert_export_of_the_run_writes_what_its_export_did(trained, tmp_path, monkeypatch, capsys):
    """`albert-export --preset <the run's output_dir>` builds the rows by the run's recorded
    max_qa_length (task.json) and serves the run's own export's answers."""
    from albert_tf.cli import export as export_cli
    from tests.helpers import console_script

    assert json.loads((trained["out"] / "task.json").read_text())["max_qa_length"] == QA
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={trained['out']}",
                                                     f"--max_seq_length={SEQ}", f"--output_dir={tmp_path / 'again'}"],
                                    monkeypatch, capsys)
    assert code == 0, err
    assert f"wrote the RACE SavedModel (float32) to {tmp_path / 'again'}" in out
    questions = readers.read_questions(trained["passages"])[:4]
    texts = {"article": tf.constant([q.article for q in questions]),
             "question": tf.constant([q.question for q in questions]),
             "options": tf.constant([list(q.options) for q in questions])}
    run_export, again = (tf.saved_model.load(str(path)) for path in (trained["out"] / "export", tmp_path / "again"))
    assert int(again.max_qa_length.numpy()) == int(run_export.max_qa_length.numpy()) == QA
    theirs, ours = (m.signatures["serve_text"](**texts) for m in (run_export, again))
    np.testing.assert_allclose(ours["logits"].numpy(), theirs["logits"].numpy(), atol=1e-6, rtol=0)
    np.testing.assert_array_equal(ours["prediction"].numpy(), theirs["prediction"].numpy())


def test_presets_and_flags(tmp_path):
    race = task.RaceTask(tmp_path)
    assert race.default_options(**dict.fromkeys(HPARAM_FIELDS)) == dataclasses.asdict(task.HPARAMS["v2"])
    assert task.HPARAMS["v2"] == Hparams(learning_rate=1e-5, train_batch_size=32, num_train_steps=12000, encoder_dropout=0.0,
                                         num_warmup_steps=1000, max_seq_length=512, classifier_dropout=0.1)
    assert task.RaceTask(tmp_path, hparams="v1").default_options(learning_rate=None)["learning_rate"] == 2e-5
    assert race.default_options(num_train_steps=7)["num_train_steps"] == 7
    with pytest.raises(ValueError, match="hparams must be one of"):
        task.RaceTask(tmp_path, hparams="v3")


def test_bad_data_is_named_before_any_model(tmp_path, spm_model):
    config = _tiny_config(tmp_path / "albert_config.json", AlbertTokenizer(spm_model).vocab_size)
    common = [f"--albert_config_file={config}", f"--spm_model_file={spm_model}", f"--output_dir={tmp_path / 'out'}",
              "--do_train", f"--max_seq_length={SEQ}", f"--max_qa_length={QA}"]
    with pytest.raises(FileNotFoundError, match=r"RACE data .*nowhere[/\\]train does not exist"):
        cli.finetune(["albert-finetune-race", f"--data_dir={tmp_path / 'nowhere'}", *common])
    bad = tmp_path / "bad" / "middle"
    bad.mkdir(parents=True)
    (bad / "1.txt").write_text(json.dumps({"article": "a", "questions": ["q"], "options": [["a", "b", "c", "d"]],
                                           "answers": ["E"], "id": "middle1.txt"}))
    with pytest.raises(readers.BadRaceFile, match=r"1\.txt: question 0: answer 'E' is not one of A, B, C, D"):
        cli.finetune(["albert-finetune-race", f"--train_data={bad.parent}", *common])
    good = tmp_path / "good.txt"
    good.write_text(json.dumps({"article": "a", "questions": ["q"], "options": [["a", "b", "c", "d"]],
                                "answers": ["A"], "id": "middle2.txt"}))
    with pytest.raises(ValueError, match="max_qa_length=45 must be at most max_seq_length - 4 = 44"):
        cli.finetune(["albert-finetune-race", f"--train_data={good}", *common, "--max_qa_length=45"])
    assert not (tmp_path / "out").exists()
