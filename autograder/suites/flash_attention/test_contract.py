"""Hidden: the ValueErrors of the input contract (handout §3, §6, §8), for every attention, at random shapes.

Each test draws fresh bad inputs from the run's seed: causal with n_queries != n_keys, head dims of q
and k that differ, k and v of different lengths, leading dims that differ, a dtype that differs; the
Triton ones also tiles below 16 or not powers of two. Any exception other than ValueError fails.
"""

import pytest
import torch

pytestmark = pytest.mark.visibility("hidden")

REFERENCE = "flash_attention.reference"
FLASH = "flash_attention.flash_pytorch"
TRITON = "flash_attention.flash_triton"


def _valid(rng) -> tuple:
    """Valid q, k, v, o, lse, do of a random small shape (n_queries != n_keys), for the tile checks."""
    lead, d = (rng.randint(1, 2),), rng.choice((16, 32))
    n_queries, n_keys = rng.randint(16, 40), rng.randint(16, 40)
    q, o, do = (torch.zeros(*lead, n_queries, d) for _ in range(3))
    k, v = (torch.zeros(*lead, n_keys, d) for _ in range(2))
    return q, k, v, o, torch.zeros(*lead, n_queries), do


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("reference.attention")
def test_reference_attention_rejects_random_bad_inputs(student, trusted, rng):
    """reference.attention raises ValueError for each kind of input outside the contract, at random shapes."""
    attention = student.module(REFERENCE).attention
    for what, (q, k, v, is_causal) in trusted.bad_inputs(rng).items():
        trusted.value_error(f"attention, {what}", lambda: attention(q, k, v, is_causal))


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_pytorch_forward_and_function_reject_random_bad_inputs(student, trusted, rng):
    """flash_forward_pytorch and FlashAttentionPytorch.apply raise ValueError for each kind of input outside
    the contract, at random shapes."""
    flash = student.module(FLASH)
    apply = getattr(flash, "FlashAttentionPytorch.apply")
    for what, (q, k, v, is_causal) in trusted.bad_inputs(rng).items():
        trusted.value_error(f"flash_forward_pytorch, {what}", lambda: flash.flash_forward_pytorch(q, k, v, is_causal))
        trusted.value_error(f"FlashAttentionPytorch.apply, {what}", lambda: apply(q, k, v, is_causal))


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.flash_backward_pytorch")
def test_pytorch_backward_rejects_random_bad_inputs(student, trusted, rng):
    """flash_backward_pytorch raises ValueError for each kind of q, k, v outside the contract, and for o, do
    or lse of the wrong shape, at random shapes."""
    backward = student.module(FLASH).flash_backward_pytorch
    for what, (q, k, v, is_causal) in trusted.bad_inputs(rng).items():
        o, do, lse = torch.zeros_like(q), torch.zeros_like(q), torch.zeros(q.shape[:-1])
        trusted.value_error(f"flash_backward_pytorch, {what}", lambda: backward(q, k, v, o, lse, do, is_causal))
    q, k, v, o, lse, do = _valid(rng)
    wrong = {"o": (q[..., :-1, :], lse, do), "do": (o, lse, do[..., :-1]), "lse": (o, lse[..., :-1], do)}
    for what, (o_, lse_, do_) in wrong.items():
        trusted.value_error(f"flash_backward_pytorch, {what} of the wrong shape",
                            lambda: backward(q, k, v, o_, lse_, do_, False))


@pytest.mark.edge
@pytest.mark.triton
@pytest.mark.points(2)
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_forward_rejects_random_bad_inputs_and_tiles(student, trusted, rng):
    """flash_forward_triton raises ValueError for each kind of input outside the contract, and for q_tile or
    k_tile below 16 or not a power of two (random sizes)."""
    forward = student.module(TRITON).flash_forward_triton
    for what, (q, k, v, is_causal) in trusted.bad_inputs(rng).items():
        trusted.value_error(f"flash_forward_triton, {what}", lambda: forward(q, k, v, is_causal))
    q, k, v, *_ = _valid(rng)
    for tile in trusted.bad_tiles(rng):
        for name in ("q_tile", "k_tile"):
            trusted.value_error(f"flash_forward_triton, {name}={tile}", lambda: forward(q, k, v, **{name: tile}))


@pytest.mark.edge
@pytest.mark.triton
@pytest.mark.points(2)
@pytest.mark.task("flash_triton.flash_backward_triton")
def test_triton_backward_rejects_random_bad_inputs_and_tiles(student, trusted, rng):
    """flash_backward_triton raises ValueError for each kind of input outside the contract, and for q_tile
    or k_tile below 16 or not a power of two (random sizes)."""
    backward = student.module(TRITON).flash_backward_triton
    for what, (q, k, v, is_causal) in trusted.bad_inputs(rng).items():
        o, do, lse = torch.zeros_like(q), torch.zeros_like(q), torch.zeros(q.shape[:-1])
        trusted.value_error(f"flash_backward_triton, {what}", lambda: backward(q, k, v, o, lse, do, is_causal))
    q, k, v, o, lse, do = _valid(rng)
    for tile in trusted.bad_tiles(rng):
        for name in ("q_tile", "k_tile"):
            trusted.value_error(f"flash_backward_triton, {name}={tile}",
                                lambda: backward(q, k, v, o, lse, do, **{name: tile}))
