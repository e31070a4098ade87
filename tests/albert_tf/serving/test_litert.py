"""LiteRT models of every task: the interpreter's float32 outputs equal the Keras model's and the
SavedModel's within 1e-4, with builtin ops only and the inputs and outputs in the documented
order; int8 models give the float model's answers on a small dev set of a tiny trained model; albert
base in dynamic int8 fits in 14 MB."""

import itertools
import json
import pathlib
import re
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.serving import litert
from albert_tf.serving.export import export_saved_model
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSpanLabeler, AlbertTokenClassifier
from albert_tf.serving.multiple_choice import export_multiple_choice
from tests.helpers import good_bad_sentences

TINY_VOCAB = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
SEQ = 16
NER_LABELS = ["O", "B-person", "I-person", "B-location", "I-location"]
TASKS = {
    "encoder": (lambda: AlbertEncoder(CONFIG), ["pooled_output", "sequence_output"]),
    "classifier": (lambda: AlbertClassifier(CONFIG, num_classes=3), ["logits", "probability"]),
    "squad": (lambda: AlbertSpanLabeler(CONFIG), ["end_logits", "start_logits"]),
    "race": (lambda: AlbertMultipleChoice(CONFIG, num_choices=4), ["logits", "probability"]),
    "ner": (lambda: AlbertTokenClassifier(CONFIG, num_classes=len(NER_LABELS)), ["logits", "probability"]),
}


def _task_outputs(task, model):
    """The LiteRT outputs of the task that owns the model: None for albert_tf's encoder and
    classifier, SQuAD's, RACE's and NER's from their fine-tuning tasks."""
    from finetune.ner.task import NerTask
    from finetune.race.task import RaceTask
    from finetune.squad.task import SquadTask

    owners = {"squad": lambda: SquadTask(), "race": lambda: RaceTask(max_qa_length=8),
              "ner": lambda: NerTask(labels=NER_LABELS)}
    return owners[task]().litert_outputs(model, SEQ) if task in owners else None


def _features(shape, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones(shape, np.int32)
    mask[..., shape[-1] - 4:] = 0
    segments = np.zeros(shape, np.int32)
    segments[..., 6: shape[-1] - 4] = 1
    return {"input_ids": rng.integers(5, CONFIG.vocab_size, shape).astype(np.int32) * mask,
            "input_mask": mask, "segment_ids": segments}


def _keras_outputs(model, task, features):
    outputs = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    if task in ("classifier", "race", "ner"):
        return {"logits": outputs, "probability": tf.nn.softmax(outputs, -1)}
    return dict(outputs)


def _saved_model_outputs(model, task, features, path):
    if task == "race":
        export_multiple_choice(model, path, TINY_VOCAB, SEQ, max_qa_length=8)
    else:
        outputs_fn = None
        if task in ("classifier", "ner"):
            outputs_fn = lambda inputs, training: {"logits": model(inputs, training=training)}  # noqa: E731
        export_saved_model(model, path, TINY_VOCAB, SEQ, outputs_fn=outputs_fn)
    serving = tf.saved_model.load(str(path)).signatures["serving_default"]
    return {k: v.numpy() for k, v in serving(**{k: tf.constant(v) for k, v in features.items()}).items()}


@pytest.fixture(scope="module")
def float32_litert(tmp_path_factory):
    """`float32_litert(task)`: the task's model (seed 0) and the folder of its float32 LiteRT model,
    made once for the tests that read them (RACE's by its fine-tuning task's export, which is
    `export_litert` with the task's outputs: the tool's door and this module's at once)."""
    made = {}

    def get(task):
        if task not in made:
            keras.utils.set_random_seed(0)
            model = TASKS[task][0]()
            model.build()
            folder = tmp_path_factory.mktemp(task) / "litert"
            if task == "race":
                FINETUNING_TASKS["race"][0]().export(model, TINY_VOCAB, SEQ, folder, "litert")
            else:
                litert.export_litert(model, folder, TINY_VOCAB, SEQ, outputs=_task_outputs(task, model))
            made[task] = model, folder
        return made[task]

    return get


@pytest.mark.parametrize("task", TASKS)
def test_float32_equals_the_keras_model_and_the_saved_model(task, float32_litert, tmp_path):
    output_names = TASKS[task][1]
    model, folder = float32_litert(task)
    flatbuffer = (folder / litert.MODEL_FILE).read_bytes()
    assert litert.custom_ops(flatbuffer) == []  # no Flex (Select TF) op: stock LiteRT runs it
    description = json.loads((folder / litert.IO_FILE).read_text())
    shape = [1, 4, SEQ] if task == "race" else [1, SEQ]
    assert description["task"] == task
    assert [(e["name"], e["dtype"], e["shape"], e["index"]) for e in description["inputs"]] == [
        (name, "int32", shape, i) for i, name in enumerate(litert.INPUTS)]
    assert [e["name"] for e in description["outputs"]] == output_names
    assert (folder / "spiece.model").read_bytes() == TINY_VOCAB.read_bytes()

    lite = litert.LiteRTModel(folder / litert.MODEL_FILE)
    # The interpreter's own order is the documented one (BertQuestionAnswerer reads by position).
    assert [d["name"] for d in lite.interpreter.get_input_details()] == list(litert.INPUTS)
    assert [d["name"] for d in lite.interpreter.get_output_details()] == output_names
    features = _features([3, *shape[1:]], seed=1)  # three rows, one at a time
    got = lite(features)
    want = _keras_outputs(model, task, features)
    assert sorted(got) == output_names
    for name in output_names:
        np.testing.assert_allclose(got[name], np.asarray(want[name]), atol=1e-4, rtol=0, err_msg=name)
    saved = _saved_model_outputs(model, task, features, tmp_path / "saved_model")
    saved_names = {"probability": "probabilities"} if task == "race" else {}
    for name in output_names:
        if saved_names.get(name, name) in saved:
            np.testing.assert_allclose(got[name], saved[saved_names.get(name, name)], atol=1e-4, rtol=0, err_msg=name)


def test_every_quantization_converts_to_builtin_ops_and_shrinks(float32_litert):
    model, folder = float32_litert("classifier")  # its float32 ("none") conversion is the module's export
    calibration = [{k: v[i] for k, v in _features([8, SEQ], seed=2).items()} for i in range(8)]
    sizes = {}
    for quantization in litert.QUANTIZATIONS:
        if quantization == "none":
            flatbuffer = (folder / litert.MODEL_FILE).read_bytes()
        else:
            flatbuffer = litert.convert(model, SEQ, quantization, representative_data=calibration)
        assert litert.custom_ops(flatbuffer) == [], quantization
        assert "FusedBatchNormV3" not in str(litert.builtin_ops(flatbuffer))
        sizes[quantization] = len(flatbuffer)
    # Tiny tensors (under 1024 values: biases, LayerNorms) stay float32 in every form.
    assert sizes["dynamic_int8"] < sizes["float16"] < 0.7 * sizes["none"]
    assert sizes["full_int8"] < 0.7 * sizes["none"]
    with pytest.raises(ValueError, match="representative_data"):
        litert.convert(model, SEQ, "full_int8")
    with pytest.raises(ValueError, match="quantization must be one of"):
        litert.convert(model, SEQ, "int4")
    with pytest.raises(ValueError, match="max_position_embeddings"):
        litert.convert(model, CONFIG.max_position_embeddings + 1)




@pytest.fixture(scope="module")
def trained_classifier():
    from albert_tf.tasks.text_classifier import AlbertTextClassifier
    from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor

    keras.utils.set_random_seed(1)
    classifier = AlbertTextClassifier(AlbertClassifier(CONFIG, num_classes=2),
                                      AlbertTextPreprocessor(str(TINY_VOCAB), sequence_length=SEQ))
    classifier.compile(optimizer=keras.optimizers.Adam(3e-3), jit_compile=False)
    texts, labels = good_bad_sentences(96, seed=2)
    classifier.fit(texts, labels, batch_size=16, epochs=8, seed=3, verbose=0)
    return classifier, texts


@pytest.mark.parametrize("quantization", ["dynamic_int8", "full_int8"])
def test_int8_classifier_gives_the_float_models_labels(trained_classifier, quantization, tmp_path):
    classifier, train_texts = trained_classifier
    # full int8 is calibrated on the training texts, tokenized as the classifier packs them.
    calibration = lambda: litert.tokenized_texts(train_texts, TINY_VOCAB, SEQ)  # noqa: E731
    litert.export_litert(classifier, tmp_path, TINY_VOCAB, SEQ, quantization=quantization,
                         representative_data=calibration)
    lite = litert.LiteRTModel(tmp_path / litert.MODEL_FILE)
    dev_texts, dev_labels = good_bad_sentences(200, seed=7)
    features = {k: v.numpy() for k, v in classifier.preprocessor(dev_texts).items()}
    want = np.argmax(classifier.classifier(features, training=False).numpy(), -1)
    got = lite(features)
    assert (want == dev_labels).mean() >= 0.9  # the tiny model learned the task
    np.testing.assert_allclose(got["probability"].sum(-1), 1.0, atol=1e-3)
    agreement = (np.argmax(got["logits"], -1) == want).mean()
    assert agreement >= 0.99, f"{quantization}: {agreement:.1%} of the labels agree"
    assert classifier.classifier.encoder.attention_mask_bias == -10000.0  # the Keras model is as it was


def _span_batch(n, seed):
    """Rows of filler ids whose answer is the two pieces 7, 8 somewhere in them."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(20, CONFIG.vocab_size, (n, SEQ)).astype(np.int32)
    starts = rng.integers(1, SEQ - 1, n)
    ids[np.arange(n), starts] = 7
    ids[np.arange(n), starts + 1] = 8
    ids[:, 0] = 2
    return ({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)},
            starts, starts + 1)


def _best_spans(start_logits, end_logits, max_answer_length=4):
    scores = start_logits[:, :, None] + end_logits[:, None, :]
    allowed = np.triu(np.ones((SEQ, SEQ), bool)) & ~np.triu(np.ones((SEQ, SEQ), bool), max_answer_length)
    flat = np.where(allowed[None], scores, -np.inf).reshape(len(scores), -1).argmax(-1)
    return np.stack(np.unravel_index(flat, (SEQ, SEQ)), -1)


def test_dynamic_int8_span_model_gives_the_float_models_answers(tmp_path):
    keras.utils.set_random_seed(4)
    model = AlbertSpanLabeler(CONFIG)
    model.build()
    optimizer = keras.optimizers.Adam(3e-3)
    optimizer.build(model.trainable_variables)  # its slots made here: the step is traced once, not twice

    @tf.function(jit_compile=False, autograph=False)
    def step(features, starts, ends):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(starts, outputs["start_logits"])
                + tf.nn.sparse_softmax_cross_entropy_with_logits(ends, outputs["end_logits"]))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    for i in range(100):
        features, starts, ends = _span_batch(32, seed=100 + i)
        step(features, starts, ends)
    litert.export_litert(model, tmp_path, TINY_VOCAB, SEQ, quantization="dynamic_int8",
                         outputs=_task_outputs("squad", model))
    lite = litert.LiteRTModel(tmp_path / litert.MODEL_FILE)
    features, starts, ends = _span_batch(200, seed=9)
    want = model(features, training=False)
    want = _best_spans(want["start_logits"].numpy(), want["end_logits"].numpy())
    got = lite(features)
    got = _best_spans(got["start_logits"], got["end_logits"])
    assert (want == np.stack([starts, ends], -1)).all(-1).mean() >= 0.9  # the tiny model learned the task
    agreement = (got == want).all(-1).mean()
    assert agreement >= 0.97, f"{agreement:.1%} of the answers agree"


@pytest.mark.measure  # a figure of the base model (a minute of conversion under load): -m measure
def test_albert_base_dynamic_int8_fits_in_14_mb():
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig.named("albert_base_v2"))
    encoder.build()
    flatbuffer = litert.convert(encoder, 128, "dynamic_int8")
    assert litert.custom_ops(flatbuffer) == []
    assert len(flatbuffer) <= 14 * 1024 * 1024, f"{len(flatbuffer) / 2**20:.1f} MiB"


def _albert_export(*args):
    from albert_tf.cli import export

    export.FLAGS(["albert-export", *args])
    try:
        export.main([])
    finally:
        export.FLAGS.unparse_flags()


@pytest.fixture(scope="module")
def encoder_preset(float32_litert, tmp_path_factory):
    """The module's encoder (seed 0) and its preset folder, which albert-export reads."""
    encoder, _ = float32_litert("encoder")
    return encoder, encoder.save_to_preset(tmp_path_factory.mktemp("encoder") / "preset", TINY_VOCAB)


def test_albert_export_writes_the_encoders_litert_model(encoder_preset, tmp_path, capfd, monkeypatch):
    from albert_tf.utils.errors import FlagError

    encoder, preset = encoder_preset
    texts = tmp_path / "texts.txt"
    texts.write_text("The old man came.\nA river\tat night.\n")
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:  # calibrating runs TensorFlow's own interpreter
        warnings.simplefilter("always")
        _albert_export(f"--preset={preset}", f"--output_dir={tmp_path / 'out'}", "--format=litert",
                       "--max_seq_length=16", "--quantization=full_int8", f"--representative_texts={texts}")
    description = json.loads((tmp_path / "out" / litert.IO_FILE).read_text())
    assert (description["task"], description["quantization"]) == ("encoder", "full_int8")
    assert litert.custom_ops((tmp_path / "out" / litert.MODEL_FILE).read_bytes()) == []
    assert not [str(w.message) for w in caught if "deprecated" in str(w.message)]
    printed = capfd.readouterr()  # nor the quantizer's C++ line of its settings
    assert not any(note in printed.err + printed.out for note in ("XNNPACK", "deprecated", "fully_quantize")), printed
    _albert_export(f"--preset={preset}", f"--output_dir={tmp_path / 'f32'}", "--format=litert", "--max_seq_length=16")
    features = _features([1, SEQ], seed=3)
    got = litert.LiteRTModel(tmp_path / "f32" / litert.MODEL_FILE)(features)
    np.testing.assert_allclose(got["pooled_output"], encoder(features)["pooled_output"].numpy(), atol=1e-4, rtol=0)
    # Real warnings only (issue 53): no runtime's XNNPACK INFO line; and without the LiteRT runtime
    # (ai_edge_litert), TensorFlow's interpreter runs it without its notice of deprecation.
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallback = litert.LiteRTModel(tmp_path / "f32" / litert.MODEL_FILE)(features)
    np.testing.assert_allclose(fallback["pooled_output"], got["pooled_output"], atol=1e-6, rtol=0)
    assert not [str(w.message) for w in caught if "deprecated" in str(w.message)]
    printed = capfd.readouterr()
    assert "XNNPACK" not in printed.err + printed.out and "deprecated" not in printed.err, printed.err
    for args, message in ((["--quantization=dynamic_int8"], "are for --format=litert"),
                          (["--format=litert", "--quantization=full_int8"], "needs it"),
                          (["--format=litert", "--model=pretrainer"], "exports the encoder"),
                          (["--format=litert", "--precision=bfloat16"], "^--precision=bfloat16 is for SavedModels: "
                           r"LiteRT has no bfloat16 kernels \(pick --quantization=float16 or dynamic_int8 for "
                           r"smaller weights\)$")):
        with pytest.raises(FlagError, match=message):
            _albert_export(f"--preset={preset}", f"--output_dir={tmp_path / 'refused'}", *args)
        assert not (tmp_path / "refused").exists()


@pytest.mark.faults
@pytest.mark.parametrize("content, message", [
    (b"", "holds no text: full int8 calibrates on training texts, one a line"),
    (b"\n  \n", "holds no text: full int8 calibrates on training texts, one a line"),
    (b"The old man came.\nA caf\xe9 at night.\n", "line 2 is not UTF-8 (byte 0xe9); save the texts as UTF-8"),
    (None, "is a folder: give a text file of training texts, one a line"),
], ids=["empty", "blank", "latin1", "folder"])
def test_representative_texts_that_cannot_calibrate_are_one_line_naming_the_flag(content, message, tmp_path):
    """Issue 40: an empty file failed in the converter, Latin-1 and a folder with tracebacks."""
    from albert_tf.utils.errors import FlagError

    texts = tmp_path / "texts"
    texts.mkdir() if content is None else texts.write_bytes(content)
    with pytest.raises(FlagError) as raised:
        _albert_export("--preset=albert_base_v2", f"--output_dir={tmp_path / 'out'}", "--format=litert",
                       "--quantization=full_int8", f"--representative_texts={texts}")
    assert str(raised.value) == f"--representative_texts {texts} {message}".replace(f"{texts} line", f"{texts}: line")
    assert raised.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["texts"]  # nothing made, no preset fetched


def test_every_format_and_precision_gives_the_keras_models_answers(trained_classifier, tmp_path):
    """The classifier's labels on 200 dev sentences from Keras, the float32 and bfloat16 SavedModels
    and the float32 LiteRT model; bf16's probabilities within 0.02 of float32's (stated tolerance:
    bf16 keeps 8 bits of mantissa, a relative error of 0.4% a weight)."""
    from albert_tf.serving.export import at_precision

    classifier, _ = trained_classifier
    dev_texts, _ = good_bad_sentences(200, seed=7)
    features = {k: v.numpy() for k, v in classifier.preprocessor(dev_texts).items()}
    keras_logits = classifier.classifier(features, training=False).numpy()
    want = np.argmax(keras_logits, -1)
    probabilities = {}
    for precision in ("float32", "bfloat16"):
        model = at_precision(classifier, precision)
        export_saved_model(model, tmp_path / precision, TINY_VOCAB, SEQ,
                           outputs_fn=lambda inputs, training, m=model: {"logits": m(inputs, training=training)})
        loaded = tf.saved_model.load(str(tmp_path / precision))
        dtypes = {v.dtype for v in loaded.trainable_variables if "layer_norm" not in v.name}  # LayerNorm: float32
        assert dtypes == {tf.float32 if precision == "float32" else tf.bfloat16}, precision
        logits = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})["logits"]
        assert logits.dtype == tf.float32
        probabilities[precision] = tf.nn.softmax(logits, -1).numpy()
        np.testing.assert_array_equal(np.argmax(logits, -1), want, err_msg=precision)
    np.testing.assert_allclose(probabilities["float32"], tf.nn.softmax(keras_logits, -1).numpy(), atol=1e-5)
    assert np.abs(probabilities["bfloat16"] - probabilities["float32"]).max() <= 0.02
    litert.export_litert(classifier, tmp_path / "litert", TINY_VOCAB, SEQ)
    lite = litert.LiteRTModel(tmp_path / "litert" / litert.MODEL_FILE)(features)
    np.testing.assert_array_equal(np.argmax(lite["logits"], -1), want)
    # The float32 model is the Keras one itself, not a copy.
    assert at_precision(classifier.classifier, "float32") is classifier.classifier


def test_bfloat16_encoder_export_stays_within_its_tolerance_of_float32(encoder_preset, tmp_path):
    """Pooled outputs of the bf16 SavedModel: cosine >= 0.999 to float32's and no value off by more
    than 0.03; the albert_tf's own CLI writes it (--precision=bfloat16) with bf16 variables."""
    encoder, preset = encoder_preset
    _albert_export(f"--preset={preset}", f"--output_dir={tmp_path / 'bf16'}", "--max_seq_length=16",
                   "--precision=bfloat16")
    loaded = tf.saved_model.load(str(tmp_path / "bf16"))
    assert {v.dtype for v in loaded.trainable_variables if "layer_norm" not in v.name} == {tf.bfloat16}
    assert json.loads((tmp_path / "bf16" / "albert_config.json").read_text()) == CONFIG.to_dict()
    features = _features([8, SEQ], seed=4)
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})["pooled_output"]
    want = encoder(features, training=False)["pooled_output"].numpy()
    got = got.numpy()
    cosine = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cosine.min() >= 0.999, cosine
    assert np.abs(got - want).max() <= 0.03


def test_keras_layer_norm_traces_without_fused_batch_norm():
    from albert_tf.layers import common

    layer = common.LayerNorm()
    layer.build((None, 8))
    x = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float32)

    def ops(traced):
        return {op.type for op in traced.graph.get_operations()}

    function = tf.function(lambda v: layer(v, training=False))
    fused = function.get_concrete_function(tf.TensorSpec([3, 8], tf.float32))
    with common.keras_layer_norm():
        keras_form = tf.function(lambda v: layer(v, training=False)).get_concrete_function(tf.TensorSpec([3, 8]))
    assert "FusedBatchNormV3" in ops(fused)  # the CPU SavedModel's form, outside the block
    assert "FusedBatchNormV3" not in ops(keras_form)
    np.testing.assert_allclose(keras_form(tf.constant(x)).numpy(), fused(tf.constant(x)).numpy(), atol=1e-5)


def _squad_v2_model():
    from finetune.squad.model import AlbertSquadV2

    return AlbertSquadV2(CONFIG, start_n_top=3, end_n_top=2)


# The task object of two fine-tuning tools, its model and its LiteRT outputs (GLUE's goes through its
# command below; SQuAD v1.1's model is TASKS' span labeler; RACE's is TASKS' too, and its export is
# the module's `float32_litert("race")`).
FINETUNING_TASKS = {
    "squad_v2": (lambda: __import__("finetune.squad.task", fromlist=["SquadTask"]).SquadTask(
                 version_2_with_negative=True), _squad_v2_model,
                 ["cls_logits", "end_top_index", "end_top_log_probs", "start_top_index", "start_top_log_probs"]),
    "race": (lambda: __import__("finetune.race.task", fromlist=["RaceTask"]).RaceTask(max_qa_length=8),
             lambda: AlbertMultipleChoice(CONFIG, num_choices=4), ["logits", "probability"]),
}


@pytest.mark.parametrize("name", FINETUNING_TASKS)
def test_every_fine_tuning_tasks_litert_export_equals_its_keras_model(name, float32_litert, tmp_path):
    make_task, make_model, output_names = FINETUNING_TASKS[name]
    if name == "race":  # the module's RACE model, exported by its task
        model, folder = float32_litert("race")
    else:
        keras.utils.set_random_seed(0)
        model = make_model()
        model.build()
        folder = pathlib.Path(make_task().export(model, TINY_VOCAB, SEQ, tmp_path / "export", "litert"))
    description = json.loads((folder / litert.IO_FILE).read_text())
    inputs = [*litert.INPUTS, "p_mask"] if name == "squad_v2" else list(litert.INPUTS)
    assert description["task"] == name
    assert [e["name"] for e in description["inputs"]] == inputs
    assert [e["name"] for e in description["outputs"]] == output_names
    assert (folder / "spiece.model").read_bytes() == TINY_VOCAB.read_bytes()
    flatbuffer = (folder / litert.MODEL_FILE).read_bytes()
    assert litert.custom_ops(flatbuffer) == []

    features = _features([2, 4, SEQ] if name == "race" else [2, SEQ], seed=5)
    if name == "squad_v2":  # the question's pieces and the padding are no answer; [CLS] is
        features["p_mask"] = 1 - features["segment_ids"]
        features["p_mask"][:, 0] = 0
    got = litert.LiteRTModel(folder / litert.MODEL_FILE)(features)
    want = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    want = dict(want) if isinstance(want, dict) else {"logits": want, "probability": tf.nn.softmax(want, -1)}
    assert sorted(got) == output_names
    for key in output_names:
        if key.endswith("index"):
            np.testing.assert_array_equal(got[key], np.asarray(want[key]), err_msg=key)
        else:
            np.testing.assert_allclose(got[key], np.asarray(want[key]), atol=1e-4, rtol=0, err_msg=key)


def test_a_fine_tuning_export_replaces_the_previous_one_only_once_complete(float32_litert, tmp_path, monkeypatch):
    """Issue 39: FinetuningTask.export deleted the previous export before the LiteRT conversion had
    succeeded. Also: its precision reaches the SavedModel, and LiteRT refuses bfloat16."""
    make_task = FINETUNING_TASKS["race"][0]
    model, converted = float32_litert("race")
    task, export_dir = make_task(), tmp_path / "run" / "export"
    task.export(model, TINY_VOCAB, SEQ, export_dir, precision="bfloat16")
    before = sorted(p.relative_to(export_dir).as_posix() for p in export_dir.rglob("*"))
    assert "saved_model.pb" in before and "albert_config.json" in before
    loaded = tf.saved_model.load(str(export_dir))
    assert {v.dtype for v in loaded.trainable_variables if "layer_norm" not in v.name} == {tf.bfloat16}

    def failing(*args, **kwargs):
        raise RuntimeError("the converter ran out of memory")

    monkeypatch.setattr(litert, "convert", failing)
    with pytest.raises(RuntimeError, match="ran out of memory"):
        task.export(model, TINY_VOCAB, SEQ, export_dir, "litert")
    assert sorted(p.relative_to(export_dir).as_posix() for p in export_dir.rglob("*")) == before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["export"]  # nothing left beside it
    with pytest.raises(ValueError, match="LiteRT has no bfloat16 kernels"):  # the one line of every door
        task.export(model, TINY_VOCAB, SEQ, export_dir, "litert", precision="bfloat16")
    # The export that succeeds: this model's conversion is the module's (float32_litert), made by
    # the same task's export; here it is read, not made a second time.
    flatbuffer = (converted / litert.MODEL_FILE).read_bytes()
    monkeypatch.setattr(litert, "convert", lambda *args, **kwargs: flatbuffer)
    task.export(model, TINY_VOCAB, SEQ, export_dir, "litert")
    assert (export_dir / litert.MODEL_FILE).read_bytes() == flatbuffer
    assert sorted(p.name for p in export_dir.iterdir()) == [
        "albert_config.json", litert.MODEL_FILE, litert.IO_FILE, "spiece.model"]


def test_glue_tool_writes_full_int8_calibrated_on_its_training_texts(small_data_dir, tmp_path, monkeypatch):
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune.glue import cli
    from finetune.glue.readers import read_examples

    calibrated = []
    convert = litert.convert

    def recording(model, max_seq_length, quantization="none", representative_data=None, outputs=None):
        calibrated.extend(itertools.islice(representative_data(), 3))
        return convert(model, max_seq_length, quantization, representative_data, outputs)

    monkeypatch.setattr(litert, "convert", recording)
    config = tmp_path / "albert_config.json"
    CONFIG.to_json_file(config)
    args = ["albert-finetune-glue", "--task=MRPC", f"--data_dir={small_data_dir / 'glue'}",
            f"--albert_config_file={config}", f"--spm_model_file={TINY_VOCAB}", f"--max_seq_length={SEQ}",
            "--train_batch_size=8", "--num_train_steps=2", "--max_train_examples=16", "--progress_bar=false",
            "--nojit_compile", "--do_train", "--format=litert"]  # XLA is not the subject: no compile
    cli.finetune([*args, f"--output_dir={tmp_path / 'run'}", "--quantization=full_int8"])
    export_dir = tmp_path / "run" / "export"
    description = json.loads((export_dir / litert.IO_FILE).read_text())
    assert (description["task"], description["quantization"]) == ("classifier", "full_int8")
    assert [e["name"] for e in description["outputs"]] == ["logits", "probability"]
    assert (export_dir / "spiece.model").read_bytes() == TINY_VOCAB.read_bytes()
    assert not (export_dir / "saved_model.pb").exists()
    # Calibrated on MRPC's training pairs, in file order, packed as training packs them.
    tokenizer = AlbertTokenizer(TINY_VOCAB)
    train = read_examples("MRPC", small_data_dir / "glue", "train").examples[:3]
    assert [list(c["input_ids"]) for c in calibrated] == [
        tokenizer.pack(tokenizer.encode(e.text_a), tokenizer.encode(e.text_b), max_seq_length=SEQ)["input_ids"]
        for e in train]
    lite = litert.LiteRTModel(export_dir / litert.MODEL_FILE)
    np.testing.assert_allclose(lite(calibrated[0])["probability"].sum(), 1.0, atol=1e-3)

    with pytest.raises(Exception, match="--quantization is for --format=litert"):
        cli.finetune([*args[:-1], f"--output_dir={tmp_path / 'refused'}", "--quantization=dynamic_int8"])
    assert not (tmp_path / "refused").exists()


@pytest.mark.slow
@pytest.mark.measure
def test_squad_tools_dynamic_int8_gives_the_float_answers_on_200_dev_questions(data_dir, tmp_path):
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune.squad import cli, features, metrics, postprocess, readers
    from tests.helpers import SQUAD_CHAIN_CONFIG as SQUAD_CONFIG, SQUAD_CHAIN_TRAINING as TRAINING
    from tests.helpers import first_squad_questions as _first_questions

    # A tiny model fine-tuned on the first 200 questions of SQuAD v1.1's dev set (so it answers them
    # well: agreement on a model that knows nothing would say little), exported by the tool itself.
    questions = _first_questions(data_dir / "squad" / "dev-v1.1.json", 200, tmp_path / "dev200.json")
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(SQUAD_CONFIG))
    spm_model = data_dir / "albert" / "30k-clean.model"
    summary = cli.finetune(["albert-finetune-squad", f"--albert_config_file={config}", f"--spm_model_file={spm_model}",
                            f"--output_dir={tmp_path / 'run'}", f"--train_file={questions}", "--do_train",
                            *TRAINING, "--format=litert", "--quantization=dynamic_int8"])
    examples = readers.read_squad(questions)[:200]
    assert len(examples) == 200
    settings = features.FeatureSettings(128, 64, 32)  # TRAINING's lengths
    records = features.stack_records(features.convert_examples(examples, AlbertTokenizer(spm_model), settings))
    inputs = {k: records[k] for k in litert.INPUTS}
    want = summary["model"](inputs, training=False)
    got = litert.LiteRTModel(pathlib.Path(summary["export_dir"]) / litert.MODEL_FILE)(inputs)
    float_answers = postprocess.postprocess_v1(examples, records, want["start_logits"].numpy(),
                                               want["end_logits"].numpy()).answers
    int8_answers = postprocess.postprocess_v1(examples, records, got["start_logits"], got["end_logits"]).answers
    scores = metrics.evaluate_v1(json.loads(questions.read_text())["data"], float_answers)
    print("float32:", scores)
    assert scores["exact_match"] >= 80  # the tiny model learned the questions
    agreement = np.mean([int8_answers[e.qas_id] == float_answers[e.qas_id] for e in examples])
    print(f"dynamic int8: {agreement:.1%} of 200 answers the float model's")
    assert agreement >= 0.97, f"{agreement:.1%} of the answers agree"


@pytest.mark.faults
def test_litert_model_refuses_what_the_saved_model_refuses(float32_litert):
    """Issue 40's LiteRT items: the wrong length was a reshape error, id -1 ran (the SavedModel
    refuses it), and an empty batch was an IndexError."""
    model, folder = float32_litert("classifier")  # AlbertClassifier(CONFIG, num_classes=3)
    lite = litert.LiteRTModel(folder / litert.MODEL_FILE)
    features = _features([2, SEQ])
    with pytest.raises(ValueError) as error:
        lite({k: v[:, :8] for k, v in features.items()})
    assert str(error.value) == f"the model takes input_ids of shape [1, {SEQ}] (or [B, {SEQ}] for B rows, or [{SEQ}] for one), got [2, 8]"
    with pytest.raises(ValueError) as error:
        lite({**features, "segment_ids": features["segment_ids"][:1]})
    assert str(error.value).endswith("got [1, 16]") and str(error.value).startswith("the model takes segment_ids")
    for bad, rule in ((-1, "input_ids must be >= 0"), (300, "input_ids must be < vocab_size (300)")):
        ids = features["input_ids"].copy()
        ids[1, 3] = bad
        with pytest.raises(ValueError) as error:
            lite({**features, "input_ids": ids})
        assert str(error.value) == f"{rule}: input_ids[1, 3] is {bad}"
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(rule)):  # the Keras model's (SavedModel's) rule
            model({k: tf.constant(v) for k, v in {**features, "input_ids": ids}.items()})
    empty = lite({k: v[:0] for k, v in features.items()})
    assert {k: v.shape for k, v in empty.items()} == {"logits": (0, 3), "probability": (0, 3)}
    assert lite({k: v[0] for k, v in features.items()})["logits"].shape == (3,)  # one unbatched row
    assert litert.LiteRTModel((folder / litert.MODEL_FILE).read_bytes()).vocab_size is None
