"""Run Triton launches under the interpreter with the programs in another order, and compare the outputs.

    with programs_in_order("reversed"):
        out = softmax_triton(x)                    # the last program runs first
    program_order_problems(lambda: softmax_triton(x))   # [] when the order does not matter

Why: a GPU runs a grid's programs all at once, in no fixed order. Triton's interpreter runs them one
after another in increasing order (triton/runtime/interpreter.py, GridExecutor.__call__: loops over x,
then y, then z, calling `interpreter_builder.set_grid_idx(x, y, z)` before each program). A kernel
that is right only in that order passes every CPU test and fails on a GPU: a softmax whose last block
of a row writes past the row (masked against the tensor's end, not the row's) is repaired by the next
row's program, which runs later on a CPU but may run earlier on a GPU.

How, without copying Triton's code: inside `programs_in_order`, the interpreter's `set_grid_idx` is
wrapped so that the k-th program the loops visit gets the ids of the k-th program of a permutation
of the grid. Every program still runs exactly once, with its own ids; only the order changes. The
method is restored on exit. Same in Triton 3.6 and 3.9; it needs an interpreted process
(TRITON_INTERPRET=1), since on a GPU the order is the hardware's.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Callable, Iterator

ORDERS = ("reversed", "shuffled")


def permutation(total: int, order: str, seed: int = 0) -> list[int]:
    """The programs 0..total-1 (in the interpreter's order) in `order`: "reversed" or "shuffled" (by seed)."""
    if order == "reversed":
        return list(range(total - 1, -1, -1))
    if order == "shuffled":
        programs = list(range(total))
        random.Random(seed).shuffle(programs)
        return programs
    raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


def _interpreter_builder():
    from kernels.device import interpreted

    if not interpreted():
        raise RuntimeError("kernels.program_order needs Triton's interpreter (TRITON_INTERPRET=1): on a GPU the "
                           "hardware chooses the order; run the check on a CPU")
    from triton.runtime import interpreter

    return interpreter.interpreter_builder


@contextmanager
def programs_in_order(order: str, seed: int = 0) -> Iterator[None]:
    """Interpreted launches inside the block run their programs in `order` (see permutation())."""
    builder = _interpreter_builder()
    original, own = builder.set_grid_idx, vars(builder).get("set_grid_idx")
    orders: dict[tuple, list[int]] = {}

    def set_grid_idx(x, y, z):
        nx, ny, nz = builder.grid_dim
        if (nx, ny, nz) not in orders:
            orders[(nx, ny, nz)] = permutation(nx * ny * nz, order, seed)
        x, rest = divmod(orders[(nx, ny, nz)][(x * ny + y) * nz + z], ny * nz)
        return original(x, *divmod(rest, nz))

    builder.set_grid_idx = set_grid_idx
    try:
        yield
    finally:
        if own is None:
            del builder.set_grid_idx  # the class's method again
        else:
            builder.set_grid_idx = own


def program_order_problems(run: Callable[[], object], what: str = "the kernel", orders=ORDERS,
                           rtol: float = 0.0, atol: float = 0.0) -> list[str]:
    """What changes when `run()` (a call that launches Triton kernels and returns fresh output tensors:
    a tensor, or a tuple or dict of them) runs its programs in each of `orders` instead of the
    interpreter's; empty when nothing does. `run` must not change its inputs in place.

    rtol, atol: how far an element may move (torch.isclose); exact by default. Give a tolerance where
    programs may add into the same output with atomics: the sum then depends on the order by rounding."""
    import torch

    def tensors(out) -> list:
        values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else [out]
        return [t for t in values if isinstance(t, torch.Tensor)]

    expected = tensors(run())
    found = []
    for order in orders:
        with programs_in_order(order):
            got = tensors(run())
        for i, (want, have) in enumerate(zip(expected, got)):
            same = torch.isclose(want, have, rtol=rtol, atol=atol, equal_nan=True)
            if not bool(same.all()):
                found.append(f"{what}: output {i} differs in {int((~same).sum())} of {same.numel()} elements when "
                             f"its programs run in {order} order: on a GPU programs run in any order, so a "
                             "program must not write what another program writes or read what it wrote "
                             "(mask each store to the program's own part)")
    return found
