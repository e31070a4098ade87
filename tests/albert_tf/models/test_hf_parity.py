"""Numeric parity with Hugging Face's PyTorch AlbertForPreTraining, weights mapped into ours."""

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.checkpoints.names import encoder_weight_names, head_weight_names, to_ours
from albert_tf.checkpoints import weights
from tests.albert_tf import hf_reference

SMALL = AlbertConfig(
    vocab_size=211,
    embedding_size=16,
    hidden_size=48,
    num_hidden_layers=6,
    num_attention_heads=4,
    intermediate_size=96,
    max_position_embeddings=64,
    num_hidden_groups=3,
    inner_group_num=2,
)


@pytest.mark.parametrize(
    "config",
    [SMALL, AlbertConfig.named("albert_base_v2")],
    ids=["small_groups_inner_groups", "albert_base"],
)
def test_outputs_match_hugging_face(config):
    reference = hf_reference.random_hf_pretrainer(config)
    ours = AlbertPretrainer(config)
    state = hf_reference.state_dict_numpy(reference)
    encoder, heads = weights.split(ours)
    weights.assign(encoder, to_ours(encoder_weight_names(config, "hf"), state, "hf"), "hf")
    weights.assign(heads, to_ours(head_weight_names(config, "hf"), state, "hf"), "hf")
    used = {n.source for n in encoder_weight_names(config, "hf") + head_weight_names(config, "hf")}
    leftovers = sorted(set(state) - used)
    # The decoder is tied to the word embeddings and to predictions.bias: nothing else is left over.
    assert leftovers == ["predictions.decoder.bias", "predictions.decoder.weight"]

    batch = hf_reference.padded_batch(config)
    expected = hf_reference.hf_outputs(reference, batch)
    encoded = ours.encoder(batch)
    heads = ours(batch)
    got = {
        "sequence_output": encoded["sequence_output"],
        "pooled_output": encoded["pooled_output"],
        "mlm_logits": heads["mlm_logits"],
        "sop_logits": heads["sop_logits"],
    }
    for name, value in expected.items():
        np.testing.assert_allclose(np.asarray(got[name]), value, atol=1e-5, rtol=0, err_msg=name)
    # The comparison is not vacuous: the outputs vary across positions and rows.
    assert np.std(expected["sequence_output"]) > 0.1 and np.std(expected["mlm_logits"]) > 0.01
