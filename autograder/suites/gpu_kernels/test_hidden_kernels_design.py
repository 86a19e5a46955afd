"""Hidden: the kernels' design as the handout states it (§2 to §4), beyond their values: what each program
loads, which tile each program computes, what the epilogue calls, and empty inputs.

The counts come from Triton's interpreter, which runs the programs one after another in Python
(kernels.design.loads_per_program): the grader runs them under the interpreter on any machine (on a GPU
machine in a second worker, without the GPU: process.Worker.interpreter); only a run in the tests' own
process on a GPU, where kernels are compiled, skips them. Like every account the worker gives, they can only take points away: each test
here is an edge test, earning its points only when the ordinary tests of its function pass.
"""

from collections import Counter

import pytest
import torch

from autograder.suites.gpu_kernels import scenarios
from kernels.design import grouped_order
from kernels.device import default_device

pytestmark = [pytest.mark.visibility("hidden"), pytest.mark.triton]

DEVICE = str(default_device())
COMPILED = ("counted under Triton's interpreter: the grader counts it on any machine; a run of the tests on a "
            "GPU in this process cannot")


def programs_of(what: str, got: dict) -> list[dict]:
    """The programs of the one kernel launched (each {"program": [x, y, z], "loads": [...]}); skips when
    compiled."""
    if got["launches"] is None:
        pytest.skip(COMPILED)
    launches = got["launches"]
    assert len(launches) == 1, f"{what}: expected one kernel launch, got {len(launches)} (handout §1)"
    return launches[0]["programs"]


def times_loaded(program: dict, name: str) -> Counter:
    """How many times the program loaded each element of tensor `name` (by index into its storage)."""
    return Counter(i for load in program["loads"] for i in load.get(name, []))


# ---- Softmax: two passes, one program per row ---------------------------------------------------------


def draw_rows(trusted, rng) -> torch.Tensor:
    return trusted.randn(rng.randrange(2**31), rng.randint(2, 4), rng.randint(40, 120), scale=4.0)


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_reads_each_element_once_per_pass(student, trusted, rng):
    """softmax_triton loads each element of x exactly twice when a row spans several blocks (block_size 16:
    the online pass, then the writing pass) and exactly once when the row fits one block (block_size the
    row length rounded up to a power of two), at random rows of 40 to 120 columns (handout §3). A
    three-pass kernel (max, then sum, then output) loads each element three times and loses these points."""
    x = draw_rows(trusted, rng)
    rows, n = x.shape
    one_block = 1 << (n - 1).bit_length()
    for block_size, passes in ((16, 2), (one_block, 1)):
        got = student.run(scenarios.softmax_loads, x=x, block_size=block_size, device=DEVICE)
        what = f"softmax_triton ({rows}x{n}, block_size {block_size})"
        trusted.assert_close(what, got["out"], trusted.softmax64(x), torch.float32, trusted.fp32)
        counts = Counter(times for program in programs_of(what, got) for times in times_loaded(program, "x").values())
        assert set(counts) == {passes}, (
            f"{what}: the elements of x were loaded {dict(sorted(counts.items()))} (times: elements); a row "
            f"{'longer than' if passes == 2 else 'within'} one block is read {passes} time(s) per element "
            f"(handout §3: {'two passes with the online softmax' if passes == 2 else 'one load, one store'})")


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_runs_one_program_per_row(student, trusted, rng):
    """softmax_triton launches one program per row (a grid of `rows` programs) and program r loads all of row r
    and nothing of any other row, at random rows in blocks of 16 (handout §3)."""
    x = draw_rows(trusted, rng)
    rows, n = x.shape
    got = student.run(scenarios.softmax_loads, x=x, block_size=16, device=DEVICE)
    what = f"softmax_triton ({rows}x{n}, block_size 16)"
    programs = programs_of(what, got)
    grid = got["launches"][0]["grid"]
    assert grid[0] * grid[1] * grid[2] == rows, f"{what}: a grid of {grid}; one program per row makes {rows}"
    read = sorted(tuple(sorted({i // n for i in times_loaded(program, "x")})) for program in programs)
    assert read == [(r,) for r in range(rows)], (
        f"{what}: the programs read rows {read}; program r reads row r alone, all of it (handout §3)")
    for program in programs:
        assert len(times_loaded(program, "x")) == n, f"{what}: program {program['program']} did not read its whole row"


# ---- GeLU: int64 offsets ------------------------------------------------------------------------------

SHIFT = 2**30  # pid · BLOCK ≥ 2^32 for any BLOCK ≥ 4: a multiple of 2^32, so int32 offsets wrap to 0


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_offsets_do_not_overflow_int32(student, trusted, rng):
    """gelu_triton's offsets are int64: with every program id read as pid + 2^30 (a program far into the grid
    of a tensor of more than 2^31 elements), pid · BLOCK is past the end of x and every load is masked off.
    With int32 offsets pid · BLOCK wraps around to 0 and the programs load x's first elements (handout §2).
    Unshifted, the same call loads every element of x."""
    x = trusted.randn(rng.randrange(2**31), rng.randint(2000, 5000))
    plain = student.run(scenarios.gelu_shifted_loads, x=x, shift=0, device=DEVICE)
    shifted = student.run(scenarios.gelu_shifted_loads, x=x, shift=SHIFT, device=DEVICE)
    loaded = [sum(len(load.get("x", [])) for program in programs_of("gelu_triton", got) for load in program["loads"])
              for got in (plain, shifted)]
    assert loaded[0] >= x.numel(), f"gelu_triton ({x.numel()} elements) loaded {loaded[0]} elements of x"
    assert loaded[1] == 0, (
        f"gelu_triton ({x.numel()} elements): programs that believe they are pid + 2^30 loaded {loaded[1]} "
        "elements of x: their offsets wrapped around in int32. Make them int64: "
        "tl.program_id(0).to(tl.int64) * BLOCK (handout §2)")


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("elementwise.gelu_triton")
def test_gelu_of_an_empty_tensor_is_empty(student, rng):
    """gelu_triton of a tensor with no elements (a random shape with one dim 0) returns an empty tensor of that
    shape and dtype (handout §1: empty inputs)."""
    shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
    shape[rng.randrange(len(shape))] = 0
    got = student.run(scenarios.gelu, x=torch.zeros(shape), view=None, device=DEVICE)["out"]
    assert type(got) is torch.Tensor and tuple(got.shape) == tuple(shape) and got.dtype == torch.float32, \
        f"gelu_triton of a float32 tensor of shape {tuple(shape)}: got {got!r}"


@pytest.mark.edge
@pytest.mark.points(0.5)
@pytest.mark.task("softmax.softmax_triton")
def test_softmax_of_empty_tensors_is_empty(student, rng):
    """softmax_triton of a tensor with no rows, (0, n), and of rows of no columns, (rows, 0), returns an empty
    tensor of that shape and dtype (handout §1: empty inputs)."""
    for shape in ((0, rng.randint(1, 40)), (rng.randint(1, 5), 0)):
        got = student.run(scenarios.softmax, x=torch.zeros(shape), view=None, block_size=None, device=DEVICE)["out"]
        assert type(got) is torch.Tensor and tuple(got.shape) == shape and got.dtype == torch.float32, \
            f"softmax_triton of a float32 tensor of shape {shape}: got {got!r}"


# ---- Matmul: the grouped order, the bias loaded once, gelu_tanh reused -------------------------------


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_tile_of_follows_the_grouped_order(student, rng):
    """`_tile_of(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)` maps each program id to the tile of the handout's
    grouped order (§4), at random tile counts (1 to 9 a side, a short last group among them), blocks and
    GROUP_M. Row-major order gives the same C but loses these points."""
    block_m, block_n, group_m = rng.choice((16, 32)), rng.choice((16, 32)), rng.choice((2, 3, 4, 8))
    tiles_m, tiles_n = rng.randint(group_m + 1, 9), rng.randint(2, 9)
    M, N = (tiles_m - 1) * block_m + rng.randint(1, block_m), (tiles_n - 1) * block_n + rng.randint(1, block_n)
    got = student.run(scenarios.tile_of, M=M, N=N, block_m=block_m, block_n=block_n, group_m=group_m, device=DEVICE)
    if got is None:
        pytest.skip(COMPILED)
    want = grouped_order(M, N, block_m, block_n, group_m)
    wrong = [(pid, got_tile, want_tile) for pid, (got_tile, want_tile) in enumerate(zip(got, want))
             if got_tile != want_tile]
    assert not wrong, (f"_tile_of(pid, M={M}, N={N}, {block_m}, {block_n}, GROUP_M={group_m}): {len(wrong)} of "
                       f"{len(want)} programs take another tile; first: pid {wrong[0][0]} took {wrong[0][1]}, the "
                       f"grouped order gives {wrong[0][2]} (handout §4)")


def draw_epilogue(trusted, rng) -> dict:
    """Random M, N from 20 to 70 and K from 130 to 200 (several steps of any BLOCK_K up to 64), a bias."""
    m, n, k = rng.randint(20, 70), rng.randint(20, 70), rng.randint(130, 200)
    return dict(a=trusted.randn(rng.randrange(2**31), m, k, scale=k ** -0.5),
                b=trusted.randn(rng.randrange(2**31), k, n), bias=trusted.randn(rng.randrange(2**31), n))


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_loads_the_bias_once_per_program(student, trusted, rng):
    """matmul_triton(a, b, bias, "relu") loads the bias once per program, in the epilogue, after the K loop (one
    load call per program touches the bias), at random M, N and a K of several steps (handout §4)."""
    x = draw_epilogue(trusted, rng)
    got = student.run(scenarios.matmul_loads, **x, activation="relu", device=DEVICE)
    (m, k), n = x["a"].shape, x["b"].shape[1]
    what = f"matmul_triton (M {m}, N {n}, K {k}, bias, relu)"
    trusted.assert_close(what, got["out"], trusted.matmul64(x["a"], x["b"], x["bias"], "relu"), torch.float32,
                         trusted.fp32)
    counts = Counter(sum(1 for load in program["loads"] if "bias" in load) for program in programs_of(what, got))
    assert set(counts) == {1}, (f"{what}: programs loaded the bias {dict(sorted(counts.items()))} (loads: programs); "
                                "load it once, in the epilogue, not inside the K loop (handout §4)")


@pytest.mark.edge
@pytest.mark.points(1)
@pytest.mark.task("matmul.matmul_triton")
def test_matmul_epilogue_calls_gelu_tanh(student, trusted, rng):
    """matmul_triton(a, b, bias, "gelu") applies §2's `gelu_tanh` helper in its epilogue: with
    elementwise.gelu_tanh replaced by a marker that returns 7, every output element is 7 (handout §4)."""
    x = draw_epilogue(trusted, rng)
    got = student.run(scenarios.matmul_with_marked_gelu, **x, device=DEVICE)
    if got is None:
        pytest.skip(COMPILED)
    (m, k), n = x["a"].shape, x["b"].shape[1]
    assert type(got) is torch.Tensor and tuple(got.shape) == (m, n), f"expected a ({m}, {n}) tensor, got {got!r}"
    assert bool((got == 7).all()), (
        f"matmul_triton (M {m}, N {n}, K {k}, bias, gelu) did not call elementwise.gelu_tanh in its epilogue: "
        "reuse §2's helper (from gpu_kernels.elementwise import gelu_tanh) instead of writing GeLU again")
