"""kernels/stores.py: which elements of a result the package's kernels stored, under Triton's interpreter.

The reference's kernels store every element of their results (gpu_kernels' three kernels, FlashAttention's
forward and backward, and an alternative backward that sums dQ with atomics); host code may view, copy,
cast and concatenate what they stored. What they did not store fails: a value written after the launch
through a numpy view, a torch op that overwrites the result, a tensor made from host data, and a result
written by a kernel from outside the package.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernels.device import triton_available

pytestmark = pytest.mark.skipif(not triton_available(), reason="needs triton (Linux)")
ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
ALTERNATIVES = ROOT / "tests" / "autograder" / "alternatives"
CLEAN = {"elements": None, "unwritten": 0, "differs": 0}


@pytest.fixture(scope="module")
def reference():
    """The reference's packages importable (the solutions tree first on sys.path), and the recorder."""
    from kernels import stores

    sys.path.insert(0, str(SOLUTIONS))
    try:
        import flash_attention.flash_triton as flash
        import gpu_kernels.elementwise as elementwise
        import gpu_kernels.matmul as matmul
        import gpu_kernels.softmax as softmax

        yield stores, elementwise, softmax, matmul, flash
    finally:
        sys.path.remove(str(SOLUTIONS))


def clean(account: dict | None) -> bool:
    return account is not None and account["elements"] > 0 and account["unwritten"] == account["differs"] == 0


def test_the_reference_kernels_store_every_element(reference):
    stores, elementwise, softmax, matmul, flash = reference
    x = torch.randn(33, 40)
    runs = {"gelu": lambda: elementwise.gelu_triton(x.t()), "softmax": lambda: softmax.softmax_triton(x, 16),
            "matmul": lambda: matmul.matmul_triton(x, x.t(), torch.randn(33), "gelu")}
    for name, run in runs.items():
        with stores.record_stores(stores.package_dir("gpu_kernels")) as record:
            y = run()
        assert clean(record.account(y)), (name, record.account(y))
    q, k, v = (torch.randn(2, 40, 16) for _ in range(3))
    with stores.record_stores(stores.package_dir("flash_attention")) as record:
        o, lse = flash.flash_forward_triton(q, k, v, is_causal=True)
        grads = flash.flash_backward_triton(q, k, v, o, lse, torch.randn_like(o), is_causal=True)
    assert all(clean(record.account(t)) for t in (o, lse, *grads))


def test_host_copies_casts_views_and_concatenations_of_what_a_kernel_stored_are_its(reference):
    stores, elementwise, *_ = reference
    x = torch.randn(12, 30)
    with stores.record_stores(stores.package_dir("gpu_kernels")) as record:
        y = elementwise.gelu_triton(x)
        copies = [y.t().contiguous(), y.to(torch.float64), y[3:, ::2], y.reshape(-1), torch.cat([y, y]),
                  y.clone().t()]
    assert all(clean(record.account(t)) for t in copies), [record.account(t) for t in copies]


@pytest.mark.parametrize("trick", ["numpy view", "torch op", "from numpy", "host copy of host data"])
def test_a_result_the_kernel_did_not_store_is_found(reference, trick):
    """The kernel ran and stored its (right) values; then host code put values there (the right ones, as an
    answer computed elsewhere would be): each is "unwritten" or "differs" somewhere."""
    stores, elementwise, *_ = reference
    x = torch.randn(12, 30)
    answer = torch.nn.functional.gelu(x.double(), approximate="tanh").float() + 1e-3
    with stores.record_stores(stores.package_dir("gpu_kernels")) as record:
        y = elementwise.gelu_triton(x)
        if trick == "numpy view":
            y.numpy()[...] = answer.numpy()
        elif trick == "torch op":
            y.copy_(answer)
        elif trick == "from numpy":
            y = torch.from_numpy(answer.numpy().copy())
        else:
            y = answer.clone()
    account = record.account(y)
    assert account is not None and (account["unwritten"] or account["differs"]), account


def test_an_empty_result_needs_no_store_and_a_result_no_kernel_wrote_is_all_unwritten(reference):
    stores, *_ = reference
    with stores.record_stores(stores.package_dir("gpu_kernels")) as record:
        empty, host = torch.empty(0, 5), torch.ones(4, 5)
    assert record.account(empty) == {"elements": 0, "unwritten": 0, "differs": 0}
    assert record.account(host) == {"elements": 20, "unwritten": 20, "differs": 0}


def test_a_kernel_from_outside_the_package_does_not_count(reference, tmp_path):
    """The same store, by a kernel whose code lives elsewhere (a module written beside the package): its
    elements are not the package's."""
    stores, *_ = reference
    (tmp_path / "elsewhere.py").write_text(textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def copy(X, Y, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            tl.store(Y + offsets, tl.load(X + offsets, mask=offsets < n), mask=offsets < n)
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        import elsewhere

        x, y = torch.randn(50), torch.empty(50)
        with stores.record_stores(stores.package_dir("gpu_kernels")) as record:
            elsewhere.copy[(1,)](x, y, 50, BLOCK=64)
        assert record.account(y) == {"elements": 50, "unwritten": 50, "differs": 0}
    finally:
        sys.path.remove(str(tmp_path))


def test_an_atomic_sum_of_the_kernels_is_theirs(tmp_path):
    """The atomic_dq alternative sums dQ with tl.atomic_add: what the atomics leave in memory is the kernels'."""
    from kernels import stores

    tree = tmp_path / "tree"
    import shutil

    shutil.copytree(SOLUTIONS / "flash_attention", tree / "flash_attention", ignore=shutil.ignore_patterns("__pycache__"))
    for path in (ALTERNATIVES / "flash_attention" / "atomic_dq").glob("*.py"):
        shutil.copy(path, tree / "flash_attention" / path.name)
    for name in [m for m in sys.modules if m == "flash_attention" or m.startswith("flash_attention.")]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        import flash_attention.flash_triton as flash

        q, k, v = (torch.randn(1, 48, 16) for _ in range(3))
        o, lse = flash.flash_forward_triton(q, k, v)
        with stores.record_stores(stores.package_dir("flash_attention")) as record:
            grads = flash.flash_backward_triton(q, k, v, o, lse, torch.randn_like(o))
        assert all(clean(record.account(t)) for t in grads), [record.account(t) for t in grads]
    finally:
        sys.path.remove(str(tree))
        for name in [m for m in sys.modules if m == "flash_attention" or m.startswith("flash_attention.")]:
            del sys.modules[name]


def test_the_check_on_the_trusted_side_fails_a_result_the_kernels_did_not_store():
    """autograder.harness.student.checked_stores, which both runners apply to a `stores` scenario's answer."""
    from autograder.harness.student import NotComputedByKernel, checked_stores

    def scenario():
        """A stand-in scenario function."""

    scenario.stores = True
    y = torch.zeros(3)
    ok = {"y": y, "kernel_stores": {"y": {"elements": 3, "unwritten": 0, "differs": 0}}}
    assert checked_stores(scenario, {"device": "cpu"}, ok) == {"y": y}
    with pytest.raises(NotComputedByKernel, match="y: 1 of its 3 elements were not stored by your kernels"):
        checked_stores(scenario, {"device": "cpu"}, {"y": y, "kernel_stores": {"y": {"elements": 3, "unwritten": 1,
                                                                                        "differs": 0}}})
    with pytest.raises(NotComputedByKernel, match="no Triton kernel of your package ran"):
        checked_stores(scenario, {"device": "cpu"}, {"y": y})
    with pytest.raises(NotComputedByKernel, match="y: no Triton kernel of your package stored it"):
        checked_stores(scenario, {"device": "cpu"}, {"y": y, "kernel_stores": {}})
    with pytest.raises(NotComputedByKernel, match="malformed"):
        checked_stores(scenario, {"device": "cpu"}, {"y": y, "kernel_stores": {"y": {"elements": "3"}}})
    assert checked_stores(scenario, {"device": "cuda"}, {"y": y}) == {"y": y}, "a GPU launch records nothing"
