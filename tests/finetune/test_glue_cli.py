"""albert-finetune-glue end to end on real GLUE data with a tiny model: MRPC, RTE, CoLA and STS-B
train, evaluate (eval_results.json) and predict (submission files); a resumed run ends where an
uninterrupted one does; the exported classifier labels raw sentences in a process that imports
only tensorflow and tensorflow_text; bad input fails with a message that says what is wrong."""

import contextlib
import io
import json
import math
import pathlib
import shutil
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.checkpoints.run_folder import CONFIG_FILE, TASK_FILE
from albert_tf.checkpoints.weights import model_weights
from finetune.glue import cli
from albert_tf.models import AlbertClassifier as GlueClassifier
from albert_tf.presets.loader import init_vocab_size, initialize_encoder
from finetune.glue.readers import read_examples

TESTS = pathlib.Path(__file__).resolve().parents[1]
TINY_VOCAB = TESTS / "fixtures" / "data_prep" / "tiny_vocab.model"
RUNNER = TESTS / "fixtures" / "export" / "run_saved_model.py"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
SEQ = 32
NUM_TEST_ROWS = 24
DEV_SIZES = {"MRPC": 408, "RTE": 277, "CoLA": 1043, "STS-B": 1500}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "albert_config.json"
    CONFIG.to_json_file(path)
    return path


@pytest.fixture(scope="module")
def mrpc_dir(tmp_path_factory, small_data_dir):
    """MRPC's train and dev files, and a test file (the official layout) made of dev rows."""
    folder = tmp_path_factory.mktemp("glue") / "MRPC"
    folder.mkdir()
    source = small_data_dir / "glue" / "MRPC"
    for name in ("train.tsv", "dev.tsv"):
        (folder / name).symlink_to(source / name)
    rows = (source / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1 : NUM_TEST_ROWS + 1]
    lines = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    lines += [f"{i}\t" + "\t".join(row.split("\t")[1:]) for i, row in enumerate(rows)]
    (folder / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder.parent


def _args(task, data_dir, output_dir, config_file, *extra, steps=16):
    # Without XLA: compiling took over half of these 16-step runs (77 s -> 35 s for the module);
    # the same training step runs under XLA in test_glue_training.py (mirrored) and the SQuAD chains.
    return ["albert-finetune-glue", f"--task={task}", f"--data_dir={data_dir}", f"--output_dir={output_dir}",
            f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}", f"--max_seq_length={SEQ}",
            "--train_batch_size=16", f"--num_train_steps={steps}", "--num_warmup_steps=2",
            "--learning_rate=1e-3", "--max_train_examples=256", "--steps_per_loop=8",
            "--eval_batch_size=64", "--progress_bar=false", "--nojit_compile", *extra]


def _eval_results(output_dir):
    return json.loads((output_dir / cli.EVAL_RESULTS).read_text())


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory, mrpc_dir, config_file):
    # Its export is version 1 of TF Serving's layout, <output_dir>/export/1: the serving-version test
    # writes version 2 beside it instead of two exports of its own.
    output_dir = tmp_path_factory.mktemp("mrpc_run")
    summary = cli.finetune(_args("MRPC", mrpc_dir, output_dir, config_file, "--do_train", "--do_eval",
                                 "--do_predict", "--save_checkpoints_steps=8", "--serving_version=1"))
    return output_dir, summary


@pytest.fixture(scope="module")
def predicted_again(mrpc_run, mrpc_dir):
    """A predict-only run from the trained run's folder, given neither --albert_config_file nor
    --spm_model_file (the folder keeps both): its summary, its stdout, and the export's mtime and
    the submission file from before it (two tests read this one run)."""
    output_dir, summary = mrpc_run
    exported = (pathlib.Path(summary["export_dir"]) / "saved_model.pb").stat().st_mtime_ns
    submitted = (output_dir / "MRPC.tsv").read_text()
    args = [arg for arg in _args("MRPC", mrpc_dir, output_dir, "unused", "--do_predict")
            if not arg.startswith(("--albert_config_file", "--spm_model_file"))]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        again = cli.finetune(args)
    return {"summary": again, "stdout": printed.getvalue(), "args": args, "exported": exported,
            "submitted": submitted}


@pytest.mark.slow
def test_mrpc_end_to_end(mrpc_run):
    output_dir, summary = mrpc_run
    assert summary["train"]["step"] == 16 and math.isfinite(summary["train"]["train"]["loss"])
    results = _eval_results(output_dir)
    assert results["task"] == "MRPC" and results["global_step"] == 16
    dev = results["dev"]
    assert dev["examples"] == DEV_SIZES["MRPC"] and dev["skipped_rows"] == 0
    assert 0.0 <= dev["accuracy"] <= 1.0 and 0.0 <= dev["f1"] <= 1.0 and 0.0 < dev["loss"] < 5.0
    # Accuracy is a count of the 408 examples: the padding rows of the last batch were left out.
    assert dev["accuracy"] * 408 == pytest.approx(round(dev["accuracy"] * 408), abs=1e-9)
    assert sorted(p.name for p in output_dir.glob("ckpt-*.index")) == ["ckpt-16.index", "ckpt-8.index"]
    lines = (output_dir / "MRPC.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == NUM_TEST_ROWS + 1
    assert [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(NUM_TEST_ROWS)]
    assert {line.split("\t")[1] for line in lines[1:]} <= {"0", "1"}


@pytest.mark.slow
def test_exported_classifier_labels_raw_text_in_a_fresh_process(mrpc_run, mrpc_dir, tmp_path, fresh_process):
    output_dir, summary = mrpc_run
    examples = read_examples("MRPC", mrpc_dir, "test").examples
    pairs = [[e.text_a, e.text_b] for e in examples]
    jobs = [{"saved_model": summary["export_dir"], "output": str(tmp_path / "out.npz"),
             "calls": {"pairs": {"signature": "serve_text", "inputs": {"text": {"text": pairs}}}}}]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    fresh_process.script(RUNNER, tmp_path / "jobs.json")
    served = np.load(tmp_path / "out.npz", allow_pickle=True)  # string outputs are object arrays
    assert served["__modules__/albert_tf"].size == 0  # the process never imported this package

    tokenizer = AlbertTokenizer(TINY_VOCAB)
    rows = [tokenizer.pack(tokenizer.encode(a), tokenizer.encode(b), max_seq_length=SEQ) for a, b in pairs]
    inputs = {k: np.array([r[k] for r in rows], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    probabilities = tf.nn.softmax(summary["model"](inputs, training=False)).numpy()
    np.testing.assert_allclose(served["pairs/probabilities"], probabilities, atol=1e-5, rtol=0)
    labels = [label.decode() for label in served["pairs/label"]]
    assert labels == [("0", "1")[i] for i in probabilities.argmax(axis=1)]
    assert served["pairs/label_names"].shape == (NUM_TEST_ROWS, 2)
    assert [n.decode() for n in served["pairs/label_names"][0]] == ["0", "1"]
    # The submission file holds the same labels: prediction and serving agree on the test rows.
    submitted = [line.split("\t")[1] for line in (output_dir / "MRPC.tsv").read_text().splitlines()[1:]]
    assert submitted == labels
    # MRPC is a task of pairs: one segment per row is refused with a message that says so.
    with pytest.raises(tf.errors.InvalidArgumentError, match="fine-tuned on pairs of texts"):
        tf.saved_model.load(summary["export_dir"]).signatures["serve_text"](text=tf.constant([pairs[0][0]]))


def test_glue_exports_know_single_and_pair_tasks():
    from finetune.glue.task import GlueTask

    segments = {name: GlueTask(name).text_segments for name in ("CoLA", "SST-2", "MRPC", "RTE", "MNLI", "STS-B")}
    assert segments == {"CoLA": 1, "SST-2": 1, "MRPC": 2, "RTE": 2, "MNLI": 2, "STS-B": 2}


@pytest.mark.slow
def test_dev_predictions_tensorboard_and_the_best_checkpoint(mrpc_run):
    output_dir, summary = mrpc_run
    lines = (output_dir / "dev_predictions.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction\tlabel" and len(lines) == DEV_SIZES["MRPC"] + 1
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[0] for row in rows] == [str(i) for i in range(DEV_SIZES["MRPC"])]
    # The file's predictions are the ones scored: their accuracy is eval_results.json's.
    accuracy = np.mean([row[1] == row[2] for row in rows])
    assert accuracy == pytest.approx(_eval_results(output_dir)["dev"]["accuracy"], abs=1e-12)
    # Dev accuracy at each checkpoint in TensorBoard's eval/, the best kept as model.ckpt-best.
    logged = {}
    for path in (output_dir / "eval").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "dev/accuracy":
                    logged[event.step] = float(tf.make_ndarray(value.tensor))
    assert sorted(logged) == [8, 16] and logged[16] == pytest.approx(accuracy)
    best = json.loads((output_dir / cli.BEST_RESULTS).read_text())
    assert best["value"] == pytest.approx(max(logged.values()), abs=1e-6)
    assert logged[best["global_step"]] == pytest.approx(best["value"], abs=1e-6)
    assert (output_dir / f"{cli.BEST_CHECKPOINT}.index").is_file()


def test_the_summary_prints_the_dev_scores_beside_the_majority_class(mrpc_run, capsys):
    output_dir, summary = mrpc_run
    labels = [row.split("\t")[2] for row in (output_dir / "dev_predictions.tsv").read_text().splitlines()[1:]]
    positive = labels.count("1")  # the majority: 279 paraphrases of 408
    assert positive > len(labels) / 2
    dev = _eval_results(output_dir)["dev"]
    expected = {"predictor": "the majority class, 1, every time", "accuracy": positive / len(labels),
                "f1": 2 * positive / (positive + len(labels))}
    assert dev["baseline"] == pytest.approx(expected, abs=1e-12)
    from finetune.cli import print_summary

    print_summary(summary)
    printed = capsys.readouterr().out.splitlines()
    assert (f"dev: accuracy {dev['accuracy']:.4g} against {expected['accuracy']:.4g}, f1 {dev['f1']:.4g} against "
            f"{expected['f1']:.4g} for the majority class, 1, every time") in printed


@pytest.mark.slow
def test_a_predict_only_run_does_not_export_again(mrpc_run, predicted_again):
    output_dir, summary = mrpc_run
    assert predicted_again["summary"]["export_dir"] is None
    assert (pathlib.Path(summary["export_dir"]) / "saved_model.pb").stat().st_mtime_ns == predicted_again["exported"]
    # the same model, restored, predicts the same
    assert (output_dir / "MRPC.tsv").read_text() == predicted_again["submitted"]


def test_serving_versions_sit_beside_each_other_with_their_warmup(mrpc_run, mrpc_dir, config_file, tmp_path):
    """--serving_version (albert-export's flag, defined once): <output_dir>/export/<version>/, TF
    Serving's layout, a second version beside the first, an existing one refused in one line."""
    from albert_tf.serving import tf_serving
    from albert_tf.utils.errors import FlagError

    output_dir = tmp_path / "run"
    shutil.copytree(mrpc_run[0], output_dir)  # with the run's own export, version 1 (mrpc_run)
    assert mrpc_run[1]["export_dir"] == str(mrpc_run[0] / "export" / "1")
    summary = cli.finetune(_args("MRPC", mrpc_dir, output_dir, config_file, "--do_eval", "--max_eval_examples=4",
                                 "--serving_version=2"))
    assert summary["export_dir"] == str(output_dir / "export" / "2")
    assert tf_serving.versions(output_dir / "export") == [1, 2]
    version = output_dir / "export" / "2"
    logs = tf_serving.read_warmup(version)
    assert tf.make_ndarray(logs[0].predict_log.request.inputs["text"]).shape == (1, 2)  # MRPC's pairs
    replies = tf_serving.replay(tf.saved_model.load(str(version)), logs)
    assert [len(r["probabilities"]) for r in replies] == [1] * (len(logs) - 1) + [len(logs) - 1]
    np.testing.assert_allclose(replies[-1]["probabilities"].sum(-1), 1.0, atol=1e-5)
    with pytest.raises(FlagError, match=r"--serving_version 1: .*1 exists: version 1 is there already"):
        cli.finetune(_args("MRPC", mrpc_dir, output_dir, config_file, "--do_eval", "--serving_version=1"))


def test_the_run_folder_remembers_its_config_and_vocabulary(mrpc_run, predicted_again):
    """Predicting from a fine-tuning run folder needs neither --albert_config_file nor
    --spm_model_file again: the run kept albert_config.json and its vocabulary as spiece.model."""
    output_dir, _ = mrpc_run
    assert (output_dir / "spiece.model").read_bytes() == TINY_VOCAB.read_bytes()
    again, args = predicted_again["summary"], predicted_again["args"]
    assert again["predictions"] and (output_dir / "MRPC.tsv").read_text() == predicted_again["submitted"]
    assert f"encoder: a checkpoint of an albert_tf run: {output_dir}" in predicted_again["stdout"]
    # Evaluation alone, from the same folder: the dev scores of the run's last step (it wrote them
    # to TensorBoard outside a training loop, which failed with a NameError).
    trained = _eval_results(output_dir)["dev"]
    evaluated = cli.finetune([arg.replace("--do_predict", "--do_eval") for arg in args] + ["--noexport"])["eval"]
    assert evaluated["dev"]["accuracy"] == pytest.approx(trained["accuracy"])


@pytest.mark.slow
def test_a_saved_model_initialises_the_encoder(mrpc_run):
    # The exported classifier is a reusable SavedModel too: its encoder weights seed a new run, and by
    # the one task rule (issue 50) a classifier of its head size resumes from its head; another size
    # gets a new one.
    _, summary = mrpc_run
    assert init_vocab_size(summary["export_dir"]) == CONFIG.vocab_size
    keras.utils.set_random_seed(3)
    classifier = GlueClassifier(CONFIG, 2)
    classifier.build()
    initialize_encoder(classifier, summary["export_dir"])
    for ours, trained in zip(classifier.encoder.weights, summary["model"].encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), trained.numpy(), err_msg=ours.path)
    np.testing.assert_array_equal(classifier.classifier.kernel.numpy(), summary["model"].classifier.kernel.numpy())
    three = GlueClassifier(CONFIG, 3)
    three.build()
    head = three.classifier.kernel.numpy().copy()
    initialize_encoder(three, summary["export_dir"])
    np.testing.assert_array_equal(three.classifier.kernel.numpy(), head)
    np.testing.assert_array_equal(three.encoder.weights[0].numpy(), summary["model"].encoder.weights[0].numpy())


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, metric_ranges",
    [
        ("RTE", {"accuracy": (0.0, 1.0)}),
        ("CoLA", {"matthews_corr": (-1.0, 1.0)}),
        ("STS-B", {"pearson": (-1.0, 1.0), "spearman": (-1.0, 1.0)}),
    ],
)
def test_tasks_end_to_end(task, metric_ranges, small_data_dir, config_file, tmp_path):
    summary = cli.finetune(_args(task, small_data_dir / "glue", tmp_path, config_file, "--do_train", "--do_eval",
                                 "--export=false", steps=8))
    assert summary["train"]["step"] == 8 and math.isfinite(summary["train"]["train"]["loss"])
    dev = _eval_results(tmp_path)["dev"]
    assert dev["examples"] == DEV_SIZES[task]
    for metric, (low, high) in metric_ranges.items():
        assert isinstance(dev[metric], float) and low <= dev[metric] <= high, (metric, dev[metric])
    assert "accuracy" not in summary["train"]["train"] if task == "STS-B" else True


@pytest.mark.slow
def test_resume_ends_where_an_uninterrupted_run_does(mrpc_run, mrpc_dir, config_file, tmp_path):
    output_dir, whole = mrpc_run
    # A run interrupted after its checkpoint of step 8: the one of step 16 never landed.
    for name in ("albert_config.json", TASK_FILE, "ckpt-8.index", "ckpt-8.data-00000-of-00001"):
        shutil.copy(output_dir / name, tmp_path / name)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-8"\n')
    resumed = cli.finetune(_args("MRPC", mrpc_dir, tmp_path, config_file, "--do_train", "--export=false",
                                 "--save_checkpoints_steps=8", f"--cache_dir={output_dir / 'features'}"))
    assert resumed["train"]["resumed_from"] == 8 and resumed["train"]["step"] == 16
    # Same data order and dropout masks after the resume: the same weights as the whole run's.
    for ours, theirs in zip(resumed["model"].weights, whole["model"].weights, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-6, rtol=0, err_msg=ours.path)


# ---- bad input ----------------------------------------------------------------------------------


def test_unknown_task_lists_the_tasks(small_data_dir, config_file, tmp_path):
    with pytest.raises(ValueError, match=r"unknown GLUE task 'SST3'.*CoLA, SST-2, MRPC, STS-B"):
        cli.finetune(_args("SST3", small_data_dir / "glue", tmp_path, config_file, "--do_train"))


def test_data_dir_without_the_task_files(config_file, tmp_path):
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"GLUE task RTE: no train file in .*RTE/train.tsv"):
        cli.finetune(_args("RTE", tmp_path / "glue", tmp_path / "out", config_file, "--do_train"))


def test_init_checkpoint_of_another_vocabulary(small_data_dir, tmp_path):
    other = AlbertPretrainer(CONFIG.replace(vocab_size=500))
    other.build()
    run_dir = tmp_path / "pretrain"
    run_dir.mkdir()
    other.config.to_json_file(run_dir / CONFIG_FILE)
    tf.train.Checkpoint(model=model_weights(other)).write(str(run_dir / "ckpt-1"))
    (run_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    args = ["albert-finetune-glue", "--task=RTE", f"--data_dir={small_data_dir / 'glue'}",
            f"--output_dir={tmp_path / 'out'}", f"--init_checkpoint={run_dir}", f"--spm_model_file={TINY_VOCAB}",
            "--do_train"]
    with pytest.raises(ValueError, match=r"has a vocabulary of 500 tokens but --spm_model_file .* has 300"):
        cli.finetune(args)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_console_script_reports_bad_input_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["albert-finetune-glue", "--task=nope", f"--data_dir={tmp_path}",
                                      f"--output_dir={tmp_path}", "--do_eval"])
    with pytest.raises(SystemExit) as exit_info:
        cli.run()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("error: unknown GLUE task 'nope'; the tasks are: CoLA")


def test_nothing_to_do_is_a_usage_error(tmp_path):
    with pytest.raises(Exception, match="at least one of --do_train, --do_eval and --do_predict"):
        cli.finetune(["albert-finetune-glue", "--task=RTE", f"--data_dir={tmp_path}", f"--output_dir={tmp_path}"])
