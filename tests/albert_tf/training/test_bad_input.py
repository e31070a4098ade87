"""Out-of-range inputs give a clear error, not silent garbage."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from tests.albert_tf.tiny import TINY
from tests.helpers import (PRETRAINING_PREDICTIONS, PRETRAINING_SEQ, pretraining_options,
                           write_pretraining_records)

pytestmark = pytest.mark.faults  # python -m pytest -q -m faults: the fault and bad-input tests


@pytest.fixture(scope="module")
def encoder():
    return AlbertEncoder(TINY)


def test_ids_outside_the_vocabulary(encoder):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids must be < vocab_size \(97\)"):
        encoder({"input_ids": tf.constant([[2, 97, 3]])})
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids must be >= 0"):
        encoder({"input_ids": tf.constant([[2, -1, 3]])})


def test_segment_ids_outside_the_type_vocabulary(encoder):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"segment_ids must be < type_vocab_size \(2\)"):
        encoder({"input_ids": tf.constant([[2, 5, 3]]), "segment_ids": tf.constant([[0, 2, 1]])})


def test_sequence_longer_than_max_position_embeddings(encoder):
    too_long = np.full((1, 33), 5, np.int32)
    with pytest.raises(ValueError, match=r"sequence length 33 exceeds max_position_embeddings \(32\)"):
        encoder({"input_ids": too_long})
    # With a dynamic length the check runs in the graph.
    fn = tf.function(lambda ids: encoder({"input_ids": ids}),
                     input_signature=[tf.TensorSpec([None, None], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        fn(too_long)
    assert fn(too_long[:, :32])["sequence_output"].shape == (1, 32, 16)


def test_int64_inputs_from_tfrecords_are_accepted(encoder):
    ids = tf.constant([[2, 5, 3]], tf.int64)
    out = encoder({"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)})
    np.testing.assert_allclose(out["sequence_output"], encoder({"input_ids": tf.cast(ids, tf.int32)})["sequence_output"])


# ---- pretraining input (issue 19: no hang, no silent wrong result) ---------------------------------

def _pretrain(tmp_path, input_file, **changes):
    from albert_tf.training import pretraining
    from albert_tf.training import loop

    values = dict(output_dir=str(tmp_path / "run"), input_file=input_file, train_batch_size=4, eval_batch_size=4,
                  max_seq_length=PRETRAINING_SEQ, max_predictions_per_seq=PRETRAINING_PREDICTIONS, num_train_steps=2, num_warmup_steps=0,
                  save_checkpoints_steps=10, steps_per_loop=1, jit_compile=False)
    values.update(changes)
    return pretraining.run_pretraining(TINY, pretraining.PretrainingOptions(**values), export_fn=lambda model, path: None)


def test_a_training_input_without_records_is_an_error_not_a_hang(tmp_path):
    from albert_tf.data.datasets import pretraining_dataset
    from albert_tf.utils.errors import UserError

    empty = write_pretraining_records(tmp_path / "empty.tfrecord", 0)
    with pytest.raises(UserError, match=f"^the input files hold no records: {empty}$"):
        _pretrain(tmp_path, empty)
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match=f"^the input files hold no records: {empty}$"):
        pretraining_dataset(empty, batch_size=2, max_seq_length=PRETRAINING_SEQ, max_predictions_per_seq=PRETRAINING_PREDICTIONS,
                            is_training=True)


def test_ids_outside_the_vocabulary_are_named_by_the_reader_under_xla(tmp_path):
    from albert_tf.utils.errors import UserError

    records = write_pretraining_records(tmp_path / "big_vocab.tfrecord", 8, max_id=TINY.vocab_size + 3)
    with pytest.raises(UserError) as error:
        _pretrain(tmp_path, records, jit_compile=True)
    assert re.fullmatch(
        r"pretraining record feature 'input_ids' holds the token id (9[7-9]|100) outside the model's vocabulary "
        r"of 97: the data was made with another SentencePiece model than the config's vocab_size",
        str(error.value),
    )


def test_the_output_of_an_unfinished_data_prep_run_is_refused(tmp_path):
    import json

    from albert_tf.data.datasets import METADATA_FILE, pretraining_dataset
    from albert_tf.utils.errors import UserError

    data = tmp_path / "data"
    data.mkdir()
    records = write_pretraining_records(data / "pretrain-00000-of-00004.tfrecord", 8)
    (data / METADATA_FILE).write_text(json.dumps({"settings": {}, "complete": False}))
    with pytest.raises(UserError) as error:
        _pretrain(tmp_path, str(data / "pretrain-*.tfrecord"))
    assert str(error.value) == (
        f"{data / METADATA_FILE} says the data-prep run that wrote these files did not finish (complete: false): "
        "rerun albert-create-pretraining-data with the same flags to finish it"
    )
    assert not (tmp_path / "run").exists()
    (data / METADATA_FILE).write_text(json.dumps({"settings": {}, "complete": True}))
    batch = next(iter(pretraining_dataset(records, batch_size=8, max_seq_length=PRETRAINING_SEQ,
                                          max_predictions_per_seq=PRETRAINING_PREDICTIONS, is_training=False)))
    assert batch["input_ids"].shape == (8, PRETRAINING_SEQ)


def test_a_file_that_is_not_a_tfrecord_is_named(tmp_path):
    from albert_tf.utils.errors import UserError

    text = tmp_path / "corpus.txt"
    text.write_text("this is plain text, not a TFRecord file\n" * 20)
    with pytest.raises(UserError, match=f"^{text} is not a TFRecord file, or it is corrupted: "):
        _pretrain(tmp_path, str(text))


@pytest.mark.parametrize("learning_rate", [0.0, -1e-3, float("nan"), float("inf")])
def test_a_learning_rate_that_cannot_train_is_refused(tmp_path, learning_rate):
    from albert_tf.utils.errors import FlagError

    with pytest.raises(FlagError) as error:
        pretraining_options(tmp_path, learning_rate=learning_rate)
    assert str(error.value) == f"learning_rate must be a positive number, got {learning_rate!r}"
    assert error.value.exit_code == 2


def test_a_failed_first_run_does_not_lock_its_output_dir(tmp_path):
    from albert_tf.training import pretraining
    from albert_tf.training import loop
    from albert_tf.checkpoints import run_folder

    run_folder.check_output_dir(str(tmp_path), TINY, write=True)  # a first run that died before saving
    wider = TINY.replace(intermediate_size=64)
    run_folder.check_output_dir(str(tmp_path), wider, write=True)
    assert '"intermediate_size": 64' in (tmp_path / run_folder.CONFIG_FILE).read_text()
    run = loop.Trainer(wider, pretraining.PretrainingTask(), pretraining_options(tmp_path))
    run.save()
    with pytest.raises(ValueError, match="holds checkpoints of another config: intermediate_size 64 there vs 32"):
        run_folder.check_output_dir(str(tmp_path), TINY, write=True)


def test_a_truncated_latest_checkpoint_is_named_and_the_one_before_is_used(tmp_path, caplog):
    from albert_tf.training import pretraining
    from albert_tf.training import loop

    run = loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(tmp_path))
    first = run.save()
    run.step.assign(3)
    latest = run.save()
    data = tf.io.gfile.glob(latest + ".data-*")[0]
    with open(data, "r+b") as f:
        f.truncate(100)
    resumed = loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(tmp_path))
    with caplog.at_level("WARNING"):
        assert resumed.restore_or_initialize() == 0
    assert f"checkpoint {latest} is unreadable" in caplog.text and data in caplog.text
    assert f"resumed from {first}, not from the unreadable latest {latest}" in caplog.text
    with open(tf.io.gfile.glob(first + ".data-*")[0], "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError, match=f"no checkpoint in {tmp_path} could be read"):
        loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(tmp_path)).restore_or_initialize()


def test_a_checkpoint_of_another_model_is_named_as_such_not_as_damaged(tmp_path, caplog):
    from albert_tf.training import pretraining
    from albert_tf.training import loop
    from albert_tf.checkpoints import run_folder
    from albert_tf.utils.errors import UserError

    loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(tmp_path)).save()
    # The run folder's config was replaced (a copied folder, an edited file): it now describes
    # another model than its checkpoints.
    wider = TINY.replace(intermediate_size=48)
    (tmp_path / run_folder.CONFIG_FILE).write_text(json.dumps(wider.to_dict()))
    with pytest.raises(UserError) as error:
        loop.Trainer(wider, pretraining.PretrainingTask(), pretraining_options(tmp_path)).restore_or_initialize()
    assert re.fullmatch(
        rf"output_dir {tmp_path} holds checkpoints of another model: {tmp_path}/ckpt-0 does not match the model: "
        r"encoder/\S+ has shape \[(16, 32|32|32, 16)\] there, \[(16, 48|48|48, 16)\] here(; encoder/\S+ has shape "
        r"\[[0-9, ]+\] there, \[[0-9, ]+\] here)+; use a fresh output_dir, or the config \(and task\) that wrote them",
        str(error.value),
    ), str(error.value)
    assert "unreadable" not in caplog.text and "truncated" not in str(error.value)


def test_export_of_a_missing_checkpoint_folder_names_it(tmp_path):
    from albert_tf.utils.errors import UserError
    from albert_tf import AlbertEncoder

    missing = str(tmp_path / "no_such_run")
    with pytest.raises(UserError) as error:  # albert-export --preset / --init_checkpoint
        AlbertEncoder.from_preset(missing)
    assert str(error.value).startswith(f"{missing}: no such folder or file, nor a released name (")
    with pytest.raises(UserError, match=f"^{tmp_path}: holds no model: not a preset folder, a run's output_dir"):
        AlbertEncoder.from_preset(str(tmp_path))


class _Payload:
    """Pickled, it would create a file when loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_payload_in_a_pytorch_checkpoint_is_refused_and_never_run(tmp_path):
    import torch

    from albert_tf.presets.convert import HF_PYTORCH, read_hf_weights
    from albert_tf.utils.errors import UserError

    marker = tmp_path / "ran"
    torch.save({"albert.embeddings.word_embeddings.weight": torch.zeros(2, 2), "x": _Payload(str(marker))},
               tmp_path / HF_PYTORCH)
    with pytest.raises(UserError, match=f"^{tmp_path / HF_PYTORCH} holds pickled Python objects, not only tensors: "
                                        "refused, as loading them could run code"):
        read_hf_weights(tmp_path)
    assert not marker.exists()


def test_fill_mask_checks_the_text_against_the_models_own_length(data_dir):
    from albert_tf.utils.errors import UserError
    from albert_tf.serving.fill_mask import fill_mask
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(str(data_dir / "albert" / "30k-clean.model"))
    calls = []

    def predict(inputs):  # as saved_model_predictor's: it knows the length it was exported for
        calls.append(inputs)
        raise AssertionError("the model must not see a text longer than it reads")

    predict.max_seq_length = 8
    with pytest.raises(UserError, match=r"^the text is \d+ tokens long with \[CLS\] and \[SEP\]; at most 8 fit$"):
        fill_mask("a long sentence with a [MASK] in the middle of it", predict, tokenizer)
    assert calls == []


def test_an_output_dir_that_is_a_file_is_named(tmp_path):
    from albert_tf.checkpoints import run_folder
    from albert_tf.utils.errors import FlagError

    (tmp_path / "run").write_text("not a folder")
    with pytest.raises(FlagError, match=f"^--output_dir {tmp_path / 'run'} is a file, not a folder$"):
        run_folder.check_output_dir(str(tmp_path / "run"), TINY, write=True)


def test_strategy_tpu_without_a_tpu_is_a_flag_error():
    from albert_tf.training import strategies
    from albert_tf.utils.errors import FlagError

    with pytest.raises(FlagError, match=r"^strategy 'tpu' needs a TPU: pass --tpu="):
        strategies.get_strategy("tpu")


@pytest.mark.parametrize("tool", ["pretrain", "export", "convert"])
def test_every_tool_refuses_an_unusable_output_dir_up_front_naming_the_flag(tmp_path, tool):
    """Through albert_tf.utils.output_dirs' one rule, before any input is read (the inputs here do not exist)."""
    import importlib

    from albert_tf.utils.errors import FlagError

    module = importlib.import_module(f"albert_tf.cli.{tool}")
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("x")
    missing = tmp_path / "missing"
    inputs = {
        "pretrain": [f"--input_file={missing}/*.tfrecord", "--size=albert_base_v2"],
        "export": [f"--init_checkpoint={missing}", "--model=encoder"],
        "convert": ["--source=tf1", f"--input={missing}"],
    }[tool]
    cases = [
        (tmp_path / "a_file" / "run", "cannot be created (a part of the path is a file)"),
        (tmp_path / "a_file", "is a file, not a folder"),
    ]
    if tool != "pretrain":  # a whole new folder: never written into another one
        cases.append((tmp_path / "full", "is not empty"))
    try:
        for output_dir, reason in cases:
            module.FLAGS.unparse_flags()
            module.FLAGS([f"albert-{tool}", *inputs, f"--output_dir={output_dir}"])
            with pytest.raises(FlagError) as error:
                module.main([f"albert-{tool}"])
            assert str(error.value) == f"--output_dir {output_dir} {reason}"
    finally:
        module.FLAGS.unparse_flags()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "full"]
    assert os.listdir(tmp_path / "full") == ["kept.txt"]


def test_records_compressed_as_gzip_are_read_under_either_gzip_suffix(tmp_path):
    # One rule for compression: ".gzip" was GZIP to the reader but plain to the up-front check,
    # which then called the file corrupted.
    from albert_tf.training import pretraining
    from albert_tf.training import loop
    from albert_tf.data.datasets import pretraining_dataset

    plain = write_pretraining_records(tmp_path / "plain.tfrecord", 4)
    packed = tmp_path / "packed.tfrecord.gzip"
    with tf.io.TFRecordWriter(str(packed), options="GZIP") as writer:
        for record in tf.data.TFRecordDataset(plain):
            writer.write(record.numpy())
    pretraining.check_record_shapes([str(packed)], PRETRAINING_SEQ, PRETRAINING_PREDICTIONS)
    batch = next(iter(pretraining_dataset(str(packed), batch_size=4, max_seq_length=PRETRAINING_SEQ,
                                          max_predictions_per_seq=PRETRAINING_PREDICTIONS, is_training=False)))
    expected = next(iter(pretraining_dataset(plain, batch_size=4, max_seq_length=PRETRAINING_SEQ,
                                             max_predictions_per_seq=PRETRAINING_PREDICTIONS, is_training=False)))
    np.testing.assert_array_equal(batch["input_ids"], expected["input_ids"])


def test_checkpoints_without_their_index_file_are_named_in_one_warning(tmp_path, caplog):
    """Issue 40: a run folder whose `checkpoint` file was lost (a partial copy) started again from
    step 0 without a word."""
    from albert_tf.training import pretraining
    from albert_tf.checkpoints import run_folder as checkpoints
    from albert_tf.training import loop

    checkpoints.check_output_dir(str(tmp_path), TINY, write=True)
    run = loop.Trainer(TINY, pretraining.PretrainingTask(), pretraining_options(tmp_path))
    run.save()
    with caplog.at_level("WARNING"):
        checkpoints.check_output_dir(str(tmp_path), TINY, write=True)
    assert caplog.records == []  # with its index: resumed, no word
    (tmp_path / "checkpoint").unlink()
    with caplog.at_level("WARNING"):
        checkpoints.check_output_dir(str(tmp_path), TINY, write=True)
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path} holds checkpoints (ckpt-0.index) but not their index file `checkpoint`: they are not resumed "
        "from; restore that file to resume, or delete them"]
