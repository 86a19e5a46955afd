"""`make check-design`: the design checks of gpu_kernels' hidden tests, on your own code at public sizes.

    TRITON_INTERPRET=1 python -m kernels.check_design [--impl assignments]

Beyond the values your kernels compute, the grader checks how they compute them (handout §A.3 and §A.5:
hidden, edge tests, 8.5 points): what each program loads, which tile each program takes, what the
matmul's epilogue calls, and that the output does not depend on the order the programs run in. Those
tests draw random sizes; this runs the same observations (kernels.design, kernels.program_order) on
fixed public ones, under Triton's interpreter, and says for each check what it found. It knows your
code only: like the grader, it counts a design check only where the kernel's output is right at that
size. Exit status 1 when a check fails; a kernel still a stub is named, not failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import kernels  # noqa: F401  (select the interpreter before Triton is imported)
import torch
from kernels.device import interpreted, triton_skip_reason

ROOT = Path(__file__).resolve().parents[1]
SHIFT = 2**30  # a program id read as pid + 2^30: pid · BLOCK is past 2^32 for any BLOCK ≥ 4


class DesignProblem(Exception):
    """A design check found the kernel working otherwise than the handout asks; the message says how."""


def randn(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def right(what: str, got, expected: torch.Tensor) -> None:
    """Raise DesignProblem unless `got` is `expected` within 1e-4 (the value tests' float32 tolerance)."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or \
            not torch.allclose(got.double(), expected.double(), atol=1e-4, rtol=1e-4):
        raise DesignProblem(f"{what} gives a wrong output here: make its value tests pass first (a design check "
                            "counts only then)")


def programs_of(what: str, got: dict) -> list[dict]:
    """The programs of the one kernel launched, as kernels.design.loads_per_program recorded them."""
    if len(got["launches"]) != 1:
        raise DesignProblem(f"{what}: {len(got['launches'])} kernel launches, one expected (handout §1)")
    return got["launches"][0]["programs"]


def times_loaded(program: dict, name: str) -> Counter:
    return Counter(i for load in program["loads"] for i in load.get(name, []))


def gelu_offsets() -> None:
    from kernels import design

    x = randn(0, 3000)
    plain, shifted = (sum(len(load.get("x", [])) for p in programs_of("gelu_triton", design.gelu_shifted_loads(
        x, shift)) for load in p["loads"]) for shift in (0, SHIFT))
    if plain < x.numel():
        raise DesignProblem(f"gelu_triton of {x.numel()} elements loaded {plain} of them")
    if shifted:
        raise DesignProblem(f"programs that believe they are pid + 2^30 loaded {shifted} elements of x: their offsets "
                            "wrapped around in int32; make them int64: tl.program_id(0).to(tl.int64) * BLOCK")


def softmax_passes() -> None:
    from kernels import design

    x = randn(1, 3, 70, scale=4.0)
    for block_size, passes in ((16, 2), (128, 1)):
        got = design.softmax_loads(x, block_size)
        what = f"softmax_triton (3x70, block_size {block_size})"
        right(what, got["out"], torch.softmax(x.double(), -1))
        counts = Counter(n for p in programs_of(what, got) for n in times_loaded(p, "x").values())
        if set(counts) != {passes}:
            how = "two passes with the online softmax" if passes == 2 else "one load, one store"
            raise DesignProblem(f"{what}: the elements of x were loaded {dict(sorted(counts.items()))} (times: "
                                f"elements); a row {'longer than' if passes == 2 else 'within'} one block is read "
                                f"{passes} time(s) per element ({how})")


def softmax_rows() -> None:
    from kernels import design

    x = randn(2, 3, 70, scale=4.0)
    got = design.softmax_loads(x, 16)
    what = "softmax_triton (3x70, block_size 16)"
    right(what, got["out"], torch.softmax(x.double(), -1))
    programs = programs_of(what, got)
    grid = got["launches"][0]["grid"]
    if grid[0] * grid[1] * grid[2] != 3:
        raise DesignProblem(f"{what}: a grid of {grid}; one program per row makes 3")
    read = sorted(tuple(sorted({i // 70 for i in times_loaded(p, "x")})) for p in programs)
    if read != [(0,), (1,), (2,)] or any(len(times_loaded(p, "x")) != 70 for p in programs):
        raise DesignProblem(f"{what}: the programs read rows {read}; program r reads row r alone, all of it")


def tile_order() -> None:
    from kernels import design

    M, N, block_m, block_n, group_m = 100, 70, 16, 32, 3
    got = design.tile_of(M, N, block_m, block_n, group_m)
    want = design.grouped_order(M, N, block_m, block_n, group_m)
    wrong = [(pid, g, w) for pid, (g, w) in enumerate(zip(got, want)) if g != w]
    if wrong:
        raise DesignProblem(f"_tile_of(pid, M={M}, N={N}, {block_m}, {block_n}, GROUP_M={group_m}): {len(wrong)} of "
                            f"{len(want)} programs take another tile; first: pid {wrong[0][0]} took {wrong[0][1]}, the "
                            f"grouped order gives {wrong[0][2]}")


def epilogue_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return randn(3, 45, 150, scale=150 ** -0.5), randn(4, 150, 38), randn(5, 38)


def bias_loads() -> None:
    from kernels import design

    a, b, bias = epilogue_inputs()
    got = design.matmul_loads(a, b, bias, "relu")
    what = "matmul_triton (M 45, N 38, K 150, bias, relu)"
    right(what, got["out"], torch.relu(a.double() @ b.double() + bias.double()))
    counts = Counter(sum(1 for load in p["loads"] if "bias" in load) for p in programs_of(what, got))
    if set(counts) != {1}:
        raise DesignProblem(f"{what}: programs loaded the bias {dict(sorted(counts.items()))} (loads: programs); load "
                            "it once, in the epilogue, not inside the K loop")


def gelu_helper() -> None:
    from kernels import design

    got = design.matmul_with_marked_gelu(*epilogue_inputs())
    if not isinstance(got, torch.Tensor) or not bool((got == 7).all()):
        raise DesignProblem("matmul_triton (bias, gelu) did not call elementwise.gelu_tanh in its epilogue: reuse "
                            "§2's helper (from gpu_kernels.elementwise import gelu_tanh) instead of writing GeLU "
                            "again")


def program_order() -> None:
    from gpu_kernels.elementwise import gelu_triton
    from gpu_kernels.matmul import matmul_triton
    from gpu_kernels.softmax import softmax_triton
    from kernels.program_order import program_order_problems

    x, rows = randn(6, 1000), randn(7, 4, 70)
    a, b, bias = randn(8, 40, 50), randn(9, 50, 33), randn(10, 33)
    runs = {"gelu_triton": lambda: gelu_triton(x), "softmax_triton": lambda: softmax_triton(rows),
            "softmax_triton (block_size 16)": lambda: softmax_triton(rows, 16),
            'matmul_triton (bias, "gelu")': lambda: matmul_triton(a, b, bias, "gelu")}
    problems = [problem for what, run in runs.items() for problem in program_order_problems(run, what)]
    if problems:
        raise DesignProblem("; ".join(problems))


# (handout section, function, what the check asks, the check): in handout order.
CHECKS: list[tuple[str, str, str, Callable[[], None]]] = [
    ("§2", "gelu_triton", "int64 offsets: a program far into a huge grid loads nothing", gelu_offsets),
    ("§3", "softmax_triton", "each element loaded twice over several blocks, once within one", softmax_passes),
    ("§3", "softmax_triton", "one program per row, reading its own row only", softmax_rows),
    ("§4", "matmul_triton", "_tile_of gives each pid the tile of the grouped order", tile_order),
    ("§4", "matmul_triton", "the bias loaded once per program, in the epilogue", bias_loads),
    ("§4", "matmul_triton", "the epilogue calls elementwise.gelu_tanh", gelu_helper),
    ("§A.5", "all three", "the same output with the programs run reversed and shuffled", program_order),
]


def run_check(check: Callable[[], None]) -> tuple[str, str]:
    """("ok" | "fails" | "not implemented yet" | "error", what it found)."""
    try:
        check()
    except DesignProblem as problem:
        return "fails", str(problem)
    except NotImplementedError as exc:
        return "not implemented yet", str(exc).split(":")[0]
    except Exception as exc:  # noqa: BLE001  (the student's code may raise anything: say what)
        cause = exc
        while type(cause).__name__ == "InterpreterError" and cause.__cause__ is not None:
            cause = cause.__cause__  # what a @triton.jit helper raised, wrapped by the interpreter
        if isinstance(cause, NotImplementedError):
            return "not implemented yet", str(cause).split(":")[0]
        return "error", f"{type(cause).__name__}: {cause}"
    return "ok", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.check_design", description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default=os.environ.get("LLMSYS_IMPL") or ("solutions" if (ROOT / "solutions").is_dir()
                        else "assignments"), help="the tree whose gpu_kernels is checked: solutions, assignments or a "
                        "path (default: assignments in the student release)")
    args = parser.parse_args(argv)
    if triton_skip_reason():
        print(f"check-design needs Triton: {triton_skip_reason()}")
        return 2
    if not interpreted():
        parser.error("the design checks count what each program does under Triton's interpreter: run them with "
                     "TRITON_INTERPRET=1 (`make check-design` does)")
    from kernels import impl

    try:
        impl.activate(impl.resolve(args.impl, ROOT))
    except impl.ImplError as exc:
        parser.error(str(exc))
    print("gpu_kernels: the design checks of the hidden tests (handout §A.7), on your code at public sizes, under "
          "Triton's interpreter")
    found = Counter()
    for section, function, asks, check in CHECKS:
        status, said = run_check(check)
        found[status] += 1
        print(f"  {status.upper() if status in ('fails', 'error') else status:<19} {section} {function}: {asks}"
              + (f"\n      {said}" if said else ""))
    print(f"{found['ok']} of {len(CHECKS)} pass" + "".join(f", {n} {status}" for status, n in found.items()
                                                      if status != "ok") +
          ". The hidden tests check the same at random sizes, and count each only once the kernel's value tests pass.")
    return 1 if found["fails"] or found["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
