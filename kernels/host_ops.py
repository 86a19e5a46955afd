"""Record the torch ops that compute, run inside a block: the host code of a Triton task runs none.

    with computing_ops() as ops:
        c = matmul_triton(a, b)
    ops.names          # ["aten.add_", "aten.mul"]: sorted, once each; [] for host code that only launches

Host code of a Triton task allocates, views, copies and launches; the arithmetic is the kernels'. So
the record is an allowlist: every aten op that is not an allocation, a view, a copy or a metadata
query (NOT_COMPUTING) counts as computing, in-place ops (`aten.add_`, `aten.mul_`), comparisons
(`aten.gt`) and conversions to Python numbers (`aten._local_scalar_dense`) included. An op missing
from the list fails honest code loudly, where a list of the ops that compute would let a new one
through in silence.

Under TRITON_INTERPRET=1 the interpreter itself copies each tensor argument in and out (`empty`,
`set_`, `copy_`: on the list). On a GPU an autotuner times its configs (`Autotuner._bench`); what
Triton runs to time them is Triton's, not the host code's, and is not recorded.

What the record shows is what the student's code let the worker see: a grader may take points away
for it, never give points for it alone (autograder/static/triton_rules.py holds those).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import kernels  # noqa: F401  (entering a dispatch mode imports Triton: select its mode first)
from torch.utils._python_dispatch import TorchDispatchMode

ALLOCATIONS = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
               "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "zero_", "fill_",
               "resize_", "set_")
VIEWS = ("view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "t", "transpose", "permute",
         "unsqueeze", "squeeze", "slice", "select", "narrow", "unbind", "split", "split_with_sizes", "chunk", "alias",
         "detach", "unflatten", "flatten", "movedim", "view_as", "expand_as")
COPIES = ("copy_", "clone", "_to_copy", "_copy_from", "_copy_from_and_resize")
METADATA = ("size", "stride", "sym_size", "sym_stride", "numel", "sym_numel", "dim", "is_contiguous",
            "is_same_size", "is_floating_point", "is_complex", "storage_offset", "sym_storage_offset")
NOT_COMPUTING = frozenset(f"aten.{name}" for name in ALLOCATIONS + VIEWS + COPIES + METADATA)


class _Ops(TorchDispatchMode):
    """Each aten op run inside the block that is not on NOT_COMPUTING, by name (`aten.add_`)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()
        self.paused = 0

    @property
    def names(self) -> list[str]:
        return sorted(self.found)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if not self.paused and name not in NOT_COMPUTING:
            self.found.add(name)
        return func(*args, **(kwargs or {}))


def _autotuner():
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # no Triton here: nothing is tuned
        return None
    return Autotuner if callable(Autotuner.__dict__.get("_bench")) else None


@contextmanager
def computing_ops() -> Iterator[_Ops]:
    """Record the computing torch ops run inside the block (an autotuner's timing of its configs aside)."""
    ops = _Ops()
    autotuner = _autotuner()
    original = autotuner.__dict__["_bench"] if autotuner is not None else None

    def bench(self, *args, **kwargs):
        ops.paused += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            ops.paused -= 1

    if autotuner is not None:
        autotuner._bench = bench
    try:
        with ops:
            yield ops
    finally:
        if autotuner is not None:
            autotuner._bench = original
