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


def test_views_and_in_place_results_are_not_new_memory_but_count_as_tensors_of_their_size():
    base = torch.zeros(64, 64)
    with MemoryTracker("cpu") as mem:
        view = base.view(4096)[:100]
        kept = base.t()
    assert mem.peak_bytes == 0 and mem.held_bytes == 0  # nothing new, nothing written
    assert (mem.largest_numel, mem.largest_bytes) == (4096, 4096 * 4)  # base.view(4096) is the whole matrix
    with MemoryTracker("cpu") as mem:
        base.add_(1.0)
    assert mem.peak_bytes == 0 and mem.largest_numel == 4096
    assert mem.held_bytes == 4096 * 4  # written inside, alive after
    del view, kept


def test_a_result_written_into_a_buffer_made_before_is_seen_at_its_size():
    """A score matrix put into a buffer allocated at import (out=, or copied in) is as large as it is."""
    buffer = torch.empty(2**16)
    q, k = torch.randn(200, 16), torch.randn(200, 16)
    with MemoryTracker("cpu") as mem:
        torch.matmul(q, k.T, out=buffer[:200 * 200].view(200, 200))
    assert mem.largest_numel == 200 * 200 and mem.held_bytes == 2**16 * 4
    with MemoryTracker("cpu") as mem:
        buffer[:200 * 200].view(200, 200).copy_(q @ k.T)
    assert mem.largest_numel == 200 * 200 and mem.held_bytes == 2**16 * 4  # the product itself died
    assert mem.peak_bytes == 200 * 200 * 4


def test_an_expanded_view_counts_what_its_storage_holds():
    one = torch.ones(1)
    with MemoryTracker("cpu") as mem:
        wide = one.expand(1000, 1000)
    assert mem.largest_numel == 1 and mem.held_bytes == 0
    del wide


def test_held_bytes_are_what_the_block_leaves_alive():
    before = torch.zeros(10)
    with MemoryTracker("cpu") as mem:
        a = torch.ones(100)  # 400 bytes, freed inside
        b = torch.ones(20)  # 80 bytes, kept
        scratch = torch.zeros(50)
        scratch.add_(1.0)  # created inside: counted once, as new
        del a, scratch
        before.mul_(2.0)  # 40 bytes from before, written
    assert mem.held_bytes == 80 + 40 and mem.peak_bytes == 400 + 80 + 200
    del before
    assert mem.held_bytes == 80 + 40  # read at the end of the block, not later
    del b


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
