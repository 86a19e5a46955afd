"""Hidden: flash_triton.py in float32 at tiny random shapes (the interpreter on a CPU), and on a GPU in bf16
and fp16 and for speed.

That a Triton kernel computed a result rests on the static rules of Triton tasks, which the grader
applies to the source before any test runs (autograder/static/triton_rules.py, the suite's TRITON_RULES: host
code allocates, reshapes and launches; the arithmetic is in @triton.jit functions): a submission that
breaks them fails every test of flash_triton. What the worker reports besides the results (the Triton
kernels launched, the computing torch ops recorded, the tl.dot calls per program under the
interpreter) is said by the student's code: it can only take points away, never earn them alone.

Speed is measured here, never in the worker: the grader's clock times a whole call that runs the
student's function on `ITERATIONS` fresh inputs (drawn from seeds both sides can reproduce) and
synchronises the device; the same loop with the baseline runs in this process on the same GPU; the
two alternate five times and the median ratio counts. The call returns one iteration's output (the
grader picks which) so that a fast wrong answer fails.
"""

import math

import pytest
import torch

from autograder.suites.flash_attention import scenarios
from kernels.device import default_device

pytestmark = [pytest.mark.visibility("hidden"), pytest.mark.triton]

TRITON = "flash_attention.flash_triton"
DEVICE = str(default_device())
TINY = dict(lengths=(1, 48), head_dims=(16, 24, 32), lead_sizes=(1, 2))


def assert_triton_did_it(what: str, launches: list, torch_ops: list) -> None:
    """The worker's own account: a kernel launched, no torch op but allocations, views and copies
    (kernels.host_ops). Necessary, not sufficient."""
    assert launches, f"{what}: no Triton kernel was launched (kernels.launches saw none)"
    assert not torch_ops, (f"{what}: torch computed in the host code ({', '.join(torch_ops)}); host code allocates, "
                           "reshapes and launches, the kernels compute (handout §8)")


@pytest.mark.points(4)
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_forward_matches_float64_at_random_shapes(student, trusted, rng):
    """flash_forward_triton's o and lse in float32 match float64 attention within 1e-4 at two tiny random
    cases (leading dims of rank 1 to 3, lengths 1 to 48, d 16, 24 or 32, tiles 16 or 32), computed by a
    launched Triton kernel with no torch matmul or softmax."""
    for _ in range(2):
        case = trusted.draw(rng, **TINY, tiles=(16, 32))
        x = case.inputs(rng.randrange(2**31))
        got = student.run(scenarios.triton_forward, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal,
                          q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
        expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
        trusted.assert_close(f"o ({case})", got["o"], expected_o, torch.float32, trusted.fp32)
        trusted.assert_close(f"lse ({case})", got["lse"], expected_lse, torch.float32, trusted.fp32)
        assert_triton_did_it(f"flash_forward_triton ({case})", got["launches"], got["torch_ops"])


@pytest.mark.points(1)
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_forward_is_exact_where_every_score_of_a_row_is_far_below_zero(student, trusted, rng):
    """At a tiny random case whose every other query row has all its scores between about -175 and -700 (the
    running maximum starts at -inf: tl.full(..., float("-inf"))), o and lse match float64 within 1e-4."""
    case = trusted.draw(rng, **{**TINY, "lengths": (2, 48)}, tiles=(16, 32))
    x = trusted.negative_rows(case, rng.randrange(2**31))
    got = student.run(scenarios.triton_forward, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal,
                      q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case}, rows of scores far below zero)", got["o"], expected_o, torch.float32,
                         trusted.fp32)
    trusted.assert_close(f"lse ({case}, rows of scores far below zero)", got["lse"], expected_lse, torch.float32,
                         trusted.fp32)


def views_case(trusted, rng) -> tuple:
    """A tiny random case of 2 or 3 heads and its inputs as the views scenarios take them: q (n_queries, heads,
    d), k and v (n_keys, d), do (heads, n_queries, d); and the same values as dense (heads, ..., d) tensors."""
    heads = rng.randint(2, 3)
    case = trusted.draw(rng, **TINY, tiles=(16, 32), lead=(heads,))
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    q = torch.randn(case.n_queries, heads, case.head_dim, generator=generator)
    k, v = (torch.randn(case.n_keys, case.head_dim, generator=generator) for _ in range(2))
    do = torch.randn(heads, case.n_queries, case.head_dim, generator=generator)
    dense = {"q": q.transpose(0, 1).contiguous(), "k": k.expand(heads, *k.shape).contiguous(),
             "v": v.expand(heads, *v.shape).contiguous(), "do": do}
    return case, {"q": q, "k": k, "v": v, "do": do}, dense


def assert_not_dense(got: dict, case) -> None:
    heads, d = case.lead[0], case.head_dim
    assert got["strides"] == [[d, heads * d, 1], [0, d, 1]], f"the views were not made: strides {got['strides']}"


@pytest.mark.points(1)
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_forward_takes_a_transposed_q_and_an_expanded_k_and_v(student, trusted, rng):
    """At a tiny random case of 2 or 3 heads, q passed as a transposed view (heads split from one projection:
    strides (d, heads·d, 1)) and k, v expanded over the heads (stride 0, one key/value head shared): o and
    lse match float64 within 1e-4 (§8: pass every tensor's strides rather than assuming contiguity)."""
    case, x, dense = views_case(trusted, rng)
    got = student.run(scenarios.triton_forward_views, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal,
                      q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
    assert_not_dense(got, case)
    expected_o, expected_lse = trusted.attention64(dense["q"], dense["k"], dense["v"], case.is_causal)
    trusted.assert_close(f"o ({case}, q transposed, k and v expanded)", got["o"], expected_o, torch.float32,
                         trusted.fp32)
    trusted.assert_close(f"lse ({case}, q transposed, k and v expanded)", got["lse"], expected_lse, torch.float32,
                         trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("flash_triton.flash_backward_triton")
def test_triton_backward_takes_a_transposed_q_and_an_expanded_k_and_v(student, trusted, rng):
    """The same views given to flash_backward_triton (o, lse float64-exact, do dense): dq, dk and dv, each of
    its input's shape (dk and dv per head: what the expanded tensors' elements receive), match float64 autograd
    within 1e-4. Written with the strides of an expanded k, every head's dk would land in one place."""
    case, x, dense = views_case(trusted, rng)
    o, lse = trusted.attention64(dense["q"], dense["k"], dense["v"], case.is_causal)
    got = student.run(scenarios.triton_backward_views, q=x["q"], k=x["k"], v=x["v"], o=o.float(), lse=lse.float(),
                      do=x["do"], is_causal=case.is_causal, q_tile=case.q_tile, k_tile=case.k_tile, device=DEVICE)
    assert_not_dense(got, case)
    expected = trusted.gradients64(dense["q"], dense["k"], dense["v"], dense["do"], case.is_causal)
    for name, want in zip(("dq", "dk", "dv"), expected):
        trusted.assert_close(f"{name} ({case}, q transposed, k and v expanded)", got[name], want, torch.float32,
                             trusted.fp32)


@pytest.mark.points(4)
@pytest.mark.task("flash_triton.flash_backward_triton")
def test_triton_backward_matches_float64_autograd_at_random_shapes(student, trusted, rng):
    """flash_backward_triton's dq, dk, dv in float32, given float64-exact o and lse, match float64 autograd
    within 1e-4 at two tiny random cases, computed by launched Triton kernels with no torch matmul."""
    for _ in range(2):
        case = trusted.draw(rng, **TINY, tiles=(16, 32))
        x = case.inputs(rng.randrange(2**31))
        o, lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
        got = student.run(scenarios.triton_backward, q=x["q"], k=x["k"], v=x["v"], o=o.float(), lse=lse.float(),
                          do=x["do"], is_causal=case.is_causal, q_tile=case.q_tile, k_tile=case.k_tile,
                          device=DEVICE)
        for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"],
                                                                      case.is_causal)):
            trusted.assert_close(f"{name} ({case})", got[name], want, torch.float32, trusted.fp32)
        assert_triton_did_it(f"flash_backward_triton ({case})", got["launches"], got["torch_ops"])


@pytest.mark.points(3)
@pytest.mark.task("flash_triton.FlashAttentionTriton")
def test_triton_autograd_function_matches_float64_at_a_random_shape(student, trusted, rng):
    """FlashAttentionTriton.apply (default tiles) and the gradients autograd gets through it match float64
    at a tiny random case; its forward and its backward each launch Triton kernels and run no torch
    matmul or softmax."""
    case = trusted.draw(rng, **TINY)
    x = case.inputs(rng.randrange(2**31))
    got = student.run(scenarios.triton_autograd, **x, is_causal=case.is_causal, device=DEVICE, loss="do")
    expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case})", got["o"], expected_o, torch.float32, trusted.fp32)
    for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)):
        trusted.assert_close(f"{name} ({case})", got[name], want, torch.float32, trusted.fp32)
    for part in ("forward", "backward"):
        assert_triton_did_it(f"FlashAttentionTriton's {part} ({case})", got["launches"][part], got["torch_ops"][part])


@pytest.mark.points(2)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flash_triton.FlashAttentionTriton")
def test_triton_autograd_function_takes_an_expanded_gradient(student, trusted, rng):
    """The gradients of FlashAttentionTriton.apply(...).sum() match float64 at a tiny random case: autograd
    hands backward an expanded, stride-0 gradient of ones, which the kernels must read correctly."""
    case = trusted.draw(rng, **TINY)
    x = case.inputs(rng.randrange(2**31))
    got = student.run(scenarios.triton_autograd, **x, is_causal=case.is_causal, device=DEVICE, loss="sum")
    ones = torch.ones_like(x["do"])
    for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], ones, case.is_causal)):
        trusted.assert_close(f"{name} of o.sum() ({case})", got[name], want, torch.float32, trusted.fp32)


def tiles_at_or_below_the_diagonal(n: int, q_tile: int, k_tile: int) -> list[int]:
    """For each query tile of a causal n x n attention, the key tiles it must visit: those holding a key
    j <= one of its rows, that is up to its last row."""
    return [(min(n, start + q_tile) - 1) // k_tile + 1 for start in range(0, n, q_tile)]


def dots_per_program(launches: list, what: str) -> list[int]:
    """The tl.dot calls of each program of the one launch that made any, sorted."""
    busy = [launch for launch in launches if launch["dots"]]
    assert len(busy) == 1, (f"{what}: {len(busy)} kernel launches called tl.dot; the forward is one kernel "
                            "(handout §8)")
    return sorted(program[-1] for program in busy[0]["dots"])


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_causal_forward_skips_the_tiles_above_the_diagonal(student, trusted, rng):
    """Under the interpreter, flash_forward_triton's programs make tl.dot calls in proportion to the key
    tiles they visit: c·T + e each without the mask (T key tiles), c·t + e with it, where t counts the
    key tiles at or below the diagonal of the program's query tile (c >= 1 dots per tile), at a random
    causal case (lengths 70 to 100, tiles 16 or 32); both results match float64. A kernel that loads
    the tiles above the diagonal and masks them makes c·T calls everywhere and loses these points."""
    case = trusted.draw(rng, lengths=(70, 100), head_dims=(16,), tiles=(16, 32), causal=True, lead=(2,))
    x = case.inputs(rng.randrange(2**31))
    got = student.run(scenarios.triton_forward_dots, q=x["q"], k=x["k"], v=x["v"], q_tile=case.q_tile,
                      k_tile=case.k_tile, device=DEVICE)
    for mode, is_causal in (("full", False), ("causal", True)):
        expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], is_causal)
        trusted.assert_close(f"o ({mode}, {case})", got[mode]["o"], expected_o, torch.float32, trusted.fp32)
        trusted.assert_close(f"lse ({mode}, {case})", got[mode]["lse"], expected_lse, torch.float32, trusted.fp32)
    if got["full"]["launches"] is None:
        pytest.skip("tl.dot calls are counted under Triton's interpreter: the grader counts them on any machine")
    n, batch = case.n_queries, math.prod(case.lead)
    tiles = sorted(tiles_at_or_below_the_diagonal(n, case.q_tile, case.k_tile) * batch)
    total = -(-n // case.k_tile)
    full = dots_per_program(got["full"]["launches"], f"flash_forward_triton ({case}, not causal)")
    causal = dots_per_program(got["causal"]["launches"], f"flash_forward_triton ({case})")
    assert len(full) == len(causal) == len(tiles), (
        f"flash_forward_triton ({case}): {len(full)} and {len(causal)} programs called tl.dot (not causal, "
        f"causal); one per query tile and head makes {len(tiles)}")
    per_tile = (causal[-1] - causal[0]) / (tiles[-1] - tiles[0])
    extra = causal[0] - per_tile * tiles[0]
    follows = (per_tile >= 1 and per_tile == int(per_tile) and extra >= 0
               and causal == [extra + per_tile * t for t in tiles] and set(full) == {extra + per_tile * total})
    assert follows, (
        f"flash_forward_triton ({case}): its programs called tl.dot {sorted(set(full))} times each without the "
        f"mask and {causal} times with it; a program whose query tile has t of the {total} key tiles at or below "
        f"the diagonal (t = {tiles}) should call it in proportion to t: the tiles above the diagonal must be "
        "skipped (never loaded), not masked (handout §8)")


def follows_the_tiles(counts: list[int], full: list[int], tiles: list[int], total: int) -> bool:
    """Do the programs' tl.dot calls grow in proportion to the tiles they visit: c·t + e with the mask (t
    tiles visited, sorted alike), c·total + e each without it (c >= 1 a whole number, e >= 0)?"""
    per_tile = (counts[-1] - counts[0]) / (tiles[-1] - tiles[0])
    extra = counts[0] - per_tile * tiles[0]
    return (per_tile >= 1 and per_tile == int(per_tile) and extra >= 0
            and counts == [extra + per_tile * t for t in tiles] and set(full) == {extra + per_tile * total})


@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("flash_triton.flash_backward_triton")
def test_triton_causal_backward_skips_the_tiles_above_the_diagonal(student, trusted, rng):
    """Under the interpreter, each backward kernel that calls tl.dot (dK/dV and dQ, or one kernel doing all)
    makes, per program, tl.dot calls in proportion to the tiles it visits: c·T + e each without the mask,
    c·t + e with it, where t counts the tiles on the causal side of the diagonal of the program's own
    tile (q_tile = k_tile, so a key tile and a query tile alike visit 1 to T tiles), at a random causal
    case (lengths 70 to 100, tiles 16 or 32, o and lse exact); dq, dk and dv match float64 in both
    modes. A kernel that loads the tiles past the diagonal and masks them makes c·T calls everywhere
    and loses these points (handout §9)."""
    case = trusted.draw(rng, lengths=(70, 100), head_dims=(16,), tiles=(16, 32), causal=True, lead=(2,))
    x, tile = case.inputs(rng.randrange(2**31)), case.q_tile
    n, batch, total = case.n_queries, math.prod(case.lead), -(-case.n_queries // tile)
    where = f"n {n}, leading dims {list(case.lead)}, d {case.head_dim}, q_tile = k_tile = {tile}"
    forward = {mode: trusted.attention64(x["q"], x["k"], x["v"], is_causal) for mode, is_causal in
               (("full", False), ("causal", True))}
    got = student.run(scenarios.triton_backward_dots, q=x["q"], k=x["k"], v=x["v"], do=x["do"],
                      o={mode: o.float() for mode, (o, _) in forward.items()},
                      lse={mode: lse.float() for mode, (_, lse) in forward.items()}, tile=tile, device=DEVICE)
    for mode, is_causal in (("full", False), ("causal", True)):
        wants = trusted.gradients64(x["q"], x["k"], x["v"], x["do"], is_causal)
        for name, want in zip(("dq", "dk", "dv"), wants):
            trusted.assert_close(f"{name} ({mode}, {where})", got[mode][name], want, torch.float32, trusted.fp32)
    if got["full"]["launches"] is None:
        pytest.skip("tl.dot calls are counted under Triton's interpreter: the grader counts them on any machine")
    tiles = sorted(list(range(1, total + 1)) * batch)
    full = [launch for launch in got["full"]["launches"] if launch["dots"]]
    causal = [launch for launch in got["causal"]["launches"] if launch["dots"]]
    assert causal and len(full) == len(causal), (
        f"flash_backward_triton ({where}): {len(full)} and {len(causal)} kernel launches called tl.dot (not causal, "
        "causal); the same kernels should run in both")
    for number, (plain, masked) in enumerate(zip(full, causal), 1):
        plain_counts = sorted(program[-1] for program in plain["dots"])
        counts = sorted(program[-1] for program in masked["dots"])
        what = f"flash_backward_triton ({where}), the kernel launch {number} of {len(causal)} that calls tl.dot"
        assert len(counts) == len(plain_counts) == len(tiles), (
            f"{what}: {len(plain_counts)} and {len(counts)} programs called tl.dot (not causal, causal); one per "
            f"tile of {n} rows and head makes {len(tiles)} (handout §9)")
        assert follows_the_tiles(counts, plain_counts, tiles, total), (
            f"{what}: its programs called tl.dot {sorted(set(plain_counts))} times each without the mask and "
            f"{counts} times with it; a program whose tile has t of the {total} tiles on the causal side of the "
            f"diagonal (t = {tiles}) should call it in proportion to t: the tiles past the diagonal must be "
            "skipped (never loaded), not masked (handout §9)")


# ---- On a GPU only: half precision and speed --------------------------------------------------------
# (tests/autograder/suites/test_suites_flash_attention.py runs this code on the CPU at tiny sizes, GPU = "cpu".)

GPU = "cuda"
HALF = [torch.bfloat16, torch.float16]
GPU_CASE = dict(lengths=(64, 333), head_dims=(32, 64, 80, 128))


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("flash_triton.flash_forward_triton")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_triton_forward_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, flash_forward_triton in bf16/fp16 (default tiles) at a random case returns o in that dtype and
    float32 lse, close to float64 attention of the same inputs."""
    case = trusted.draw(rng, **GPU_CASE)
    x = case.inputs(rng.randrange(2**31), dtype)
    got = student.run(scenarios.triton_forward, q=x["q"], k=x["k"], v=x["v"], is_causal=case.is_causal, q_tile=None,
                      k_tile=None, device=GPU)
    expected_o, expected_lse = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case})", got["o"], expected_o, dtype, trusted.half[dtype])
    trusted.assert_close(f"lse ({case})", got["lse"], expected_lse, torch.float32, trusted.half[dtype])
    assert got["launches"], f"flash_forward_triton ({case}) launched no Triton kernel"


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("flash_triton.FlashAttentionTriton")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_triton_gradients_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, FlashAttentionTriton's o and gradients in bf16/fp16 at a random case are in that dtype and
    close to float64 autograd of the same inputs."""
    case = trusted.draw(rng, **GPU_CASE)
    x = case.inputs(rng.randrange(2**31), dtype)
    got = student.run(scenarios.triton_autograd, **x, is_causal=case.is_causal, device=GPU, loss="do")
    expected_o, _ = trusted.attention64(x["q"], x["k"], x["v"], case.is_causal)
    trusted.assert_close(f"o ({case})", got["o"], expected_o, dtype, trusted.half[dtype])
    for name, want in zip(("dq", "dk", "dv"), trusted.gradients64(x["q"], x["k"], x["v"], x["do"], case.is_causal)):
        trusted.assert_close(f"{name} ({case})", got[name], want, dtype, trusted.half[dtype])


# Speed: CS336's benchmark shape at N = 4096 (batch 1, 16 heads, d 64, bf16, causal).
SPEED = dict(lead=[1, 16], n=4096, head_dim=64, dtype=torch.bfloat16, is_causal=True)
ITERATIONS = {False: 50, True: 20}  # calls per timed round: forward; forward + backward
CHECKED_ROWS = 64


def rows_attention64(q, k, v, rows: list, is_causal: bool) -> torch.Tensor:
    """float64 attention output of the given query rows of one head (q, k, v of shape (n, d))."""
    scores = q[rows].double() @ k.double().T / math.sqrt(q.shape[-1])
    if is_causal:
        scores = scores.masked_fill(torch.arange(k.shape[0])[None, :] > torch.tensor(rows)[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


def checked_inputs(draw: dict) -> list[torch.Tensor]:
    """The checked iteration's q, k, v, do for the checked head, on the CPU (as the worker drew them)."""
    shape = (*SPEED["lead"], SPEED["n"], SPEED["head_dim"])
    tensors = scenarios.seeded_randn(draw["seed"] + draw["check"], [shape] * 4, GPU, SPEED["dtype"])
    return [t.reshape(-1, SPEED["n"], SPEED["head_dim"])[draw["head"]].cpu() for t in tensors]


def timed_ratio(student, trusted, rng, backward: bool, baseline) -> tuple[float, list]:
    """The median ratio of the student's time to `baseline`'s over 5 alternations, after checking the
    student's output of a random iteration (random head, random rows) against float64.

    One untimed call first compiles and autotunes the student's kernels at the timed shape, and one
    untimed baseline iteration warms the baseline.
    """
    iterations, shape = ITERATIONS[backward], (*SPEED["lead"], SPEED["n"], SPEED["head_dim"])
    heads = math.prod(SPEED["lead"])
    draw = dict(seed=rng.randrange(2**30), check=rng.randrange(iterations), head=rng.randrange(heads),
                rows=sorted(rng.sample(range(SPEED["n"]), CHECKED_ROWS)))
    call = dict(**SPEED, **draw, backward=backward, device=GPU)
    student.run(scenarios.timed_triton, **{**call, "check": 0, "iterations": 1})
    trusted.loop(baseline, draw["seed"], shape, SPEED["dtype"], 1, GPU)
    outputs = []

    def student_seconds() -> float:
        elapsed, result = trusted.seconds(lambda: student.run(scenarios.timed_triton, **call, iterations=iterations))
        outputs.append(result)
        return elapsed

    ratio, ratios = trusted.median_ratio(
        student_seconds, lambda: trusted.loop(baseline, draw["seed"], shape, SPEED["dtype"], iterations, GPU))
    q, k, v, do = checked_inputs(draw)
    if backward:
        expected = dict(zip(("dq", "dk", "dv"), (g[draw["rows"]] for g in trusted.gradients64(q, k, v, do, True))))
    else:
        expected = {"o": rows_attention64(q, k, v, draw["rows"], SPEED["is_causal"])}
    for name, want in expected.items():
        trusted.assert_close(f"{name} of the timed call (head {draw['head']}, iteration {draw['check']})",
                             outputs[-1].get(name), want, SPEED["dtype"], trusted.half[SPEED["dtype"]])
    return ratio, ratios


@pytest.mark.gpu
@pytest.mark.points(3)
@pytest.mark.edge
@pytest.mark.task("flash_triton.flash_forward_triton")
def test_triton_forward_is_several_times_faster_than_naive_attention_on_gpu(student, trusted, rng):
    """On a GPU, flash_forward_triton (bf16, batch 1, 16 heads, N 4096, d 64, causal) runs at least 3 times
    as fast as naive attention (scores, mask, softmax, product, in bf16) run in the grader on the same
    inputs: the grader's clock around 50 calls, median of 5 alternations; a random call's output is right."""
    ratio, ratios = timed_ratio(student, trusted, rng, False, lambda q, k, v, do: trusted.naive(q, k, v, True))
    assert ratio <= 1 / 3, (f"flash_forward_triton took {ratio:.2f}x the naive attention's time (median of "
                            f"{[round(r, 3) for r in ratios]}); it must take at most 1/3 of it")


@pytest.mark.gpu
@pytest.mark.points(3)
@pytest.mark.visibility("after_due_date")
@pytest.mark.task("flash_triton.FlashAttentionTriton")
def test_triton_forward_backward_keeps_up_with_the_reference_on_gpu(student, trusted, reference, rng):
    """On a GPU, forward + backward through FlashAttentionTriton (bf16, batch 1, 16 heads, N 4096, d 64,
    causal) takes at most 2 times as long as the reference solution's, both timed in the grader on the
    same inputs (20 steps a round, median of 5 alternations); a random step's gradients are right."""
    function = reference.module("flash_attention.flash_triton").FlashAttentionTriton

    def reference_step(q, k, v, do):
        leaves = [t.requires_grad_() for t in (q, k, v)]
        torch.autograd.grad(function.apply(*leaves, True), leaves, do)

    ratio, ratios = timed_ratio(student, trusted, rng, True, reference_step)
    assert ratio <= 2, (f"forward + backward took {ratio:.2f}x the reference's time (median of "
                        f"{[round(r, 3) for r in ratios]}); the limit is 2x")
