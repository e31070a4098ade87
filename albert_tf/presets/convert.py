"""Released ALBERT checkpoints (original TF1, Hugging Face) to presets of ours, and back to HF.

Conversion works on tensors by name and builds no model: the names come from
`albert_tf.checkpoints.names`, computed from the config, and a preset is written and read as
tensors by name (`albert_tf.presets.folder`). A TF1 or HF checkpoint with the pretraining heads
becomes an `AlbertPretrainer`'s preset (the encoder in model.weights.h5, the heads in
task.weights.h5); without them (or with `encoder_only`), an encoder's. Optimizer slots (`/adam_m`,
`/adam_v`) and `global_step` are skipped; any other tensor that is missing, left over or of another
shape is an error that names it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil

import numpy as np

from albert_tf.checkpoints.names import encoder_weight_names, head_weight_names, to_ours, to_source
from albert_tf.config import AlbertConfig
from albert_tf.utils.output_dirs import prepare_output_dir
from albert_tf.presets import folder as preset_folder
from albert_tf.checkpoints import weights as preset_weights

PRETRAINER_TASK = {"class": preset_folder.PRETRAINER_TASK, "arguments": {}}

TF1_CONFIG = "albert_config.json"
TF1_VOCAB = "30k-clean.model"
TF1_CHECKPOINT = "model.ckpt-best"
TF1_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")
TF1_BOOKKEEPING = ("global_step",)

HF_CONFIG = "config.json"
HF_SAFETENSORS = "model.safetensors"
HF_PYTORCH = "pytorch_model.bin"
HF_VOCAB = "spiece.model"
# Hugging Face's decoder is tied to the input embeddings and to `predictions.bias`; a checkpoint
# may hold the tied copies, which must then equal what they are tied to.
HF_TIED = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}
# Hugging Face's names for the activations of our config: our "gelu" is the tanh approximation.
_HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh",
                   "swish": "swish", "silu": "silu"}
# Non-ALBERT fields that HF's AlbertConfig writes; accepted when they have the values of ALBERT.
_HF_CONFIG_IGNORED = frozenset({
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "bos_token_id",
    "eos_token_id", "pad_token_id", "classifier_dropout_prob", "layer_norm_eps", "position_embedding_type",
    "output_past", "tie_word_embeddings", "_name_or_path", "id2label", "label2id", "problem_type",
    "is_decoder", "add_cross_attention", "return_dict", "use_cache", "output_hidden_states",
    "output_attentions", "chunk_size_feed_forward", "finetuning_task", "tokenizer_class", "num_labels",
})


def _check_output_dir(output_dir: str | os.PathLike) -> str:
    """A new or empty folder that can be written (the files rule: one line naming --output_dir)."""
    output_dir = os.fspath(output_dir)
    prepare_output_dir(output_dir, create=False, empty=True)
    return output_dir


def _split_source(config: AlbertConfig, naming: str, tensors: dict[str, np.ndarray], source: str,
                  with_heads: bool, skippable) -> tuple[dict, dict | None]:
    """Our encoder's (and heads') tensors by name from a checkpoint's; leftovers that `skippable`
    does not excuse are an error."""
    encoder_names = encoder_weight_names(config, naming)
    head_names = head_weight_names(config, naming) if with_heads else []
    sentence_order = [n for n in head_names if n.ours.startswith(preset_folder.SENTENCE_ORDER_HEAD)]
    if not any(n.source in tensors for n in sentence_order):
        # A masked-LM checkpoint (the Hub's ALBERT, AlbertForMaskedLM): its pretrainer's preset keeps
        # the one head there is, and a pretrainer from it starts the sentence-order head new.
        head_names = [n for n in head_names if n not in sentence_order]
    missing = [n.source for n in encoder_names + head_names if n.source not in tensors]
    if missing and with_heads and not {n.source for n in encoder_names}.intersection(missing):
        # E.g. a masked-LM checkpoint without the sentence-order head.
        raise ValueError(f"{source}: missing tensors {missing} (heads only); to convert the encoder "
                         "alone, dropping the heads, pass encoder_only=True (--encoder_only)")
    if missing:
        raise ValueError(f"{source}: missing tensors {missing}, which an ALBERT model of this config "
                         f"has (num_hidden_layers={config.num_hidden_layers}, num_hidden_groups="
                         f"{config.num_hidden_groups}, groups used {list(config.used_groups)})")
    used = {n.source for n in encoder_names + head_names}
    unexpected = sorted(name for name in tensors if name not in used and not skippable(name))
    if unexpected:
        raise ValueError(f"{source}: unexpected tensors {unexpected} (not part of an ALBERT model of this config)")
    encoder = to_ours(encoder_names, tensors, source)
    return encoder, (to_ours(head_names, tensors, source) if with_heads else None)


def _write(output_dir, config, encoder, heads, spm_model_file) -> str:
    return preset_folder.write(output_dir, config, encoder, spm_model_file,
                               task=PRETRAINER_TASK if heads is not None else None, task_weights=heads)


# ---- original TF1 checkpoints ------------------------------------------------------------------


def find_tf1_checkpoint(input_path: str | os.PathLike) -> str:
    """The checkpoint prefix in a released tarball folder (model.ckpt-best, else the latest one)."""
    input_path = os.fspath(input_path)
    if os.path.isfile(input_path + ".index"):
        return input_path
    best = os.path.join(input_path, TF1_CHECKPOINT)
    if os.path.isfile(best + ".index"):
        return best
    indexes = sorted(glob.glob(os.path.join(input_path, "*.index")))
    if len(indexes) == 1:
        return indexes[0][: -len(".index")]
    if not indexes:
        raise FileNotFoundError(f"no TF1 checkpoint ({TF1_CHECKPOINT}.index) in {input_path}")
    raise ValueError(f"several checkpoints in {input_path} ({[os.path.basename(i) for i in indexes]}) "
                     f"and none named {TF1_CHECKPOINT}; pass the prefix of the one to convert")


def read_tf1_checkpoint(prefix: str) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def write_tf1_release(folder: str | os.PathLike, config: AlbertConfig, weights: dict[str, np.ndarray],
                      spm_model_file: str | os.PathLike, extra: dict[str, np.ndarray] | None = None) -> str:
    """Our weights by name (the encoder's, and the pretraining heads' if present) as a folder in the
    release's layout: albert_config.json, 30k-clean.model, model.ckpt-best.* with `bert/...` and
    `cls/...` names (and `extra` tensors, e.g. optimizer slots); what `convert_tf1` reads."""
    import tensorflow as tf

    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    tensors = to_source(encoder_weight_names(config, "tf1"), weights)
    heads = head_weight_names(config, "tf1")
    if all(n.ours in weights for n in heads):
        tensors.update(to_source(heads, weights))
    tensors.update(extra or {})
    tf.raw_ops.SaveV2(prefix=os.path.join(folder, TF1_CHECKPOINT), tensor_names=list(tensors),
                      shape_and_slices=[""] * len(tensors), tensors=list(tensors.values()))
    config.to_json_file(os.path.join(folder, TF1_CONFIG))
    shutil.copyfile(spm_model_file, os.path.join(folder, TF1_VOCAB))
    return folder


def _tf1_skippable(name: str) -> bool:
    return name.endswith(TF1_OPTIMIZER_SUFFIXES) or name in TF1_BOOKKEEPING


def convert_tf1(input_dir: str | os.PathLike, output_dir: str | os.PathLike,
                config_file: str | None = None, spm_model_file: str | None = None,
                encoder_only: bool = False) -> str:
    """A google-research ALBERT checkpoint folder (albert_config.json, 30k-clean.model,
    model.ckpt-best.*) -> a preset folder. Returns the output folder.

    The preset holds a pretrainer when the checkpoint has the `cls/` heads; with `encoder_only`
    the heads are deliberately dropped and the preset holds the encoder alone."""
    input_dir = os.fspath(input_dir)
    _check_output_dir(output_dir)  # before the slow part
    folder = input_dir if os.path.isdir(input_dir) else os.path.dirname(input_dir)
    config = AlbertConfig.from_json_file(config_file or os.path.join(folder, TF1_CONFIG))
    spm_model_file = spm_model_file or os.path.join(folder, TF1_VOCAB)
    preset_folder.check_vocabulary(spm_model_file, config)
    encoder, heads = tf1_tensors(find_tf1_checkpoint(input_dir), config, encoder_only)
    return _write(output_dir, config, encoder, heads, spm_model_file)


def tf1_tensors(prefix: str, config: AlbertConfig, encoder_only: bool = False) -> tuple[dict, dict | None]:
    """`(encoder, heads)` by our names from a TF1 checkpoint of the release; heads None where it has
    none (or with `encoder_only`)."""
    tensors = read_tf1_checkpoint(prefix)
    with_heads = not encoder_only and any(name.startswith("cls/") for name in tensors)
    skippable = _tf1_skippable if not encoder_only else (
        lambda name: _tf1_skippable(name) or name.startswith("cls/"))
    return _split_source(config, "tf1", tensors, f"TF1 checkpoint {prefix}", with_heads, skippable)


# ---- Hugging Face ------------------------------------------------------------------------------


def _check_hf_groups(config: AlbertConfig, source: str) -> None:
    """Hugging Face maps layer i to group `int(i / (L / G))`, the release `int(i / L * G)`; refuse
    the few configs where float rounding makes them differ (e.g. L = G = 22), naming the layers."""
    L, G = config.num_hidden_layers, config.num_hidden_groups
    differ = [i for i in range(L) if int(i / (L / G)) != config.group_of_layer(i)]
    if differ:
        raise ValueError(
            f"{source}: with num_hidden_layers={L} and num_hidden_groups={G}, Hugging Face runs "
            f"layers {differ} in other groups than the release does ({[config.group_of_layer(i) for i in differ]}), "
            "so the same weights would compute another function; no exact conversion exists"
        )


def config_from_hf(values: dict, source: str = "config.json", exact_gelu_as_tanh: bool = False) -> AlbertConfig:
    """Our config from a Hugging Face ALBERT `config.json`; other model types are an error."""
    if not isinstance(values, dict) or values.get("model_type") != "albert":
        found = values.get("model_type") if isinstance(values, dict) else type(values).__name__
        raise ValueError(f"{source}: not an ALBERT config (model_type {found!r}, expected 'albert')")
    act = values.get("hidden_act", "gelu_new")
    if act == "gelu" and exact_gelu_as_tanh:
        act = "gelu_new"
    if act not in _HF_ACTIVATIONS:
        raise ValueError(
            f"{source}: hidden_act {act!r} is not supported; Hugging Face's 'gelu' is the exact GELU, "
            "while the released ALBERT weights were trained with the tanh approximation ('gelu_new'); "
            "pass exact_gelu_as_tanh to convert such a config with the approximation"
        )
    eps = values.get("layer_norm_eps", 1e-12)
    if not np.isclose(eps, 1e-12, rtol=1e-3, atol=0):
        raise ValueError(f"{source}: layer_norm_eps {eps} is not ALBERT's 1e-12")
    position = values.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ValueError(f"{source}: position_embedding_type {position!r} is not ALBERT's 'absolute'")
    fields = {k: v for k, v in values.items() if k not in _HF_CONFIG_IGNORED and k != "hidden_act"}
    config = AlbertConfig.from_dict({**fields, "hidden_act": _HF_ACTIVATIONS[act]}, source=source)
    _check_hf_groups(config, source)
    return config


def config_to_hf(config: AlbertConfig, with_heads: bool = True) -> dict:
    """The Hugging Face `config.json` of our config (gelu is written as 'gelu_new', its tanh form)."""
    if config.sharing != "all":
        raise ValueError(f"Hugging Face's ALBERT holds grouped all-shared models; this config has "
                         f"sharing={config.sharing!r}")
    _check_hf_groups(config, "this config")
    values = config.to_dict()
    del values["sharing"]
    act = {"gelu": "gelu_new"}.get(config.hidden_act, config.hidden_act)
    return {
        **values,
        "hidden_act": act,
        "architectures": ["AlbertForPreTraining" if with_heads else "AlbertModel"],
        "model_type": "albert",
        "layer_norm_eps": 1e-12,
        "classifier_dropout_prob": 0.1,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 3,
    }


def read_hf_weights(input_dir: str | os.PathLike) -> dict[str, np.ndarray]:
    """The tensors of `model.safetensors` (preferred) or `pytorch_model.bin`, as numpy arrays."""
    input_dir = os.fspath(input_dir)
    safetensors_path = os.path.join(input_dir, HF_SAFETENSORS)
    pytorch_path = os.path.join(input_dir, HF_PYTORCH)
    if os.path.isfile(safetensors_path):
        from safetensors.numpy import load_file

        return dict(load_file(safetensors_path))
    if os.path.isfile(pytorch_path):
        import torch

        import pickle

        try:
            # weights_only: tensors are read, a pickled Python object (which could run code) is refused.
            state = torch.load(pytorch_path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as error:
            from albert_tf.utils.errors import UserError

            raise UserError(f"{pytorch_path} holds pickled Python objects, not only tensors: refused, as loading "
                            f"them could run code ({str(error).splitlines()[0][:200]})") from None
        return {k: v.detach().float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}
    raise FileNotFoundError(f"no {HF_SAFETENSORS} or {HF_PYTORCH} in {input_dir}")


def _untie_hf(tensors: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """Drops the tied decoder copies after checking that they equal what they are tied to."""
    tensors = dict(tensors)
    for copy, original in HF_TIED.items():
        if copy in tensors and original in tensors:
            if tensors[copy].shape != tensors[original].shape or not np.array_equal(tensors[copy], tensors[original]):
                raise ValueError(f"{source}: {copy} differs from {original}; ALBERT ties them, so an untied "
                                 "checkpoint cannot be represented")
            del tensors[copy]
    return tensors


def convert_hf(input_dir: str | os.PathLike, output_dir: str | os.PathLike,
               exact_gelu_as_tanh: bool = False, encoder_only: bool = False) -> str:
    """A Hugging Face ALBERT folder (config.json, model.safetensors or pytorch_model.bin,
    spiece.model) -> a preset folder. Returns the output folder.

    A checkpoint with the heads gives a pretrainer's preset: both (`AlbertForPreTraining`), or the
    masked-LM head alone (`AlbertForMaskedLM`, as the Hub's), whose pretrainer starts a new
    sentence-order head. A task model (`AlbertForSequenceClassification`, `...ForQuestionAnswering`,
    `...ForMultipleChoice`, `...ForTokenClassification`) gives the preset of our matching task
    (`albert_tf.presets.hf_heads`). `encoder_only` deliberately drops the heads."""
    input_dir = os.fspath(input_dir)
    _check_output_dir(output_dir)  # before the slow part
    config_path = os.path.join(input_dir, HF_CONFIG)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"no {HF_CONFIG} in {input_dir}")
    with open(config_path, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{config_path}: not valid JSON ({e})") from None
    config = config_from_hf(values, config_path, exact_gelu_as_tanh)
    spm_model_file = os.path.join(input_dir, HF_VOCAB)
    preset_folder.check_vocabulary(spm_model_file, config)
    source = f"Hugging Face checkpoint {input_dir}"
    tensors = read_hf_weights(input_dir)
    from albert_tf.presets import hf_heads

    architecture = hf_heads.task_architecture(values)
    if architecture is not None:
        tensors, heads, task = hf_heads.split_task(architecture, config, values, tensors, source, encoder_only)
        # position_ids is a buffer of positions 0..T-1 that older transformers saved; nothing to load.
        encoder, _ = _split_source(config, "hf", tensors, source, False,
                                   lambda name: name == "albert.embeddings.position_ids")
        return preset_folder.write(output_dir, config, encoder, spm_model_file, task, heads if task else None)
    if not any(k.startswith("albert.") for k in tensors):
        # AlbertModel saves its tensors without the "albert." prefix of the task models.
        tensors = {f"albert.{k}": v for k, v in tensors.items()}
    tensors = _untie_hf(tensors, source)
    heads = ("predictions.", "sop_classifier.")
    with_heads = not encoder_only and any(k.startswith(heads) for k in tensors)
    # position_ids is a buffer of positions 0..T-1 that older transformers saved; nothing to load.
    encoder, head_tensors = _split_source(
        config, "hf", tensors, source, with_heads,
        lambda name: name == "albert.embeddings.position_ids" or (encoder_only and name.startswith(heads)))
    return _write(output_dir, config, encoder, head_tensors, spm_model_file)


def convert_preset_to_hf(preset_dir: str | os.PathLike, output_dir: str | os.PathLike) -> str:
    """A preset folder -> a Hugging Face folder that `AlbertForPreTraining.from_pretrained` (or
    `AlbertModel`, for an encoder's preset; for a task's, the Hugging Face class of the same head:
    `albert_tf.presets.hf_heads.ARCHITECTURE_OF`) loads: config.json, model.safetensors, spiece.model."""
    preset_dir, output_dir = os.fspath(preset_dir), _check_output_dir(output_dir)
    config = preset_folder.read_config(preset_dir)
    config_to_hf(config)  # fails early for configs HF cannot hold
    encoder = preset_weights.read(os.path.join(preset_dir, preset_folder.WEIGHTS))
    task = preset_folder.read_task(preset_dir)
    vocab = os.path.join(preset_dir, preset_folder.VOCAB)
    kind = task["class"] if task else None
    from albert_tf.presets import hf_heads

    if kind in hf_heads.ARCHITECTURE_OF:
        heads = preset_weights.read(os.path.join(preset_dir, preset_folder.TASK_WEIGHTS))
        with open(os.path.join(preset_dir, preset_folder.TASK_CONFIG), encoding="utf-8") as f:
            recorded = json.load(f)  # beside the class and arguments: problem_type, a tagger's labels
        tensors, keys = hf_heads.task_to_hf(recorded, config, encoder, heads)
        return _write_hf(output_dir, tensors, {**config_to_hf(config), **keys}, vocab)
    if kind not in (None, preset_folder.PRETRAINER_TASK):
        raise ValueError(f"preset {preset_dir} holds an {kind}, which has no Hugging Face counterpart here; "
                         "convert its encoder from an encoder's preset")
    tensors = to_source(encoder_weight_names(config, "hf"), encoder)
    if kind is None:
        tensors = {k[len("albert."):]: v for k, v in tensors.items()}
    else:
        heads = preset_weights.read(os.path.join(preset_dir, preset_folder.TASK_WEIGHTS))
        tensors.update(to_source(head_weight_names(config, "hf"), heads))
    return _write_hf(output_dir, tensors, config_to_hf(config, with_heads=kind is not None), vocab)


def _write_hf(output_dir: str, tensors: dict, hf_config: dict, spm_model_file) -> str:
    from safetensors.numpy import save_file

    os.makedirs(output_dir, exist_ok=True)
    save_file(tensors, os.path.join(output_dir, HF_SAFETENSORS), metadata={"format": "pt"})
    with open(os.path.join(output_dir, HF_CONFIG), "w", encoding="utf-8") as f:
        json.dump(hf_config, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.copyfile(spm_model_file, os.path.join(output_dir, HF_VOCAB))
    return output_dir


def classifier_to_hf(config: AlbertConfig, encoder: dict[str, np.ndarray], kernel: np.ndarray, bias: np.ndarray,
                     spm_model_file: str | os.PathLike, output_dir: str | os.PathLike, labels=None,
                     dropout_rate: float = 0.1, problem_type: str | None = None) -> str:
    """A classifier (its encoder's tensors by name, the output layer's `kernel` [H, N] and `bias`)
    -> a Hugging Face folder that `AlbertForSequenceClassification.from_pretrained` loads, with the
    same logits; one output is a regressor (`problem_type` "regression" unless given). `labels`
    names the classes (`id2label`)."""
    from albert_tf.presets import hf_heads

    return _head_to_hf(hf_heads.SEQUENCE_CLASSIFICATION, config, encoder, kernel, bias, spm_model_file, output_dir,
                       labels=labels, dropout_rate=dropout_rate, problem_type=problem_type)


def token_classifier_to_hf(config: AlbertConfig, encoder: dict[str, np.ndarray], kernel: np.ndarray,
                           bias: np.ndarray, spm_model_file: str | os.PathLike, output_dir: str | os.PathLike,
                           labels=None, dropout_rate: float = 0.1) -> str:
    """A token classifier (its encoder's tensors by name, the output layer's `kernel` [H, N] and
    `bias`) -> a Hugging Face folder that `AlbertForTokenClassification.from_pretrained` loads, with
    the same logits and `labels` as `id2label`; the pooler, which that class lacks, is left out."""
    from albert_tf.presets import hf_heads

    return _head_to_hf(hf_heads.TOKEN_CLASSIFICATION, config, encoder, kernel, bias, spm_model_file, output_dir,
                       labels=labels, dropout_rate=dropout_rate)


def _head_to_hf(architecture, config, encoder, kernel, bias, spm_model_file, output_dir, **keys) -> str:
    from albert_tf.presets import hf_heads

    output_dir = _check_output_dir(output_dir)
    tensors, hf_keys = hf_heads.head_to_hf(architecture, config, encoder,
                                           {"classifier/kernel": kernel, "classifier/bias": bias}, **keys)
    return _write_hf(output_dir, tensors, {**config_to_hf(config), **hf_keys}, spm_model_file)
