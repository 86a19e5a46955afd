"""The design of gpu_kernels' kernels, observed under Triton's interpreter: what each program loads, which
tile each program takes, what the matmul's epilogue calls.

    with loads_per_program({"x": x}) as launches:
        y = softmax_triton(x, 16)
    launches[0]["programs"][r]["loads"]     # what program r loaded from x, one entry per tl.load

The interpreter runs a grid's programs one after another in Python, so what each one loads can be
recorded (loads_per_program) and a helper can be swapped for a marker while a kernel runs (tile_of,
matmul_with_marked_gelu). The functions below drive the student's `gpu_kernels` (the package of the
implementation tree in use) on given inputs and report what they saw, as plain data; compiled (on a GPU)
they report None. The grader's hidden design checks run them in its worker at random sizes
(autograder/suites/gpu_kernels/scenarios.py); `make check-design` runs them on the student's own code at
public sizes and says what each check found (kernels.check_design). `grouped_order` is the handout's
grouped program order (§4), the answer `tile_of` is held to.
"""

from __future__ import annotations

from contextlib import contextmanager

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch

try:  # Triton's interpreter asks for triton.language among the globals of a jitted function it calls (the marker)
    import triton.language as tl  # noqa: F401
except ImportError:  # no Triton (it is Linux only): the pure-Python helpers here still import
    tl = None


def grouped_order(M: int, N: int, block_m: int, block_n: int, group_m: int) -> list[list[int]]:
    """The handout's grouped order (§4): [tile_m, tile_n] of each pid."""
    tiles_m, tiles_n = -(-M // block_m), -(-N // block_n)
    order = []
    for pid in range(tiles_m * tiles_n):
        per_group = group_m * tiles_n
        first_m = pid // per_group * group_m
        rows_here = min(tiles_m - first_m, group_m)
        order.append([first_m + pid % per_group % rows_here, pid % per_group // rows_here])
    return order


@contextmanager
def loads_per_program(tensors: dict, program_shift: int = 0):
    """Under Triton's interpreter, record what each program of each kernel launched in the block loads
    from `tensors` (name -> tensor): yields a list, one entry per launch, {"grid": [x, y, z], "programs":
    [{"program": [x, y, z], "loads": [{name: [element index, ...] for each tensor it touched}, ...]}]},
    one dict per load call (its enabled lanes only; indices into the tensor's storage). Yields None when
    kernels are compiled (on a GPU), where nothing can be counted this way.

    program_shift: add it to every tl.program_id(0) the kernels read (the launched programs stay the
    same), so that a kernel believes it is a program far into a huge grid.

    How: the interpreter sets the grid of a launch (`set_grid_dim`), runs each program after `set_grid_idx`,
    and every tl.load ends in its builder's `create_masked_load` (`create_load` for an unmasked one); the
    program id comes from `create_get_program_id`. They are wrapped on the builder's class and restored.
    """
    from kernels.device import interpreted

    if not interpreted():
        yield None
        return
    import numpy as np
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    names = ("set_grid_dim", "set_grid_idx", "create_load", "create_masked_load", "create_get_program_id")
    originals = {name: builder.__dict__[name] for name in names}
    ranges = {name: (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), t.element_size())
              for name, t in tensors.items()}
    launches: list[dict] = []
    inside = []  # create_load calls create_masked_load in some Triton versions: record the outer call only

    def record(ptrs, mask) -> None:
        if not launches or not launches[-1]["programs"]:
            return
        addresses = np.asarray(ptrs.data, dtype=np.uint64)
        enabled = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        loaded = addresses[enabled].astype(np.int64)
        found = {}
        for name, (start, size, itemsize) in ranges.items():
            inside_tensor = loaded[(loaded >= start) & (loaded < start + size)]
            if inside_tensor.size:
                found[name] = sorted(int(i) for i in (inside_tensor - start) // itemsize)
        launches[-1]["programs"][-1]["loads"].append(found)

    def set_grid_dim(self, *grid):
        launches.append({"grid": [int(g) for g in grid], "programs": []})
        return originals["set_grid_dim"](self, *grid)

    def set_grid_idx(self, *index):
        if launches:
            launches[-1]["programs"].append({"program": [int(i) for i in index], "loads": []})
        return originals["set_grid_idx"](self, *index)

    def create_load(self, ptrs, *args, **kwargs):
        record(ptrs, interpreter.TensorHandle(np.ones_like(ptrs.data, dtype=bool), None))
        inside.append(True)
        try:
            return originals["create_load"](self, ptrs, *args, **kwargs)
        finally:
            inside.pop()

    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        if not inside:
            record(ptrs, mask)
        return originals["create_masked_load"](self, ptrs, mask, *args, **kwargs)

    def create_get_program_id(self, axis):
        handle = originals["create_get_program_id"](self, axis)
        if axis == 0 and program_shift:
            handle.data = (handle.data.astype(np.int64) + program_shift).astype(handle.data.dtype)
        return handle

    for name in names:
        setattr(builder, name, locals()[name])
    try:
        yield launches
    finally:
        for name, original in originals.items():
            setattr(builder, name, original)


def softmax_loads(x: torch.Tensor, block_size) -> dict:
    """softmax_triton(x, block_size): its output and what each program loaded from x
    (loads_per_program; "launches" None when compiled)."""
    from gpu_kernels.softmax import softmax_triton

    with loads_per_program({"x": x}) as launches:
        y = softmax_triton(x, block_size)
    return {"out": y.detach().to("cpu"), "launches": launches}


def gelu_shifted_loads(x: torch.Tensor, shift: int) -> dict:
    """gelu_triton(x) with every program id read as itself + `shift`: the launches and what each
    program loaded from x (None when compiled). With int32 offsets, pid · BLOCK wraps around past 2^31 and
    the shifted programs load x's first elements; with int64 offsets they are past the end, masked off."""
    from gpu_kernels.elementwise import gelu_triton

    with loads_per_program({"x": x}, program_shift=shift) as launches:
        gelu_triton(x)
    return {"launches": launches}


def matmul_loads(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation) -> dict:
    """matmul_triton(a, b, bias, activation): its output and what each program loaded from a, b
    and the bias (loads_per_program; None when compiled)."""
    from gpu_kernels.matmul import matmul_triton

    with loads_per_program({"a": a, "b": b, "bias": bias}) as launches:
        c = matmul_triton(a, b, bias, activation)
    return {"out": c.detach().to("cpu"), "launches": launches}


_STUDENT_TILE_OF = None  # the student's _tile_of, called by tile_of's probe kernel


def tile_of(M: int, N: int, block_m: int, block_n: int, group_m: int, device: str = "cpu"):
    """The (tile_m, tile_n) the student's `_tile_of(pid, M, N, block_m, block_n, group_m)` gives each pid of the
    grid cdiv(M, block_m) · cdiv(N, block_n), as a list of pairs, by a probe kernel that calls it (its output on
    `device`); None when compiled (the probe calls the student's helper through a global, which only the
    interpreter re-reads)."""
    global _STUDENT_TILE_OF
    from kernels.device import interpreted

    if not interpreted():
        return None
    import triton
    import triton.language as tl

    from gpu_kernels import matmul

    @triton.jit
    def _tile_probe(OUT, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        tile_m, tile_n = _STUDENT_TILE_OF(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        tl.store(OUT + 2 * pid, tile_m)
        tl.store(OUT + 2 * pid + 1, tile_n)

    programs = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    out = torch.full((programs, 2), -1, dtype=torch.int32, device=device)
    _STUDENT_TILE_OF = matmul._tile_of
    try:
        _tile_probe[(programs,)](out, M, N, BLOCK_M=block_m, BLOCK_N=block_n, GROUP_M=group_m)
    finally:
        _STUDENT_TILE_OF = None
    return out.to("cpu").tolist()


def matmul_with_marked_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor):
    """matmul_triton(a, b, bias, "gelu") with elementwise.gelu_tanh (and every name of matmul.py
    bound to it) replaced by a marker that returns 7 everywhere: the output, all 7 when the epilogue calls
    gelu_tanh; None when compiled (a compiled kernel keeps the helper it was built with)."""
    from kernels.device import interpreted

    if not interpreted():
        return None
    import triton

    from gpu_kernels import elementwise, matmul

    @triton.jit
    def _marker(x):
        return x * 0.0 + 7.0

    original = elementwise.gelu_tanh
    bound = [name for name, value in vars(matmul).items() if value is original]
    elementwise.gelu_tanh = _marker
    for name in bound:
        setattr(matmul, name, _marker)
    try:
        c = matmul.matmul_triton(a, b, bias, "gelu")
    finally:
        elementwise.gelu_tanh = original
        for name in bound:
            setattr(matmul, name, original)
    return c.detach().to("cpu")
