"""Every model source through every door, by one rule (albert_tf.presets.model_source and loader).

The sources are made by the real tools on a tiny model: a pretraining run (albert-pretrain, a few
steps) and its encoder export, a GLUE fine-tuning run (albert-finetune-glue) and its classifier
export, a preset of `save_to_preset`, a Keras text classifier's preset, the release's TF1 folder
and its tarball (with a TF-Hub module beside the checkpoint, as google-research/albert issue 71
describes the tarballs), that tarball by URL on 127.0.0.1, a Hugging Face folder and the same as a
Hub repository (hf://, the loopback stand-in of tests/albert_tf/release_replicas.py). Each door
(every model and task class's `from_preset`, the fine-tuning tools' and albert-pretrain's
initialisation, albert-fill-mask, albert-convert --source any) either loads the source's tensors,
read here independently of the loader, or refuses in one line naming what the source holds.
"""

from __future__ import annotations

import io
import pathlib
import tarfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.checkpoints import weights
from albert_tf.checkpoints.run_folder import checkpoint_key
from albert_tf.config import AlbertConfig
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_labeler import AlbertSpanLabeler
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.presets import convert, loader
from albert_tf.tasks.entity_recognizer import AlbertEntityRecognizer
from albert_tf.tasks.text_classifier import AlbertTextClassifier
from albert_tf.utils.errors import UserError
from tests.albert_tf.release_replicas import LoopbackServer, point_the_hub_at
from tests.conftest import REPO_ROOT
from tests.helpers import console_script
from tests.pretrained_runs import TINY_CONFIG, process_output, tiny_corpus_pretraining

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(**TINY_CONFIG)
SEQ = 16


def _checkpoint_tensors(prefix: str) -> tuple[dict, dict]:
    """A run's weights read with TensorFlow's own reader by the names the training loop gives them."""
    reader = tf.train.load_checkpoint(prefix)
    names = {k for k in reader.get_variable_to_shape_map()}
    model = {}
    for key in names:
        if key.startswith("model/") and key.endswith("/.ATTRIBUTES/VARIABLE_VALUE") and "OPTIMIZER_SLOT" not in key:
            model[key] = reader.get_tensor(key)
    pretrainer = AlbertPretrainer(CONFIG)
    classifier = AlbertClassifier(CONFIG, 2)
    out = {}
    for candidate in (pretrainer, classifier):
        wanted = {name: checkpoint_key(name) for name in weights.model_weights(candidate)}
        if all(key in model for key in wanted.values()) and len(wanted) == len(model):
            out = {name: model[key] for name, key in wanted.items()}
    assert out, f"{prefix} holds neither a pretrainer nor a classifier"
    encoder = {k[len("encoder/"):]: v for k, v in out.items() if k.startswith("encoder/")}
    return encoder, {k: v for k, v in out.items() if not k.startswith("encoder/")}


@pytest.fixture(scope="module")
def sources(tmp_path_factory, small_data_dir):
    """Every kind of source, by the tools that make it: {name: (path, holds, encoder, heads)}."""
    from finetune.glue import cli as glue_cli

    # albert-pretrain's run of CONFIG (4 steps, its encoder exported): the session's, read only here
    # (tests/pretrained_runs.py; made, if this module asks first, in the environment of the others).
    pretrained = tiny_corpus_pretraining(tmp_path_factory)
    assert process_output(pretrained, "albert-pretrain").returncode == 0
    run = pretrained / "run"
    assert AlbertConfig.from_json_file(run / "albert_config.json") == CONFIG
    made = tmp_path_factory.mktemp("sources")
    patch = pytest.MonkeyPatch()
    patch.setenv("ALBERT_TF_HOME", str(made / "cache"))
    pre_encoder, pre_heads = _checkpoint_tensors(tf.train.latest_checkpoint(str(run)))

    glue = made / "rte"
    summary = glue_cli.finetune([
        "albert-finetune-glue", "--task=RTE", f"--data_dir={small_data_dir / 'glue'}", f"--output_dir={glue}",
        f"--init_checkpoint={run}", f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_steps=4",
        "--num_warmup_steps=1", "--learning_rate=1e-2", "--max_train_examples=64", "--progress_bar=false",
        "--nojit_compile", "--do_train"])
    glue_encoder, glue_heads = _checkpoint_tensors(tf.train.latest_checkpoint(str(glue)))
    assert not np.array_equal(glue_encoder["embeddings/word_embeddings/embeddings"],
                              pre_encoder["embeddings/word_embeddings/embeddings"])  # it trained

    keras.utils.set_random_seed(3)
    pretrainer = AlbertPretrainer(CONFIG)
    pretrainer.build()
    preset = pretrainer.save_to_preset(made / "preset", TINY_VOCAB)
    preset_encoder, preset_heads = (weights.values(part) for part in weights.split(pretrainer))

    tf1 = pathlib.Path(convert.write_tf1_release(made / "release" / "albert_tiny", CONFIG,
                                                 {**preset_encoder, **preset_heads}, TINY_VOCAB))
    tarball = made / "albert_tiny.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tf1, arcname="albert_tiny")
        # A TF-Hub module beside the checkpoint (these files are not read: their bytes are stand-ins).
        for name in ("saved_model.pb", "tfhub_module.pb", "fingerprint.pb", "variables/variables.index",
                     "variables/variables.data-00000-of-00001", "assets/albert_config.json",
                     "assets/30k-clean.model"):
            data = b"stand-in"
            info = tarfile.TarInfo(f"albert_tiny/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    hf = pathlib.Path(convert.convert_preset_to_hf(preset, made / "hf"))
    server = LoopbackServer()
    server.files["/albert_models/albert_tiny.tar.gz"] = tarball.read_bytes()
    server.repos["me/albert-tiny"] = {p.name: p.read_bytes() for p in hf.iterdir() if p.is_file()}
    point_the_hub_at(patch, server, made / "hub")
    classifier = AlbertTextClassifier.from_preset(str(glue))  # a Keras task's preset, from the run
    keras_preset = classifier.save_to_preset(made / "keras_classifier")

    table = {
        "pretraining run": (str(run), "pretrainer", pre_encoder, pre_heads),
        "pretraining run's export": (str(run / "export"), "encoder", pre_encoder, {}),
        "fine-tuning run": (str(glue), "classifier", glue_encoder, glue_heads),
        "fine-tuning run's export": (summary["export_dir"], "classifier", glue_encoder, glue_heads),
        "Keras classifier preset": (keras_preset, "classifier", glue_encoder, glue_heads),
        "preset": (preset, "pretrainer", preset_encoder, preset_heads),
        "release folder": (str(tf1), "pretrainer", preset_encoder, preset_heads),
        "release checkpoint": (str(tf1 / "model.ckpt-best"), "pretrainer", preset_encoder, preset_heads),
        "release tarball": (str(tarball), "pretrainer", preset_encoder, preset_heads),
        "URL": (server.url("albert_tiny"), "pretrainer", preset_encoder, preset_heads),
        "Hugging Face folder": (str(hf), "pretrainer", preset_encoder, preset_heads),
        "hf://": ("hf://me/albert-tiny", "pretrainer", preset_encoder, preset_heads),
    }
    yield table
    server.stop()
    patch.undo()


def _encoder_equal(model, expected):
    encoder, _ = weights.split(model)
    assert set(encoder) == set(expected)
    for name, variable in encoder.items():
        np.testing.assert_array_equal(variable.numpy(), expected[name], err_msg=name)


def _heads_equal(model, expected):
    _, heads = weights.split(model)
    assert set(heads) == set(expected)
    for name, variable in heads.items():
        np.testing.assert_array_equal(variable.numpy(), expected[name], err_msg=name)


def _heads_new(model, expected):
    _, heads = weights.split(model)
    assert not any(name in expected and np.array_equal(v.numpy(), expected[name]) for name, v in heads.items()
                   if "bias" not in name and "beta" not in name and "gamma" not in name)


# door: (how it loads a source, which model it yields, the class whose heads it takes)
DOORS = {
    "AlbertEncoder.from_preset": (lambda s: AlbertEncoder.from_preset(s), None),
    "AlbertPretrainer.from_preset": (lambda s: AlbertPretrainer.from_preset(s), "pretrainer"),
    "AlbertClassifier.from_preset": (lambda s: AlbertClassifier.from_preset(s, num_classes=2), "classifier"),
    "AlbertTextClassifier.from_preset": (lambda s: AlbertTextClassifier.from_preset(s, num_classes=2).classifier,
                                         "classifier"),
    "AlbertEntityRecognizer.from_preset": (lambda s: AlbertEntityRecognizer.from_preset(
        s, labels=["person", "location"]).tagger, "tagger"),
    "AlbertTokenClassifier.from_preset": (lambda s: AlbertTokenClassifier.from_preset(s, num_classes=5), "tagger"),
    "AlbertSpanLabeler.from_preset": (lambda s: AlbertSpanLabeler.from_preset(s), "spans"),
    "AlbertMultipleChoice.from_preset": (lambda s: AlbertMultipleChoice.from_preset(s), "choices"),
    "--init_checkpoint of the fine-tuning tools": (lambda s: _initialized(AlbertClassifier(CONFIG, 2), s), "classifier"),
    "--init_checkpoint of albert-pretrain": (lambda s: _pretrainer(s), "pretrainer"),
}


def _initialized(model, source):
    loader.initialize_encoder(model, init_checkpoint=source)
    return model


def _pretrainer(source):
    model = AlbertPretrainer(CONFIG)
    loader.initialize_pretrainer(model, source)
    return model


@pytest.mark.parametrize("door", list(DOORS))
def test_every_source_through_the_door(sources, door):
    load, takes = DOORS[door]
    for name, (path, holds, encoder, heads) in sources.items():
        if takes == "pretrainer" and holds != "pretrainer":
            held = "an encoder" if holds == "encoder" else "an Albert(Text)?Classifier"
            with pytest.raises(UserError, match=rf"^{path} holds {held} without the heads of an AlbertPretrainer; "):
                load(path)
            continue
        model = load(path)
        _encoder_equal(model, encoder)
        if takes == holds:
            _heads_equal(model, heads)
        elif heads:
            _heads_new(model, heads)


def test_every_source_through_fill_mask_and_convert(sources, tmp_path):
    from albert_tf.serving.fill_mask import fill_mask, model_predictor
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    for name, (path, holds, encoder, heads) in sources.items():
        out = tmp_path / name.replace(" ", "_").replace("'", "")
        written = loader.preset_from_source(path, out)  # albert-convert --source any
        reloaded = AlbertPretrainer.from_preset(written) if holds == "pretrainer" else AlbertEncoder.from_preset(written)
        _encoder_equal(reloaded, encoder)
        if holds == "pretrainer":
            _heads_equal(reloaded, heads)
            predict, tokenizer = model_predictor(path)  # albert-fill-mask --preset
            assert isinstance(tokenizer, AlbertTokenizer)
            candidates = fill_mask("the [MASK] of it", predict, tokenizer, top_k=3)
            assert len(candidates) == 1 and len(candidates[0]) == 3
        elif "export" not in name:
            with pytest.raises(UserError, match="without the heads of an AlbertPretrainer"):
                model_predictor(path)


def test_a_fine_tuning_run_predicts_in_keras_what_its_export_serves(sources):
    path, _, _, _ = sources["fine-tuning run"]
    classifier = AlbertTextClassifier.from_preset(path, sequence_length=SEQ)  # the run's length: the same cut
    assert classifier.labels == ["entailment", "not_entailment"]  # the run's labels travel with it
    texts = (["The cat sat.", "A dog ran far away."], ["A cat sat.", "Nobody moved."])
    keras_logits = classifier.predict(texts)
    served = loader.load_saved_model(sources["fine-tuning run's export"][0])
    out = served.signatures["serve_text"](text=tf.constant(list(zip(*texts))))
    probabilities = tf.nn.softmax(keras_logits).numpy()
    served_values = [v.numpy() for v in out.values() if v.dtype == tf.float32 and v.shape == (2, 2)]
    assert any(np.allclose(value, probabilities, atol=1e-5) or np.allclose(value, keras_logits, atol=1e-5)
               for value in served_values), out


def test_a_folder_holding_no_model_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"^.*empty: holds no model: not a preset folder, a run's output_dir"):
        AlbertEncoder.from_preset(str(tmp_path / "empty"))


def test_the_quickstart_falls_back_to_the_demos_model_offline(sources, tmp_path, monkeypatch, capsys):
    """README: `./run_demo.sh`, then the quickstart with no network finds runs/demo/model."""
    import json

    cells = json.loads((REPO_ROOT / "docs" / "quickstart.ipynb").read_text(encoding="utf-8"))["cells"]
    parameters = "".join(cells[1]["source"])
    (tmp_path / "docs").mkdir()
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "model").symlink_to(sources["pretraining run"][0])
    monkeypatch.chdir(tmp_path / "docs")
    monkeypatch.delenv("QUICKSTART_PRESET", raising=False)
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "empty_cache"))
    namespace = {}
    exec(compile(parameters, "quickstart.ipynb[1]", "exec"), namespace)
    assert namespace["PRESET"] == "../runs/demo/model"
    assert "albert_base_v2 cannot be had" in capsys.readouterr().out
    classifier = AlbertTextClassifier.from_preset(namespace["PRESET"], num_classes=2, sequence_length=SEQ)
    _encoder_equal(classifier.classifier, sources["pretraining run"][2])


def test_the_console_scripts_take_a_run_where_they_take_a_model(sources, tmp_path, monkeypatch, capsys):
    from albert_tf.cli import convert as convert_cli
    from albert_tf.cli import export as export_cli
    from albert_tf.cli import fill_mask as fill_mask_cli

    run, _, encoder, heads = sources["pretraining run"]
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={run}", "--model=pretrainer",
                                                     f"--output_dir={tmp_path / 'export'}", f"--max_seq_length={SEQ}"],
                                    monkeypatch, capsys)
    assert code == 0, err
    exported = loader.open_source(str(tmp_path / "export"))
    assert exported.task["class"] == "AlbertPretrainer"
    reloaded = AlbertPretrainer.from_preset(exported)  # an export of a run goes wherever the run goes
    _encoder_equal(reloaded, encoder)
    _heads_equal(reloaded, heads)
    code, out, err = console_script(fill_mask_cli.run, ["albert-fill-mask", f"--init_checkpoint={run}",
                                                        "--text=the [MASK] of it", "--top_k=2"], monkeypatch, capsys)
    assert code == 0 and "[MASK] 1:" in out, err
    glue, _, glue_encoder, glue_heads = sources["fine-tuning run"]
    code, out, err = console_script(convert_cli.run, ["albert-convert", "--source=any", f"--input={glue}",
                                                      f"--output_dir={tmp_path / 'preset'}"], monkeypatch, capsys)
    assert code == 0, err
    kept = AlbertClassifier.from_preset(str(tmp_path / "preset"))
    _encoder_equal(kept, glue_encoder)
    _heads_equal(kept, glue_heads)
    code, out, err = console_script(export_cli.run, ["albert-export", f"--preset={tmp_path / 'nothing'}",
                                                     f"--output_dir={tmp_path / 'x'}"], monkeypatch, capsys)
    assert code == 1 and err.strip().count("\n") == 0 and "no such folder or file" in err
    assert not (tmp_path / "x").exists()


def test_a_tagging_run_comes_back_as_a_recognizer_with_its_tags(sources, small_data_dir, tmp_path):
    """albert-finetune-ner's output_dir into AlbertEntityRecognizer: its head and its tag names."""
    import json

    from finetune.ner import cli as ner_cli

    run = sources["pretraining run"][0]
    ner = tmp_path / "ner"
    ner_cli.finetune(["albert-finetune-ner", f"--init_checkpoint={run}", f"--output_dir={ner}",
                      f"--train_file={small_data_dir / 'ner' / 'wnut17' / 'emerging.dev.conll'}", "--do_train",
                      f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_steps=2", "--num_warmup_steps=1",
                      "--nojit_compile", "--progress_bar=false", "--export=false"])
    tags = json.loads((ner / "task.json").read_text())["labels"]
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(ner)))
    recognizer = AlbertEntityRecognizer.from_preset(str(ner), sequence_length=SEQ)
    assert recognizer.labels == tags and tags[0] == "O" and len(tags) > 3  # O and a B-/I- tag of each type
    assert recognizer.tagger.num_classes == len(tags)
    encoder, heads = weights.split(recognizer.tagger)
    for name, variable in {**{"encoder/" + k: v for k, v in encoder.items()}, **heads}.items():
        np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(checkpoint_key(name)), err_msg=name)
    with pytest.raises(UserError, match=f"^{ner} holds an AlbertTokenClassifier without the heads of an "
                                        "AlbertPretrainer"):
        AlbertPretrainer.from_preset(str(ner))
