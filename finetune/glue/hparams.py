"""The paper's fine-tuning hyperparameters per GLUE task (its appendix A.4, Table 14), each
overridable, and the release's (run_glue.sh) as the alternative.

The paper's table gives, per task, the learning rate, batch size, the encoder's dropout while
fine-tuning ("ALBERT DR"), the classifier's dropout, train steps, warmup steps and sequence length.
run_glue.sh has the same learning rates, batches, steps, warmups and length but sets no encoder
dropout: the model's config decides it (0 for the v2 models, 0.1 for v1 but xxlarge), and it has
no WNLI. Steps and batch sizes are the release's, so a run with these hparams sees as many examples as
the paper's did. AX has no hparams: it is predicted with the MNLI model.
"""

from __future__ import annotations

import dataclasses

from albert_tf.utils.validation import require_choice
from finetune.glue.definitions import get_task
from finetune.task import Hparams


def _paper(lr, bsz, albert_dr, classifier_dr, ts, ws, msl) -> Hparams:
    """One row of the paper's Table 14, in its column order."""
    return Hparams(learning_rate=lr, train_batch_size=bsz, encoder_dropout=albert_dr,
                   classifier_dropout=classifier_dr, num_train_steps=ts, num_warmup_steps=ws, max_seq_length=msl)


# The paper's Table 14:        LR     BSZ  ALBERT DR  Classifier DR  TS     WS    MSL
PAPER_HPARAMS: dict[str, Hparams] = {
    "CoLA": _paper(1e-5, 16, 0.0, 0.1, 5336, 320, 512),
    "STS-B": _paper(2e-5, 16, 0.0, 0.1, 3598, 214, 512),
    "SST-2": _paper(1e-5, 32, 0.0, 0.1, 20935, 1256, 512),
    "MNLI": _paper(3e-5, 128, 0.0, 0.1, 10000, 1000, 512),
    "QNLI": _paper(1e-5, 32, 0.0, 0.1, 33112, 1986, 512),
    "QQP": _paper(5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    "RTE": _paper(3e-5, 32, 0.1, 0.1, 800, 200, 512),
    "MRPC": _paper(2e-5, 32, 0.0, 0.1, 800, 200, 512),
    "WNLI": _paper(2e-5, 16, 0.1, 0.1, 2000, 250, 512),
}
# run_glue.sh: the same but the encoder's dropout, which the model's config decides (WNLI, which
# it does not run, keeps the paper's other values).
RELEASE_HPARAMS: dict[str, Hparams] = {
    name: dataclasses.replace(hparams, encoder_dropout=None) for name, hparams in PAPER_HPARAMS.items()
}
HPARAMS = {"paper": PAPER_HPARAMS, "release": RELEASE_HPARAMS}


def glue_hparams(task: str, hparams: str = "paper", **overrides) -> Hparams:
    """The hyperparameters for `task` (`hparams`: "paper", Table 14, or "release", run_glue.sh),
    with `overrides` (field=value) replacing any.

    An override of None keeps the hparams' value, so command-line flags that default to None can
    be passed straight through.

    Raises:
        ValueError: an unknown task, a task without hparams (AX), an unknown field or `hparams`,
            or an invalid value.
    """
    require_choice("hparams", hparams, HPARAMS)
    name = get_task(task).name
    if name not in PAPER_HPARAMS:
        raise ValueError(
            f"GLUE task {name} has no fine-tuning hparams (it is predicted with a model fine-tuned "
            f"on MNLI); the tasks with hparams are: {', '.join(PAPER_HPARAMS)}"
        )
    fields = {f.name for f in dataclasses.fields(Hparams)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)}; "
            f"the fields are: {', '.join(sorted(fields))}"
        )
    given = {key: value for key, value in overrides.items() if value is not None}
    return dataclasses.replace(HPARAMS[hparams][name], **given)
