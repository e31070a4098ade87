"""The paper's GLUE hyperparameters (Table 14; tests/finetune/test_paper_hparams.py spells out all
its columns) and their overrides."""

import pytest

from finetune.glue.hparams import PAPER_HPARAMS, glue_hparams
from finetune.task import Hparams

# task: learning rate, batch, steps, warmup, from the paper's Table 14 / run_glue.sh.
PAPER_TABLE = {
    "CoLA": (1e-5, 16, 5336, 320),
    "STS-B": (2e-5, 16, 3598, 214),
    "SST-2": (1e-5, 32, 20935, 1256),
    "MNLI": (3e-5, 128, 10000, 1000),
    "QNLI": (1e-5, 32, 33112, 1986),
    "QQP": (5e-5, 128, 14000, 1000),
    "RTE": (3e-5, 32, 800, 200),
    "MRPC": (2e-5, 32, 800, 200),
    "WNLI": (2e-5, 16, 2000, 250),
}


def test_presets_are_the_paper_table():
    assert set(PAPER_HPARAMS) == set(PAPER_TABLE)
    for task, (learning_rate, batch, steps, warmup) in PAPER_TABLE.items():
        assert glue_hparams(task) == Hparams(
            encoder_dropout=0.1 if task in ("QQP", "RTE", "WNLI") else 0.0,
            learning_rate=learning_rate,
            train_batch_size=batch,
            num_train_steps=steps,
            num_warmup_steps=warmup,
            max_seq_length=512,
            classifier_dropout=0.1,
        )


def test_overrides():
    hparams = glue_hparams("sst2", learning_rate=3e-5, max_seq_length=128, train_batch_size=None)
    assert (hparams.learning_rate, hparams.max_seq_length, hparams.train_batch_size) == (3e-5, 128, 32)
    assert hparams.num_train_steps == 20935
    # The preset itself is untouched.
    assert PAPER_HPARAMS["SST-2"].max_seq_length == 512


def test_bad_requests():
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) lr, steps; the fields are: "
                       "classifier_dropout, encoder_dropout, learning_rate, max_seq_length"):  # fmt: skip
        glue_hparams("RTE", lr=1e-5, steps=3)
    with pytest.raises(ValueError, match="AX has no fine-tuning hparams"):
        glue_hparams("AX")
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        glue_hparams("squad")
    with pytest.raises(ValueError, match=r"^num_warmup_steps=900 must be between 0 and num_train_steps=800$"):
        glue_hparams("MRPC", num_warmup_steps=900)
    with pytest.raises(ValueError, match="classifier_dropout must be in"):
        glue_hparams("MRPC", classifier_dropout=1.0)
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        glue_hparams("MRPC", learning_rate=0.0)
    with pytest.raises(ValueError, match="train_batch_size must be at least 1, got 0"):
        glue_hparams("MRPC", train_batch_size=0)
    with pytest.raises(ValueError, match="max_seq_length must be at least 5, got 4"):
        glue_hparams("MRPC", max_seq_length=4)
