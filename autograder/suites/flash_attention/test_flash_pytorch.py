"""Hidden: flash_pytorch.py at random shapes and tiles, its memory, its causal skipping, and its autograd Function.

Every shape, tile and seed is drawn from the run's seed; expected values are float64 attention and
float64 autograd computed here. How the causal skipping is checked (no timing involved): the scenario
counts, with a dispatch mode, the FLOPs of the matrix products (aten mm, bmm, addmm, baddbmm: where
every torch matmul, `@` and einsum ends, except einsum over a contracted size of 1, which the drawn
sizes avoid) that the causal and the non-causal passes run. Masking the
tiles above the diagonal computes them all, so it costs as much as the non-causal pass; skipping them
leaves at most the fraction of the score matrix that the tiles on or below the diagonal cover, which
is computed here from N and the tiles. The check is a ratio of the student's own two passes, so
extra products that scale with the tiles visited do not matter.
"""

import dataclasses

import pytest
import torch

from autograder.suites.flash_attention import scenarios

pytestmark = pytest.mark.visibility("hidden")

FLASH = "flash_attention.flash_pytorch"
HEAD_DIMS = (8, 16, 24, 40, 64, 80)


def ragged_tiles(rng, n_queries: int, n_keys: int, choices) -> tuple[int, int]:
    """Tiles from `choices` that divide neither length (when shorter than it): a ragged last tile."""
    def pick(n):
        options = [t for t in choices if t >= n or n % t]
        return rng.choice(options)

    return pick(n_queries), pick(n_keys)


def draw(trusted, rng, **kwargs):
    """A random case whose lengths are not multiples of its tiles."""
    case = trusted.draw(rng, **kwargs)
    q_tile, k_tile = ragged_tiles(rng, case.n_queries, case.n_keys, range(3, 70))
    return dataclasses.replace(case, q_tile=q_tile, k_tile=k_tile)


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_forward_matches_float64_at_random_shapes_and_tiles(student, trusted, rng):
    """flash_forward_pytorch's o (float32, q's shape) and lse (float32, (..., n_queries)) match float64
    attention and its logsumexp within 1e-4, at four random cases (two causal, two not): leading dims of rank
    1 to 3, lengths 1 to 90 that are not multiples of the random tiles (3 to 69), n_queries != n_keys unless
    causal."""
    forward = student.module(FLASH).flash_forward_pytorch
    for i in range(4):
        case = draw(trusted, rng, lengths=(1, 90), head_dims=HEAD_DIMS, causal=i % 2 == 0)
        x = case.inputs(rng.randrange(2**31))
        expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
        o, lse = forward(x["q"], x["k"], x["v"], case.is_causal, q_tile=case.q_tile, k_tile=case.k_tile)
        trusted.assert_close(f"o ({case})", o, expected_o, torch.float32, trusted.fp32)
        trusted.assert_close(f"lse ({case})", lse, expected_lse, torch.float32, trusted.fp32)


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_backward_pytorch")
def test_backward_matches_float64_autograd_at_random_shapes_and_tiles(student, trusted, rng):
    """flash_backward_pytorch's (dq, dk, dv), given float64-exact o and lse, match float64 autograd within
    1e-4 at three random cases, the first and last causal (as for the forward: ragged tiles, n_queries != n_keys,
    rank 1 to 3)."""
    backward = student.module(FLASH).flash_backward_pytorch
    for i in range(3):
        case = draw(trusted, rng, lengths=(1, 80), head_dims=HEAD_DIMS, causal=i % 2 == 0)
        x = case.inputs(rng.randrange(2**31))
        o, lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
        grads = backward(x["q"], x["k"], x["v"], o.float(), lse.float(), x["do"], case.is_causal,
                         q_tile=case.q_tile, k_tile=case.k_tile)
        assert type(grads) is tuple and len(grads) == 3, "flash_backward_pytorch must return (dq, dk, dv)"
        expected = trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)
        for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
            trusted.assert_close(f"{name} ({case})", got, want, torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_forward_is_exact_where_every_score_of_a_row_is_far_below_zero(student, trusted, rng):
    """At a random case whose every other query row has all its scores between about -175 and -700 (§5: m is
    the maximum so far, starting at -inf, so exp(s - m) is 1 for the row's largest score), o and lse match
    float64 within 1e-4 as for ordinary scores."""
    case = draw(trusted, rng, lengths=(2, 48), head_dims=HEAD_DIMS)
    x = trusted.negative_rows(case, rng.randrange(2**31))
    o, lse = student.module(FLASH).flash_forward_pytorch(x["q"], x["k"], x["v"], case.is_causal,
                                                         q_tile=case.q_tile, k_tile=case.k_tile)
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case}, rows of scores far below zero)", o, expected_o, torch.float32, trusted.fp32)
    trusted.assert_close(f"lse ({case}, rows of scores far below zero)", lse, expected_lse, torch.float32,
                         trusted.fp32)


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("flash_pytorch.flash_backward_pytorch")
def test_backward_returns_the_gradients_in_the_input_dtype(student, trusted, rng):
    """On bfloat16 q, k, v and do (o in bfloat16, lse float32) at a random case on the CPU, flash_backward_pytorch
    returns dq, dk and dv in bfloat16 ("in the dtypes of q, k, v": the float32 it works in is cast back), close
    to float64 autograd of the same inputs at bf16's tolerance. Autograd would cast a float32 gradient back
    silently, so only a direct call sees it."""
    backward = student.module(FLASH).flash_backward_pytorch
    case = draw(trusted, rng, lengths=(1, 48), head_dims=HEAD_DIMS)
    x = case.inputs(rng.randrange(2**31), torch.bfloat16)
    o, lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    grads = backward(x["q"], x["k"], x["v"], o.to(torch.bfloat16), lse.float(), x["do"], case.is_causal,
                     q_tile=case.q_tile, k_tile=case.k_tile)
    assert type(grads) is tuple and len(grads) == 3, "flash_backward_pytorch must return (dq, dk, dv)"
    expected = trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        trusted.assert_close(f"{name} ({case}, bfloat16)", got, want, torch.bfloat16, trusted.half[torch.bfloat16])


@pytest.mark.points(2)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_two_tilings_agree(student, trusted, rng):
    """Tile-size invariance: at a random case, two different random tilings give the same o and lse (forward) and the
    same dq, dk, dv (backward, from the first tiling's o and lse) within 2e-5: only the summation order
    may differ. The first tiling's results also match float64 (agreeing on a wrong answer earns nothing)."""
    flash = student.module(FLASH)
    case = draw(trusted, rng, lengths=(20, 80), head_dims=HEAD_DIMS)
    x = case.inputs(rng.randrange(2**31))
    tilings = [(case.q_tile, case.k_tile)]
    while len(tilings) < 2 or tilings[1] == tilings[0]:
        tilings[1:] = [ragged_tiles(rng, case.n_queries, case.n_keys, range(3, 70))]
    forwards = [flash.flash_forward_pytorch(x["q"], x["k"], x["v"], case.is_causal, q_tile=qt, k_tile=kt)
                for qt, kt in tilings]
    o, lse = forwards[0]
    backwards = [flash.flash_backward_pytorch(x["q"], x["k"], x["v"], o, lse, x["do"], case.is_causal, q_tile=qt,
                                              k_tile=kt) for qt, kt in tilings]
    close = dict(atol=2e-5, rtol=2e-5)
    where = f"{case}, tilings {tilings[0]} and {tilings[1]}"
    expected = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    expected += trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)
    for name, got, want in zip(("o", "lse", "dq", "dk", "dv"), (*forwards[0], *backwards[0]), expected):
        trusted.assert_close(f"{name} ({case}, tiling {tilings[0]})", got, want, torch.float32, trusted.fp32)
    for name, first, second in zip(("o", "lse"), *forwards):
        trusted.assert_close(f"{name} ({where})", second, first, torch.float32, close)
    for name, first, second in zip(("dq", "dk", "dv"), *backwards):
        trusted.assert_close(f"{name} ({where})", second, first, torch.float32, close)


@pytest.mark.points(1)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_no_leading_dims_at_all(student, trusted, rng):
    """With no leading dims (q of shape (n_queries, d)), reference.attention, flash_forward_pytorch and
    flash_backward_pytorch return the shapes of their inputs (lse (n_queries,)) and match float64."""
    case = trusted.draw(rng, lengths=(5, 60), head_dims=HEAD_DIMS, lead=())
    x = case.inputs(rng.randrange(2**31))
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    out = student.module("flash_attention.reference").attention(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"attention ({case})", out, expected_o, torch.float32, trusted.fp32)
    flash = student.module(FLASH)
    o, lse = flash.flash_forward_pytorch(x["q"], x["k"], x["v"], case.is_causal, q_tile=16, k_tile=16)
    trusted.assert_close(f"o ({case})", o, expected_o, torch.float32, trusted.fp32)
    trusted.assert_close(f"lse ({case})", lse, expected_lse, torch.float32, trusted.fp32)
    grads = flash.flash_backward_pytorch(x["q"], x["k"], x["v"], expected_o.float(), expected_lse.float(), x["do"],
                                         case.is_causal, q_tile=16, k_tile=16)
    expected = trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        trusted.assert_close(f"{name} ({case})", got, want, torch.float32, trusted.fp32)


# ---- FlashAttentionPytorch --------------------------------------------------------------------------


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
def test_autograd_function_matches_float64_at_random_shapes(student, trusted, rng):
    """FlashAttentionPytorch.apply's o and the gradients autograd gets through it for a random upstream
    gradient match float64 at two random cases (one causal, one not, n_queries != n_keys)."""
    for is_causal in (True, False):
        case = trusted.draw(rng, lengths=(1, 70), head_dims=HEAD_DIMS, causal=is_causal)
        x = case.inputs(rng.randrange(2**31))
        got = student.run(scenarios.pytorch_autograd, **x, is_causal=is_causal, device="cpu", loss="do")
        expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
        trusted.assert_close(f"o ({case})", got["o"], expected_o, torch.float32, trusted.fp32)
        for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], is_causal)):
            trusted.assert_close(f"{name} ({case})", got[name], want, torch.float32, trusted.fp32)


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
def test_autograd_function_saves_the_lse_and_no_score_matrix(student, trusted, rng):
    """At a random case, exactly one of the tensors FlashAttentionPytorch saves for backward has shape
    (..., n_queries): float32 and equal to float64 logsumexp within 1e-4 (it is the lse); and no saved
    tensor has as many elements as the (..., n_queries, n_keys) scores."""
    case = trusted.draw(rng, lengths=(40, 90), head_dims=(8, 16, 24))
    x = case.inputs(rng.randrange(2**31))
    got = student.run(scenarios.pytorch_autograd, **x, is_causal=case.is_causal, device="cpu", loss="do")
    rows = [t for t in got["saved"] if t["shape"] == [*case.lead, case.n_queries]]
    assert len(rows) == 1 == len(got["rows"]), (
        f"expected exactly one saved tensor of shape {[*case.lead, case.n_queries]} (the lse) at {case}; "
        f"saved: {got['saved']}")
    _, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"the saved (..., n_queries) tensor ({case})", got["rows"][0], expected_lse, torch.float32,
                         trusted.fp32)
    scores = torch.Size([*case.lead, case.n_queries, case.n_keys]).numel()
    for t in got["saved"]:
        assert torch.Size(t["shape"]).numel() < scores, \
            f"a saved tensor of shape {t['shape']} is as large as the score matrix ({case})"


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_forward_never_materialises_the_scores_near_n_1024(student, trusted, rng):
    """At random n_queries, n_keys near 1024 (960 to 1100; equal when causal), one head, d 16 or 32, tiles
    64 or 128: flash_forward_pytorch returns the right o, creates no tensor of n_queries·n_keys/4 elements or more and holds at
    most n_queries·n_keys bytes alive (a quarter of the float32 scores), measured by kernels.memory."""
    is_causal = rng.random() < 0.5
    n_queries = rng.randint(960, 1100)
    n_keys = n_queries if is_causal else rng.randint(960, 1100)
    sizes = dict(n_queries=n_queries, n_keys=n_keys, head_dim=rng.choice((16, 32)), is_causal=is_causal,
                 q_tile=rng.choice((64, 128)), k_tile=rng.choice((64, 128)))
    seed = rng.randrange(2**31)
    got = student.run(scenarios.pytorch_forward_memory, seed=seed, **sizes)
    assert type(got["result"]) in (tuple, list) and len(got["result"]) == 2, \
        f"expected the pair (o, lse), got {type(got['result']).__name__}"
    q, k, v = scenarios.seeded_randn(seed, [(1, n_queries, sizes["head_dim"]), (1, n_keys, sizes["head_dim"]),
                                            (1, n_keys, sizes["head_dim"])], "cpu")
    trusted.assert_close("o", got["result"][0], trusted.attention64(q, k, v, is_causal)[0], torch.float32,
                         trusted.fp32)
    scores = n_queries * n_keys
    assert got["largest_numel"] < scores // 4, \
        f"at {sizes} the forward created a tensor of {got['largest_numel']} elements; the scores have {scores}"
    assert got["peak_bytes"] <= scores, f"at {sizes} the forward held {got['peak_bytes']} bytes alive at once"


@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
def test_autograd_function_backward_never_materialises_the_scores_near_n_1024(student, trusted, rng):
    """At a random N near 1024 (992 to 1056, one head, d 16, causal), the backward autograd runs through
    FlashAttentionPytorch gives the right gradients, creates no tensor of N²/4 elements or more and holds at most N² bytes alive
    (a quarter of the float32 scores), measured by kernels.memory. (Its forward is flash_forward_pytorch,
    measured above at cheaper tiles: the tracker costs time per op.)"""
    n = rng.randint(992, 1056)
    seed = rng.randrange(2**31)
    got = student.run(scenarios.pytorch_autograd_memory, seed=seed, n=n, head_dim=16, is_causal=True)
    q, k, v, do = scenarios.seeded_randn(seed, [(1, n, 16)] * 4, "cpu")
    assert type(got["grads"]) is list and len(got["grads"]) == 3, "expected the gradients of q, k and v"
    for name, grad, expected in zip(("dq", "dk", "dv"), got["grads"], trusted.gradients64(q, k, v, do, True)):
        trusted.assert_close(name, grad, expected, torch.float32, trusted.fp32)
    assert got["largest_numel"] < n * n // 4, \
        f"at N = {n} the backward created a tensor of {got['largest_numel']} elements; the scores have {n * n}"
    assert got["peak_bytes"] <= n * n, f"at N = {n} the backward held {got['peak_bytes']} bytes alive at once"


# ---- Causal tiles above the diagonal are skipped ----------------------------------------------------


def query_outer_area(n: int, q_tile: int, k_tile: int) -> int:
    """Score elements visited when each query tile [start, end) runs the key tiles that start before end."""
    area = 0
    for start in range(0, n, q_tile):
        end = min(start + q_tile, n)
        area += (end - start) * min(-(-end // k_tile) * k_tile, n)
    return area


def key_outer_area(n: int, q_tile: int, k_tile: int) -> int:
    """Score elements visited when each key tile [start, end) runs the query tiles from the one holding start."""
    area = 0
    for start in range(0, n, k_tile):
        end = min(start + k_tile, n)
        area += (end - start) * (n - start // q_tile * q_tile)
    return area


def assert_skips(what: str, flops: dict, area: int, n: int, least: int) -> None:
    full, causal = flops["full"], flops["causal"]
    assert type(full) is int and type(causal) is int, f"{what}: expected int FLOP counts, got {flops}"
    assert full >= least, (f"{what}: the non-causal pass ran {full} matmul FLOPs, less than the {least} of its "
                           "products: compute the score tiles and their products with matmuls (@)")
    assert causal * n * n <= area * full, (
        f"{what}: the causal pass ran {causal / full:.1%} of the non-causal matmul FLOPs; skipping the tiles "
        f"above the diagonal leaves at most {area / (n * n):.1%}: the tiles above it are computed, not skipped")


def draw_skip_case(rng) -> dict:
    """N from 100 to 200 and tiles from 12 to 32, but never a last tile of one row or one key: a product
    whose contracted size is 1 is an outer product, which einsum runs as an elementwise multiply, not a
    matmul, so the counter would miss it in a correct einsum implementation (the correctness tests cover
    such lengths)."""
    q_tile, k_tile = rng.choice((12, 16, 24, 32)), rng.choice((12, 16, 24, 32))
    n = rng.choice([n for n in range(100, 201) if n % q_tile != 1 and n % k_tile != 1])
    return dict(n=n, head_dim=rng.choice((16, 32)), q_tile=q_tile, k_tile=k_tile)


@pytest.mark.edge
@pytest.mark.points(3)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
def test_causal_forward_skips_the_tiles_above_the_diagonal(student, rng):
    """At a random N (100 to 200) and random tiles (12 to 32), the causal forward runs at most the fraction of
    the non-causal matmul FLOPs that the tiles on or below the diagonal cover (counted by a dispatch mode:
    masking alone runs 100%), and the non-causal one at least the 4·N²·d of its two products."""
    sizes = draw_skip_case(rng)
    flops = student.run(scenarios.pytorch_matmul_flops, seed=rng.randrange(2**31), **sizes)
    n, d = sizes["n"], sizes["head_dim"]
    assert_skips(f"flash_forward_pytorch at {sizes}", flops["forward"],
                 query_outer_area(n, sizes["q_tile"], sizes["k_tile"]), n, 4 * n * n * d)


@pytest.mark.edge
@pytest.mark.points(2)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flash_pytorch.flash_backward_pytorch")
def test_causal_backward_skips_the_tiles_above_the_diagonal(student, rng):
    """At a random N and random tiles, the causal backward runs at most the fraction of the non-causal
    matmul FLOPs that the tiles on or below the diagonal cover (for either loop order: key tiles outside or
    query tiles outside), and the non-causal one at least 4·N²·d."""
    sizes = draw_skip_case(rng)
    flops = student.run(scenarios.pytorch_matmul_flops, seed=rng.randrange(2**31), **sizes)
    n, q_tile, k_tile = sizes["n"], sizes["q_tile"], sizes["k_tile"]
    area = max(key_outer_area(n, q_tile, k_tile), query_outer_area(n, q_tile, k_tile))
    assert_skips(f"flash_backward_pytorch at {sizes}", flops["backward"], area, n, 4 * n * n * sizes["head_dim"])


# ---- On a GPU only: half precision ------------------------------------------------------------------
# (tests/autograder/suites/test_suites_flash_attention.py runs this code on the CPU at tiny sizes, GPU = "cpu".)

GPU = "cuda"
HALF = [torch.bfloat16, torch.float16]
GPU_CASE = dict(lengths=(64, 300), head_dims=(32, 64, 80, 128))


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.flash_forward_pytorch")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_forward_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, flash_forward_pytorch on CUDA tensors in bf16/fp16 at a random case (lengths 64 to 300, d 32
    to 128, random tiles) returns o in that dtype and float32 lse, close to float64 of the same inputs."""
    case = trusted.draw(rng, **GPU_CASE, tiles=(32, 48, 64, 128))
    x = case.inputs(rng.randrange(2**31), dtype)
    got = student.run(scenarios.pytorch_forward, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal,
                      q_tile=case.q_tile, k_tile=case.k_tile, device=GPU)
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case})", got["o"], expected_o, dtype, trusted.half[dtype])
    trusted.assert_close(f"lse ({case})", got["lse"], expected_lse, torch.float32, trusted.half[dtype])


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("flash_pytorch.FlashAttentionPytorch")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_autograd_function_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, FlashAttentionPytorch's o and gradients on CUDA tensors in bf16/fp16 at a random case are in
    that dtype and close to float64 autograd of the same inputs."""
    case = trusted.draw(rng, **GPU_CASE)
    x = case.inputs(rng.randrange(2**31), dtype)
    got = student.run(scenarios.pytorch_autograd, **x, is_causal=case.is_causal, device=GPU, loss="do")
    expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case})", got["o"], expected_o, dtype, trusted.half[dtype])
    for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)):
        trusted.assert_close(f"{name} ({case})", got[name], want, dtype, trusted.half[dtype])
