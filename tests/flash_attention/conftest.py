"""The trusted side of the flash_attention tests: seeded inputs and float64 expected values.

Expected values come from PyTorch's own attention in float64 (scaled_dot_product_attention for the
output and, by autograd, the gradients; its CPU flash kernel for the logsumexp), never from the
student's code, and not from a copy of the attention the handout asks for (§3): that one is yours
to write.
"""

from types import SimpleNamespace

import pytest
import torch

from autograder.harness.failures import distinct, pattern

# Tolerances against float64 (handout §A.6 The tests).
FP32 = dict(atol=1e-4, rtol=1e-4)
HALF = {torch.bfloat16: dict(atol=2e-2, rtol=2e-2), torch.float16: dict(atol=1e-2, rtol=1e-2)}


def make_inputs(seed: int, lead: tuple, n_queries: int, n_keys: int, head_dim: int,
                dtype: torch.dtype = torch.float32) -> dict:
    """Seeded q, k, v and an upstream gradient do, standard normal, in `dtype`, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    shapes = {"q": (n_queries, head_dim), "k": (n_keys, head_dim), "v": (n_keys, head_dim),
              "do": (n_queries, head_dim)}
    return {name: torch.randn(*lead, *shape, generator=gen).to(dtype) for name, shape in shapes.items()}


def attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    """(o, lse) of softmax(q kᵀ / sqrt(d)) v in float64, on q's device; lse is the natural-log
    logsumexp per row. Any leading dimensions; the computation runs on the CPU."""
    *lead, n_queries, _ = q.shape
    flat = [_cpu64(x).reshape(-1, 1, *x.shape[-2:]) for x in (q, k, v)]
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*flat, 0.0, is_causal)[:2]
    return o.reshape(*lead, n_queries, v.shape[-1]).to(q.device), lse.reshape(*lead, n_queries).to(q.device)


def gradients64(q, k, v, do, is_causal: bool = False) -> tuple:
    """(dq, dk, dv) of the float64 attention for the upstream gradient do, by autograd."""
    leaves = [_cpu64(x).requires_grad_() for x in (q, k, v)]
    flat = [x.reshape(-1, 1, *x.shape[-2:]) for x in leaves]
    o = torch.nn.functional.scaled_dot_product_attention(*flat, is_causal=is_causal)
    grads = torch.autograd.grad(o.reshape(do.shape), leaves, _cpu64(do))
    return tuple(g.to(q.device) for g in grads)


def _cpu64(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.float64)


def assert_close(name: str, actual, expected: torch.Tensor, dtype: torch.dtype, tolerance: dict) -> None:
    """actual is a tensor of expected's shape and of `dtype`, within `tolerance` of expected."""
    assert type(actual) is torch.Tensor, f"{name}: expected a torch.Tensor, got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{name}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    assert actual.dtype == dtype, f"{name}: expected dtype {dtype}, got {actual.dtype}"
    actual, expected = actual.double(), expected.double()
    # torch.testing.assert_close's rule, |actual - expected| <= atol + rtol * |expected|, written out
    # (its first call costs over a second of imports).
    excess = (actual - expected).abs() - (tolerance["atol"] + tolerance["rtol"] * expected.abs())
    # Within tolerance, or equal (an infinity where one is expected): a NaN, or an infinite expected value
    # missed (inf - inf is NaN, never over the tolerance), is an element that differs.
    bad = int((~((excess <= 0) | (actual == expected))).sum())
    if bad:
        worst = int(torch.nan_to_num(excess, nan=float("inf")).argmax())
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), expected.shape))
        got, want = distinct(actual.flatten()[worst].item(), expected.flatten()[worst].item())
        raise AssertionError(
            f"{name}: {bad} of {expected.numel()} elements differ by more than atol={tolerance['atol']} + "
            f"rtol={tolerance['rtol']} * |expected|; worst at index {where}: got {got}, expected {want}"
            + pattern(actual, expected, (tolerance["rtol"], tolerance["atol"])))


@pytest.fixture(scope="session")
def trusted() -> SimpleNamespace:
    """The trusted helpers above, as one fixture: inputs, attention64, gradients64, assert_close."""
    return SimpleNamespace(inputs=make_inputs, attention64=attention64, gradients64=gradients64,
                           assert_close=assert_close, fp32=FP32, half=HALF)
