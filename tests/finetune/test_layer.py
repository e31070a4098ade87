"""The shared fine-tuning layer on a task that is not GLUE: features of any shape ([2, T] choices,
float vectors), several records per example, prediction that returns every record once in file
order, a task model that learns; the CLI skeleton's flags are the option fields; every encoder
source is recognised and loads, a SavedModel in a fresh process too."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.presets import convert
from albert_tf.checkpoints import weights as preset_weights
from albert_tf.data.features import EXAMPLE_WEIGHT
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, classifier_sums
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.checkpoints.run_folder import CONFIG_FILE
from albert_tf.checkpoints.weights import model_weights
from albert_tf.presets import loader as initialization
from albert_tf.training import loop
from finetune import cache, cli, inputs, trainer
from albert_tf.checkpoints.run_folder import TASK_FILE
from finetune.options import FinetuneOptions
from finetune.task import HPARAM_FIELDS, FinetuningTask, model_inputs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
SEQ = 8
MARK = 7  # the token that marks the right choice


def _toy_examples(n, seed):
    """Questions of two choices; the right one holds token MARK. Odd questions are 'long': they
    give two records (windows), the second a copy with its choices' other tokens redrawn."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(n):
        label = int(rng.integers(0, 2))
        for _ in range(1 + index % 2):
            ids = rng.integers(10, 300, size=(2, SEQ))
            ids[:, 0] = 2
            ids[label, rng.integers(1, SEQ)] = MARK
            # [2, T] features are written flat, row after row (albert_tf.data.features).
            records.append({"input_ids": ids.reshape(-1), "input_mask": np.ones(2 * SEQ, np.int64),
                            "segment_ids": np.zeros(2 * SEQ, np.int64), "label": label,
                            "example_index": index, "score": rng.normal(size=2).astype(np.float32)})
    return records


class ToyChoiceTask(FinetuningTask):
    """A task module as short as a real one: records of [2, T] choices, several per example."""

    name = "Toy"
    train_metric_names = ("loss", "accuracy")
    prediction_features = ("example_index", "label", "score")

    def __init__(self, num_examples=20, seed=0):
        self.num_examples, self.seed, self.conversions = num_examples, seed, 0

    def feature_spec(self, max_seq_length):
        choices = tf.io.FixedLenFeature([2, max_seq_length], tf.int64)
        scalar = tf.io.FixedLenFeature([], tf.int64)
        return {"input_ids": choices, "input_mask": choices, "segment_ids": choices, "label": scalar,
                "example_index": scalar, "score": tf.io.FixedLenFeature([2], tf.float32)}

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        def convert(report):
            self.conversions += 1
            report.num_examples = self.num_examples
            report.details["windows"] = "two for odd questions"
            return iter(_toy_examples(self.num_examples, self.seed))

        return cache.cache_features(task=self.name, split=split, spec=self.feature_spec(max_seq_length),
                                    max_seq_length=max_seq_length, sources=[], settings=(self.num_examples, self.seed),
                                    tokenizer=tokenizer, convert=convert, cache_dir=cache_dir)

    def build_model(self, config, options, dtype):
        return AlbertMultipleChoice(config, num_choices=2, dropout=options.classifier_dropout, dtype=dtype)

    def loss_sums(self, model, features, training):
        logits = model(model_inputs(features), training=training)
        sums = classifier_sums(logits, features["label"], features[EXAMPLE_WEIGHT], regression=False)
        return {"loss": sums["loss"], "accuracy": sums["hits"]}

    def predict_outputs(self, model, features):
        return {"logits": model(model_inputs(features), training=False)}

    def evaluate(self, split, predictions, cached):
        # Post-processing: an example's answer is the argmax of its records' summed logits.
        totals = np.zeros((cached.num_examples, 2))
        np.add.at(totals, predictions["example_index"], predictions["logits"])
        labels = np.zeros(cached.num_examples, np.int64)
        labels[predictions["example_index"]] = predictions["label"]
        return {"accuracy": float(np.mean(totals.argmax(axis=1) == labels))}


@pytest.fixture(scope="module")
def tokenizer():
    return AlbertTokenizer(TINY_VOCAB)


def _options(output_dir, **changes):
    values = dict(output_dir=str(output_dir), train_batch_size=8, eval_batch_size=8, max_seq_length=SEQ,
                  learning_rate=2e-3, num_train_steps=40, num_warmup_steps=4, classifier_dropout=0.0,
                  save_checkpoints_steps=40, steps_per_loop=20, jit_compile=False, seed=3)
    values.update(changes)
    return FinetuneOptions(**values)


def test_cache_keeps_any_shapes_and_is_written_once(tokenizer, tmp_path):
    task = ToyChoiceTask(num_examples=5)
    cached = task.features("dev", tokenizer, SEQ, tmp_path)
    # 5 questions, the odd ones twice: 3 + 2 * 2 records.
    assert (cached.num_examples, cached.num_records, cached.windows) == (5, 7, "two for odd questions")
    assert cached.feature_spec() == task.feature_spec(SEQ)
    again = task.features("dev", tokenizer, SEQ, tmp_path)
    assert again == cached and task.conversions == 1
    batches = list(inputs.make_dataset(cached, global_batch_size=4, training=False, with_index=True))
    assert batches[0]["input_ids"].shape == (4, 2, SEQ) and batches[0]["input_ids"].dtype == tf.int32
    assert batches[0]["score"].dtype == tf.float32 and batches[0]["score"].shape == (4, 2)
    # 7 records and 1 filler of weight 0 make two full batches.
    weights = np.concatenate([b[EXAMPLE_WEIGHT].numpy() for b in batches])
    np.testing.assert_array_equal(weights, [1] * 7 + [0])
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        cached.nothing


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """One fine-tuning run (the one Trainer) of the toy task, for the tests that predict with it and the one that trains
    it (its predictions agree with its model whatever its weights): one model built, its prediction
    step traced once."""
    return loop.Trainer(CONFIG, ToyChoiceTask(), _options(tmp_path_factory.mktemp("toy") / "run"))


def test_prediction_returns_every_record_once_in_file_order(tokenizer, tmp_path, toy_run):
    task = ToyChoiceTask(num_examples=25)
    cached = task.features("dev", tokenizer, SEQ, tmp_path / "features")
    assert cached.num_records == 37  # not a multiple of the batch of 8
    run = toy_run
    predictions, rate = trainer.predict(run, cached)
    records = _toy_examples(25, 0)
    assert rate > 0 and set(predictions) == {"logits", "example_index", "label", "score"}
    np.testing.assert_array_equal(predictions["example_index"], [r["example_index"] for r in records])
    np.testing.assert_allclose(predictions["score"], [r["score"] for r in records])
    batch = {k: np.array([r[k].reshape(2, SEQ) for r in records], np.int32)
             for k in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(predictions["logits"], run.model(batch).numpy(), atol=1e-5, rtol=0)


class _ShortToyTask(ToyChoiceTask):
    """Toy records of 1 to SEQ real tokens, evaluated in batches cut to 2, 4 or SEQ columns."""

    buckets = (2, 4, SEQ)
    longest_short = 2  # rows 0-15 hold 1 to this many tokens; the others up to SEQ

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        rng = np.random.default_rng(5)

        def convert(report):
            report.num_examples = self.num_examples
            for index in range(self.num_examples):
                short = index < 16 or self.longest_short == SEQ // 2
                length = int(rng.integers(1, self.longest_short + 1 if short else SEQ + 1))
                mask = (np.arange(SEQ) < length).astype(np.int64)
                ids = rng.integers(10, 300, size=(2, SEQ)) * mask
                yield {"input_ids": ids.reshape(-1), "input_mask": np.tile(mask, 2),
                       "segment_ids": np.zeros(2 * SEQ, np.int64), "label": index % 2,
                       "example_index": index, "score": np.zeros(2, np.float32)}

        return cache.cache_features(task=self.name, split=split, spec=self.feature_spec(max_seq_length),
                                    max_seq_length=max_seq_length, sources=[],
                                    settings=("short", self.num_examples, self.longest_short),
                                    tokenizer=tokenizer, convert=convert, cache_dir=cache_dir)

    def length_buckets(self, max_seq_length):
        return self.buckets


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_length_bucketed_prediction_equals_padded_prediction(tokenizer, tmp_path, jit_compile):
    task = _ShortToyTask(num_examples=27)
    cached = task.features("dev", tokenizer, SEQ, tmp_path / "features")
    batches = list(inputs.make_dataset(cached, global_batch_size=8, training=False, with_index=True,
                                       length_buckets=task.buckets))
    # Rows 0-15 hold 1 or 2 tokens: the first two batches are cut to 2 columns; the others hold
    # longer rows and one its filler.
    assert [b["input_ids"].shape[-1] for b in batches][:2] == [2, 2]
    assert all(b["input_ids"].shape[-1] in task.buckets for b in batches) and len(batches) == 4
    run = loop.Trainer(CONFIG, task, _options(tmp_path / "run", jit_compile=jit_compile))
    shapes = [b["input_ids"].shape[-1] for b in trainer.dataset_fn(run, cached, for_training=False)(
        tf.distribute.InputContext(), 8)]
    assert len(set(shapes)) == 3, shapes  # sorted by length: 2, 2, 4, SEQ
    bucketed, _ = trainer.predict(run, cached)
    # Traced for the first length, then once for any length: not once a bucket.
    assert run._eval_step.experimental_get_tracing_count() == 2
    task.buckets = None
    padded, _ = trainer.predict(run, cached)
    np.testing.assert_array_equal(bucketed["example_index"], np.arange(27))
    np.testing.assert_allclose(bucketed["logits"], padded["logits"], atol=1e-5, rtol=0)
    assert np.std(padded["logits"]) > 1e-3


def _lengths(batch):
    return np.asarray(batch["input_mask"]).reshape(len(batch["input_mask"]), 2, -1).sum(-1).max(-1)


def test_sorting_by_length_within_windows_keeps_every_record_once_and_shortens_batches(tokenizer, tmp_path):
    task = _ShortToyTask(num_examples=27)
    task.longest_short = 1  # rows 0-15 hold one token; rows 16-26 1 to SEQ
    cached = task.features("dev", tokenizer, SEQ, tmp_path / "features")
    records = list(tf.data.TFRecordDataset(str(cached.path)))
    lengths = _lengths(tf.io.parse_example(tf.stack(records), cached.feature_spec()))
    # Rewritten so that each batch of 8 in file order starts with one of the four longest rows.
    longs = sorted(range(16, 27), key=lambda i: -lengths[i])
    assert lengths[longs[3]] > 4
    rest = list(range(16)) + longs[4:]
    order = [i for b in range(4) for i in [longs[b]] + rest[7 * b:7 * b + 7]]
    with tf.io.TFRecordWriter(str(tmp_path / "mixed.tfrecord")) as writer:
        for i in order:
            writer.write(records[i].numpy())
    mixed = dataclasses.replace(cached, path=tmp_path / "mixed.tfrecord")

    def batches(sort_window):
        return list(inputs.make_dataset(mixed, global_batch_size=8, training=False, with_index=True,
                                        length_buckets=task.buckets, sort_window=sort_window))

    plain, sorted_ = batches(None), batches(4)
    assert len(plain) == len(sorted_) == 4
    indices = np.concatenate([b[inputs.RECORD_INDEX].numpy() for b in sorted_])
    np.testing.assert_array_equal(np.sort(indices), np.arange(32))  # 27 records and 5 fillers, once each
    weights = np.concatenate([b[EXAMPLE_WEIGHT].numpy() for b in sorted_])
    np.testing.assert_array_equal(weights, (indices < 27).astype(np.float32))
    lengths = np.concatenate([_lengths(b) for b in sorted_])
    assert np.all(np.diff(lengths) >= 0)  # one window of 4 batches: in order of length throughout
    # Each record keeps its own tokens (compared padded back to SEQ).
    def rows(batches_):
        return {int(i): np.pad(row, [(0, 0), (0, SEQ - row.shape[-1])])
                for b in batches_ for i, row in zip(b[inputs.RECORD_INDEX].numpy(), b["input_ids"].numpy())}

    plain_rows, sorted_rows = rows(plain), rows(sorted_)
    assert plain_rows.keys() == sorted_rows.keys()
    for i in plain_rows:
        np.testing.assert_array_equal(sorted_rows[i], plain_rows[i])
    # In file order every batch holds a long row; sorted, the one-token rows and the fillers fill
    # the first two batches, cut to 2 columns.
    assert [b["input_ids"].shape[-1] for b in plain] == [SEQ] * 4
    widths = [b["input_ids"].shape[-1] for b in sorted_]
    assert widths[:2] == [2, 2] and widths[3] == SEQ
    with pytest.raises(ValueError, match="sort_window"):
        inputs.make_dataset(mixed, global_batch_size=8, training=True, sort_window=4)  # no buckets


def test_training_grouped_by_length_draws_every_record_evenly_in_shorter_batches(tokenizer, tmp_path):
    task = _ShortToyTask(num_examples=32)
    task.longest_short = 1  # rows 0-15 hold one token; rows 16-31 1 to SEQ
    cached = task.features("train", tokenizer, SEQ, tmp_path / "features")

    def batches(sort_window, seed=7):
        dataset = inputs.make_dataset(cached, global_batch_size=8, training=True, seed=seed, with_index=True,
                                      length_buckets=task.buckets, sort_window=sort_window)
        return list(dataset.take(16))  # four epochs of 32 records: a window of 4 batches each

    grouped, at_random = batches(4), batches(None)
    # Every record drawn about as often as at random: 4 times in 4 epochs, give or take the batches
    # that the shuffle of a window's batches lets through from the next window.
    counts = np.bincount(np.concatenate([b[inputs.RECORD_INDEX].numpy() for b in grouped]), minlength=32)
    assert counts.sum() == 128 and counts.min() >= 3 and counts.max() <= 5
    # A batch of grouped records holds rows of similar length: fewer columns than random batches.
    def widths(of):
        return [b["input_ids"].shape[-1] for b in of]

    assert np.mean(widths(grouped)) < 0.8 * np.mean(widths(at_random))
    assert widths(grouped).count(2) >= 4 > widths(at_random).count(2)
    # The spread of lengths within a batch is smaller too (the longest minus the shortest row).
    def spread(of):
        return np.mean([np.ptp(_lengths(b)) for b in of])

    assert spread(grouped) < 0.6 * spread(at_random)
    # The batches of a window come in shuffled order, not shortest first, the same for the same seed.
    first_window = widths(grouped)[:4]
    assert first_window != sorted(first_window)
    again = batches(4)
    for one, other in zip(grouped, again):
        np.testing.assert_array_equal(one[inputs.RECORD_INDEX].numpy(), other[inputs.RECORD_INDEX].numpy())
    assert any(not np.array_equal(one[inputs.RECORD_INDEX].numpy(), other[inputs.RECORD_INDEX].numpy())
               for one, other in zip(grouped, batches(4, seed=8)))


def test_the_trainer_groups_training_batches_by_length_unless_told_not_to(tokenizer, tmp_path):
    task = _ShortToyTask(num_examples=32)
    task.longest_short = 1
    cached = task.features("train", tokenizer, SEQ, tmp_path / "features")

    def widths(group_by_length):
        run = loop.Trainer(CONFIG, task, _options(tmp_path / f"run-{group_by_length}",
                                                        group_by_length=group_by_length))
        dataset = trainer.dataset_fn(run, cached, for_training=True)(tf.distribute.InputContext(), 8)
        return [b["input_ids"].shape[-1] for b in dataset.take(trainer.SORT_WINDOW)]

    grouped, at_random = widths(True), widths(False)
    assert np.mean(grouped) < 0.8 * np.mean(at_random)


def _trained_weights(task, cached, output_dir, jit_compile):
    """The initial and trained weights of a 6-step run of `task` on `cached`."""
    keras.utils.set_random_seed(0)
    # Batches drawn at random, as without buckets (grouping by length would change them).
    run = loop.Trainer(CONFIG, task, _options(output_dir, num_train_steps=6, save_checkpoints_steps=6, steps_per_loop=3,
                                              jit_compile=jit_compile, group_by_length=False))
    run.restore_or_initialize()
    initial = [v.numpy() for v in run.model.trainable_variables]
    trainer.train(run, cached)
    return initial, [v.numpy() for v in run.model.trainable_variables]


def _every_row_short():
    task = _ShortToyTask(num_examples=40)
    task.longest_short = SEQ // 2  # every row: every training batch is cut to 2 or 4 columns
    return task


@pytest.fixture(scope="module")
def padded_trajectory(tokenizer, tmp_path_factory):
    """The reference of both bucketed runs below: the padded run, in graph mode, made once. Under XLA
    the padded trajectory is the same (XLA's padded run ended 1.6e-6 from it, its bucketed run too,
    against the tolerance of 1e-4); made again with XLA, it was a third of the [xla] test's CPU."""
    task = _every_row_short()
    task.buckets = None
    folder = tmp_path_factory.mktemp("padded_trajectory")
    cached = task.features("train", tokenizer, SEQ, folder / "features")
    return cached, _trained_weights(task, cached, folder / "run", jit_compile=False)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_length_bucketed_training_follows_the_padded_trajectory(tmp_path, jit_compile, padded_trajectory):
    task = _every_row_short()
    cached, (initial, padded_weights) = padded_trajectory  # the same features: buckets cut batches, not records
    shapes = {b["input_ids"].shape[-1] for b in inputs.make_dataset(
        cached, global_batch_size=8, training=True, seed=3, length_buckets=task.buckets).take(12)}
    assert shapes <= {2, 4} and 4 in shapes
    bucketed_initial, bucketed_weights = _trained_weights(task, cached, tmp_path / "run", jit_compile)
    for start, padded_start in zip(bucketed_initial, initial):
        np.testing.assert_array_equal(start, padded_start)  # the same fresh model
    for bucketed, padded in zip(bucketed_weights, padded_weights):
        np.testing.assert_allclose(bucketed, padded, atol=1e-4, rtol=0)
    # The runs trained: the weights differ from the fresh model's they started from.
    moved = any(np.abs(a - b).max() > 1e-3 for a, b in zip(padded_weights, initial))
    assert moved


def test_a_task_model_learns_on_the_shared_trainer(tokenizer, tmp_path, toy_run):
    task = ToyChoiceTask(num_examples=24, seed=1)
    cached = task.features("train", tokenizer, SEQ, tmp_path / "features")
    run = toy_run
    assert run.restore_or_initialize() == 0  # nothing trained it before
    before = task.evaluate("train", trainer.predict(run, cached)[0], cached)["accuracy"]
    result = trainer.train(run, cached)
    after = task.evaluate("train", trainer.predict(run, cached)[0], cached)["accuracy"]
    assert result["step"] == 40 and set(result["train"]) >= {"loss", "accuracy"}
    assert after >= 0.9 and after > before, (before, after)
    recorded = json.loads((pathlib.Path(run.options.output_dir) / TASK_FILE).read_text())  # the task, and the model its heads are
    assert recorded == {"task": "Toy", "class": type(run.model).__name__,
                        "arguments": {name: getattr(run.model, name) for name in run.model.config_arguments}}
    # Another task's run in the same folder is refused.
    other = ToyChoiceTask()
    other.name = "Other"
    with pytest.raises(ValueError, match="holds a Toy run, not Other"):
        loop.Trainer(CONFIG, other, _options(run.options.output_dir))


# ---- the CLI skeleton ----------------------------------------------------------------------------


class _PresetTask(ToyChoiceTask):
    def default_options(self, **given):
        preset = {"learning_rate": 3e-5, "train_batch_size": 32, "num_train_steps": 100, "num_warmup_steps": 10,
                  "max_seq_length": 64, "classifier_dropout": 0.1}
        return {**preset, **{k: v for k, v in given.items() if v is not None}}


def test_cli_flags_are_the_option_fields():
    flag_values = flags.FlagValues()
    cli.define_flags(flag_values)
    fields = {f.name for f in dataclasses.fields(FinetuneOptions)}
    assert fields <= set(flag_values)
    flag_values(["prog", "--output_dir=/tmp/x", "--learning_rate=1e-4", "--seed=5", "--jit_compile=false"])
    options = cli.options_from_flags(flag_values, _PresetTask())
    assert options == FinetuneOptions(
        output_dir="/tmp/x", learning_rate=1e-4, train_batch_size=32, num_train_steps=100, num_warmup_steps=10,
        max_seq_length=64, classifier_dropout=0.1, seed=5, jit_compile=False, progress_bar=True)
    assert all(flag_values[name].default is None for name in HPARAM_FIELDS)


def _flag_values():
    flag_values = flags.FlagValues()
    cli.define_flags(flag_values)
    return flag_values


def _scalars(folder):
    """TensorBoard scalars of the event files in `folder`: {tag: {step: value}}."""
    found = {}
    for path in sorted(pathlib.Path(folder).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                found.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
    return found


class _DevTask(_PresetTask):
    eval_splits = ("dev",)
    best_metric = "accuracy"

    def features(self, split, tokenizer, max_seq_length, cache_dir):
        self.seed = {"train": 1, "dev": 2}[split]
        return super().features(split, tokenizer, max_seq_length, cache_dir)


def test_evaluation_while_training_goes_to_tensorboard_and_keeps_the_best_checkpoint(tmp_path):
    output_dir = tmp_path / "run"
    argv = ["prog", f"--output_dir={output_dir}", f"--albert_config_file={tmp_path / 'config.json'}",
            f"--spm_model_file={TINY_VOCAB}", f"--max_seq_length={SEQ}", "--train_batch_size=8",
            "--num_train_steps=40", "--num_warmup_steps=4", "--learning_rate=2e-3", "--classifier_dropout=0",
            "--save_checkpoints_steps=10", "--steps_per_loop=10", "--eval_batch_size=8", "--jit_compile=false",
            "--seed=3", "--progress_bar=false", "--export=false", "--do_train", "--do_eval"]
    CONFIG.to_json_file(tmp_path / "config.json")
    summary = cli.finetune(argv, _flag_values(), lambda flag_values: _DevTask(num_examples=24))
    dev = _scalars(output_dir / "eval")["dev/accuracy"]
    assert sorted(dev) == [10, 20, 30, 40]  # at every checkpoint, once each
    assert summary["eval"]["global_step"] == 40 and summary["eval"]["dev"]["accuracy"] == pytest.approx(dev[40])
    best = json.loads((output_dir / cli.BEST_RESULTS).read_text())
    best_step = min(step for step, value in dev.items() if value == max(dev.values()))
    assert (best["global_step"], best["metric"], best["checkpoint"]) == (best_step, "accuracy", cli.BEST_CHECKPOINT)
    assert best["value"] == pytest.approx(max(dev.values()))
    # model.ckpt-best holds that step's weights: restored, it scores what was recorded.
    task = _DevTask(num_examples=24)
    run = loop.Trainer(CONFIG, task, _options(tmp_path / "other"))
    run.checkpoint.read(str(output_dir / cli.BEST_CHECKPOINT)).assert_existing_objects_matched()
    cached = task.features("dev", AlbertTokenizer(TINY_VOCAB), SEQ, output_dir / "features")
    assert run.current_step == best_step
    assert task.evaluate("dev", trainer.predict(run, cached)[0], cached)["accuracy"] == pytest.approx(best["value"])


# ---- encoder sources -----------------------------------------------------------------------------


def _random_encoder(seed):
    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    return encoder


def _write_tf1_checkpoint(encoder, folder):
    """The encoder under the release's `bert/...` names, as its tarballs hold them."""
    weights = preset_weights.values(preset_weights.split(encoder)[0])
    return pathlib.Path(convert.write_tf1_release(folder, CONFIG, weights, TINY_VOCAB))


def _assert_encoder_equal(model, encoder):
    for ours, theirs in zip(model.encoder.weights, encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def test_every_source_is_recognised_and_loads(tmp_path):
    pretrainer = AlbertPretrainer(CONFIG)
    pretrainer.build()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    CONFIG.to_json_file(run_dir / CONFIG_FILE)
    tf.train.Checkpoint(model=model_weights(pretrainer)).write(str(run_dir / "ckpt-4"))
    (run_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
    (run_dir / "spiece.model").write_bytes(TINY_VOCAB.read_bytes())  # as albert-pretrain keeps it
    preset_encoder = _random_encoder(5)
    preset = preset_encoder.save_to_preset(tmp_path / "preset", TINY_VOCAB)
    tf1_encoder = _random_encoder(6)
    tf1 = _write_tf1_checkpoint(tf1_encoder, tmp_path / "tf1")

    cases = {"checkpoint": (str(run_dir), pretrainer.encoder, str(run_dir / "spiece.model")),
             "preset": (preset, preset_encoder, str(pathlib.Path(preset) / "spiece.model")),
             # A release's checkpoint prefix is read where it is (its folder converts once into the cache).
             "tf1_checkpoint": (str(tf1 / "model.ckpt-best"), tf1_encoder, str(tf1 / initialization.TF1_VOCAB))}
    for kind, (path, encoder, vocab) in cases.items():
        source = initialization.find_source(path)
        assert (source.kind, source.config, source.spm_model_file) == (kind, CONFIG, vocab)
        assert source.describe().endswith(path)
        model = AlbertClassifier(CONFIG, 2)
        initialization.initialize_encoder(model, path)
        _assert_encoder_equal(model, encoder)
    assert initialization.find_source(albert_config_file=str(run_dir / CONFIG_FILE)).kind == "random"
    assert initialization.init_vocab_size(str(tf1)) == 300


_FRESH_PROCESS = """
import sys
from albert_tf import AlbertConfig
from albert_tf.models import AlbertMultipleChoice
from albert_tf.presets import loader as initialization
assert "tensorflow_text" not in sys.modules
source = initialization.find_source(sys.argv[1])
model = AlbertMultipleChoice(source.config)
initialization.initialize_encoder(model, sys.argv[1])
print(source.kind, source.spm_model_file.endswith(".model"), float(model.encoder.weights[0].numpy().sum()))
"""


@pytest.mark.slow
def test_a_saved_model_initialises_an_encoder_in_a_fresh_process(tmp_path):
    # A process that never imported tensorflow_text: the export's SentencepieceOp must be registered
    # by the loader itself (issue 20, item 1).
    from albert_tf.serving.export import export_encoder

    encoder = _random_encoder(8)
    export_encoder(encoder, tmp_path / "export", TINY_VOCAB, max_seq_length=16)
    CONFIG.to_json_file(tmp_path / "export" / CONFIG_FILE)
    process = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "export")], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    kind, vocab, total = process.stdout.split()
    assert (kind, vocab) == ("saved_model", "True")
    assert float(total) == pytest.approx(float(encoder.weights[0].numpy().sum()), abs=1e-4)
