"""The roofline plot: the lecture's ops at their intensities, and a real PNG written by the command line."""

import struct
import sys
from pathlib import Path

import pytest

from kernels import course, roofline
from kernels.hardware import gpu

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_lecture_ops_have_the_lectures_intensities_in_bf16():
    ops = {op.name: op.intensity for op in roofline.lecture_ops()}
    assert list(ops) == ["ReLU", "GeLU", "dot product", "matrix-vector", "1024x1024x1024 matmul"]
    assert ops["ReLU"] == 0.25 and ops["GeLU"] == 5.0
    assert ops["dot product"] == pytest.approx(0.5, rel=1e-3)
    assert ops["matrix-vector"] == pytest.approx(1.0, rel=3e-3)
    assert ops["1024x1024x1024 matmul"] == pytest.approx(1024 / 3, rel=1e-12)


def test_intensities_follow_from_the_formulas_not_constants():
    assert roofline.lecture_ops(bytes_per_element=4)[0].intensity == 0.125  # ReLU in fp32
    assert roofline.matmul(64, 64, 64, 2).intensity == pytest.approx(64 / 3)
    assert roofline.dot_product(10, 2).intensity == pytest.approx(20 / 42)


def test_placed_points_sit_on_each_gpus_roofline():
    points = roofline.placed_points()
    assert {p.gpu for p in points} == {"H100 SXM", "H200 SXM"} and len(points) == 10
    for p in points:
        device = gpu(p.gpu)
        expected = min(device.bf16_flops_per_sec, p.intensity * device.hbm_bandwidth_bytes_per_sec)
        assert p.attainable_flops_per_sec == pytest.approx(expected)
        assert p.compute_bound is (p.op == "1024x1024x1024 matmul"), p


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR", "not a PNG file"
    return struct.unpack(">II", data[16:24])


def test_the_title_names_the_kernels_assignment_by_its_number_in_the_course():
    assert f"Assignment {course.number('gpu_kernels')} (gpu_kernels)" in roofline.TITLE


def test_plot_writes_a_png_of_sane_size(tmp_path):
    out = roofline.plot(tmp_path / "sub" / "roofline.png")
    width, height = png_size(out)
    assert 400 <= width <= 4000 and 300 <= height <= 4000
    assert out.stat().st_size > 10_000  # lines, points and labels, not an empty canvas


def test_the_command_line_writes_the_png_named_by_out(tmp_path, capsys):
    """`python -m kernels.roofline --out PATH` (run in-process: a subprocess would re-import torch)."""
    out = tmp_path / "build" / "roofline.png"
    assert roofline.main(["--out", str(out)]) == 0
    assert png_size(out) and str(out) in capsys.readouterr().out


def test_the_gpu_kernels_join_the_plot_counted_by_the_trees_cost_functions():
    """With gpu_kernels/cost.py written, the plot adds GeLU (5 FLOP/byte), the softmax (1.25) and the
    4096x4096x1024 matmul + bias + GeLU, fused (≈ 690, compute-bound) and unfused (≈ 188, memory-bound)."""
    ops, skipped = roofline.kernel_ops()
    assert skipped == "" and [op.name for op in ops] == [label for label, *_ in roofline.KERNEL_SHAPES] + [
        "unfused (3 kernels)"]
    intensity = {op.name: op.intensity for op in ops}
    assert intensity["gelu_triton"] == 5.0 and intensity["softmax_triton"] == 1.25
    fused, unfused = ops[2], ops[3]
    assert unfused.bytes_moved - fused.bytes_moved == 4 * 4096 * 4096 * 2 and fused.flops == unfused.flops
    assert fused.intensity > gpu("H100").ridge_point() > gpu("H200").ridge_point() > unfused.intensity


def test_the_plot_leaves_out_kernels_whose_cost_functions_are_not_written(monkeypatch, tmp_path, capsys):
    """A stub cost.py (NotImplementedError) leaves the gpu_kernels assignment's kernels out; the plot is still
    written and the command line says why, naming the assignment by its number in the course."""
    import importlib
    import types

    def stub(*args, **kwargs):
        raise NotImplementedError("elementwise_cost in gpu_kernels/cost.py is not implemented yet")

    module = types.ModuleType("gpu_kernels.cost")
    module.elementwise_cost = stub
    monkeypatch.setitem(sys.modules, "gpu_kernels.cost", module)
    monkeypatch.setattr(importlib.import_module("gpu_kernels"), "cost", module, raising=False)
    assert roofline.kernel_ops() == ((), "gpu_kernels/cost.py is not written yet (elementwise_cost in "
                                         "gpu_kernels/cost.py is not implemented yet)")
    assert roofline.main(["--out", str(tmp_path / "roofline.png")]) == 0
    number = course.number("gpu_kernels")
    assert f"The kernels of Assignment {number} (gpu_kernels) are not on the plot" in capsys.readouterr().out
