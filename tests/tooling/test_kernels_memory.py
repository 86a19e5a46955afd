"""kernels.memory: the peak-memory tracker (storage accounting on CPU)."""

import pytest
import torch

from kernels.memory import MemoryTracker


def test_a_known_allocation_is_the_peak_and_the_largest_tensor():
    with MemoryTracker("cpu") as mem:
        x = torch.zeros(4, 8)  # 128 bytes in float32 (the lecture's example)
    assert (mem.peak_bytes, mem.largest_numel, mem.largest_bytes) == (128, 32, 128)
    assert mem.source == "storage accounting"
    del x


def test_the_peak_counts_what_is_alive_at_once_not_the_total():
    with MemoryTracker("cpu") as mem:
        a = torch.empty(1000)  # 4000 bytes
        b = torch.empty(2000)  # 8000 bytes: 12000 alive
        del a
        c = torch.empty(500)  # 2000 bytes: 10000 alive
    assert mem.peak_bytes == 12000
    assert (mem.largest_numel, mem.largest_bytes) == (2000, 8000)
    del b, c


def test_views_and_in_place_results_are_not_new_memory():
    base = torch.zeros(64, 64)
    with MemoryTracker("cpu") as mem:
        view = base.view(4096)[:100]
        base.add_(1.0)
        kept = base.t()
    assert mem.peak_bytes == 0 and mem.largest_numel == 0
    del view, kept


def test_intermediates_count_at_their_own_size():
    x = torch.randn(256, 256)
    with MemoryTracker("cpu") as mem:
        y = (x @ x).sum()
    assert mem.largest_numel == 256 * 256 and mem.largest_bytes == 256 * 256 * 4
    del y


def test_an_unknown_device_is_refused():
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        MemoryTracker("meta")


@pytest.mark.gpu
def test_on_a_gpu_the_peak_comes_from_the_allocator():
    with MemoryTracker("cuda") as mem:
        x = torch.empty(2**20, device="cuda")  # 4 MiB
        del x
    assert mem.source == "cuda allocator"
    assert mem.peak_bytes >= 4 * 2**20 and mem.largest_bytes == 4 * 2**20
