"""Hugging Face's PyTorch ALBERT as an independent reference: built from our config, with every
parameter (biases and LayerNorm included) randomised so that no mapping error can hide behind
an initial zero or one."""

import numpy as np
import torch
import transformers

from albert_tf.config import AlbertConfig


def hf_config(config: AlbertConfig) -> transformers.AlbertConfig:
    return transformers.AlbertConfig(
        vocab_size=config.vocab_size,
        embedding_size=config.embedding_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_hidden_groups=config.num_hidden_groups,
        inner_group_num=config.inner_group_num,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        hidden_act="gelu_new",  # ALBERT's "gelu" is the tanh approximation
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        layer_norm_eps=1e-12,
        attn_implementation="eager",
    )


def random_hf_pretrainer(config: AlbertConfig, seed: int = 0):
    torch.manual_seed(seed)
    model = transformers.AlbertForPreTraining(hf_config(config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("LayerNorm" in name or "layer_norm" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.02 * torch.randn_like(p))
    return model


def state_dict_numpy(model) -> dict:
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def padded_batch(config: AlbertConfig, batch=3, length=24, predictions=5, seed=0):
    """Random ids with a padded tail on every row but the first, and masked positions inside."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(5, config.vocab_size, size=(batch, length)).astype(np.int32)
    input_mask = np.ones((batch, length), np.int32)
    segment_ids = np.zeros((batch, length), np.int32)
    for row in range(batch):
        real = length - 4 * row
        input_mask[row, real:] = 0
        input_ids[row, real:] = 0
        segment_ids[row, real // 2 : real] = 1
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, length - 4 * (batch - 1)), predictions, replace=False)) for _ in range(batch)]
    ).astype(np.int32)
    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": positions,
    }


def hf_outputs(model, batch):
    with torch.no_grad():
        out = model.albert(
            input_ids=torch.from_numpy(batch["input_ids"]).long(),
            attention_mask=torch.from_numpy(batch["input_mask"]).long(),
            token_type_ids=torch.from_numpy(batch["segment_ids"]).long(),
        )
        seq, pooled = out.last_hidden_state, out.pooler_output
        logits = model.predictions(seq)
        sop = model.sop_classifier(pooled)
    positions = batch["masked_lm_positions"]
    mlm = np.take_along_axis(logits.numpy(), positions[:, :, None], axis=1)
    return {
        "sequence_output": seq.numpy(),
        "pooled_output": pooled.numpy(),
        "mlm_logits": mlm,
        "sop_logits": sop.numpy(),
    }
