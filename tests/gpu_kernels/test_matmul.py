"""matmul.py: matmul_triton with its fused epilogue, interpreted on a CPU (float32) or compiled on a GPU
(handout §4)."""

import pytest
import torch

from kernels.device import default_device
from tests.gpu_kernels import scenarios

DEVICE = str(default_device())
MATMUL = "gpu_kernels.matmul"

pytestmark = pytest.mark.triton

# (M, N, K, a stored transposed, b stored transposed)
CASES = {
    "m40-n33-k50": (40, 33, 50, False, False),
    "m1-n70-k65-a-transposed": (1, 70, 65, True, False),
    "m67-n5-k3-b-transposed": (67, 5, 3, False, True),
}


def operands(trusted, seed: int, m: int, n: int, k: int, a_t: bool, b_t: bool, dtype=torch.float32) -> dict:
    """a (m, k) and b (k, n), stored transposed when asked (the scenario takes .t()), scaled by 1/sqrt(k)."""
    scale = k ** -0.5
    a = trusted.randn(seed, *((k, m) if a_t else (m, k)), dtype=dtype, scale=scale)
    b = trusted.randn(seed + 1, *((n, k) if b_t else (k, n)), dtype=dtype)
    return dict(a=a, b=b, a_view="t" if a_t else None, b_view="t" if b_t else None)


def expected(trusted, x: dict, bias, activation):
    return trusted.matmul64(trusted.view(x["a"], x["a_view"]), trusted.view(x["b"], x["b_view"]), bias, activation)


@pytest.mark.points(2)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("case", list(CASES))
def test_matmul_matches_float64(student, trusted, case):
    """matmul_triton(a, b) in float32 matches the float64 product within 1e-4, for M, N, K that are not
    multiples of any block and transposed (strided) operands.

    Hint (close): tl.dot(..., input_precision="ieee") for float32: a GPU's default TF32 dot is off by about 1e-3.
    Hint (values, nan): masks on M and N for the loads and the store, and on K inside the loop (other=0.0, so
    that what lies past the edge adds nothing).
    """
    x = operands(trusted, 30, *CASES[case])
    got = student.run(scenarios.matmul, **x, bias=None, activation=None, device=DEVICE)
    trusted.assert_close("c", got["c"], expected(trusted, x, None, None), torch.float32, trusted.fp32)


@pytest.mark.points(2)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("activation", [None, "gelu", "relu"], ids=["bias", "bias-gelu", "bias-relu"])
def test_matmul_fused_epilogue_matches_float64(student, trusted, activation):
    """matmul_triton(a, b, bias, activation) matches float64 activation(a @ b + bias): the bias added
    first, then the activation (None, GeLU with tanh, ReLU), at M 45, N 38, K 70."""
    x = operands(trusted, 31, 45, 38, 70, False, False)
    bias = trusted.randn(33, 38)
    got = student.run(scenarios.matmul, **x, bias=bias, activation=activation, device=DEVICE)
    trusted.assert_close("c", got["c"], expected(trusted, x, bias, activation), torch.float32, trusted.fp32)


@pytest.mark.points(1)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_with_epilogue_launches_one_triton_kernel(student, trusted):
    """matmul_triton(a, b, bias, "gelu") launches one Triton kernel (by name: an autotuner's
    trial runs count once) and nothing else: the epilogue is fused."""
    x = operands(trusted, 34, 20, 20, 20, False, False)
    got = student.run(scenarios.matmul, **x, bias=trusted.randn(35, 20), activation="gelu", device=DEVICE)
    assert len(set(got["launches"])) == 1, f"expected one Triton kernel, got {sorted(set(got['launches']))}"


# The handout's worked example (§4): 3 x 4 tiles, GROUP_M = 2, the last group one row high.
WORKED_EXAMPLE = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 0), (2, 1), (2, 2), (2, 3)]


@pytest.mark.points(0.5)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_tile_of_gives_the_worked_example(student):
    """`_tile_of` gives the handout's worked example (§4): tiles_m = 3, tiles_n = 4 (M = 40, N = 100 with
    16 x 32 blocks), GROUP_M = 2, program by program, the short last group included. Read under the
    interpreter (skipped where kernels are compiled); the hidden tests draw other grids.

    Hint: programs 8 to 11 are the last group, one row high: walking it down a column of GROUP_M rows
    puts tiles on row 3, past the end.
    """
    got = student.run(scenarios.tile_of, M=40, N=100, block_m=16, block_n=32, group_m=2)
    if got is None:
        pytest.skip("_tile_of is read under the Triton interpreter; kernels are compiled here")
    got = [tuple(tile) for tile in got]
    wrong = [(pid, have, want) for pid, (have, want) in enumerate(zip(got, WORKED_EXAMPLE)) if have != want]
    assert len(got) == len(WORKED_EXAMPLE) and not wrong, (
        f"{len(wrong)} of 12 programs take another tile than the handout's worked example; first: pid "
        f"{wrong[0][0]} took {wrong[0][1]}, the example gives {wrong[0][2]}" if wrong else f"{len(got)} programs")


BAD_CALLS = {
    "inner dims differ": lambda: ((torch.zeros(4, 5), torch.zeros(6, 3)), {}, ValueError),
    "a is 3-D": lambda: ((torch.zeros(2, 4, 5), torch.zeros(5, 3)), {}, ValueError),
    "bias of the wrong length": lambda: ((torch.zeros(4, 5), torch.zeros(5, 3)), dict(bias=torch.zeros(4)), ValueError),
    "unknown activation": lambda: ((torch.zeros(4, 5), torch.zeros(5, 3)), dict(activation="tanh"), ValueError),
    "integer inputs": lambda: ((torch.zeros(4, 5, dtype=torch.int32), torch.zeros(5, 3, dtype=torch.int32)), {},
                               TypeError),
    "a and b of different dtypes": lambda: ((torch.zeros(4, 5), torch.zeros(5, 3, dtype=torch.float16)), {},
                                            TypeError),
}


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_matmul_rejects_bad_arguments(student, case):
    """matmul_triton raises ValueError for shapes that do not multiply, a bias that is not (N,), an unknown
    activation; TypeError for non-float or mixed dtypes."""
    (a, b), options, error = BAD_CALLS[case]()
    with pytest.raises(error):
        student.module(MATMUL).matmul_triton(a, b, **options)


# ---- On a GPU only: half precision and speed -----------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
@pytest.mark.parametrize("activation", [None, "gelu"], ids=["plain", "bias-gelu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_matmul_half_precision_on_gpu(student, trusted, dtype, activation):
    """On a GPU, matmul_triton in bf16/fp16 (M 300, N 517, K 1000, b transposed) returns that dtype, close to
    the float64 result of the same inputs (atol: the dtype's tolerance times the largest |expected|)."""
    x = operands(trusted, 36, 300, 517, 1000, False, True, dtype)
    bias = trusted.randn(37, 517, dtype=dtype) if activation else None
    got = student.run(scenarios.matmul, **x, bias=bias, activation=activation, device="cuda")
    want = expected(trusted, x, bias, activation)
    trusted.assert_close("c", got["c"], want, dtype, trusted.matmul_tolerance(dtype, want))


@pytest.mark.gpu
@pytest.mark.points(3)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_reaches_half_of_cublas_on_gpu(student):
    """On a GPU, matmul_triton in bf16 at 4096³ takes at most 2x the time of torch.matmul (cuBLAS), both
    timed with do_bench in the same run.

    Hint: 128 x 128 tiles or larger, BLOCK_K 32 or 64, bf16 straight into tl.dot, grouped program ids.
    """
    times = student.run(scenarios.matmul_ms, m=4096, n=4096, k=4096, dtype=torch.bfloat16)
    ours, cublas = times["triton"], times["cublas"]
    assert type(ours) is float and ours > 0, f"expected a positive time in ms, got {ours!r}"
    assert cublas / ours >= 0.5, (f"matmul_triton {ours:.3f} ms vs cuBLAS {cublas:.3f} ms: {cublas / ours:.2f}x "
                                  "cuBLAS's speed; 0.5x needed")


@pytest.mark.gpu
@pytest.mark.points(2)
@pytest.mark.edge
@pytest.mark.task("matmul.matmul_triton")
def test_fused_epilogue_is_faster_than_the_unfused_sequence_on_gpu(student):
    """On a GPU, matmul_triton(a, b, bias, "gelu") in bf16 (M 8192, N 4096, K 512) is faster than
    matmul_triton(a, b) followed by + bias and GeLU as torch ops, both timed with do_bench in the same run."""
    times = student.run(scenarios.epilogue_ms, m=8192, n=4096, k=512, dtype=torch.bfloat16)
    assert times["fused"] < times["unfused"], (f"fused {times['fused']:.3f} ms vs unfused {times['unfused']:.3f} ms: "
                                               "the epilogue must save the passes over C")
