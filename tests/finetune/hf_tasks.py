"""Hugging Face's PyTorch task models as references for our training steps: a tiny config, each
task's Hugging Face class with every parameter randomised, its weights moved into our task model
by the one name table (`albert_tf.checkpoints.names`, plus each head's two tensors named here), and
one batch of a task's real records read through the fine-tuning input pipeline.

Used by test_gradient_parity.py (loss and gradients), test_update_parity.py and test_memorisation.py.
"""

from __future__ import annotations

import numpy as np
import torch
import transformers

from albert_tf import AlbertConfig
from albert_tf.checkpoints.names import WeightName, encoder_weight_names, head_weight_names
from albert_tf.checkpoints.weights import model_weights
from tests.albert_tf.hf_reference import hf_config  # noqa: F401 (re-exported)
from tests.conftest import SMALL_DATA_DIR, torch_on_one_thread

torch_on_one_thread()  # also in the children that import this module (tests/warm_python.py's)

SPM_MODEL = SMALL_DATA_DIR / "albert" / "30k-clean.model"  # the released English vocabulary


def tiny_config(**changes) -> AlbertConfig:
    """Two layers sharing one block (the release's sharing: its gradient sums both uses), dropout 0."""
    values = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(changes)
    return AlbertConfig(**values)


# Each task's Hugging Face class and where our head's weights live in it (ours: below the task model).
HF_CLASSES = {
    "classifier": transformers.AlbertForSequenceClassification,
    "multiple_choice": transformers.AlbertForMultipleChoice,
    "span": transformers.AlbertForQuestionAnswering,
    "token": transformers.AlbertForTokenClassification,
    "pretraining": transformers.AlbertForPreTraining,
    "encoder": transformers.AlbertModel,
}


def _dense(ours: str, hf: str, shape) -> list[WeightName]:
    return [WeightName(f"{ours}/kernel", f"{hf}.weight", shape, transpose=True),
            WeightName(f"{ours}/bias", f"{hf}.bias", shape[1:])]


def weight_names(kind: str, config: AlbertConfig, outputs: int = 0) -> list[WeightName]:
    """Our weights (named below the task model) and their Hugging Face names, for `kind`'s model."""
    prefix = "" if kind == "encoder" else "albert."
    encoder = [WeightName(f"encoder/{n.ours}", prefix + n.source[len("albert."):], n.shape, n.transpose)
               for n in encoder_weight_names(config, "hf")]
    h = config.hidden_size
    heads = {
        "classifier": lambda: _dense("classifier", "classifier", (h, outputs)),
        "multiple_choice": lambda: _dense("classifier", "classifier", (h, 1)),
        "span": lambda: _dense("span", "qa_outputs", (h, 2)),
        "token": lambda: _dense("classifier", "classifier", (h, outputs)),
        "pretraining": lambda: head_weight_names(config, "hf"),
        "encoder": lambda: [],
    }[kind]()
    return encoder + heads


def randomised(model: torch.nn.Module, seed: int, scale: float = 0.05) -> torch.nn.Module:
    """`model` with every parameter drawn anew (LayerNorm scales near 1, biases of 0.1 and weights
    of `scale` standard deviation), so that no mapping error hides behind an initial 0 or 1."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if "LayerNorm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(scale * noise)
    return model


def hf_model(kind: str, config: AlbertConfig, outputs: int = 0, seed: int = 0, scale: float = 0.05,
             **hf_changes) -> torch.nn.Module:
    """Hugging Face's model of `kind` on `config` (dropout 0), randomised (`randomised`)."""
    values = hf_config(config)
    if outputs:
        values.num_labels = outputs
    if kind == "classifier" and outputs == 1:
        values.problem_type = "regression"
    for key, value in hf_changes.items():
        setattr(values, key, value)
    torch.manual_seed(seed)
    model = HF_CLASSES[kind](values) if kind != "encoder" else transformers.AlbertModel(values, add_pooling_layer=True)
    return randomised(model, seed, scale).train()


class WeightMap:
    """Our model's trainable variables and the Hugging Face parameters they are, one to one.

    Built after `copy_weights`: every trainable variable of ours has exactly one parameter there
    (an error names any that has none), so a gradient compared over the map is every gradient.
    """

    def __init__(self, ours, hf: torch.nn.Module, names: list[WeightName]):
        by_name = {n.ours: n for n in names}
        parameters = dict(hf.named_parameters())
        variables = model_weights(ours)
        key_of = {id(v): k for k, v in variables.items()}
        self.entries = []
        missing = []
        for variable in ours.trainable_variables:
            key = key_of[id(variable)]
            name = by_name.get(key)
            if name is None or name.source not in parameters:
                missing.append(key)
                continue
            self.entries.append((key, variable, name, parameters[name.source]))
        if missing:
            raise ValueError(f"trainable weights without a Hugging Face parameter: {missing}")
        self.variables = variables


def map_weights(ours, hf: torch.nn.Module, kind: str, config: AlbertConfig, outputs: int = 0) -> WeightMap:
    """Copies `hf`'s weights into `ours` (every weight both have, frozen ones too) and returns the
    map of our trainable variables to its parameters."""
    names = weight_names(kind, config, outputs)
    if not ours.built:
        ours.build()
    variables = model_weights(ours)
    state = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
    copied = 0
    for name in names:
        if name.ours in variables and name.source in state:
            variables[name.ours].assign(name.to_ours(state[name.source]))
            copied += 1
    assert copied >= len(ours.trainable_variables)
    return WeightMap(ours, hf, names)


def first_batch(cached, size: int) -> dict[str, np.ndarray]:
    """The first `size` records of a cached split as the fine-tuning pipeline batches them
    (`finetune.inputs.make_dataset`, in file order), as NumPy arrays."""
    from finetune import inputs

    dataset = inputs.make_dataset(cached, global_batch_size=size, training=False)
    return {k: v.numpy() for k, v in next(iter(dataset)).items()}


def torch_inputs(batch: dict) -> dict:
    return {"input_ids": torch.from_numpy(batch["input_ids"]).long(),
            "attention_mask": torch.from_numpy(batch["input_mask"]).long(),
            "token_type_ids": torch.from_numpy(batch["segment_ids"]).long()}


def pretraining_records(tokenizer, max_seq_length: int, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """`count` real pretraining records: two fixture books' sentences (Caesar is Latin-1) through data_prep's instances
    (SOP, n-gram masking, 10 predictions), padded as the records are."""
    import random

    from data_prep.documents import split_sentences
    from data_prep.generation import encode_documents
    from data_prep.instances import InstanceOptions, MaskingVocab, create_instances_from_document, instance_features

    text = "\n\n".join((SMALL_DATA_DIR / "corpus" / "gutenberg" / f"{book}.txt").read_text(encoding="latin-1")
                         for book in ("blake-poems", "shakespeare-caesar"))
    paragraphs = [p for p in text.split("\n\n") if p.strip()][20:]
    documents = encode_documents(tokenizer, [split_sentences(" ".join(p.split())) for p in paragraphs])
    options = InstanceOptions(max_seq_length=max_seq_length, max_predictions_per_seq=10)
    vocab = MaskingVocab.from_tokenizer(tokenizer)
    rng = random.Random(seed)
    records = []
    for document in documents:
        if len(document) > 1:
            records += [instance_features(i, options) for i in create_instances_from_document(document, rng, vocab, options)]
        if len(records) >= count:
            break
    assert len(records) >= count, f"the book makes {len(records)} records, not {count}"
    batch = {k: np.asarray([r[k] for r in records[:count]]) for k in records[0] if k != "token_boundary"}
    batch = {k: v.astype(np.float32 if k == "masked_lm_weights" else np.int32) for k, v in batch.items()}
    batch["next_sentence_labels"] = batch["next_sentence_labels"].reshape(-1, 1)
    return batch


def pretraining_labels(batch: dict) -> dict:
    """`AlbertForPreTraining`'s labels of pretraining records: the masked pieces' ids at their
    positions (-100 elsewhere) and the sentence order."""
    labels = np.full(batch["input_ids"].shape, -100, np.int64)
    for row, (positions, ids, weights) in enumerate(zip(batch["masked_lm_positions"], batch["masked_lm_ids"],
                                                        batch["masked_lm_weights"])):
        real = weights > 0
        labels[row, positions[real]] = ids[real]
    assert (labels >= 0).sum() == batch["masked_lm_weights"].sum()  # no position masked twice
    return {"labels": torch.from_numpy(labels),
            "sentence_order_label": torch.from_numpy(batch["next_sentence_labels"].reshape(-1)).long()}
