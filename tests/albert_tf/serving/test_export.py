"""SavedModels of the encoder, the pretrainer and a classifier: every signature, reloaded in a fresh
process that imports only tensorflow and tensorflow_text, gives the Keras model's outputs; raw text
is tokenized in the graph exactly as in Python; the encoder fine-tunes through its SavedModel."""

import base64
import json
import pathlib
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.serving.export import (
    SEQUENCE_INPUTS,
    SIGNATURES,
    SavedModelLayer,
    export_encoder,
    export_pretrainer,
    export_saved_model,
)
from albert_tf.data.features import classification_feature_spec, pretraining_feature_spec, serialize_example
from albert_tf.tokenizers.tokenizer import AlbertTokenizer

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "export"
TINY_SPM = FIXTURES / "tiny_spm.model"
RUNNER = FIXTURES / "run_saved_model.py"
SEQ = 16  # serve_text / serve_examples length
PREDICTIONS = 4

CONFIG = AlbertConfig(
    vocab_size=131,  # more ids than the 120 SentencePiece pieces: a model may have a larger table
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=64,
    hidden_dropout_prob=0.1,  # so that training=True and training=False differ in the reusable call
)

TEXT_A = [
    "Emma Woodhouse, handsome, clever, and rich.",
    "",  # an empty segment is served, never an error
    " ".join(["Unusually long text that the packer has to truncate."] * 40),
    "Ça va? ``Quoted'' words, naïve café.",
]
TEXT_B = [
    "She had lived nearly twenty-one years in the world.",
    "A second segment after an empty first one.",
    "",
    " ".join(["and a long second segment as well"] * 30),
]


def _random_weights(model, seed):
    # Biases and LayerNorm offsets away from 0/1, so that a wrong mapping cannot hide behind them.
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.normal(0, 0.2 if len(v.shape) < 2 else 0.05, v.shape).astype(np.float32))


def _ids_batch(seed=0, batch=3, length=SEQ):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), np.int32)
    mask[1, length - 5 :] = 0
    mask[2, length - 9 :] = 0
    return {
        "input_ids": (rng.integers(5, CONFIG.vocab_size, (batch, length)) * mask).astype(np.int32),
        "input_mask": mask,
        "segment_ids": ((np.arange(length)[None, :] >= length // 2) * mask).astype(np.int32),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, 7), (batch, PREDICTIONS)), axis=1).astype(np.int32),
    }


def _python_pack(tokenizer, texts_a, texts_b=None, length=SEQ):
    rows = [
        tokenizer.pack(tokenizer.encode(a), None if texts_b is None else tokenizer.encode(b), max_seq_length=length)
        for a, b in zip(texts_a, texts_b or texts_a)
    ]
    return {k: np.array([r[k] for r in rows], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}


def _examples(batch, spec):
    rows = []
    for i in range(len(batch["input_ids"])):
        values = {k: batch[k][i] for k in spec}
        rows.append(base64.b64encode(serialize_example(values, spec)).decode("ascii"))
    return {"base64": rows}


class _Classifier(keras.Model):
    """What a fine-tuning task exports: an encoder and a dense head on the pooled output."""

    def __init__(self, config):
        super().__init__(name="classifier")
        self.encoder = AlbertEncoder(config)
        self.head = keras.layers.Dense(3)

    def build(self, input_shape=None):
        self.encoder.build()
        self.head.build((None, self.encoder.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        return self.head(self.encoder(inputs, training=training)["pooled_output"])


@pytest.fixture(scope="module")
def tokenizer():
    return AlbertTokenizer(TINY_SPM)


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    _random_weights(encoder, 1)
    pretrainer = AlbertPretrainer(CONFIG)
    pretrainer.build()
    _random_weights(pretrainer, 2)
    classifier = _Classifier(CONFIG)
    classifier.build()
    _random_weights(classifier, 3)
    return {"encoder": encoder, "pretrainer": pretrainer, "classifier": classifier}


def _keras_outputs(name, model, inputs):
    if name == "classifier":
        return {"logits": np.asarray(model(inputs, training=False))}
    if name == "encoder":
        inputs = {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
    return {k: np.asarray(v) for k, v in model(inputs, training=False).items()}


@pytest.fixture(scope="module")
def exported(models, tmp_path_factory):
    root = tmp_path_factory.mktemp("exported")
    paths = {name: str(root / name) for name in models}
    export_encoder(models["encoder"], paths["encoder"], TINY_SPM, SEQ)
    export_pretrainer(models["pretrainer"], paths["pretrainer"], TINY_SPM, SEQ, PREDICTIONS)
    # The fine-tuning tasks' way: any output dict from the encoder-style inputs.
    def outputs_fn(inputs, training):
        CLASSIFIER_TRACES.append(training)
        return {"logits": models["classifier"](inputs, training=training)}

    export_saved_model(models["classifier"], paths["classifier"], TINY_SPM, SEQ, outputs_fn=outputs_fn)
    return paths


CLASSIFIER_TRACES = []  # the `training` flag of each trace of the classifier's export


def test_an_export_traces_the_model_once_at_inference_and_once_in_training(exported):
    # tf.saved_model.save traces every function it stores again unless they were traced in its save
    # context (albert_tf.serving.export.save_tracing): each export traced the model four times before.
    assert sorted(CLASSIFIER_TRACES) == [False, True]


@pytest.fixture(scope="module")
def fresh_results(exported, tmp_path_factory, fresh_process):
    """Runs every signature of every SavedModel in one fresh Python process."""
    root = tmp_path_factory.mktemp("fresh")
    batch = _ids_batch()
    jobs = []
    for name, path in exported.items():
        extra = ("masked_lm_positions",) if name == "pretrainer" else ()
        ids = {k: batch[k].tolist() for k in ("input_ids", "input_mask", "segment_ids", *extra)}
        spec = (
            pretraining_feature_spec(SEQ, PREDICTIONS) if name == "pretrainer" else classification_feature_spec(SEQ)
        )
        spec = {k: spec[k] for k in ("input_ids", "input_mask", "segment_ids", *extra)}
        positions = {k: batch[k].tolist() for k in extra}
        four = {k: (v + [v[0]]) for k, v in positions.items()}  # the text batches have 4 rows
        calls = {
            "serving_default": {"signature": "serving_default", "inputs": ids},
            "serve_examples": {"signature": "serve_examples", "inputs": {"examples": _examples(batch, spec)}},
            "text_single": {"signature": "serve_text", "inputs": {"text": {"text": [[a] for a in TEXT_A]}, **four}},
            "text_pair": {
                "signature": "serve_text",
                "inputs": {"text": {"text": [list(p) for p in zip(TEXT_A, TEXT_B)]}, **four},
            },
            # A TF Serving REST call {"instances": ["..."]} sends a flat [B] batch.
            "text_flat": {"signature": "serve_text", "inputs": {"text": {"text": list(TEXT_A)}, **four}},
            "tokenize_single": {"signature": "tokenize", "inputs": {"text": {"text": [[a] for a in TEXT_A]}}},
            "tokenize_pair": {
                "signature": "tokenize", "inputs": {"text": {"text": [list(p) for p in zip(TEXT_A, TEXT_B)]}},
            },
            "call": {"signature": "__call__", "inputs": ids, "training": False},
        }
        jobs.append({"saved_model": path, "output": str(root / f"{name}.npz"), "calls": calls})
    jobs_file = root / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    # Outside the repository, without this package; the module check below is what proves independence.
    fresh_process.script(RUNNER, jobs_file)
    return {name: dict(np.load(root / f"{name}.npz")) for name in exported}, batch


MODELS = ("encoder", "pretrainer", "classifier")


def _select(results, label):
    return {k.split("/", 1)[1]: v for k, v in results.items() if k.startswith(label + "/")}


def _assert_close(got, expected):
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, atol=1e-5, rtol=0, err_msg=key)
        assert np.std(value) > 1e-3, key  # not a comparison of constants


@pytest.mark.parametrize("name", MODELS)
def test_fresh_process_loads_without_this_package(fresh_results, name):
    results, _ = fresh_results
    assert list(results[name]["__modules__/albert_tf"]) == []


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("label", ["serving_default", "serve_examples", "call"])
def test_ids_and_examples_give_the_keras_outputs(fresh_results, models, name, label):
    results, batch = fresh_results
    _assert_close(_select(results[name], label), _keras_outputs(name, models[name], batch))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("pair", [False, True], ids=["single", "pair"])
def test_serve_text_is_python_tokenization_then_the_model(fresh_results, models, tokenizer, name, pair):
    results, batch = fresh_results
    packed = _python_pack(tokenizer, TEXT_A, TEXT_B if pair else None)
    tokenized = _select(results[name], "tokenize_" + ("pair" if pair else "single"))
    for key, value in packed.items():
        np.testing.assert_array_equal(tokenized[key], value, err_msg=key)
    inputs = dict(packed)
    if name == "pretrainer":
        inputs["masked_lm_positions"] = np.concatenate([batch["masked_lm_positions"], batch["masked_lm_positions"][:1]])
    label = "text_" + ("pair" if pair else "single")
    _assert_close(_select(results[name], label), _keras_outputs(name, models[name], inputs))


@pytest.mark.parametrize("name", MODELS)
def test_serve_text_takes_a_flat_batch_as_single_segments(fresh_results, name):
    results, _ = fresh_results
    flat, single = _select(results[name], "text_flat"), _select(results[name], "text_single")
    assert sorted(flat) == sorted(single)
    for key, value in single.items():
        np.testing.assert_array_equal(flat[key], value, err_msg=key)


def test_serve_text_pads_empty_and_truncates_long_text(fresh_results, tokenizer):
    results, _ = fresh_results
    single = _select(results["encoder"], "tokenize_single")
    pair = _select(results["encoder"], "tokenize_pair")
    assert single["input_ids"].shape == pair["input_ids"].shape == (4, SEQ)
    cls, sep = tokenizer.cls_id, tokenizer.sep_id
    # An empty string is [CLS] [SEP] and padding.
    assert single["input_ids"][1, :3].tolist() == [cls, sep, 0] and single["input_mask"][1].sum() == 2
    # Long text fills the length exactly: [CLS] 14 pieces [SEP], or a pair cut to fit.
    assert single["input_mask"][2].sum() == SEQ and single["input_ids"][2, -1] == sep
    assert pair["input_mask"][3].sum() == SEQ and pair["input_ids"][3].tolist().count(sep) == 2
    # The pair with an empty second segment keeps its layout: [CLS] A [SEP] [SEP].
    ids = pair["input_ids"][2]
    assert ids[-1] == sep and ids[-2] == sep and pair["segment_ids"][2, -1] == 1


def test_saved_model_cli_lists_the_signatures(exported, fresh_process):
    # TensorFlow's installed console script (its entry point, as the script calls it) in a process of
    # its own, forked from the warm one that has loaded TensorFlow, with only PATH and the log level.
    stdout = fresh_process.script("saved_model_cli", "show", "--all", "--dir", exported["pretrainer"])
    for name in SIGNATURES:
        assert f"signature_def['{name}']" in stdout
    for tensor in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "examples", "text",
                   "mlm_logits", "sop_logits"):
        assert f"['{tensor}']" in stdout, tensor


def test_fine_tuning_through_the_reusable_saved_model(exported, models):
    layer = SavedModelLayer(exported["encoder"])
    before = [v.numpy().copy() for v in layer.trainable_weights]
    assert len(before) == len(models["encoder"].trainable_weights) > 10
    batch = {k: tf.constant(v) for k, v in _ids_batch(seed=5).items() if k != "masked_lm_positions"}
    # Before training it is the Keras encoder.
    expected = models["encoder"](batch, training=False)
    got = layer(batch, training=False)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[key], expected[key], atol=1e-5, rtol=0)
    # Dropout is live in training mode only: the flag reaches the SavedModel.
    assert not np.allclose(layer(batch, training=True)["pooled_output"], got["pooled_output"])

    head = keras.layers.Dense(2)
    head.build((None, CONFIG.hidden_size))
    labels = tf.constant([0, 1, 1])
    optimizer = keras.optimizers.Adam(1e-2)

    def loss_value(training):
        logits = head(layer(batch, training=training)["pooled_output"])
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))

    variables = layer.trainable_weights + head.trainable_weights
    optimizer.build(variables)
    # The gradients are taken eagerly through the loaded functions; Adam's update is one traced call
    # (eagerly it was 7 s of Python for 20 steps of ~40 variables).
    apply = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)), autograph=False)
    initial = float(loss_value(False))
    for _ in range(20):
        with tf.GradientTape() as tape:
            loss = loss_value(True)
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads)
        apply(grads)
    final = float(loss_value(False))
    assert final < 0.5 * initial, (initial, final)
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, layer.trainable_weights)]
    assert all(changed), [v.name for v, c in zip(layer.trainable_weights, changed) if not c]


@pytest.mark.parametrize("trainable", [True, False])
def test_keras_fit_trains_the_saved_models_own_variables(exported, models, trainable):
    """Keras's `fit` sees the layer's variables as its model's, and they are the variables the
    loaded functions read: fitting moves the SavedModel's own outputs (or, frozen, only the head)."""
    layer = SavedModelLayer(exported["encoder"], trainable=trainable)
    inputs = {k: keras.Input((SEQ,), dtype="int32", name=k) for k in SEQUENCE_INPUTS}
    model = keras.Model(inputs, keras.layers.Dense(2)(layer(inputs)["pooled_output"]))
    encoder_count = len(models["encoder"].trainable_weights)
    assert len(model.trainable_variables) == (encoder_count if trainable else 0) + 2
    batch = {k: v for k, v in _ids_batch(seed=7, batch=8).items() if k != "masked_lm_positions"}
    labels = np.array([0, 1] * 4)
    before = layer.loaded(batch, training=False)["pooled_output"].numpy()

    model.compile(optimizer=keras.optimizers.Adam(1e-2),  # XLA is not the subject: no compile
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    history = model.fit(batch, labels, epochs=10, batch_size=8, verbose=0).history["loss"]
    after = layer.loaded(batch, training=False)["pooled_output"].numpy()
    assert history[-1] < history[0]
    if trainable:
        assert np.abs(after - before).max() > 1e-2
    else:
        np.testing.assert_array_equal(after, before)


def test_released_vocabulary_tokenizes_inside_the_saved_model_like_sentencepiece(data_dir, tmp_path):
    """test_graph_tokenizer.py already compares the graph tokenizer with Python on every corpus line;
    here the same vocabulary goes through a SavedModel (asset, loading, packing), on a few hundred
    lines drawn from every corpus file, including the Latin-1 ones with accents."""
    spm_file = data_dir / "albert" / "30k-clean.model"
    python_tokenizer = AlbertTokenizer(spm_file)
    encoder = AlbertEncoder(CONFIG.replace(vocab_size=30000, max_position_embeddings=128))
    encoder.build()
    path = export_encoder(encoder, tmp_path / "released_vocab", spm_file, max_seq_length=128)
    lines = []
    rng = random.Random(0)
    for file in sorted((data_dir / "corpus").glob("*/*")):
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        file_lines = [line for line in text.split("\n") if line.strip()]
        accented = [line for line in file_lines if not line.isascii()]
        lines += rng.sample(file_lines, 20) + rng.sample(accented, min(5, len(accented)))
    assert len(lines) > 300
    tokenize = tf.saved_model.load(path).signatures["tokenize"]
    got = tokenize(text=tf.constant([[line] for line in lines]))
    expected = [python_tokenizer.pack(ids, max_seq_length=128) for ids in python_tokenizer.encode_batch(lines)]
    for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(got[key].numpy(), np.array([e[key] for e in expected]), err_msg=key)
    # The vocabulary travels as an asset file inside the SavedModel.
    assert (pathlib.Path(path) / "assets" / "30k-clean.model").read_bytes() == spm_file.read_bytes()


def test_bad_export_arguments_fail_with_a_message(models, tmp_path):
    not_spm = tmp_path / "not.model"
    not_spm.write_bytes(b"this is not a SentencePiece model")
    with pytest.raises(ValueError, match="not a readable SentencePiece model"):
        export_encoder(models["encoder"], tmp_path / "a", not_spm, SEQ)
    with pytest.raises(ValueError, match="exceeds the model's max_position_embeddings"):
        export_encoder(models["encoder"], tmp_path / "b", TINY_SPM, 65)
    small = AlbertEncoder(CONFIG.replace(vocab_size=100))
    small.build()
    with pytest.raises(ValueError, match="120 pieces, more than the model's vocab_size"):
        export_encoder(small, tmp_path / "c", TINY_SPM, SEQ)


@pytest.mark.faults
def test_a_python_export_into_a_folder_holding_files_is_refused_and_leaves_it_as_it_was(models, tmp_path):
    """Issue 40: export() wrote into it, and an older export then had two vocabularies."""
    from albert_tf.utils.errors import UserError

    folder = tmp_path / "old_export"
    (folder / "assets").mkdir(parents=True)
    (folder / "assets" / "other.model").write_bytes(b"an older export's vocabulary")
    with pytest.raises(UserError) as raised:
        export_encoder(models["encoder"], folder, TINY_SPM, SEQ)
    assert str(raised.value) == f"{folder} is not empty: write into a new or empty folder"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "old_export", "old_export/assets", "old_export/assets/other.model"]


def test_serve_text_edge_batches(exported):
    loaded = tf.saved_model.load(exported["encoder"])
    # Both segments empty: [CLS] [SEP] [SEP]; whitespace only is empty after normalisation.
    packed = loaded.signatures["tokenize"](text=tf.constant([["", ""], [" \t\u3000", "\n"]]))
    assert packed["input_mask"].numpy().sum(axis=1).tolist() == [3, 3]
    # An empty batch serves an empty batch.
    out = loaded.signatures["serve_text"](text=tf.zeros([0, 1], tf.string))
    assert out["pooled_output"].shape == (0, CONFIG.hidden_size)
    out = loaded.signatures["serve_text"](text=tf.zeros([0], tf.string))
    assert out["pooled_output"].shape == (0, CONFIG.hidden_size)
    # More than two segments, or a shape that is no batch, is the client's error, said in its words.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[batch, 1\] \(one segment\) or \[batch, 2\]"):
        loaded.signatures["serve_text"](text=tf.constant([["a", "b", "c"]]))
    for text in (tf.constant("a"), tf.constant([[["a"]]])):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[batch\] or \[batch, 1\]"):
            loaded.signatures["serve_text"](text=text)


LONG = 64  # max_seq_length of the bucketing tests: room for several buckets


@pytest.fixture(scope="module")
def bucketed(models, tmp_path_factory):
    """The encoder exported padded to a few buckets. What it is held against, padding to LONG
    always (as before), is the Python tokenizer's packing and the Keras encoder: a second export
    padded to LONG was the same graph tokenizer and model, traced and loaded again."""
    path = export_encoder(models["encoder"], tmp_path_factory.mktemp("buckets") / "bucketed", TINY_SPM, LONG,
                          length_buckets=(8, 16, 32, LONG))
    return tf.saved_model.load(path)


@pytest.mark.parametrize("rows, bucket", [
    (["Emma"], 8),  # 3 tokens
    (["Emma", "Emma Woodhouse, handsome"], 16),  # 12
    ([TEXT_A[0], ""], 32),  # 24
    ([TEXT_A[0], "", TEXT_A[3]], LONG),  # 33
    (TEXT_A, LONG),  # truncated to 64
    ([["Emma", "Woodhouse"], [TEXT_A[0], "She had lived"]], 32),  # exactly 32
])
def test_serve_text_pads_to_the_smallest_bucket_with_the_padded_outputs(bucketed, models, tokenizer, rows, bucket):
    text = tf.constant(rows)
    fed = bucketed.signatures["tokenize"](text=text)
    texts_a, texts_b = (rows, None) if isinstance(rows[0], str) else zip(*rows)  # texts, or [a, b] pairs
    full = _python_pack(tokenizer, texts_a, texts_b, length=LONG)  # padded to LONG always
    assert fed["input_ids"].shape == (len(rows), bucket) and full["input_ids"].shape == (len(rows), LONG)
    lengths = full["input_mask"].sum(axis=1)
    assert lengths.max() <= bucket and (bucket == 8 or lengths.max() > bucket // 2)  # the smallest that holds
    for key in SEQUENCE_INPUTS:  # the same rows, less padding
        np.testing.assert_array_equal(fed[key].numpy(), full[key][:, :bucket], err_msg=key)
        assert not full[key][:, bucket:].any()
    got = bucketed.signatures["serve_text"](text=text)
    expected = {k: v.numpy() for k, v in models["encoder"](full, training=False).items()}
    np.testing.assert_allclose(got["pooled_output"], expected["pooled_output"], atol=1e-5, rtol=0)
    assert got["sequence_output"].shape[1] == bucket
    real = full["input_mask"][:, :bucket].astype(bool)
    np.testing.assert_allclose(got["sequence_output"].numpy()[real], expected["sequence_output"][:, :bucket][real],
                               atol=1e-5, rtol=0)
    assert np.std(expected["pooled_output"]) > 1e-3


def test_a_model_of_pairs_says_so_when_given_one_segment(models, tmp_path):
    path = export_saved_model(
        models["classifier"], tmp_path / "pairs", TINY_SPM, SEQ, text_segments=2,
        outputs_fn=lambda inputs, training: {"logits": models["classifier"](inputs, training=training)},
    )
    serve_text = tf.saved_model.load(path).signatures["serve_text"]
    assert serve_text(text=tf.constant([["a", "b"]]))["logits"].shape == (1, 3)
    for text in (tf.constant(["a"]), tf.constant([["a"]])):
        with pytest.raises(tf.errors.InvalidArgumentError, match="fine-tuned on pairs of texts"):
            serve_text(text=text)
    with pytest.raises(ValueError, match="text_segments must be None, 1 or 2"):
        export_encoder(models["encoder"], tmp_path / "bad", TINY_SPM, SEQ, text_segments=3)
    with pytest.raises(ValueError, match=r"largest is max_seq_length \(16\)"):
        export_encoder(models["encoder"], tmp_path / "bad", TINY_SPM, SEQ, length_buckets=[8, 32])


def test_export_command_reads_a_pretraining_run(tmp_path):
    """`albert-export --preset RUN_DIR`: the run's albert_config.json and latest checkpoint."""
    from albert_tf.checkpoints.weights import model_weights

    pretrainer = AlbertPretrainer(CONFIG)
    pretrainer.build()
    _random_weights(pretrainer, 7)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    CONFIG.to_json_file(run_dir / "albert_config.json")
    # As the training loop writes it: variables by path, with the optimizer and step beside them.
    optimizer = keras.optimizers.Adam()
    optimizer.build(pretrainer.trainable_variables)
    tf.train.Checkpoint(model=model_weights(pretrainer), optimizer=optimizer).save(str(run_dir / "ckpt"))
    batch = {k: v for k, v in _ids_batch(seed=9).items() if k != "masked_lm_positions"}
    encoder = AlbertEncoder.from_preset(str(run_dir))
    np.testing.assert_allclose(encoder(batch)["pooled_output"], pretrainer.encoder(batch)["pooled_output"],
                               atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="does not match the model"):
        CONFIG.replace(hidden_size=20, num_attention_heads=2).to_json_file(run_dir / "albert_config.json")
        AlbertPretrainer.from_preset(str(run_dir))
