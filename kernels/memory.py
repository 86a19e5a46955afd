"""A peak-memory tracker that works on a laptop (CPU) and on a GPU.

    with MemoryTracker() as mem:
        o, lse = flash_forward_pytorch(q, k, v)
    mem.peak_bytes         # most bytes alive at once among the storages created inside
    mem.largest_numel      # the largest tensor an op inside returned, in elements...
    mem.largest_bytes      # ...and in bytes
    mem.held_bytes         # bytes still alive at the end among the storages ops inside created or wrote

On CPU there are no allocator statistics, so the tracker counts storages itself: a TorchDispatchMode
sees every aten op run inside the block, notes each output whose storage is new (a view shares its
base's storage and is not new), and a weakref finalizer subtracts a storage's bytes when torch frees
it. On a GPU, `peak_bytes` comes from the CUDA caching allocator instead (reset the peak on entry,
read `max_memory_allocated` on exit, minus what was allocated before): that also sees memory no aten
op reports, such as a Triton kernel's scratch space. The largest-tensor figures and `held_bytes`
come from the dispatch mode in both cases.

The largest tensor is any tensor an op returns, new or not: a view, an in-place result and an `out=`
result count at their own size (an expanded view at no more than its storage holds), so a score matrix
written into a buffer made before the block (at import, say), or viewed whole, is seen for what it is.
`held_bytes` is what the block leaves behind: the storages created inside that are still alive when it
ends, and the storages from before it that an op inside wrote into (in place or through `out=`) and
that are still alive. For a forward pass that is what autograd keeps for the backward, plus the
output; activation checkpointing holds less.

The "never materialises an n_queries x n_keys matrix" tests use `largest_numel`: one attention
score matrix for one head of N = 1024 is 1024 * 1024 elements, which no tiled kernel ever creates.
"""

from __future__ import annotations

import weakref

import kernels  # noqa: F401  (entering a dispatch mode imports Triton: select its mode first)
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _tensors(values) -> list[torch.Tensor]:
    """The tensors among an aten op's arguments or results: tensors, or lists and tuples of them."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


class _StorageAccounting(TorchDispatchMode):
    """Counts the bytes of the storages created while active, live and at peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}  # storage data pointer -> bytes
        self.live_bytes = 0
        self.peak_bytes = 0
        self.largest_numel = 0
        self.largest_bytes = 0
        self.written: dict[int, weakref.ref] = {}  # storages from before the block that an op wrote into

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((*args, *kwargs.values()))}
        schema = getattr(func, "_schema", None)
        writes = schema is not None and any(a.alias_info is not None and a.alias_info.is_write
                                            for a in schema.arguments)
        for tensor in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
            self._note(tensor, inputs, writes)
        return out

    def _note(self, tensor: torch.Tensor, inputs: set[int], writes: bool) -> None:
        storage = tensor.untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        # Every result counts at its own size for the largest tensor, a view or an in-place result too; an
        # expanded view no more than the elements its storage holds (a scalar's expand(n, n) holds one).
        numel = min(tensor.numel(), size // tensor.element_size())
        self.largest_numel = max(self.largest_numel, numel)
        self.largest_bytes = max(self.largest_bytes, numel * tensor.element_size())
        # A view or an in-place result shares a storage we have seen (or one from outside): not new memory.
        if size == 0 or key in self.live:
            return
        if key in inputs:
            if writes:  # an in-place or out= op wrote into a storage from before the block
                self.written.setdefault(key, weakref.ref(storage))
            return
        self.live[key] = size
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(storage, self._free, key, size)

    def held_bytes(self) -> int:
        """Bytes alive now among the storages created while active and those from before it written into."""
        return self.live_bytes + sum(storage.nbytes() for key, ref in self.written.items()
                                     if key not in self.live and (storage := ref()) is not None
                                     and storage.data_ptr() == key)

    def _free(self, key: int, size: int) -> None:
        if self.live.get(key) == size:
            del self.live[key]
            self.live_bytes -= size


class MemoryTracker:
    """Context manager: peak memory and the largest tensor created inside the block.

    `device` is "cpu" (storage accounting) or "cuda" (allocator statistics for the peak); by default
    the GPU when there is one. After the block: `peak_bytes`, `largest_numel`, `largest_bytes`,
    `held_bytes` (ints) and `source`, which says where `peak_bytes` came from.
    """

    def __init__(self, device: str | torch.device | None = None) -> None:
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"MemoryTracker tracks 'cpu' or 'cuda' memory, got device {self.device}")
        self.source = "cuda allocator" if self.device.type == "cuda" else "storage accounting"
        self.peak_bytes = 0
        self.largest_numel = 0
        self.largest_bytes = 0
        self.held_bytes = 0
        self._mode: _StorageAccounting | None = None
        self._base = 0

    def __enter__(self) -> "MemoryTracker":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        self._mode = _StorageAccounting()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        mode, self._mode = self._mode, None
        mode.__exit__(*exc_info)
        self.largest_numel, self.largest_bytes = mode.largest_numel, mode.largest_bytes
        self.held_bytes = mode.held_bytes()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device) - self._base)
        else:
            self.peak_bytes = mode.peak_bytes
