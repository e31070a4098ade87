import numpy as np
import pytest

from albert_tf.serving.fill_mask import fill_mask, masked_inputs
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from tests.conftest import REPO_ROOT

TOKENIZER = AlbertTokenizer(str(REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"))


def test_masks_become_the_mask_id_at_the_reported_positions():
    inputs = masked_inputs("the [MASK] of the [MASK].", TOKENIZER, max_seq_length=64)
    ids = inputs["input_ids"][0]
    assert ids[0] == TOKENIZER.cls_id and ids[-1] == TOKENIZER.sep_id
    positions = inputs["masked_lm_positions"][0]
    assert len(positions) == 2 and all(ids[p] == TOKENIZER.mask_id for p in positions)
    # Everything else is the ordinary encoding of the text around the masks.
    rest = [t for t in ids[1:-1] if t != TOKENIZER.mask_id]
    assert rest == TOKENIZER.encode("the ") + TOKENIZER.encode(" of the ") + TOKENIZER.encode(".")
    assert inputs["input_mask"].sum() == len(ids)


def test_text_without_mask_or_too_long_is_an_error():
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        masked_inputs("no mask here", TOKENIZER, 64)
    with pytest.raises(ValueError, match="at most 8 fit"):
        masked_inputs("a long sentence with a [MASK] in the middle of it", TOKENIZER, 8)


def test_candidates_are_ranked_and_never_control_pieces():
    target = TOKENIZER.encode("the")[-1]

    def predict(inputs):
        masks = inputs["masked_lm_positions"].shape[1]
        logits = np.zeros((1, masks, TOKENIZER.vocab_size))
        logits[0, :, target] = 5.0
        logits[0, :, TOKENIZER.cls_id] = 50.0  # a control piece must not win
        logits[0, :, TOKENIZER.unk_id] = 50.0
        return logits

    (candidates,) = fill_mask("a [MASK] b", predict, TOKENIZER, top_k=3)
    assert candidates[0][0] == TOKENIZER.convert_ids_to_tokens([target])[0]
    others = TOKENIZER.vocab_size - 1 - sum(TOKENIZER.is_control(i) for i in range(TOKENIZER.vocab_size)) - 1
    np.testing.assert_allclose(candidates[0][1], np.exp(5) / (np.exp(5) + others), rtol=1e-9)
    assert [p for _, p in candidates] == sorted((p for _, p in candidates), reverse=True)
