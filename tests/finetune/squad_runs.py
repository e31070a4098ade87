"""SQuAD runs and exports that several test modules read alike, each built once per test session
(`tests.shared_builds.shared_build`: by whichever module, on whichever pytest-xdist worker, asks
first; a module run alone builds what it reads).

- `v1_chain`, `v2_chain`: albert-finetune-squad's 30-step chain runs (`train_chain`: the tiny chain
  model of tests/helpers.py from random weights, trained and predicting on the same questions,
  exported). tests/finetune/test_squad_cli.py checks their predictions, scores and served answers;
  tests/finetune/test_squad_v2_export.py exports the v2.0 run again with albert-export;
  tests/finetune/test_max_examples.py predicts from a copy of the v1.1 run.
- `random_export`: a random-weight SQuAD v1.1 or v2.0 model with short windows, exported by
  `export_squad`, with its Python outputs on the questions it was built on (`serving_questions`).
  tests/finetune/test_squad_serving.py compares the served answers with the Python pipeline's;
  tests/test_faults.py serves bad inputs to the same SavedModels. `serve_text` loads one once in a
  test process (its first call, where TensorFlow prepares the function, is as dear as the load).

The folders are read-only: a test that writes into one takes `tests.shared_builds.copy_of` first.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from tests.helpers import SQUAD_CHAIN_CONFIG, SQUAD_CHAIN_TRAINING, first_squad_questions
from tests.shared_builds import shared_build

# The chains of the default run: 30 steps leave the answers poor but many and varied, which is all
# their checks need (the measure tier's chains, hundreds of steps, show the pipeline learns).
SHORT_CHAIN = ("--num_train_steps=30", "--num_warmup_steps=3")
# The chains' windows, which a run predicting from a chain's folder gives again.
CHAIN_WINDOWS = tuple(flag for flag in SQUAD_CHAIN_TRAINING
                      if flag.split("=")[0] in ("--max_seq_length", "--doc_stride", "--max_query_length"))
V2_ARTICLE = "dev-v2.0.article0.json"  # 208 questions, 112 unanswerable


def chain_argv(folder, small_data_dir, *flags) -> list:
    """albert-finetune-squad's command line for the chain model (its config written into `folder`),
    writing into `folder`/run."""
    config = folder / "albert_config.json"
    config.write_text(json.dumps(SQUAD_CHAIN_CONFIG))
    return ["albert-finetune-squad", f"--albert_config_file={config}",
            f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}", f"--output_dir={folder / 'run'}",
            *flags]


def chain_data(folder, small_data_dir, version_2: bool):
    """The questions a chain trains and predicts on: the first 200 (204) of the v1.1 dev articles 1-2
    (written into `folder`), or the 208 of a v2.0 article."""
    if version_2:
        return small_data_dir / "squad" / V2_ARTICLE
    return first_squad_questions(small_data_dir / "squad" / "dev-v1.1.articles1-2.json", 200, folder / "v1.json")


def train_chain(folder, small_data_dir, version_2: bool, *training) -> dict:
    """Fine-tunes the chain model on `chain_data` and answers the same (--do_predict), exporting it
    to `folder`/run/export; `training` flags override SQUAD_CHAIN_TRAINING's. The run's summary."""
    from finetune.squad import cli

    data = chain_data(folder, small_data_dir, version_2)
    version = ["--version_2_with_negative"] if version_2 else []
    return cli.finetune(chain_argv(folder, small_data_dir, f"--train_file={data}", f"--predict_file={data}", *version,
                                   "--do_train", "--do_predict", *SQUAD_CHAIN_TRAINING, *training))


def v1_chain(tmp_path_factory, small_data_dir):
    """The 30-step v1.1 chain's folder (`train_chain`): v1.json, run/ (predictions, scores, export/)."""
    return shared_build(tmp_path_factory, "squad_v1_chain",
                        lambda folder: train_chain(folder, small_data_dir, False, *SHORT_CHAIN))


def v2_chain(tmp_path_factory, small_data_dir):
    """The 30-step v2.0 chain's folder (`train_chain`): run/ (predictions, null odds, scores, export/)."""
    return shared_build(tmp_path_factory, "squad_v2_chain",
                        lambda folder: train_chain(folder, small_data_dir, True, *SHORT_CHAIN))


# ---- random-weight exports with short windows ------------------------------------------------------

# Short windows, so that most contexts need several.
RANDOM_SETTINGS = {"max_seq_length": 64, "doc_stride": 16, "max_query_length": 16}
RANDOM_CONFIG = {"vocab_size": 30000, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}
TOP_K = {False: 3, True: 5}  # the served n-best's length: v1.1 not the default, v2.0 the default
INPUTS = {False: ("input_ids", "input_mask", "segment_ids"), True: ("input_ids", "input_mask", "segment_ids", "p_mask")}


def serving_questions(small_data_dir, version_2: bool):
    """The questions a random export was built on, and their windows' records: the first 100 of a v2.0
    article, or the first 30 of the v1.1 dev articles 1-2."""
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune.squad import features, readers

    if version_2:
        examples = readers.read_squad(small_data_dir / "squad" / V2_ARTICLE, True)[:100]
    else:
        examples = readers.read_squad(small_data_dir / "squad" / "dev-v1.1.articles1-2.json", False)[:30]
    tokenizer = AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")
    settings = features.FeatureSettings(**RANDOM_SETTINGS)
    return examples, features.stack_records(features.convert_examples(examples, tokenizer, settings))


def _build_random_export(folder, small_data_dir, version_2: bool):
    import keras

    from albert_tf import AlbertConfig
    from albert_tf.models import AlbertSpanLabeler
    from albert_tf.serving.question_answering import export_squad
    from finetune.squad import features
    from finetune.squad.model import AlbertSquadV2

    _, records = serving_questions(small_data_dir, version_2)
    keras.utils.set_random_seed(0)
    config = AlbertConfig(**RANDOM_CONFIG)
    model = AlbertSquadV2(config) if version_2 else AlbertSpanLabeler(config)
    outputs = {k: v.numpy() for k, v in model({k: records[k] for k in INPUTS[version_2]}).items()}
    # v2.0: a threshold that leaves some questions unanswered and answers others.
    threshold = float(np.median(outputs["cls_logits"])) if version_2 else None
    export_squad(model, folder / "export", small_data_dir / "albert" / "30k-clean.model",
                 features.FeatureSettings(**RANDOM_SETTINGS), version_2=version_2,
                 null_score_diff_threshold=threshold, top_k=TOP_K[version_2])
    np.savez(folder / "outputs.npz", **outputs)
    (folder / "threshold.json").write_text(json.dumps(threshold))


def random_export(tmp_path_factory, small_data_dir, version_2: bool) -> dict:
    """A random-weight AlbertSpanLabeler (v1.1) or AlbertSquadV2 (v2.0) of RANDOM_CONFIG (seed 0)
    exported by `export_squad` with RANDOM_SETTINGS' windows and TOP_K answers (v2.0: at the median
    of its [CLS] logits on `serving_questions` as the null threshold): `export` (the SavedModel's
    folder), `outputs` (the Python model's outputs on `serving_questions`' records, as numpy) and
    `threshold`."""
    name = f"squad_random_v{2 if version_2 else 1}_export"
    folder = shared_build(tmp_path_factory, name, lambda f: _build_random_export(f, small_data_dir, version_2))
    with np.load(folder / "outputs.npz") as outputs:
        return {"export": folder / "export", "outputs": dict(outputs),
                "threshold": json.loads((folder / "threshold.json").read_text())}


@functools.cache
def _loaded(export):
    import tensorflow as tf

    return tf.saved_model.load(str(export))


def serve_text(export):
    """The `serve_text` signature of the SavedModel at `export` (a `random_export`'s), loaded once in
    this process for every test that serves it: they only call it. The loaded object is kept with
    it: its variables live only as long as it does."""
    return _loaded(export).signatures["serve_text"]
