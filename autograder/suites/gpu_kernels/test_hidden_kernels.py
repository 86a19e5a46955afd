"""Hidden: gelu_triton, softmax_triton and matmul_triton at random shapes, strides and block sizes, in float32
through the interpreter on a CPU (bf16 and fp16 too: the dtype kept), and on a GPU in bf16/fp16 and for speed.

That a Triton kernel computed a result rests on the static rules of Triton tasks, applied to the source
before any test runs (autograder/static/triton_rules.py, the suite's TRITON_RULES): a submission that breaks
them fails every test of that kernel. What the worker reports besides the results (the Triton kernels
launched, the computing torch ops recorded) is said by the student's code: it can only take points away.

Speed is measured here, never in the worker: the grader's clock times a whole call that runs the
student's function on `ITERATIONS` fresh inputs (drawn from seeds both sides can reproduce) and
synchronises the device; the same loop with the baseline runs in this process on the same GPU. Both
sides are timed the same way: each loop's time less the time of the same loop doing nothing, timed
where that loop ran (for the student, the same worker call with no kernel: the round trip and the
drawing; for the baseline, the drawing in this process). The two alternate five times and the median
counts. The call returns part of one iteration's output (the grader picks which) so that a fast wrong
answer fails.
"""

import pytest
import torch

from autograder.suites.gpu_kernels import scenarios
from kernels.device import default_device

pytestmark = [pytest.mark.visibility("hidden"), pytest.mark.triton]

DEVICE = str(default_device())
ACTIVATIONS = (None, "gelu", "relu")


def assert_one_kernel(what: str, got: dict) -> None:
    """The worker's own account: one Triton kernel (by name) launched, no torch op computed. Necessary,
    not sufficient."""
    names = sorted(set(got["launches"]))
    assert len(names) == 1, f"{what}: expected one Triton kernel, got {names or 'none'} (handout §1)"
    assert not got["torch_ops"], f"{what}: torch computed ({', '.join(got['torch_ops'])}); Triton must (handout §1)"


# ---- GeLU ---------------------------------------------------------------------------------------------


@pytest.mark.points(3)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_matches_float64_at_random_shapes_and_strides(student, trusted, rng):
    """gelu_triton in float32 matches float64 GeLU (tanh) within 1e-4 at three random shapes (rank 1 to 3,
    sizes 1 to 40, values up to ±12) and views (dense, transposed, a column step, a storage offset; the
    first one strided), launching one Triton kernel and no torch arithmetic."""
    for i in range(3):
        shape = trusted.draw_shape(rng)
        stored, view = trusted.draw_view(rng, shape, strided=i == 0)
        x = trusted.randn(rng.randrange(2**31), *stored, scale=4.0)
        got = student.run(scenarios.gelu, x=x, view=view, device=DEVICE)
        what = f"gelu_triton (shape {shape}, view {view})"
        trusted.assert_close(what, got["out"], trusted.gelu64(trusted.view(x, view)), torch.float32, trusted.fp32)
        assert_one_kernel(what, got)


@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gelu_keeps_a_half_precision_dtype(student, trusted, rng, dtype):
    """gelu_triton of a bf16/fp16 tensor (a random shape, on the device the tests run on) returns that dtype,
    close to float64 GeLU of the same inputs."""
    shape = trusted.draw_shape(rng, ranks=(2,))
    x = trusted.randn(rng.randrange(2**31), *shape, dtype=dtype, scale=3.0)
    got = student.run(scenarios.gelu, x=x, view=None, device=DEVICE)
    trusted.assert_close(f"gelu_triton ({dtype}, {shape})", got["out"], trusted.gelu64(x), dtype, trusted.half[dtype])


# ---- Softmax ------------------------------------------------------------------------------------------


@pytest.mark.points(3)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_matches_float64_at_random_shapes_views_and_blocks(student, trusted, rng):
    """softmax_triton in float32 matches float64 within 1e-4 at three random cases: leading dims of rank 0 to
    2, rows of 2 to 300 columns, views (the first strided), and block sizes 16, 32 or 64 (most rows span
    several blocks) or the default; one Triton kernel, no torch arithmetic."""
    for i in range(3):
        shape = (*trusted.draw_shape(rng, ranks=(0, 1, 2), sizes=(1, 6)), rng.randint(2, 300))
        stored, view = trusted.draw_view(rng, shape, strided=i == 0)
        block_size = rng.choice((16, 32, 64, None))
        x = trusted.randn(rng.randrange(2**31), *stored, scale=5.0)
        got = student.run(scenarios.softmax, x=x, view=view, block_size=block_size, device=DEVICE)
        what = f"softmax_triton (shape {shape}, view {view}, block_size {block_size})"
        trusted.assert_close(what, got["out"], trusted.softmax64(trusted.view(x, view)), torch.float32, trusted.fp32)
        assert_one_kernel(what, got)


@pytest.mark.points(2)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_is_stable_where_exp_overflows(student, trusted, rng):
    """softmax_triton of rows with values of a random scale from 100 to 10000 (exp overflows past 89 in
    float32), whose maximum sits at a random column, matches float64 with blocks of 16 and with the default
    block (one block for these rows, at most 120 columns): no inf, no nan."""
    for block_size in (16, None):
        rows, n = rng.randint(1, 4), rng.randint(40, 120)
        x = trusted.randn(rng.randrange(2**31), rows, n, scale=rng.uniform(100, 10000))
        x[:, rng.randrange(n)] = float(x.abs().max()) + 1
        got = student.run(scenarios.softmax, x=x, view=None, block_size=block_size, device=DEVICE)
        trusted.assert_close(f"softmax_triton ({rows}x{n}, block_size {block_size})", got["out"],
                             trusted.softmax64(x), torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_is_exact_where_every_value_of_a_row_is_far_below_zero(student, trusted, rng):
    """softmax_triton of rows whose every value lies between -C and -C + 8 for a random C from 200 to 2000
    (exact in float32: multiples of 1/8) matches float64 with blocks of 16 and with the default block. A
    running maximum started at 0 instead of -inf underflows there (exp(x - 0) = 0 for every column: a sum of
    0, nan); the maximum so far gives the softmax up to rounding."""
    for block_size in (16, None):
        rows, n = rng.randint(1, 4), rng.randint(40, 120)
        generator = torch.Generator().manual_seed(rng.randrange(2**31))
        x = torch.randint(0, 64, (rows, n), generator=generator).float() / 8 - rng.randint(200, 2000)
        got = student.run(scenarios.softmax, x=x, view=None, block_size=block_size, device=DEVICE)
        trusted.assert_close(f"softmax_triton ({rows}x{n} far below zero, block_size {block_size})", got["out"],
                             trusted.softmax64(x), torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_softmax_keeps_a_half_precision_dtype(student, trusted, rng, dtype):
    """softmax_triton of a bf16/fp16 tensor (random rows, blocks of 16) returns that dtype, within the dtype's
    relative tolerance of float64 (atol 1e-6)."""
    shape = (rng.randint(1, 5), rng.randint(20, 100))
    x = trusted.randn(rng.randrange(2**31), *shape, dtype=dtype, scale=3.0)
    got = student.run(scenarios.softmax, x=x, view=None, block_size=16, device=DEVICE)
    trusted.assert_close(f"softmax_triton ({dtype}, {shape})", got["out"], trusted.softmax64(x), dtype,
                         trusted.softmax_half[dtype])


# ---- Matmul -------------------------------------------------------------------------------------------


def draw_matmul(trusted, rng, sizes=(1, 100), dtype=torch.float32, transposed: bool = False) -> dict:
    """Random M, N, K in `sizes`, each operand stored transposed or not (both, with `transposed`), scaled by
    1/sqrt(K)."""
    m, n, k = (rng.randint(*sizes) for _ in range(3))
    a_t, b_t = transposed or rng.random() < 0.5, transposed or rng.random() < 0.5
    a = trusted.randn(rng.randrange(2**31), *((k, m) if a_t else (m, k)), dtype=dtype, scale=k ** -0.5)
    b = trusted.randn(rng.randrange(2**31), *((n, k) if b_t else (k, n)), dtype=dtype)
    return dict(a=a, b=b, a_view="t" if a_t else None, b_view="t" if b_t else None)


def matmul_case(x: dict, bias, activation) -> str:
    a = x["a"].T if x["a_view"] else x["a"]
    n = x["b"].shape[0 if x["b_view"] else 1]
    stored = [f"{name} transposed" for name in ("a", "b") if x[f"{name}_view"]]
    return (f"M {a.shape[0]}, N {n}, K {a.shape[1]}, {', '.join(stored) or 'dense operands'}, "
            f"bias {'yes' if bias is not None else 'no'}, activation {activation}")


def expected_matmul(trusted, x: dict, bias, activation):
    return trusted.matmul64(trusted.view(x["a"], x["a_view"]), trusted.view(x["b"], x["b_view"]), bias, activation)


@pytest.mark.points(3)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_matches_float64_at_random_shapes(student, trusted, rng):
    """matmul_triton(a, b) in float32 matches float64 within 1e-4 at three random cases (M, N, K from 1 to 100,
    operands transposed or not, both in the first); one Triton kernel, no torch arithmetic."""
    for i in range(3):
        x = draw_matmul(trusted, rng, transposed=i == 0)
        got = student.run(scenarios.matmul, **x, bias=None, activation=None, device=DEVICE)
        what = f"matmul_triton ({matmul_case(x, None, None)})"
        trusted.assert_close(what, got["out"], expected_matmul(trusted, x, None, None), torch.float32, trusted.fp32)
        assert_one_kernel(what, got)


@pytest.mark.points(3)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_fused_epilogue_at_random_shapes(student, trusted, rng):
    """matmul_triton(a, b, bias, activation) matches float64 activation(a @ b + bias) at a random case for each
    activation (None, "gelu", "relu"; bias added first); one Triton kernel, no torch arithmetic."""
    for activation in ACTIVATIONS:
        x = draw_matmul(trusted, rng, sizes=(1, 80))
        n = x["b"].shape[0 if x["b_view"] else 1]
        bias = trusted.randn(rng.randrange(2**31), n)
        got = student.run(scenarios.matmul, **x, bias=bias, activation=activation, device=DEVICE)
        what = f"matmul_triton ({matmul_case(x, bias, activation)})"
        trusted.assert_close(what, got["out"], expected_matmul(trusted, x, bias, activation), torch.float32,
                             trusted.fp32)
        assert_one_kernel(what, got)


@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_matmul_keeps_a_half_precision_dtype(student, trusted, rng, dtype):
    """matmul_triton of bf16/fp16 operands (random small shapes, a bias and ReLU) returns that dtype, close to
    the float64 result (under the interpreter, tl.dot's operands upcast to fp32: handout §4)."""
    x = draw_matmul(trusted, rng, sizes=(1, 48), dtype=dtype)
    n = x["b"].shape[0 if x["b_view"] else 1]
    bias = trusted.randn(rng.randrange(2**31), n, dtype=dtype)
    got = student.run(scenarios.matmul, **x, bias=bias, activation="relu", device=DEVICE)
    want = expected_matmul(trusted, x, bias, "relu")
    trusted.assert_close(f"matmul_triton ({dtype}, {matmul_case(x, bias, 'relu')})", got["out"], want, dtype,
                         trusted.matmul_tolerance(dtype, want))


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_with_k_zero_is_the_epilogue_of_zero(student, trusted, rng):
    """matmul_triton with K = 0 (a sum of no products) returns activation(0 + bias) of shape (M, N), with
    M = 0 an empty (0, N) tensor and with N = 0 (a bias of shape (0,)) an empty (M, 0) tensor."""
    m, n = rng.randint(1, 40), rng.randint(1, 40)
    bias = trusted.randn(rng.randrange(2**31), n)
    for shape_a, shape_b in (((m, 0), (0, n)), ((0, 5), (5, n)), ((m, 5), (5, 0))):
        x = dict(a=torch.zeros(shape_a), b=torch.zeros(shape_b), a_view=None, b_view=None)
        bias = bias[:shape_b[1]]
        got = student.run(scenarios.matmul, **x, bias=bias, activation="gelu", device=DEVICE)
        trusted.assert_close(f"matmul_triton (a {shape_a}, b {shape_b}, bias, gelu)", got["out"],
                             expected_matmul(trusted, x, bias, "gelu"), torch.float32, trusted.fp32)


# ---- On a GPU only: half precision and speed ------------------------------------------------------------
# (tests/autograder/suites/test_suites_gpu_kernels.py runs this code on the CPU at tiny sizes, GPU = "cpu".)

GPU = "cuda"
HALF = [torch.bfloat16, torch.float16]
GPU_SIZES = (64, 700)  # the matmul's M, N and K
GELU_GPU_SIZES = (64, 200)  # each dim of GeLU's rank-2 or rank-3 tensor


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_gelu_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, gelu_triton in bf16/fp16 at a random shape and view matches float64 in that dtype."""
    shape = trusted.draw_shape(rng, ranks=(2, 3), sizes=GELU_GPU_SIZES)
    stored, view = trusted.draw_view(rng, shape)
    x = trusted.randn(rng.randrange(2**31), *stored, dtype=dtype, scale=3.0)
    got = student.run(scenarios.gelu, x=x, view=view, device=GPU)
    trusted.assert_close(f"gelu_triton ({dtype}, {shape}, view {view})", got["out"],
                         trusted.gelu64(trusted.view(x, view)), dtype, trusted.half[dtype])


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_softmax_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, softmax_triton in bf16/fp16 (default blocks) at random rows of 1000 to 20000 columns matches
    float64 within the dtype's relative tolerance (atol 1e-6)."""
    shape = (rng.randint(1, 8), rng.randint(1000, 20000))
    x = trusted.randn(rng.randrange(2**31), *shape, dtype=dtype, scale=4.0)
    got = student.run(scenarios.softmax, x=x, view=None, block_size=None, device=GPU)
    trusted.assert_close(f"softmax_triton ({dtype}, {shape})", got["out"], trusted.softmax64(x), dtype,
                         trusted.softmax_half[dtype])


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_matmul_half_precision_on_gpu(student, trusted, rng, dtype):
    """On a GPU, matmul_triton in bf16/fp16 at a random case (M, N, K from 64 to 700, transposes, a bias and a
    random activation) matches float64 (atol: the dtype's tolerance times the largest |expected|)."""
    x = draw_matmul(trusted, rng, sizes=GPU_SIZES, dtype=dtype)
    n = x["b"].shape[0 if x["b_view"] else 1]
    bias, activation = trusted.randn(rng.randrange(2**31), n, dtype=dtype), rng.choice(ACTIVATIONS)
    got = student.run(scenarios.matmul, **x, bias=bias, activation=activation, device=GPU)
    want = expected_matmul(trusted, x, bias, activation)
    trusted.assert_close(f"matmul_triton ({dtype}, {matmul_case(x, bias, activation)})", got["out"], want, dtype,
                         trusted.matmul_tolerance(dtype, want))


# Speed, in bf16: GeLU on 2^27 elements, the matmul at 4096³, the epilogue at M 8192, N 4096, K 512.
SPEED = {"gelu": dict(shapes=[[1 << 27]], iterations=200),
         "matmul": dict(shapes=[[4096, 4096], [4096, 4096]], iterations=100),
         "epilogue": dict(shapes=[[8192, 512], [512, 4096], [4096]], iterations=100)}
CHECKED_ROWS = 16


def trusted_loop(fn, seed: int, shapes: list, iterations: int) -> float:
    """Seconds to run fn(*inputs) on the same fresh bf16 inputs as scenarios.timed draws, synchronised."""
    def loop() -> None:
        for i in range(iterations):
            fn(*scenarios.seeded_randn(seed + i, shapes, GPU, torch.bfloat16))
        if GPU == "cuda":
            torch.cuda.synchronize()

    return trusted_seconds(loop)


def trusted_seconds(call) -> float:
    import time

    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def timed_student(student, trusted, rng, kernel: str, activation=None, speed=None) -> tuple:
    """A timing function for the student's `kernel` at SPEED's shapes (each call: `iterations` fresh inputs,
    by the grader's clock), the draw, and a check of the returned output: (seconds(), draw, check(result))."""
    speed = speed or SPEED["epilogue" if kernel == "unfused" else kernel]
    first = speed["shapes"][0][0]
    draw = dict(seed=rng.randrange(2**30), check=rng.randrange(speed["iterations"]),
                rows=sorted(rng.sample(range(first), min(CHECKED_ROWS, first))))
    call = dict(kernel=kernel, shapes=speed["shapes"], dtype=torch.bfloat16, device=GPU, activation=activation, **draw)
    student.run(scenarios.timed, **{**call, "check": 0, "iterations": 1})  # compile (and autotune) first
    outputs = []

    def seconds() -> float:
        elapsed, result = trusted.seconds(lambda: student.run(scenarios.timed, **call, iterations=speed["iterations"]))
        outputs.append(result)
        return elapsed

    def check() -> None:
        inputs = [t.cpu() for t in scenarios.seeded_randn(draw["seed"] + draw["check"], speed["shapes"], GPU,
                                                           torch.bfloat16)]
        if kernel == "gelu":
            want = trusted.gelu64(inputs[0][draw["rows"]])
            trusted.assert_close(f"gelu_triton's timed output (iteration {draw['check']})", outputs[-1], want,
                                 torch.bfloat16, trusted.half[torch.bfloat16])
            return
        a, b, *bias = inputs
        want = trusted.matmul64(a[draw["rows"]], b, *(bias or [None]), activation)
        trusted.assert_close(f"matmul_triton's timed output ({kernel}, iteration {draw['check']})", outputs[-1], want,
                             torch.bfloat16, trusted.matmul_tolerance(torch.bfloat16, want))

    return seconds, draw, check


def idle_seconds(student, trusted, draw: dict, speed: dict) -> float:
    """Seconds of the worker call that times the student's kernel, with no kernel in it ("none"): the round
    trip into the worker and the drawing of the inputs, by the grader's clock."""
    call = dict(kernel="none", shapes=speed["shapes"], dtype=torch.bfloat16, device=GPU, **draw)
    elapsed, _ = trusted.seconds(lambda: student.run(scenarios.timed, **call, iterations=speed["iterations"]))
    return elapsed


def speed_ratio(student, trusted, rng, kernel: str, baseline, speed=None) -> tuple[float, list]:
    """The median over 5 alternations of (baseline's loop - the same loop idle) / (the student's worker call -
    the same call idle): how fast the student's kernel runs relative to `baseline` on the same inputs, each
    side less its own overhead (the drawing; for the student also the round trip), timed the same way."""
    seconds, draw, check = timed_student(student, trusted, rng, kernel, speed=speed)
    speed = speed or SPEED[kernel]
    trusted_loop(baseline, draw["seed"], speed["shapes"], 1)

    def ratio() -> float:
        ours = seconds() - idle_seconds(student, trusted, draw, speed)
        theirs = trusted_loop(baseline, draw["seed"], speed["shapes"], speed["iterations"])
        drawing = trusted_loop(lambda *inputs: None, draw["seed"], speed["shapes"], speed["iterations"])
        return (theirs - drawing) / max(ours, 1e-9)

    median, ratios = trusted.median_of(5, ratio)
    check()
    return median, ratios


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_reaches_most_of_torchs_bandwidth_on_gpu(student, trusted, rng):
    """On a GPU, gelu_triton on 2^27 bf16 elements moves its bytes at least 0.8x as fast as torch's
    F.gelu(approximate="tanh") run in the grader on the same inputs (200 calls a round, each side less the
    same loop without a kernel, median of 5 alternations); a random call's output is right."""
    ratio, ratios = speed_ratio(student, trusted, rng, "gelu",
                                lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    assert ratio >= 0.8, (f"gelu_triton reached {ratio:.2f}x torch's bandwidth (median of "
                          f"{[round(r, 3) for r in ratios]}); 0.8x needed")


@pytest.mark.gpu
@pytest.mark.points(3)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_reaches_half_of_cublas_on_gpu(student, trusted, rng):
    """On a GPU, matmul_triton in bf16 at 4096³ runs at least 0.5x as fast as torch.matmul (cuBLAS) run in the
    grader on the same inputs (100 calls a round, each side less the same loop without a kernel, median of 5);
    a random call's rows are right."""
    ratio, ratios = speed_ratio(student, trusted, rng, "matmul", torch.matmul)
    assert ratio >= 0.5, (f"matmul_triton ran at {ratio:.2f}x cuBLAS's speed (median of "
                          f"{[round(r, 3) for r in ratios]}); 0.5x needed")


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
def test_fused_epilogue_beats_the_unfused_sequence_on_gpu(student, trusted, rng):
    """On a GPU, matmul_triton(a, b, bias, "gelu") in bf16 (M 8192, N 4096, K 512) takes less time than
    matmul_triton(a, b) followed by + bias and GeLU in torch, both the student's code timed by the grader
    (100 calls a round, median of 5 alternations); random rows of both outputs are right."""
    fused, _, check_fused = timed_student(student, trusted, rng, "epilogue", "gelu")
    unfused, _, check_unfused = timed_student(student, trusted, rng, "unfused", "gelu")
    ratio, ratios = trusted.median_of(5, lambda: fused() / unfused())
    check_fused()
    check_unfused()
    assert ratio < 1, (f"the fused epilogue took {ratio:.2f}x the unfused sequence's time (median of "
                       f"{[round(r, 3) for r in ratios]}); it must be faster")
