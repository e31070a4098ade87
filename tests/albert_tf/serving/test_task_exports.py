"""One export door (issue 51 item 3): albert-export exports a fine-tuning run through the function
the fine-tuning tools call (albert_tf.serving.task_exports), and every door refuses a bf16 LiteRT
model with the same one line (albert_tf.serving.formats)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.serving import formats
from albert_tf.utils.errors import FlagError
from tests.conftest import REPO_ROOT
from tests.helpers import console_script

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
SEQ = 16
BF16_LITERT = ("--precision=bfloat16 is for SavedModels: LiteRT has no bfloat16 kernels "
               "(pick --quantization=float16 or dynamic_int8 for smaller weights)")


def _glue_argv(data_dir, output_dir, config_file, *extra):
    return ["albert-finetune-glue", "--task=RTE", f"--data_dir={data_dir / 'glue'}", f"--output_dir={output_dir}",
            f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}", f"--max_seq_length={SEQ}",
            "--train_batch_size=8", "--num_train_steps=3", "--num_warmup_steps=1", "--learning_rate=1e-2",
            "--max_train_examples=32", "--progress_bar=false", "--nojit_compile", "--do_train", *extra]


@pytest.fixture(scope="module")
def glue_run(tmp_path_factory, small_data_dir):
    """A tiny RTE run of albert-finetune-glue, and the SavedModel its --export wrote."""
    from finetune.glue import cli as glue_cli

    made = tmp_path_factory.mktemp("glue")
    config_file = made / "albert_config.json"
    CONFIG.to_json_file(config_file)
    summary = glue_cli.finetune(_glue_argv(small_data_dir, made / "rte", config_file))
    assert summary["export_dir"] == str(made / "rte" / "export")
    return made / "rte", config_file


def test_albert_export_of_a_glue_run_is_the_tools_export(glue_run, tmp_path, monkeypatch, capsys):
    from albert_tf.cli import export as export_cli

    run, _ = glue_run
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={run}",
                                                     f"--output_dir={tmp_path / 'exported'}",
                                                     f"--max_seq_length={SEQ}"], monkeypatch, capsys)
    assert code == 0, err
    assert "wrote the RTE SavedModel (float32)" in out
    ours, tools = tf.saved_model.load(str(tmp_path / "exported")), tf.saved_model.load(str(run / "export"))
    assert sorted(ours.signatures) == sorted(tools.signatures)
    pairs = tf.constant([["The cat sat on the mat.", "A cat sat."], ["It rained all day.", "The sun shone."],
                         ["Paris is in France.", "Paris is a city in Europe where it rains."]])
    got, want = ours.signatures["serve_text"](text=pairs), tools.signatures["serve_text"](text=pairs)
    assert sorted(got) == sorted(want) == ["label", "label_names", "probabilities"]
    np.testing.assert_allclose(got["probabilities"].numpy(), want["probabilities"].numpy(), rtol=0, atol=1e-6)
    assert got["label"].numpy().tolist() == want["label"].numpy().tolist()
    assert got["label_names"].numpy().tolist() == [[b"entailment", b"not_entailment"]] * 3
    # The probabilities are the run's own head's: not a fresh one's (which the encoder door would give).
    assert not np.allclose(got["probabilities"].numpy(), 0.5, atol=1e-4)
    # Both refuse single texts the same way: the run was fine-tuned on pairs.
    for saved in (ours, tools):
        with pytest.raises(tf.errors.InvalidArgumentError, match="fine-tuned on pairs of texts"):
            saved.signatures["serve_text"](text=tf.constant(["one text"]))

    # --model=encoder still gives the encoder of the same run.
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={run}", "--model=encoder",
                                                     f"--output_dir={tmp_path / 'encoder'}",
                                                     f"--max_seq_length={SEQ}"], monkeypatch, capsys)
    assert code == 0, err
    encoder = tf.saved_model.load(str(tmp_path / "encoder"))
    assert sorted(encoder.signatures["serve_text"](text=pairs)) == ["pooled_output", "sequence_output"]


def test_a_class_without_a_saved_model_is_refused_in_one_line_naming_those_exported():
    from albert_tf.serving.task_exports import SAVED_MODELS, check_exportable

    with pytest.raises(ValueError, match=r"^a AlbertTextClassifier has its own serving signatures: albert-export "
                                         r"exports AlbertEncoder, .*AlbertSquadV2, AlbertMultipleChoice$") as refused:
        check_exportable("AlbertTextClassifier")
    assert "\n" not in str(refused.value)
    assert "AlbertSquadV2" in SAVED_MODELS  # SQuAD v2.0's head: albert-export of its run (test_squad_v2_export)
    for exported in ("AlbertClassifier", "AlbertTokenClassifier", "AlbertEntityRecognizer", "AlbertSpanLabeler",
                     "AlbertSquadV2", "AlbertMultipleChoice"):
        check_exportable(exported)


def test_bf16_litert_is_one_line_from_every_door(glue_run, small_data_dir, tmp_path, monkeypatch, capsys):
    from albert_tf.cli import export as export_cli
    from finetune.glue import cli as glue_cli
    from finetune.glue.task import GlueTask

    with pytest.raises(FlagError) as refused:
        formats.check_export_settings("litert", precision="bfloat16")
    assert str(refused.value) == BF16_LITERT
    run, config_file = glue_run
    doors = {
        "albert-export": (export_cli.run, ["albert-export", f"--preset={run}", "--format=litert",
                                           "--precision=bfloat16", f"--output_dir={tmp_path / 'a'}"]),
        "albert-finetune-glue": (glue_cli.run, _glue_argv(small_data_dir, tmp_path / "b", config_file,
                                                          "--format=litert", "--precision=bfloat16")),
    }
    for door, (run_fn, argv) in doors.items():
        code, out, err = console_script(run_fn, argv, monkeypatch, capsys)
        assert (code, err.strip()) == (2, f"error: {BF16_LITERT}"), door
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())  # refused before anything is written
    from albert_tf.models import AlbertClassifier

    model = AlbertClassifier(CONFIG, 2)
    with pytest.raises(FlagError) as refused:  # the library door: the fine-tuning task's export
        GlueTask("RTE").export(model, str(TINY_VOCAB), SEQ, str(tmp_path / "c"), "litert", precision="bfloat16")
    assert str(refused.value) == BF16_LITERT and not (tmp_path / "c").exists()


def test_albert_export_of_a_ner_run_is_the_tools_export(small_data_dir, tmp_path, monkeypatch, capsys):
    from albert_tf.cli import export as export_cli
    from finetune.ner import cli as ner_cli

    config_file = tmp_path / "albert_config.json"
    CONFIG.to_json_file(config_file)
    run = tmp_path / "ner"
    ner_cli.finetune(["albert-finetune-ner", f"--albert_config_file={config_file}", f"--spm_model_file={TINY_VOCAB}",
                      f"--output_dir={run}", f"--train_file={small_data_dir / 'ner' / 'wnut17' / 'emerging.dev.conll'}",
                      "--do_train", f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_steps=2",
                      "--num_warmup_steps=1", "--doc_stride=4", "--nojit_compile", "--progress_bar=false"])
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={run}",
                                                     f"--output_dir={tmp_path / 'exported'}",
                                                     f"--max_seq_length={SEQ}"], monkeypatch, capsys)
    assert code == 0, err
    ours, tools = tf.saved_model.load(str(tmp_path / "exported")), tf.saved_model.load(str(run / "export"))
    assert sorted(ours.signatures) == sorted(tools.signatures)
    assert int(ours.doc_stride.numpy()) == int(tools.doc_stride.numpy()) == 4  # the run's, from its task.json
    texts = tf.constant(["Alice met Bob in Paris last week and they went to the museum by the river",
                         "nothing here"])
    got, want = ours.signatures["serve_text"](text=texts), tools.signatures["serve_text"](text=texts)
    assert sorted(got) == sorted(want) and "tags" in got
    for name in got:
        if got[name].dtype.is_floating:
            np.testing.assert_allclose(got[name].numpy(), want[name].numpy(), rtol=0, atol=1e-6, err_msg=name)
        else:
            assert got[name].numpy().tolist() == want[name].numpy().tolist(), name
