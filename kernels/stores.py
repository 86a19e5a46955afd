"""Which elements of a result the kernels wrote, observed inside Triton's interpreter.

    with record_stores(package_dir) as stores:
        y = gelu_triton(x)
    stores.account(y)    # {"elements": 1200, "unwritten": 0, "differs": 0}

"A Triton kernel computed this" is observed, not inferred. Under TRITON_INTERPRET=1 every `tl.store`
(masked or not, through a block pointer or a descriptor) and every atomic of a kernel ends in the
interpreter's builder; the recorder wraps those methods and keeps, for each store of a kernel whose code
lives in `package_dir` (the student's package), the addresses it wrote and the bytes it wrote there.
`account(result)` then looks at every element of the result: it must lie at an address such a store
wrote last, and hold the bytes stored. A value written by host code after the launch (through a numpy
view of the tensor, a ctypes pointer, a torch op), or a tensor made elsewhere (torch.from_numpy of an
answer computed on the host), is "unwritten" or "differs".

Host code may still move what a kernel wrote: a copy, a cast or a concatenation of elements that are
all the kernel's (aten copy_, clone, _to_copy, cat, stack, seen by a dispatch mode during the block)
makes the copy's elements the kernel's too, with the bytes the copy holds. A view needs nothing: its
elements are where the kernel wrote.

Under a compiled launch (a GPU) nothing is recorded: `account` returns None, and the grader relies on its
other checks there.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

import kernels  # noqa: F401  (select the interpreter before Triton is imported)

_COPIES = ("aten::copy_", "aten::clone", "aten::_to_copy", "aten::cat", "aten::stack")
_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _addresses(tensor: torch.Tensor) -> np.ndarray:
    """The address of every element of a CPU tensor, in its logical (row-major) order."""
    offsets = np.zeros((), dtype=np.int64)
    for size, stride in zip(tensor.shape, tensor.stride()):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * stride
    return (tensor.data_ptr() + offsets.reshape(-1) * tensor.element_size()).astype(np.uint64)


def _raw(tensor: torch.Tensor) -> np.ndarray:
    """The bytes of every element of a CPU tensor as unsigned integers, in logical order."""
    dense = tensor.detach().contiguous().reshape(-1)
    return dense.view(torch.uint8).numpy().view(_UINTS[tensor.element_size()]).copy()


class StoreRecord:
    """What the kernels of one package stored while the block ran, as (addresses, bytes) per element size."""

    def __init__(self, package_dir: str) -> None:
        self.package_dir = os.path.realpath(package_dir) + os.sep
        self.kernels: list = []  # the launches under way, innermost last (their Python functions)
        self._writes: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._last: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.observing = False  # whether the block ran under the interpreter, where stores are seen

    def _ours(self) -> bool:
        if not self.kernels:
            return False
        code = getattr(self.kernels[-1], "__code__", None)
        return code is not None and os.path.realpath(code.co_filename).startswith(self.package_dir)

    def add(self, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray | None) -> None:
        addresses = np.asarray(addresses)
        values = np.broadcast_to(np.asarray(values), addresses.shape)
        keep = np.ones(addresses.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, bool),
                                                                                         addresses.shape)
        size = values.dtype.itemsize
        if size not in _UINTS:
            return
        self._writes.setdefault(size, []).append((addresses[keep].astype(np.uint64).reshape(-1),
                                                  np.ascontiguousarray(values[keep]).view(_UINTS[size]).reshape(-1)))
        self._last.pop(size, None)

    def stored(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(sorted addresses, the bytes last stored at each) of the stores of elements of `size` bytes."""
        if size not in self._last:
            writes = self._writes.get(size, [])
            if not writes:
                self._last[size] = (np.zeros(0, np.uint64), np.zeros(0, _UINTS[size]))
            else:
                addresses = np.concatenate([a for a, _ in writes])[::-1]
                values = np.concatenate([v for _, v in writes])[::-1]
                unique, first = np.unique(addresses, return_index=True)  # first in reverse: the last store
                self._last[size] = (unique, values[first])
        return self._last[size]

    def compare(self, tensor: torch.Tensor) -> tuple[int, int, int]:
        """(elements, unwritten, differs) of a CPU tensor against the stores."""
        addresses, raw = _addresses(tensor), _raw(tensor)
        known, values = self.stored(tensor.element_size())
        where = np.searchsorted(known, addresses)
        inside = where < len(known)
        found = np.zeros(addresses.shape, dtype=bool)
        found[inside] = known[where[inside]] == addresses[inside]
        differs = found.copy()
        differs[found] = values[where[found]] != raw[found]
        return int(addresses.size), int((~found).sum()), int(differs.sum())

    def account(self, result) -> dict | None:
        """{"elements", "unwritten", "differs"} of a tensor result (an empty one has nothing to store); None
        where nothing could be observed (compiled launches, a result not on the CPU)."""
        if not self.observing or not isinstance(result, torch.Tensor) or result.device.type != "cpu":
            return None
        elements, unwritten, differs = self.compare(result)
        return {"elements": elements, "unwritten": unwritten, "differs": differs}


class _Copies(TorchDispatchMode):
    """Host copies of what the kernels wrote are the kernels' too (the module's docstring)."""

    def __init__(self, record: StoreRecord) -> None:
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func._schema.name in _COPIES:
            with _disable_current_modes():  # its own reading of the tensors is nobody's op to record
                self._copied(func, args, out)
        return out

    def _copied(self, func, args, out) -> None:
        flat = [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]
        sources = [t for t in flat if isinstance(t, torch.Tensor)]
        targets = [out] if isinstance(out, torch.Tensor) else []
        if func._schema.name == "aten::copy_":
            sources, targets = sources[1:2], sources[:1]
        if all(t.device.type == "cpu" for t in sources + targets) and sources and targets and all(
                t.numel() and self.record.compare(t)[1:] == (0, 0) for t in sources):
            for target in targets:
                self.record.add(_addresses(target), _raw(target), None)


@contextmanager
def record_stores(package_dir: str) -> Iterator[StoreRecord]:
    """Record the stores of the kernels of `package_dir` launched inside the block (under the interpreter)."""
    record = StoreRecord(package_dir)
    from kernels.device import interpreted

    if not interpreted():
        yield record
        return
    from triton.runtime import interpreter

    builder, function = interpreter.InterpreterBuilder, interpreter.InterpretedFunction
    saved = {name: getattr(builder, name) for name in ("create_masked_store", "create_atomic_rmw",
                                                         "create_atomic_cas")}
    run = function.run

    def launch(self, *args, **kwargs):
        record.kernels.append(self.fn)
        try:
            return run(self, *args, **kwargs)
        finally:
            record.kernels.pop()

    def store(self, ptrs, value, mask, *rest):
        done = saved["create_masked_store"](self, ptrs, value, mask, *rest)
        if record._ours():
            record.add(ptrs.data, value.data, mask.data)
        return done

    def after_atomic(ptrs, mask, dtype) -> None:
        """What an atomic left in memory, read back from its addresses."""
        if record._ours():
            other = np.zeros(np.shape(ptrs.data), dtype=dtype)
            record.add(ptrs.data, interpreter._interpreter.load(ptrs.data, mask, other, dtype), mask)

    def atomic_rmw(self, op, ptr, val, mask, *rest):
        done = saved["create_atomic_rmw"](self, op, ptr, val, mask, *rest)
        after_atomic(ptr, np.broadcast_to(np.asarray(mask.data, bool), np.shape(ptr.data)), val.data.dtype)
        return done

    def atomic_cas(self, ptr, cmp, val, *rest):
        done = saved["create_atomic_cas"](self, ptr, cmp, val, *rest)
        after_atomic(ptr, np.ones(np.shape(ptr.data), dtype=bool), val.data.dtype)
        return done

    builder.create_masked_store, builder.create_atomic_rmw, builder.create_atomic_cas = store, atomic_rmw, atomic_cas
    function.run = launch
    record.observing = True
    try:
        with _Copies(record):
            yield record
    finally:
        for name, method in saved.items():
            setattr(builder, name, method)
        function.run = run


def package_dir(package: str) -> str:
    """The folder of `package` as the import path finds it now (not as the module says of itself)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no package {package} on the import path")
    return list(spec.submodule_search_locations)[0]


def accounts(record: StoreRecord, **results) -> dict:
    """{name: record.account(result)} of the results that could be observed (under the interpreter)."""
    found = {name: record.account(result) for name, result in results.items()}
    return {name: account for name, account in found.items() if account is not None}
