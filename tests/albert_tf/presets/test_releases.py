"""The released checkpoints as their real files are laid out, into every task.

The loader compares only what determines the weights: dropout is the loading model's choice.
"""

import json

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.utils.errors import UserError
from albert_tf.models import AlbertClassifier
from albert_tf.presets import folder, loader
from albert_tf.checkpoints import weights
from tests.conftest import REPO_ROOT

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
# A v1-like tiny config: dropout 0.1 as the v1 base/large/xlarge releases.
V1_TINY = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=48, max_position_embeddings=64,
                       hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="module")
def v1_preset(tmp_path_factory):
    pretrainer = AlbertPretrainer(V1_TINY)
    pretrainer.build()
    path = tmp_path_factory.mktemp("v1") / "preset"
    pretrainer.save_to_preset(path, TINY_VOCAB)
    return path, weights.values(weights.split(pretrainer)[0]), weights.values(weights.split(pretrainer)[1])


def _encoder_values(model):
    return weights.values(weights.split(model)[0] if not hasattr(model, "encoder") else
                          weights.split(model.encoder)[0])


def test_dropout_is_the_loading_models_choice_not_the_checkpoints(v1_preset):
    path, encoder, heads = v1_preset
    fine_tuning = V1_TINY.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.05)
    classifier = AlbertClassifier(fine_tuning, num_classes=2)
    assert loader.initialize_encoder(classifier, preset=str(path)) == str(path)
    assert loader.initialize_encoder(AlbertClassifier(fine_tuning, num_classes=2), init_checkpoint=str(path))
    for name, value in _encoder_values(classifier).items():
        np.testing.assert_array_equal(value, encoder[name], err_msg=name)
    assert classifier.config.hidden_dropout_prob == 0.0  # the model keeps its own
    pretrainer = AlbertPretrainer(V1_TINY.replace(hidden_dropout_prob=0.2))
    pretrainer.build()
    loader.initialize_pretrainer(pretrainer, str(path))
    for name, value in weights.values(weights.split(pretrainer)[1]).items():
        np.testing.assert_array_equal(value, heads[name], err_msg=name)


@pytest.mark.parametrize("field, value", [("hidden_act", "relu"), ("num_hidden_groups", 2),
                                          ("intermediate_size", 64), ("sharing", "none")])
def test_a_config_that_shapes_other_weights_is_refused_naming_the_field(v1_preset, field, value):
    path = v1_preset[0]
    other = V1_TINY.replace(**{field: value})
    want = (f"preset {path} holds an encoder with {field}={getattr(V1_TINY, field)!r}, "
            f"the model has {field}={value!r}")
    with pytest.raises(UserError) as raised:
        loader.initialize_encoder(AlbertClassifier(other, num_classes=2), preset=str(path))
    assert str(raised.value) == want
    pretrainer = AlbertPretrainer(other)
    pretrainer.build()
    with pytest.raises(UserError, match=f"^preset {path} holds an encoder with {field}="):  # one rule, one line
        loader.initialize_pretrainer(pretrainer, str(path))


def test_albert_config_file_beside_a_preset_may_set_the_dropout_only(v1_preset, tmp_path):
    path = v1_preset[0]
    run = tmp_path / "run_config.json"
    V1_TINY.replace(hidden_dropout_prob=0.0).to_json_file(run)
    assert loader.find_source(preset=str(path), albert_config_file=str(run)).config.hidden_dropout_prob == 0.0
    V1_TINY.replace(embedding_size=8).to_json_file(run)
    with pytest.raises(UserError, match=r"^--preset .* holds an encoder with embedding_size=16, the model has "
                                        r"embedding_size=8$"):
        loader.find_source(preset=str(path), albert_config_file=str(run))


# ---- one task rule for every entry point ---------------------------------------------------------


def test_both_classifier_classes_restore_a_saved_text_classifiers_head(tmp_path):
    from albert_tf.tasks.text_classifier import AlbertTextClassifier

    classifier = AlbertClassifier(V1_TINY, num_classes=3, dropout=0.2)
    classifier.build()
    text = AlbertTextClassifier.from_preset(classifier.save_to_preset(tmp_path / "bare", TINY_VOCAB),
                                            sequence_length=16)
    assert (text.num_classes, text.classifier.dropout, text.preprocessor.sequence_length) == (3, 0.2, 16)
    for a, b in zip(text.classifier.weights, classifier.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    saved = text.save_to_preset(tmp_path / "text")
    again = AlbertClassifier.from_preset(saved)
    assert (again.num_classes, again.dropout) == (3, 0.2)
    for a, b in zip(again.weights, classifier.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert AlbertTextClassifier.from_preset(saved, sequence_length=8).preprocessor.sequence_length == 8
    assert AlbertTextClassifier.from_preset(saved).preprocessor.sequence_length == 16
    with pytest.raises(UserError, match=r"holds an encoder, not an AlbertTextClassifier: give num_classes for a "
                                        r"new head$"):
        AlbertTextClassifier.from_preset(AlbertEncoder(V1_TINY).save_to_preset(tmp_path / "encoder", TINY_VOCAB))


@pytest.mark.faults
@pytest.mark.parametrize("content, message", [
    ("[]", r'task\.json: not a task \({"class": <name>, "arguments": {\.\.\.}}\), got \[\]$'),
    ("{", r"task\.json: not valid JSON \("),
])
def test_a_broken_task_json_is_one_line_naming_it(v1_preset, tmp_path, content, message):
    import shutil

    from albert_tf.utils.errors import one_line

    broken = tmp_path / "broken"
    shutil.copytree(v1_preset[0], broken)
    (broken / folder.TASK_CONFIG).write_text(content)
    for load in (lambda: AlbertPretrainer.from_preset(broken), lambda: AlbertEncoder.from_preset(broken)):
        with pytest.raises(UserError, match=f"^{broken}/{message}") as raised:
            load()
        assert one_line(raised.value) == (str(raised.value), 1) and "\n" not in str(raised.value)
    assert (broken / folder.TASK_CONFIG).read_text() == content  # nothing rewritten


@pytest.mark.faults
def test_a_preset_without_its_vocabulary_is_named(v1_preset, tmp_path):
    import shutil

    from albert_tf.tasks.text_classifier import AlbertTextClassifier

    broken = tmp_path / "novocab"
    shutil.copytree(v1_preset[0], broken)
    (broken / folder.VOCAB).unlink()
    with pytest.raises(UserError, match=f"^{broken} holds no SentencePiece model \\(a preset folder: {broken}\\): "
                                        "copy the vocabulary"):
        AlbertTextClassifier.from_preset(broken, num_classes=2)
    assert sorted(p.name for p in broken.iterdir()) == ["config.json", "model.weights.h5", "task.json",
                                                        "task.weights.h5"]


# ---- the released names, as their real files, on 127.0.0.1 ---------------------------------------


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """The 8 English releases as tiny replicas in the real layouts (tests/albert_tf/release_replicas.py),
    their tarballs and Hub repositories served on 127.0.0.1, the released names pointed at them, and
    one cache for the module: each is fetched and converted once."""
    import dataclasses

    from albert_tf.presets import registry
    from tests.albert_tf import release_replicas as replicas

    made = tmp_path_factory.mktemp("releases")
    server = replicas.LoopbackServer()
    for seed, name in enumerate(replicas.ENGLISH):
        tarball = replicas.write_release_tarball(name, made, seed=seed)
        server.files[f"/albert_models/{name}.tar.gz"] = tarball.read_bytes()
        server.repos[replicas.hub_repo(name)] = replicas.hub_files(name, seed=seed)
    patch = pytest.MonkeyPatch()
    patch.setenv("ALBERT_TF_HOME", str(made / "cache"))
    replicas.point_the_hub_at(patch, server, made / "hub")
    for name in replicas.ENGLISH:
        patch.setitem(registry.RELEASES, name, dataclasses.replace(registry.RELEASES[name], url=server.url(name)))
    yield server, made
    patch.undo()
    server.stop()


def test_the_hubs_repositories_load_as_they_are(released, caplog):
    import safetensors.torch
    import torch
    import transformers

    from tests.albert_tf import hf_reference
    from tests.albert_tf import release_replicas as replicas

    server, made = released
    for name in ("albert_base_v2", "albert_base_v1"):
        repo = replicas.hub_repo(name)
        encoder = AlbertEncoder.from_preset(f"hf://{repo}")
        assert AlbertClassifier.from_preset(f"hf://{repo}", num_classes=2).classifier.kernel.shape == (16, 2)
        with caplog.at_level("WARNING"):
            pretrainer = AlbertPretrainer.from_preset(f"hf://{repo}")
        assert [r.getMessage() for r in caplog.records if "sentence-order" in r.getMessage()][-1].endswith(
            "has no sentence-order head (as the Hugging Face Hub's ALBERT checkpoints): AlbertPretrainer starts "
            "with a new one")
        # Parity with transformers' AlbertModel on the same files; v1's "gelu" is the tanh form here.
        hub_config = json.loads(server.repos[repo]["config.json"])
        batch = hf_reference.padded_batch(replicas.tiny_config(name), seed=1)
        ours = encoder(batch)["sequence_output"].numpy()
        # transformers on the repository's own config: equal for v2 ("gelu_new"); for v1 ("gelu", the
        # exact GELU there) it differs, and equals with the tanh form the weights were trained with.
        checks = [("gelu_new", True)] if name.endswith("v2") else [("gelu", False), ("gelu_new", True)]
        assert hub_config["hidden_act"] == checks[0][0]
        for act, close in checks:
            hf = transformers.AlbertModel(transformers.AlbertConfig(**{**hub_config, "hidden_act": act},
                                                                    attn_implementation="eager")).eval()
            stored = safetensors.torch.load(server.repos[repo]["model.safetensors"])
            missing, unexpected = hf.load_state_dict(
                {k[len("albert."):]: v for k, v in stored.items() if k.startswith("albert.")}, strict=False)
            assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
            with torch.no_grad():
                theirs = hf(input_ids=torch.from_numpy(batch["input_ids"]).long(),
                            attention_mask=torch.from_numpy(batch["input_mask"]).long(),
                            token_type_ids=torch.from_numpy(batch["segment_ids"]).long()).last_hidden_state.numpy()
            mask = batch["input_mask"].astype(bool)
            difference = np.abs(ours[mask] - theirs[mask]).max()
            assert (difference < 1e-5) == close, (name, act, difference)
        mlm = weights.values(weights.split(pretrainer)[1])
        np.testing.assert_array_equal(mlm["predictions/output_bias"], stored["predictions.bias"].numpy())
    assert server.count("tf_model.h5") == 0
    assert server.count("pytorch_model.bin") == 0  # model.safetensors is there


def _tasks():
    """The 12 tasks with their default hparams (finetune's tables), and RACE's v1 row."""
    from finetune.glue.definitions import TASKS
    from finetune.glue.task import GlueTask
    from finetune.race.task import RaceTask
    from finetune.squad.task import SquadTask

    glue = [GlueTask(name) for name in TASKS if name != "AX"]
    return [*glue, SquadTask(), SquadTask(version_2_with_negative=True), RaceTask(), RaceTask(hparams="v1")]


def test_every_released_name_into_every_task(released):
    """What albert-finetune-* does (finetune/cli.py): the source's config, the task's encoder
    dropout on it, the task's model, the encoder from the released name; for the 8 names x the 12
    tasks' default hparams (and RACE's v1)."""
    import dataclasses
    import types

    from tests.albert_tf import release_replicas as replicas

    tasks = _tasks()
    assert len(tasks) == 13 and {t.name for t in tasks[:9]} == {"CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI",
                                                                "QNLI", "RTE", "WNLI"}
    dropouts = set()
    for name in replicas.ENGLISH:
        expected = _encoder_values(AlbertEncoder.from_preset(name))
        release = replicas.release_tensors(name, replicas.ENGLISH.index(name))
        np.testing.assert_array_equal(expected["embeddings/word_embeddings/embeddings"],
                                      release["bert/embeddings/word_embeddings"])
        source = loader.find_source(preset=name)
        assert source.config == replicas.tiny_config(name)
        loaded = set()
        for task in tasks:
            options = types.SimpleNamespace(**task.default_options())
            config = source.config
            if options.encoder_dropout is not None:
                config = dataclasses.replace(config, hidden_dropout_prob=options.encoder_dropout,
                                             attention_probs_dropout_prob=options.encoder_dropout)
            dropouts.add((config.hidden_dropout_prob, source.config.hidden_dropout_prob))
            model = task.build_model(config, options, None)
            # A model of the class and the whole config (its own name aside) of one this name has
            # loaded into already is the same model, built and loaded by the same code: GLUE's
            # tasks of two labels and the same dropouts are 8 models of 13 tasks. Loaded once.
            model_config = {k: v for k, v in model.get_config().items() if k != "name"}
            same = (type(model), json.dumps(model_config, sort_keys=True, default=repr))
            if same in loaded:
                continue
            loaded.add(same)
            assert loader.initialize_encoder(model, preset=name) == name
            for key, value in _encoder_values(model).items():
                np.testing.assert_array_equal(value, expected[key], err_msg=f"{name} {task.name} {key}")
    # The pairs that the whole-config comparison refused are among them.
    assert {(0.1, 0.0), (0.0, 0.1)} <= dropouts
    assert server_fetches(released) == len(replicas.ENGLISH)


def server_fetches(released) -> int:
    server, _ = released
    return server.count(".tar.gz")


def test_the_readmes_three_lines_against_a_loopback_copy_of_the_release(released):
    """README.md's lines, from the released name to a prediction."""
    from albert_tf import AlbertTextClassifier

    classifier = AlbertTextClassifier.from_preset("albert_base_v2", num_classes=2)  # the released weights
    np.testing.assert_array_equal(classifier.backbone.weights[0].numpy(),
                                  AlbertEncoder.from_preset("albert_base_v2").weights[0].numpy())
    history = classifier.fit(x=["A gem of a film.", "Dull and long."], y=[1, 0])
    logits = classifier.predict(["What a delight."])
    assert logits.shape == (1, 2) and np.isfinite(logits).all()
    assert np.isfinite(history.history["loss"][0])


SHORT_RUN = ["--do_train", "--num_train_steps=1", "--train_batch_size=4", "--max_train_examples=8",
             "--nojit_compile", "--noexport", "--noprogress_bar"]


@pytest.mark.parametrize("tool, name, flags, dropout", [
    # v2 (dropout 0) into RTE, whose paper row sets the encoder's dropout to 0.1
    ("glue", "albert_base_v2", ["--task=RTE", "--max_seq_length=32"], 0.1),
    # v1 (dropout 0.1) by URL into MRPC (encoder dropout 0), --init_checkpoint
    ("glue", "url:albert_large_v1", ["--task=MRPC", "--max_seq_length=32"], 0.0),
    # v1 into SQuAD v1.1 (encoder dropout 0)
    ("squad", "albert_xlarge_v1", ["--max_seq_length=64", "--max_query_length=16", "--doc_stride=32"], 0.0),
    # v2 into RACE with the v1 row (encoder dropout 0.1)
    ("race", "albert_xxlarge_v2", ["--hparams=v1", "--max_seq_length=48", "--max_qa_length=16"], 0.1),
])
def test_the_fine_tuning_tools_start_from_released_names(released, small_data_dir, tmp_path, tool, name, flags,
                                                        dropout):
    """Real runs (in-process main), one step each, of pairs that the whole-config comparison refused."""
    import importlib

    server, _ = released
    cli = importlib.import_module(f"finetune.{tool}.cli")
    data = {"glue": [f"--data_dir={small_data_dir / 'glue'}"],
            "squad": [f"--train_file={small_data_dir / 'squad' / 'train-v1.1.articles2-3.json'}"],
            "race": [f"--train_data={small_data_dir / 'race' / 'dev'}"]}[tool]
    source = (f"--init_checkpoint={server.url(name[4:])}" if name.startswith("url:") else f"--preset={name}")
    out = tmp_path / "out"
    summary = cli.finetune([f"albert-finetune-{tool}", *data, f"--output_dir={out}", source, *SHORT_RUN, *flags])
    release = AlbertEncoder.from_preset(name.removeprefix("url:"))
    assert summary["train"]["step"] == 1
    model = summary["model"]
    assert model.config.hidden_dropout_prob == dropout != release.config.hidden_dropout_prob
    # One step of a tiny learning rate from the release's weights (std 0.2), not from a fresh
    # initialisation (std 0.02).
    trained = _encoder_values(model)
    for key, value in _encoder_values(release).items():
        np.testing.assert_allclose(trained[key], value, atol=1e-3, err_msg=key)


# ---- every failure of a source is one line and leaves the cache clean ----------------------------


def _cache_files(cache) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock")


@pytest.fixture
def own_cache(released, tmp_path, monkeypatch):
    """The released names' server with a cache of this test's own."""
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "cache"))
    return released[0], tmp_path / "cache"


def _retarred(tarball: bytes, change) -> bytes:
    """The tarball with `change(members: dict[name, bytes]) -> dict` applied to its files."""
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in change(members).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _chinese(members: dict) -> dict:
    """albert_base_zh's layout: vocab_chinese.txt (WordPiece), no SentencePiece model."""
    kept = {k: v for k, v in members.items() if not k.endswith(("30k-clean.model", "30k-clean.vocab"))}
    return {**kept, "albert_base/vocab_chinese.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n的\n".encode()}


@pytest.mark.faults
def test_a_chinese_release_is_one_line_by_any_address(own_cache, tmp_path):
    server, cache = own_cache
    server.files["/albert_models/albert_base_zh.tar.gz"] = _retarred(
        server.files["/albert_models/albert_base_v1.tar.gz"], _chinese)
    url = server.url("albert_base_zh")
    want = ("albert_base/vocab_chinese.txt is a WordPiece vocabulary and there is no 30k-clean.model; this package's "
            "tokenizers read SentencePiece models only")
    with pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset(url)
    assert str(raised.value) == f"{url}: {want}; the download was removed, rerun to download it again"
    assert raised.value.exit_code == 1
    local = tmp_path / "albert_base_zh.tar.gz"
    local.write_bytes(server.files["/albert_models/albert_base_zh.tar.gz"])
    with pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset(str(local))
    assert str(raised.value) == f"{local}: {want}"
    with pytest.raises(UserError, match="^albert_base_zh has a wordpiece vocabulary"):
        AlbertEncoder.from_preset("albert_base_zh")
    assert _cache_files(cache) == []


@pytest.mark.faults
def test_a_download_that_fails_after_unpacking_is_fetched_again(own_cache):
    server, cache = own_cache
    good = server.files["/albert_models/albert_large_v2.tar.gz"]
    server.files["/albert_models/albert_large_v2.tar.gz"] = _retarred(
        good, lambda m: {**m, "albert_large/albert_config.json": b'{"hidden_size": 16,'})
    with pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset("albert_large_v2")
    assert str(raised.value).startswith(f"{server.url('albert_large_v2')}: albert_large/albert_config.json: not "
                                        "valid JSON (")
    assert str(raised.value).endswith("; the download was removed, rerun to download it again")
    assert "\n" not in str(raised.value) and _cache_files(cache) == []
    server.files["/albert_models/albert_large_v2.tar.gz"] = good  # the server is fixed: a rerun fetches it
    before = server.count("albert_large_v2.tar.gz")
    assert AlbertEncoder.from_preset("albert_large_v2").config == AlbertEncoder.from_preset(
        "albert_large_v2").config
    assert server.count("albert_large_v2.tar.gz") == before + 1
    # A cached preset that went corrupt is named with the folder to delete.
    cached = cache / "presets" / "albert_large_v2"
    (cached / folder.WEIGHTS).write_bytes(b"truncated")
    with pytest.raises(UserError, match=f"the cached preset is corrupt: delete {cached} and load again"):
        AlbertEncoder.from_preset("albert_large_v2")


@pytest.mark.faults
def test_a_tarball_with_other_files_skips_them_and_one_too_large_is_refused(own_cache, monkeypatch, tmp_path):
    from albert_tf.presets import sources

    server, cache = own_cache
    good = server.files["/albert_models/albert_base_v2.tar.gz"]
    # Files a loader does not read are not unpacked, a path out of the folder least of all (issue 50).
    server.files["/albert_models/extra.tar.gz"] = _retarred(good, lambda m: {**m, "albert_base/../../evil.sh": b"x"})
    released = AlbertEncoder.from_preset(server.url("albert_base_v2"))
    extra = AlbertEncoder.from_preset(server.url("extra"))
    for a, b in zip(released.weights, extra.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not [p for p in cache.parent.rglob("evil.sh")]
    for key in [p.name for p in (cache / "presets").iterdir()]:
        import shutil

        shutil.rmtree(cache / "presets" / key)
    monkeypatch.setattr(sources, "MAX_UNPACKED_BYTES", 4096)  # as a bomb unpacks to more than any release
    with pytest.raises(UserError, match=r"unpacks to more than 4096 bytes, far over any release; the download was "
                                         r"removed"):
        AlbertEncoder.from_preset(server.url("albert_base_v2"))
    assert _cache_files(cache) == []


def test_a_released_name_is_the_release_even_beside_a_folder_of_that_name(own_cache, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    mine = AlbertEncoder(AlbertEncoder.from_preset("albert_base_v2").config)
    mine.build()
    mine.save_to_preset(tmp_path / "albert_base_v2", TINY_VOCAB)
    with caplog.at_level("WARNING"):
        release = AlbertEncoder.from_preset("albert_base_v2")
    assert "albert_base_v2 is a released name: loading the release, not the folder here (give ./albert_base_v2 " \
           "to load that)" in caplog.text
    local = AlbertEncoder.from_preset("./albert_base_v2")
    np.testing.assert_array_equal(local.weights[0].numpy(), mine.weights[0].numpy())
    assert not np.array_equal(release.weights[0].numpy(), mine.weights[0].numpy())


def test_fine_tuning_from_a_classifiers_preset_keeps_its_head_when_it_fits(tmp_path):
    saved = AlbertClassifier(V1_TINY, num_classes=3)
    saved.build()
    path = saved.save_to_preset(tmp_path / "mnli_like", TINY_VOCAB)
    same = AlbertClassifier(V1_TINY, num_classes=3)
    same.build()
    loader.initialize_encoder(same, preset=str(path))
    for a, b in zip(same.weights, saved.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    other = AlbertClassifier(V1_TINY, num_classes=2)  # another task's head size: the encoder only
    other.build()
    fresh = other.classifier.kernel.numpy().copy()
    loader.initialize_encoder(other, preset=str(path))
    np.testing.assert_array_equal(other.classifier.kernel.numpy(), fresh)
    np.testing.assert_array_equal(other.encoder.weights[0].numpy(), saved.encoder.weights[0].numpy())
