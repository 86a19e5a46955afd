"""reference.py: the naive attention and the input contract every attention here checks."""

import pytest
import torch

REFERENCE = "flash_attention.reference"


@pytest.mark.points(2)
@pytest.mark.task("reference.attention")
@pytest.mark.parametrize("lead, n_queries, n_keys, head_dim, is_causal",
                         [((2, 3), 12, 20, 16, False), ((4,), 17, 17, 8, True)],
                         ids=["2x3-nq12-nk20-d16-full", "4-nq17-nk17-d8-causal"])
def test_attention_matches_float64(student, trusted, lead, n_queries, n_keys, head_dim, is_causal):
    """attention(q, k, v, is_causal) in float32 matches a float64 softmax(q kᵀ / sqrt(d)) v.

    Hint (values, close): scale the scores by 1/sqrt(d), d = q.shape[-1], before the softmax; causal masks key
    j > query i with -inf.
    Hint (nan): a row of NaN had every score masked: causal masks only keys j > i, so key 0 is always seen.
    """
    x = trusted.inputs(1, lead, n_queries, n_keys, head_dim)
    expected, _ = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
    out = student.module(REFERENCE).attention(x["q"], x["k"], x["v"], is_causal)
    trusted.assert_close("attention output", out, expected, torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("reference.attention")
def test_attention_keeps_the_input_dtype(student, trusted):
    """attention on bfloat16 inputs returns bfloat16 of shape (..., n_queries, d)."""
    x = trusted.inputs(2, (2,), 8, 16, 16, dtype=torch.bfloat16)
    expected, _ = trusted.attention64(x["q"], x["k"], x["v"])
    out = student.module(REFERENCE).attention(x["q"], x["k"], x["v"])
    trusted.assert_close("attention output", out, expected, torch.bfloat16, trusted.half[torch.bfloat16])


BAD_INPUTS = {
    "causal with n_queries != n_keys": ((1, 8, 16), (1, 12, 16), (1, 12, 16), True),
    "q and k head dims differ": ((1, 8, 16), (1, 8, 32), (1, 8, 32), False),
    "k and v shapes differ": ((1, 8, 16), (1, 8, 16), (1, 9, 16), False),
    "leading dims differ": ((2, 8, 16), (3, 8, 16), (3, 8, 16), False),
}


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("reference.attention")
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_attention_rejects_inputs_outside_the_contract(student, case):
    """attention raises ValueError for causal with n_queries != n_keys and for mismatched shapes.

    Hint (did not raise, raised): call check_attention_inputs(q, k, v, is_causal) first; it raises ValueError with a message.
    """
    q_shape, k_shape, v_shape, is_causal = BAD_INPUTS[case]
    with pytest.raises(ValueError):
        student.module(REFERENCE).attention(torch.zeros(q_shape), torch.zeros(k_shape), torch.zeros(v_shape),
                                            is_causal)
