"""Conversion of released checkpoints: Hugging Face folders and original TF1 checkpoints into presets
(checked against PyTorch outputs at 1e-5), presets back to Hugging Face, and every bad input named."""

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModels' SentencePiece op)
import torch
import transformers

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.presets import convert
from albert_tf.checkpoints.names import head_weight_names
from albert_tf.utils.errors import FlagError
from albert_tf.presets import folder
from albert_tf.checkpoints import weights
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from tests.albert_tf import hf_reference
from tests.warm_python import SOCKET_ENV, command_folder, load_time_env

TINY_SPM = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "export" / "tiny_spm.model"

# Every size distinct (V, E, H, I, positions, heads), so a transposed or swapped tensor cannot fit.
SMALL = AlbertConfig(
    vocab_size=123,
    embedding_size=10,
    hidden_size=24,
    num_hidden_layers=4,
    num_attention_heads=3,
    intermediate_size=40,
    max_position_embeddings=48,
    num_hidden_groups=2,
    inner_group_num=2,
)


def _hf_folder(model, path):
    model.save_pretrained(path)
    shutil.copyfile(TINY_SPM, pathlib.Path(path) / "spiece.model")
    return path


def _ours(preset, batch):
    encoded = AlbertEncoder.from_preset(preset)(batch)
    heads = AlbertPretrainer.from_preset(preset)(batch)
    return {
        "sequence_output": encoded["sequence_output"],
        "pooled_output": encoded["pooled_output"],
        "mlm_logits": heads["mlm_logits"],
        "sop_logits": heads["sop_logits"],
    }


def _assert_close(got, expected):
    for name, value in expected.items():
        np.testing.assert_allclose(np.asarray(got[name]), value, atol=1e-5, rtol=0, err_msg=name)
        assert np.std(value) > 1e-2, name  # the outputs vary: not a comparison of constants


# ---- Hugging Face ------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [SMALL, AlbertConfig.named("albert_base_v2")], ids=["small", "albert_base"])
def test_hugging_face_round_trip_gives_the_pytorch_outputs(config, tmp_path):
    reference = hf_reference.random_hf_pretrainer(config, seed=1)
    source = _hf_folder(reference, tmp_path / "hf")
    assert (source / "model.safetensors").is_file()
    preset = convert.convert_hf(source, tmp_path / "preset")
    # The encoder in model.weights.h5, the pretraining heads beside it as the task's weights.
    assert sorted(p.name for p in pathlib.Path(preset).iterdir()) == [
        "config.json", "model.weights.h5", "spiece.model", "task.json", "task.weights.h5"]
    assert AlbertConfig.from_json_file(pathlib.Path(preset) / "config.json") == config

    batch = hf_reference.padded_batch(config, seed=2)
    expected = hf_reference.hf_outputs(reference, batch)
    _assert_close(_ours(preset, batch), expected)

    # Ours -> Hugging Face: transformers loads it with nothing missing or left over, same outputs.
    back = convert.convert_preset_to_hf(preset, tmp_path / "back")
    reloaded, info = transformers.AlbertForPreTraining.from_pretrained(
        back, attn_implementation="eager", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    _assert_close(hf_reference.hf_outputs(reloaded.eval(), batch), expected)
    # ... and its tokenizer reads our vocabulary to the same ids.
    ours = AlbertTokenizer(TINY_SPM)
    text = "Emma Woodhouse, handsome, clever."
    theirs = transformers.AutoTokenizer.from_pretrained(back)(text)["input_ids"]
    assert theirs == [ours.cls_id, *ours.encode(text), ours.sep_id]


def test_pytorch_bin_and_encoder_only_checkpoints(tmp_path):
    reference = hf_reference.random_hf_pretrainer(SMALL, seed=3)
    source = tmp_path / "bin"
    source.mkdir()
    torch.save(reference.state_dict(), source / "pytorch_model.bin")
    reference.config.to_json_file(source / "config.json")
    shutil.copyfile(TINY_SPM, source / "spiece.model")
    batch = hf_reference.padded_batch(SMALL, seed=4)
    _assert_close(_ours(convert.convert_hf(source, tmp_path / "from_bin"), batch),
                  hf_reference.hf_outputs(reference, batch))

    # A bare AlbertModel (no heads, no "albert." prefix) gives an encoder-only preset.
    encoder_only = _hf_folder(reference.albert, tmp_path / "albert_model")
    preset = convert.convert_hf(encoder_only, tmp_path / "encoder_preset")
    expected = hf_reference.hf_outputs(reference, batch)
    got = AlbertEncoder.from_preset(preset)(batch)
    _assert_close({k: got[k] for k in ("sequence_output", "pooled_output")},
                  {k: expected[k] for k in ("sequence_output", "pooled_output")})
    with pytest.raises(ValueError, match="an encoder without the heads of an AlbertPretrainer"):
        AlbertPretrainer.from_preset(preset)
    back = convert.convert_preset_to_hf(preset, tmp_path / "encoder_back")
    model = transformers.AlbertModel.from_pretrained(back, attn_implementation="eager").eval()
    with torch.no_grad():
        pooled = model(input_ids=torch.from_numpy(batch["input_ids"]).long(),
                       attention_mask=torch.from_numpy(batch["input_mask"]).long(),
                       token_type_ids=torch.from_numpy(batch["segment_ids"]).long()).pooler_output
    np.testing.assert_allclose(pooled.numpy(), expected["pooled_output"], atol=1e-5, rtol=0)


def test_bad_hugging_face_inputs_are_named(tmp_path):
    reference = hf_reference.random_hf_pretrainer(SMALL, seed=5)
    source = _hf_folder(reference, tmp_path / "hf")

    def variant(name, edit_config=None, tensors=None, spm=None):
        folder = tmp_path / name
        shutil.copytree(source, folder)
        if edit_config:
            values = json.loads((folder / "config.json").read_text())
            edit_config(values)
            (folder / "config.json").write_text(json.dumps(values))
        if tensors:
            from safetensors.numpy import load_file, save_file

            save_file(tensors(load_file(folder / "model.safetensors")), folder / "model.safetensors")
        if spm is not None:
            (folder / "spiece.model").write_bytes(spm)
        return folder

    not_albert = variant("bert", lambda v: v.update(model_type="bert"))
    with pytest.raises(ValueError, match="not an ALBERT config .model_type 'bert'"):
        convert.convert_hf(not_albert, tmp_path / "o1")
    exact_gelu = variant("gelu", lambda v: v.update(hidden_act="gelu"))
    with pytest.raises(ValueError, match="exact GELU"):
        convert.convert_hf(exact_gelu, tmp_path / "o2")
    wider = variant("wider", lambda v: v.update(hidden_size=27))  # the tensors are 24 wide
    with pytest.raises(ValueError, match=r"albert\.encoder\.embedding_hidden_mapping_in\.weight has shape \(24, 10\)"):
        convert.convert_hf(wider, tmp_path / "o3")
    extra = variant("extra", tensors=lambda t: {**t, "albert.encoder.extra.weight": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match=r"unexpected tensors \['albert.encoder.extra.weight'\]"):
        convert.convert_hf(extra, tmp_path / "o4")
    missing = variant("missing", tensors=lambda t: {k: v for k, v in t.items() if k != "albert.pooler.bias"})
    with pytest.raises(ValueError, match=r"missing tensors \['albert.pooler.bias'\]"):
        convert.convert_hf(missing, tmp_path / "o5")
    not_spm = variant("not_spm", spm=b"\x00\x01 not a sentencepiece model")
    with pytest.raises(ValueError, match="not a readable SentencePiece model"):
        convert.convert_hf(not_spm, tmp_path / "o6")
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 7))  # nothing half-written

    # A masked-LM checkpoint (no sentence-order head, as the Hub's) keeps its one head; a pretrainer
    # from it starts the sentence-order head new...
    masked_lm = variant("masked_lm", tensors=lambda t: {k: v for k, v in t.items() if "sop_classifier" not in k})
    heads = weights.read(pathlib.Path(convert.convert_hf(masked_lm, tmp_path / "o7")) / folder.TASK_WEIGHTS)
    assert sorted(heads) == sorted(n.ours for n in head_weight_names(SMALL, "hf")
                                   if not n.ours.startswith("seq_relationship/"))
    loaded = weights.values(weights.split(AlbertPretrainer.from_preset(tmp_path / "o7"))[1])
    for name, value in heads.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)
    # ... and `encoder_only` converts the encoder alone.
    preset = convert.convert_hf(masked_lm, tmp_path / "o8", encoder_only=True)
    batch = hf_reference.padded_batch(SMALL, seed=9)
    got = AlbertEncoder.from_preset(preset)(batch)["pooled_output"]
    np.testing.assert_allclose(got, hf_reference.hf_outputs(reference, batch)["pooled_output"], atol=1e-5, rtol=0)


# ---- original TF1 checkpoints --------------------------------------------------------------------


def tf1_shapes(c: AlbertConfig) -> dict[str, tuple]:
    """The released checkpoints' model tensors (ALBERT.md §5), written out independently of
    albert_tf.checkpoints.names: TF1 kernels are [in, out], the SOP weights [2, H]."""
    V, E, H, I, P, T = (c.vocab_size, c.embedding_size, c.hidden_size, c.intermediate_size,
                        c.max_position_embeddings, c.type_vocab_size)
    shapes = {
        "bert/embeddings/word_embeddings": (V, E),
        "bert/embeddings/token_type_embeddings": (T, E),
        "bert/embeddings/position_embeddings": (P, E),
        "bert/embeddings/LayerNorm/beta": (E,),
        "bert/embeddings/LayerNorm/gamma": (E,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (E, H),
        "bert/encoder/embedding_hidden_mapping_in/bias": (H,),
        "bert/pooler/dense/kernel": (H, H),
        "bert/pooler/dense/bias": (H,),
        "cls/predictions/transform/dense/kernel": (H, E),
        "cls/predictions/transform/dense/bias": (E,),
        "cls/predictions/transform/LayerNorm/beta": (E,),
        "cls/predictions/transform/LayerNorm/gamma": (E,),
        "cls/predictions/output_bias": (V,),
        "cls/seq_relationship/output_weights": (2, H),
        "cls/seq_relationship/output_bias": (2,),
    }
    for g in range(c.num_hidden_groups):
        for k in range(c.inner_group_num):
            t = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            for part in ("query", "key", "value"):
                shapes[f"{t}/attention_1/self/{part}/kernel"] = (H, H)
                shapes[f"{t}/attention_1/self/{part}/bias"] = (H,)
            shapes[f"{t}/attention_1/output/dense/kernel"] = (H, H)
            shapes[f"{t}/attention_1/output/dense/bias"] = (H,)
            shapes[f"{t}/ffn_1/intermediate/dense/kernel"] = (H, I)
            shapes[f"{t}/ffn_1/intermediate/dense/bias"] = (I,)
            shapes[f"{t}/ffn_1/intermediate/output/dense/kernel"] = (I, H)
            shapes[f"{t}/ffn_1/intermediate/output/dense/bias"] = (H,)
            for norm in ("LayerNorm", "LayerNorm_1"):
                shapes[f"{t}/{norm}/beta"] = (H,)
                shapes[f"{t}/{norm}/gamma"] = (H,)
    return shapes


def tf1_from_hf(name: str) -> tuple[str, bool]:
    """The Hugging Face tensor holding a TF1 tensor, and whether it is stored transposed; an
    independent reader's table, so that a swap in ours (query for key, ...) shows in the outputs."""
    h = name
    h = h.replace("bert/embeddings/", "albert.embeddings.").replace("bert/pooler/dense", "albert.pooler")
    h = h.replace("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in")
    if h.startswith("bert/encoder/transformer/"):
        _, _, _, group, inner, rest = h.split("/", 5)
        prefix = f"albert.encoder.albert_layer_groups.{group[6:]}.albert_layers.{inner[12:]}."
        rest = (rest.replace("attention_1/self/", "attention.").replace("attention_1/output/dense", "attention.dense")
                .replace("ffn_1/intermediate/output/dense", "ffn_output").replace("ffn_1/intermediate/dense", "ffn")
                .replace("LayerNorm_1", "full_layer_layer_norm").replace("LayerNorm", "attention.LayerNorm"))
        h = prefix + rest
    h = (h.replace("cls/predictions/transform/dense", "predictions.dense")
         .replace("cls/predictions/transform/LayerNorm", "predictions.LayerNorm")
         .replace("cls/predictions/output_bias", "predictions.bias")
         .replace("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight")
         .replace("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias"))
    h = h.replace("/kernel", ".weight").replace("/bias", ".bias").replace("/gamma", ".weight").replace("/beta", ".bias")
    h = h.replace("/", ".")
    if name.endswith(("word_embeddings", "token_type_embeddings", "position_embeddings")):
        h += ".weight"
    return h, name.endswith("/kernel")


def write_tf1_checkpoint(prefix, tensors: dict[str, np.ndarray], global_step=125000, graph=True):
    """Writes `tensors`, Adam slots for each, and global_step, as the original release did:
    tf.compat.v1 variables saved with a Saver. With `graph=False`, the same tensors (names, values,
    slots, step: all a converter reads) in the same bundle, written by the SaveV2 op that Saver runs,
    without building the TF1 graph (seconds for a 22-group checkpoint) or its .meta file."""
    rng = np.random.default_rng(0)
    values = {}
    for name, value in tensors.items():
        values[name] = value
        for slot in ("adam_m", "adam_v"):
            values[f"{name}/{slot}"] = rng.normal(size=value.shape).astype(np.float32)
    if not graph:
        names = [*values, "global_step"]
        tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[*(tf.constant(v) for v in values.values()), tf.constant(global_step, tf.int64)])
        return
    with tf.Graph().as_default():
        for name, value in values.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value), trainable="/adam_" not in name)
        tf.compat.v1.get_variable("global_step", initializer=tf.constant(global_step, tf.int64), trainable=False)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(prefix))


def tf1_tarball(folder, config, tensors, graph=True):
    folder = pathlib.Path(folder)
    folder.mkdir()
    config.to_json_file(folder / "albert_config.json")
    shutil.copyfile(TINY_SPM, folder / "30k-clean.model")
    write_tf1_checkpoint(folder / "model.ckpt-best", tensors, graph=graph)
    return folder


@pytest.fixture(scope="module")
def tf1_reference():
    """A random HF pretrainer and the same tensors under the original names and layouts."""
    reference = hf_reference.random_hf_pretrainer(SMALL, seed=6)
    state = hf_reference.state_dict_numpy(reference)
    tensors = {}
    for name, shape in tf1_shapes(SMALL).items():
        hf_name, transpose = tf1_from_hf(name)
        value = state[hf_name].T if transpose else state[hf_name]
        assert value.shape == shape, name
        tensors[name] = np.ascontiguousarray(value)
    return reference, tensors


def test_tf1_checkpoint_converts_with_every_tensor_used_once(tf1_reference, tmp_path):
    """transformers 5 no longer ships load_tf_weights_in_albert (the independent TF1 reader the issue
    names), so the check is the name and shape table above plus Hugging Face's outputs on the same
    tensors mapped by the table's own independent HF names."""
    reference, tensors = tf1_reference
    folder = tf1_tarball(tmp_path / "albert_small", SMALL, tensors)
    stored = tf.train.load_checkpoint(str(folder / "model.ckpt-best")).get_variable_to_shape_map()
    assert "global_step" in stored and "bert/pooler/dense/kernel/adam_m" in stored
    assert len(stored) == 3 * len(tensors) + 1

    preset = convert.convert_tf1(folder, tmp_path / "preset")
    batch = hf_reference.padded_batch(SMALL, seed=7)
    _assert_close(_ours(preset, batch), hf_reference.hf_outputs(reference, batch))

    # Each variable of ours holds exactly one checkpoint tensor, and each tensor lands exactly once.
    pretrainer = AlbertPretrainer.from_preset(preset)
    uses = {name: 0 for name in tensors}
    for variable in pretrainer.weights:
        value = variable.numpy()
        matches = [n for n, t in tensors.items() if t.shape == value.shape and np.array_equal(t, value)]
        matches += [n for n, t in tensors.items() if t.ndim == 2 and t.T.shape == value.shape
                    and np.array_equal(t.T, value)]
        assert len(matches) == 1, (variable.path, matches)
        uses[matches[0]] += 1
    assert set(uses.values()) == {1}, {n: u for n, u in uses.items() if u != 1}


def test_bad_tf1_checkpoints_are_named(tf1_reference, tmp_path):
    _, tensors = tf1_reference
    # A checkpoint of another size than its config.
    bigger = tf1_tarball(tmp_path / "bigger", SMALL.replace(intermediate_size=44), tensors)
    with pytest.raises(ValueError, match=r"ffn_1/intermediate/dense/kernel has shape \(24, 40\), expected \(24, 44\)"):
        convert.convert_tf1(bigger, tmp_path / "o1")
    fewer_groups = tf1_tarball(tmp_path / "groups", SMALL.replace(num_hidden_groups=1), tensors)
    with pytest.raises(ValueError, match=r"unexpected tensors \['bert/encoder/transformer/group_1/"):
        convert.convert_tf1(fewer_groups, tmp_path / "o2")
    missing = tf1_tarball(tmp_path / "missing", SMALL,
                          {k: v for k, v in tensors.items() if k != "cls/predictions/output_bias"})
    with pytest.raises(ValueError, match=r"missing tensors \['cls/predictions/output_bias'\]"):
        convert.convert_tf1(missing, tmp_path / "o3")
    # A config that is not ALBERT's (a BERT config has no embedding_size but keys ALBERT lacks).
    not_albert = tf1_tarball(tmp_path / "bert_config", SMALL, tensors)
    values = json.loads((not_albert / "albert_config.json").read_text())
    values["hidden_act"] = "gelu"
    values["use_bias_in_classifier"] = True
    (not_albert / "albert_config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"unknown ALBERT config keys \['use_bias_in_classifier'\]"):
        convert.convert_tf1(not_albert, tmp_path / "o4")
    not_spm = tf1_tarball(tmp_path / "not_spm", SMALL, tensors)
    (not_spm / "30k-clean.model").write_text("a text file, not a model")
    with pytest.raises(ValueError, match="not a readable SentencePiece model"):
        convert.convert_tf1(not_spm, tmp_path / "o5")
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 6))


def test_tf1_checkpoint_with_22_layers_in_22_groups_converts(tmp_path):
    """The release runs layer i in group int(i / 22 * 22): layer 15 in group 14, so its checkpoint
    has no group_15. Such a checkpoint converts, and each layer runs the release's group."""
    config = SMALL.replace(num_hidden_layers=22, num_hidden_groups=22, inner_group_num=1)
    release_groups = sorted({int(i / 22 * 22) for i in range(22)})
    assert 15 not in release_groups
    rng = np.random.default_rng(4)
    tensors = {}
    for name, shape in tf1_shapes(config).items():
        group = name.split("/group_")[1].split("/")[0] if "/group_" in name else None
        if group is None or int(group) in release_groups:
            tensors[name] = rng.normal(0, 0.02, size=shape).astype(np.float32)
    # Its two checkpoints without the TF1 graph (write_tf1_checkpoint): the layout is the other tests'.
    folder = tf1_tarball(tmp_path / "l22", config, tensors, graph=False)
    preset = convert.convert_tf1(folder, tmp_path / "preset")
    encoder = AlbertPretrainer.from_preset(preset).encoder
    assert len(encoder.blocks) == 21
    query = "bert/encoder/transformer/group_{}/inner_group_0/attention_1/self/query/kernel"
    for layer in (14, 15, 16):  # layers 14 and 15 share group 14's block; layer 16 runs group 16
        group = int(layer / 22 * 22)
        block = encoder.blocks[encoder._applications[layer]]
        np.testing.assert_array_equal(block.attention.query.kernel.numpy(), tensors[query.format(group)])
    # A checkpoint that truly lacks a group the config runs: the missing tensors are named, and
    # --encoder_only (which drops heads) is not suggested.
    lacking = tf1_tarball(tmp_path / "lacking", config,
                          {k: v for k, v in tensors.items() if "/group_16/" not in k}, graph=False)
    with pytest.raises(ValueError, match=r"missing tensors \['bert/encoder/transformer/group_16/") as error:
        convert.convert_tf1(lacking, tmp_path / "o1")
    assert "encoder_only" not in str(error.value) and "groups used" in str(error.value)


def test_command_lines_convert_and_export(tf1_reference, tmp_path, warm_python):
    _, tensors = tf1_reference
    folder = tf1_tarball(tmp_path / "albert_small", SMALL, tensors)
    bin_dir = pathlib.Path(sys.executable).parent
    # Each tool in a child of the warm Python (TensorFlow loaded already), as the installed script
    # runs it (those run in test_fresh_clone.py and test_readme_demo.py).
    tools = command_folder(tmp_path / "warm_tools", ["albert-convert", "albert-export"])
    env = {**load_time_env(), "PATH": f"{tools}:{bin_dir}:/usr/bin:/bin", SOCKET_ENV: warm_python.socket}
    script = (
        f"albert-convert --source tf1 --input {folder} --output_dir {tmp_path / 'preset'} && "
        f"albert-export --preset {tmp_path / 'preset'} --model pretrainer --max_seq_length 16 "
        f"--max_predictions_per_seq 3 --output_dir {tmp_path / 'saved'}"
    )
    process = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert process.returncode == 0, process.stderr[-3000:]
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    assert set(loaded.signatures) == {"serving_default", "serve_examples", "serve_text", "tokenize"}
    batch = hf_reference.padded_batch(SMALL, length=16, predictions=3, seed=8)
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in batch.items()})
    expected = AlbertPretrainer.from_preset(tmp_path / "preset")(batch)
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(got[key], expected[key], atol=1e-5, rtol=0)
    # Refuses to overwrite, before reading anything.
    with pytest.raises(FlagError, match=f"^--output_dir {tmp_path / 'preset'} is not empty$"):
        convert.convert_tf1(folder / "missing_checkpoint", tmp_path / "preset")


def test_the_hub_config_of_albert_base_v2_is_the_preset():
    """The keys of Hugging Face's published albert-base-v2 config.json, legacy ones included."""
    hub = {
        "architectures": ["AlbertForMaskedLM"], "attention_probs_dropout_prob": 0, "bos_token_id": 2,
        "classifier_dropout_prob": 0.1, "down_scale_factor": 1, "embedding_size": 128, "eos_token_id": 3,
        "gap_size": 0, "hidden_act": "gelu_new", "hidden_dropout_prob": 0, "hidden_size": 768,
        "initializer_range": 0.02, "inner_group_num": 1, "intermediate_size": 3072, "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512, "model_type": "albert", "net_structure_type": 0,
        "num_attention_heads": 12, "num_hidden_groups": 1, "num_hidden_layers": 12, "num_memory_blocks": 0,
        "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": 30000,
    }
    assert convert.config_from_hf(hub) == AlbertConfig.named("albert_base_v2")
    # v1's config names the exact GELU although the weights were trained with the tanh form.
    v1 = {**hub, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    with pytest.raises(ValueError, match="exact_gelu_as_tanh"):
        convert.config_from_hf(v1)
    assert convert.config_from_hf(v1, exact_gelu_as_tanh=True) == AlbertConfig.named("albert_base_v1")
    # Written back, transformers reads the same model shape.
    back = transformers.AlbertConfig(**convert.config_to_hf(AlbertConfig.named("albert_base_v2")))
    assert (back.hidden_act, back.embedding_size, back.num_hidden_groups) == ("gelu_new", 128, 1)
