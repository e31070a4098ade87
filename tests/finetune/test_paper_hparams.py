"""The fine-tuning hparams are the paper's hyperparameter table (appendix A.4, Table 14), column for
column, and the release's scripts' values where they differ (`--hparams=release`, RACE's `v2`).

The table is spelt out here as the paper prints it: learning rate, batch size, ALBERT DR (the
encoder's dropout while fine-tuning), classifier dropout, train steps, warmup steps, maximum
sequence length.
"""

import json

import pytest

from albert_tf import AlbertConfig
from albert_tf.training import loop
from finetune.options import FinetuneOptions
from finetune.glue.hparams import glue_hparams
from finetune.glue.task import GlueTask
from finetune.ner.task import NerTask
from finetune.race.task import RaceTask
from finetune.squad.task import SquadTask
from finetune.task import HPARAM_FIELDS

COLUMNS = ("learning_rate", "train_batch_size", "encoder_dropout", "classifier_dropout", "num_train_steps",
           "num_warmup_steps", "max_seq_length")

#                        LR     BSZ  ALBERT DR  Classifier DR  TS     WS    MSL
TABLE_14 = {
    "CoLA":       (1e-5,  16,  0.0,  0.1,  5336,  320,  512),
    "STS-B":      (2e-5,  16,  0.0,  0.1,  3598,  214,  512),
    "SST-2":      (1e-5,  32,  0.0,  0.1, 20935, 1256,  512),
    "MNLI":       (3e-5, 128,  0.0,  0.1, 10000, 1000,  512),
    "QNLI":       (1e-5,  32,  0.0,  0.1, 33112, 1986,  512),
    "QQP":        (5e-5, 128,  0.1,  0.1, 14000, 1000,  512),
    "RTE":        (3e-5,  32,  0.1,  0.1,   800,  200,  512),
    "MRPC":       (2e-5,  32,  0.0,  0.1,   800,  200,  512),
    "WNLI":       (2e-5,  16,  0.1,  0.1,  2000,  250,  512),
    "SQuAD v1.1": (5e-5,  48,  0.0,  0.1,  3649,  365,  384),
    "SQuAD v2.0": (3e-5,  48,  0.0,  0.1,  8144,  814,  512),
    "RACE":       (2e-5,  32,  0.1,  0.1, 12000, 1000,  512),
}  # fmt: skip

# Where the release's scripts differ: run_glue.sh and the README's run_squad_v1/v2.py and run_race.py
# commands set no encoder dropout (None: the model config's), SQuAD v2.0 runs 2 epochs at 5e-5
# with 384 tokens, and RACE on the v2 models takes 1e-5 and no encoder dropout.
RELEASE = {
    **{task: (*row[:2], None, *row[3:]) for task, row in TABLE_14.items()},
    "SQuAD v1.1": (5e-5, 48, None, 0.1, 3649, 364, 384),
    "SQuAD v2.0": (5e-5, 48, None, 0.1, 5429, 542, 384),
    "RACE": (1e-5, 32, 0.0, 0.1, 12000, 1000, 512),
}


def presets(hparams, columns=COLUMNS):
    found = {task: GlueTask(task, hparams=hparams).default_options() for task in TABLE_14 if "SQuAD" not in task
             and task != "RACE"}
    found["SQuAD v1.1"] = SquadTask(hparams=hparams).default_options()
    found["SQuAD v2.0"] = SquadTask(version_2_with_negative=True, hparams=hparams).default_options()
    found["RACE"] = RaceTask(hparams="v1" if hparams == "paper" else "v2").default_options()
    return {task: tuple(options[c] for c in columns) for task, options in found.items()}


def test_every_preset_is_the_papers_table_column_for_column():
    # The table's columns, and the optimizer each recipe was tuned on (issue 55).
    assert set(COLUMNS) | {"optimizer"} == set(HPARAM_FIELDS)
    assert presets("paper") == TABLE_14
    for hparams in ("paper", "release"):
        assert set(presets(hparams, ("optimizer",)).values()) == {("adamw_release",)}  # the release's AdamW
    # NER's recipe is Hugging Face's, on torch's bias-corrected AdamW (tests/finetune/test_memorisation.py).
    assert NerTask(labels=["O", "B-PER", "I-PER"]).default_options()["optimizer"] == "adamw"
    # The GLUE rows through the library function too, with one field overridden.
    assert glue_hparams("QQP").encoder_dropout == 0.1 and glue_hparams("QQP", encoder_dropout=0.0).encoder_dropout == 0.0


def test_the_releases_values_are_the_alternative():
    assert presets("release") == {task: tuple(row) for task, row in RELEASE.items()}
    with pytest.raises(ValueError, match="hparams must be one of paper, release"):
        glue_hparams("RTE", "appendix")
    with pytest.raises(ValueError, match="hparams must be one of paper, release"):
        SquadTask(hparams="appendix")


def test_the_encoder_dropout_replaces_the_configs_in_the_model_trained(tmp_path):
    config = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0  # as the v2 models
    rte = GlueTask("RTE", tmp_path)
    for hparams, expected in (("paper", 0.1), ("release", 0.0)):
        options = FinetuneOptions(output_dir=str(tmp_path / hparams), jit_compile=False,
                                          **GlueTask("RTE", tmp_path, hparams=hparams).default_options(max_seq_length=16))
        run = loop.Trainer(config, rte, options)
        encoder_config = run.model.encoder.config
        assert (encoder_config.hidden_dropout_prob, encoder_config.attention_probs_dropout_prob) == (expected, expected)
        # The run's folder keeps the encoder's own config: a resumed run compares with it.
        assert json.loads((tmp_path / hparams / "albert_config.json").read_text())["hidden_dropout_prob"] == 0.0
    with pytest.raises(ValueError, match=r"encoder_dropout must be in \[0, 1\), got 1.0"):
        FinetuneOptions(output_dir=str(tmp_path / "bad"), encoder_dropout=1.0)
