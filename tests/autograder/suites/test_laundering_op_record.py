"""The worker's record of torch ops (kernels/host_ops.py; issue 29, part 1): an allowlist of the ops that do
not compute (allocations, views, copies, metadata), so that in-place arithmetic, comparisons, powers and
conversions to Python numbers run by a Triton task's host code are all seen. The record can only take
points away (the static rules hold them); the reference kernels must show nothing.
"""

from __future__ import annotations

import math

import pytest
import torch

from kernels.host_ops import NOT_COMPUTING, computing_ops


def test_in_place_arithmetic_comparisons_and_numbers_are_recorded():
    """The issue's laundering ops (`t *= y`, `acc += t`, `math.e ** u`, `acc *= acc > 0`) and `.item()`."""
    a, b = torch.randn(3, 4), torch.randn(4)
    with computing_ops() as ops:
        t = a.clone()
        t *= b
        t += a
        u = math.e ** t
        t *= t > 0
        float(u[0, 0])
    assert {"aten.mul_", "aten.add_", "aten.pow", "aten.gt", "aten._local_scalar_dense"} <= set(ops.names), ops.names


def test_allocations_views_and_copies_are_not():
    a = torch.randn(4, 6)
    with computing_ops() as ops:
        c = torch.empty_like(a)
        c.copy_(a.t().contiguous().t())
        d = a.reshape(2, 12)[:, ::2].clone().to(torch.float64)
        torch.zeros(3).fill_(1.0)
        a.new_empty((2, 2)).zero_()
        a.unsqueeze(0).expand(2, 4, 6).transpose(1, 2).detach()
    assert ops.names == [], ops.names
    assert d.dtype == torch.float64 and "aten.add_" not in NOT_COMPUTING


@pytest.mark.parametrize("kernel", ["matmul", "gelu", "softmax"])
def test_the_reference_kernels_record_nothing(kernel):
    """Under the interpreter, the reference's host code and Triton's own copies in and out are allocations,
    views and copies only."""
    pytest.importorskip("triton")
    import importlib
    import sys
    from pathlib import Path

    before = set(sys.modules)
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "solutions"))
    try:
        module = importlib.import_module({"matmul": "gpu_kernels.matmul", "gelu": "gpu_kernels.elementwise",
                                          "softmax": "gpu_kernels.softmax"}[kernel])
        a, b, bias = torch.randn(20, 12), torch.randn(12, 9), torch.randn(9)
        call = {"matmul": lambda: module.matmul_triton(a, b.t().contiguous().t(), bias, "gelu"),
                "gelu": lambda: module.gelu_triton(a.t()), "softmax": lambda: module.softmax_triton(a[:, ::2])}[kernel]
        with computing_ops() as ops:
            call()
    finally:
        sys.path.pop(0)
        for name in set(sys.modules) - before:  # leave no reference module behind for the other tests
            if name.partition(".")[0] == "gpu_kernels":
                del sys.modules[name]
    assert ops.names == [], ops.names


def test_an_autotuners_timing_is_not_recorded(monkeypatch):
    """What Triton runs to time an autotuner's configs (Autotuner._bench, on a GPU) is Triton's own work."""
    autotuner = pytest.importorskip("triton.runtime.autotuner").Autotuner

    def bench(self, *args, **kwargs):
        return torch.tensor([1.0, 2.0]).median().item()

    monkeypatch.setattr(autotuner, "_bench", bench)
    with computing_ops() as ops:
        autotuner._bench(None)
        torch.ones(2).sum()
    assert ops.names == ["aten.sum"], ops.names
    assert autotuner._bench is bench
