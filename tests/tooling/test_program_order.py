"""kernels.program_order: a Triton launch interpreted with its programs in another order, as a GPU may run them."""

import pytest
import torch

from kernels.device import interpreted

pytestmark = [pytest.mark.triton,
              pytest.mark.skipif(not interpreted(), reason="reorders the interpreter's programs: a CPU check")]


def softmax_rows(x, row_mask: bool):
    """Row softmax, a program per row, its block wider than the row. row_mask=False plants the GPU-only bug:
    the store is masked against the tensor's end, not the row's, so each program writes zeros past its row."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr, ROW_MASK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        offsets = tl.program_id(0) * n_cols + cols
        x = tl.load(x_ptr + offsets, mask=cols < n_cols, other=-float("inf"))
        p = tl.exp(x - tl.max(x, 0))
        p = p / tl.sum(p, 0)
        tl.store(out_ptr + offsets, p, mask=(cols < n_cols) if ROW_MASK else offsets < n_rows * n_cols)

    out = torch.empty_like(x)
    kernel[(x.shape[0],)](x, out, x.shape[0], x.shape[1], BLOCK=16, ROW_MASK=row_mask)
    return out


def test_programs_run_once_each_in_the_order_asked():
    import triton
    import triton.language as tl

    from kernels.program_order import programs_in_order

    @triton.jit
    def stamp(order_ptr, counter_ptr):  # each program writes the count of programs run before it
        pid = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
        seen = tl.load(counter_ptr)
        tl.store(order_ptr + pid, seen)
        tl.store(counter_ptr, seen + 1)

    def ran(order):
        positions, counter = torch.zeros(6, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
        if order is None:
            stamp[(3, 2)](positions, counter)
        else:
            with programs_in_order(order):
                stamp[(3, 2)](positions, counter)
        return positions.tolist()

    assert ran(None) == [0, 2, 4, 1, 3, 5]  # x outer, y inner: the interpreter's order
    assert ran("reversed") == [5, 3, 1, 4, 2, 0]
    assert sorted(ran("shuffled")) == list(range(6)) and ran("shuffled") != ran(None)
    assert ran(None) == [0, 2, 4, 1, 3, 5], "the interpreter's order was not restored"


def test_a_store_past_the_row_passes_in_order_and_fails_in_another():
    from kernels.program_order import program_order_problems

    x = torch.randn(8, 10, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(softmax_rows(x, row_mask=False), torch.softmax(x, 1)), "the planted bug shows in order"
    assert program_order_problems(lambda: softmax_rows(x, row_mask=True), "softmax") == []
    problems = program_order_problems(lambda: softmax_rows(x, row_mask=False), "softmax")
    assert [p.split(" order")[0].rsplit(" ", 1)[-1] for p in problems] == ["reversed", "shuffled"], problems
    assert problems[0].startswith("softmax: output 0 differs in ") and "mask each store" in problems[0]
