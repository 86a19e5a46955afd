"""Hidden: reference.attention at random shapes and dtypes, and the input contract of every attention."""

import pytest
import torch

pytestmark = pytest.mark.visibility("hidden")

REFERENCE = "flash_attention.reference"


@pytest.mark.points(3)
@pytest.mark.task("reference.attention")
def test_attention_matches_float64_at_random_shapes(student, trusted, rng):
    """reference.attention in float32 matches float64 attention (1e-4) at four random shapes: leading dims
    of rank 1 to 3, lengths 1 to 70 (n_queries != n_keys when not causal), head dims 1 to 96, causal or not."""
    for _ in range(4):
        case = trusted.draw(rng, lengths=(1, 70), head_dims=range(1, 97))
        x = case.inputs(rng.randrange(2**31))
        expected, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
        out = student.module(REFERENCE).attention(x["q"], x["k"], x["v"], case.is_causal)
        trusted.assert_close(f"attention ({case})", out, expected, torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("reference.attention")
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=["float64", "bfloat16"])
def test_attention_keeps_the_input_dtype_at_a_random_shape(student, trusted, rng, dtype):
    """reference.attention returns the input dtype (float64: within 1e-10 of float64 attention; bfloat16:
    the bf16 tolerance 2e-2) at a random shape."""
    case = trusted.draw(rng, lengths=(2, 40), head_dims=(8, 16, 32))
    x = case.inputs(rng.randrange(2**31), dtype)
    expected, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    out = student.module(REFERENCE).attention(x["q"], x["k"], x["v"], case.is_causal)
    tolerance = dict(atol=1e-10, rtol=1e-10) if dtype == torch.float64 else trusted.half[dtype]
    trusted.assert_close(f"attention ({case})", out, expected, dtype, tolerance)
