"""Hidden tests of §2 named dimensions: random leading batch dims, heads, sizes and strides.

Expected values are plain torch (matmul, reshape, transpose) computed here.
"""

import random

import pytest
import torch

from autograder.suites.resource_accounting import scenarios

pytestmark = pytest.mark.visibility("hidden")


def lead_dims(rng: random.Random) -> list[int]:
    return [rng.randint(1, 4) for _ in range(rng.randint(0, 3))]


def randn(rng: random.Random, shape, dtype=torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def split_expected(x: torch.Tensor, heads: int) -> torch.Tensor:
    """`... seq (heads d) -> ... heads seq d` in plain torch."""
    *lead, seq, width = x.shape
    return x.reshape(*lead, seq, heads, width // heads).transpose(-2, -3)


def merge_expected(y: torch.Tensor) -> torch.Tensor:
    """`... heads seq d -> ... seq (heads d)` in plain torch."""
    *lead, heads, seq, d = y.shape
    return y.transpose(-2, -3).reshape(*lead, seq, heads * d)


@pytest.mark.points(3)
@pytest.mark.task("einops_ops.attention_scores")
def test_attention_scores_are_q_kt_for_random_leading_dims_and_sizes(einops_ops, trusted, rng):
    """For 6 random cases (0 to 3 leading dims, seq1 ≠ seq2, random hidden, float64 or float32)
    attention_scores(q, k) is q @ kᵀ of shape (..., seq1, seq2) in q's dtype, unscaled (rtol 1e-12 in float64,
    1e-5 in float32)."""
    for _ in range(6):
        lead, dtype = lead_dims(rng), rng.choice((torch.float64, torch.float32))
        seq1, seq2, hidden = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 12)
        q, k = randn(rng, (*lead, seq1, hidden), dtype), randn(rng, (*lead, seq2, hidden), dtype)
        expected = (q.double() @ k.double().transpose(-1, -2))
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        trusted.assert_tensor(f"scores for q {tuple(q.shape)}, k {tuple(k.shape)}", einops_ops.attention_scores(q, k),
                              expected, dtype=dtype, rtol=tol, atol=tol)


@pytest.mark.points(2)
@pytest.mark.task("einops_ops.split_heads")
def test_split_heads_gives_head_h_features_h_d_to_h_d_plus_d_for_random_shapes(einops_ops, trusted, rng):
    """For 6 random cases (0 to 3 leading dims, random heads and head size, float, int64 or bool data)
    split_heads(x, heads) equals x.reshape(..., seq, heads, d).transpose(-2, -3) exactly."""
    for _ in range(6):
        lead, heads, d, seq = lead_dims(rng), rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 7)
        x = randn(rng, (*lead, seq, heads * d), rng.choice((torch.float32, torch.float64)))
        if rng.random() < 0.3:
            x = (x * 100).to(rng.choice((torch.int64, torch.bool)))
        trusted.assert_tensor(f"split_heads(x of {tuple(x.shape)}, {heads})", einops_ops.split_heads(x, heads),
                              split_expected(x, heads), dtype=x.dtype)


@pytest.mark.points(2)
@pytest.mark.task("einops_ops.merge_heads")
def test_merge_heads_and_split_heads_are_inverse_for_random_shapes(einops_ops, trusted, rng):
    """For 4 random shapes: merge_heads(y) is y.transpose(-2, -3).reshape(..., seq, heads·d), and
    merge_heads(split_heads(x, h)) == x and split_heads(merge_heads(y), h) == y, bit for bit."""
    for _ in range(4):
        lead, heads, d, seq = lead_dims(rng), rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 7)
        x, y = randn(rng, (*lead, seq, heads * d), torch.float32), randn(rng, (*lead, heads, seq, d), torch.float32)
        merged = einops_ops.merge_heads(y)
        trusted.assert_tensor(f"merge_heads(y of {tuple(y.shape)})", merged, merge_expected(y), dtype=y.dtype)
        trusted.assert_tensor(f"split_heads(merge_heads(y), {heads})", einops_ops.split_heads(merged, heads), y,
                              dtype=y.dtype)
        round_trip = einops_ops.merge_heads(einops_ops.split_heads(x, heads))
        trusted.assert_tensor(f"merge_heads(split_heads(x of {tuple(x.shape)}, {heads}))", round_trip, x, dtype=x.dtype)


STRIDED = ("attention_scores", "split_heads", "merge_heads")


@pytest.mark.points(0.5)
@pytest.mark.parametrize("function", [pytest.param(f, marks=pytest.mark.task(f"einops_ops.{f}")) for f in STRIDED])
def test_einops_functions_accept_non_contiguous_inputs(student, trusted, rng, function):
    """attention_scores, split_heads and merge_heads give the right values on transposed (non-contiguous) inputs
    with random leading dims (a .view() of such a tensor fails)."""
    spec = {"seed": rng.randrange(2**31), "lead": lead_dims(rng), "seq1": rng.randint(2, 6),
            "seq2": rng.randint(2, 6), "hidden": rng.randint(2, 5), "heads": rng.randint(2, 4)}
    got = student.run(scenarios.einops_on_strided, function=function, **spec)
    q, k, x, y = scenarios.strided_inputs(**spec)
    if function == "attention_scores":
        trusted.assert_tensor(f"attention_scores {spec}", got, q @ k.transpose(-1, -2), dtype=q.dtype,
                              rtol=1e-12, atol=1e-12)
    elif function == "split_heads":
        trusted.assert_tensor(f"split_heads {spec}", got, split_expected(x, spec["heads"]).contiguous(),
                              dtype=x.dtype)
    else:
        trusted.assert_tensor(f"merge_heads {spec}", got, merge_expected(y).contiguous(), dtype=y.dtype)


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("einops_ops.attention_scores")
def test_attention_scores_rejects_random_mismatched_shapes(einops_ops, rng):
    """ValueError for q and k whose hidden sizes differ, whose leading dims differ, whose ranks differ, or that
    have a single dimension (random sizes for each)."""
    lead, seq1, seq2, hidden = [rng.randint(2, 4)], rng.randint(1, 5), rng.randint(1, 5), rng.randint(2, 6)
    cases = {
        "hidden sizes differ": ((*lead, seq1, hidden), (*lead, seq2, hidden + rng.randint(1, 3))),
        "leading dims differ": ((*lead, seq1, hidden), (lead[0] + rng.randint(1, 3), seq2, hidden)),
        "ranks differ": ((*lead, seq1, hidden), (seq2, hidden)),
        "1-D inputs": ((hidden,), (hidden,)),
    }
    for what, (q_shape, k_shape) in cases.items():
        with pytest.raises(ValueError):
            einops_ops.attention_scores(torch.zeros(q_shape), torch.zeros(k_shape))
            pytest.fail(f"no ValueError when {what}: q {q_shape}, k {k_shape}")


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("einops_ops.split_heads")
def test_split_heads_rejects_random_head_counts_that_do_not_divide(einops_ops, rng):
    """ValueError for a random head count that does not divide the width, for 0 heads and for a negative count."""
    width = rng.choice((6, 10, 12, 15, 21))
    bad = rng.choice([h for h in range(2, width + 3) if width % h])
    for heads in (bad, 0, -rng.randint(1, width)):
        with pytest.raises(ValueError):
            einops_ops.split_heads(torch.zeros(2, 3, width), heads)
            pytest.fail(f"no ValueError for {heads} heads of width {width}")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("einops_ops.merge_heads")
def test_merge_heads_rejects_fewer_than_three_dims(einops_ops, rng):
    """ValueError for a random 1-D or 2-D tensor."""
    shape = [rng.randint(1, 6) for _ in range(rng.randint(1, 2))]
    with pytest.raises(ValueError):
        einops_ops.merge_heads(torch.zeros(shape))
        pytest.fail(f"no ValueError for shape {shape}")
