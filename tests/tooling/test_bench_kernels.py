"""kernels.bench_kernels (`make bench-kernels`): gpu_kernels' kernels timed against torch and the roofline.

The quick run (tiny sizes, the Triton interpreter on a CPU) runs once in this process on the reference;
its CSV is checked against what the tool promises: a row per measurement, rates that are the counts over
the measured time, counts and tiles that agree with the reference's cost functions (solutions/gpu_kernels/
cost.py, loaded from its file so that the check does not depend on the active tree). The stubs run in a
subprocess: only one implementation tree may be active in a process.
"""

from __future__ import annotations

import contextlib
import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels import bench_kernels
from kernels.hardware import gpu
from tests.tooling import reference_cost

ROOT = Path(__file__).resolve().parents[2]
NUMERIC = ("time_ms", "flops", "hbm_bytes", "achieved_GB_per_s", "achieved_TFLOP_per_s", "peak_FLOP_per_s",
           "hbm_bandwidth_bytes_per_s", "ideal_time_ms", "measured_over_ideal", "tiles_128x128", "num_sms", "waves",
           "tile_efficiency")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


C = reference_cost.load()


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for column in NUMERIC:
            row[column] = float(row[column]) if row[column] else None
    return rows


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """(exit status, stdout, CSV rows, output folder) of `--quick --impl solutions`, run once."""
    out = tmp_path_factory.mktemp("bench_kernels")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = bench_kernels.main(["--quick", "--impl", "solutions", "--out", str(out)])
    return code, printed.getvalue(), read_rows(out / "bench_kernels.csv"), out


def shapes(rows: list[dict], table: str) -> list[str]:
    return list(dict.fromkeys(r["shape"] for r in rows if r["table"] == table))


@pytest.mark.triton
def test_the_quick_run_prints_four_tables_and_writes_a_row_per_measurement_and_a_png(quick):
    code, printed, rows, out = quick
    assert code == 0, printed
    for title in ("GeLU (tanh)", "row softmax", "matmul, shape = m x n x k", "wave sweep"):
        assert title in printed, f"no {title!r} table in:\n{printed}"
    sms = int(next(r for r in rows if r["table"] == "sweep")["num_sms"])
    assert f"128 x 128 output tiles on {sms} SMs" in printed
    assert (out / "bench_kernels.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shapes(rows, "gelu") == ["1024"] and shapes(rows, "softmax") == ["8x64"]
    assert shapes(rows, "matmul") == ["32x32x32"]
    sweep = [tuple(map(int, s.split("x"))) for s in shapes(rows, "sweep")]
    assert 2 <= len(sweep) <= 3 and len({(m, k) for m, _, k in sweep}) == 1
    assert len({n for _, n, _ in sweep}) == len(sweep)
    for table in bench_kernels.TABLES:
        for shape in shapes(rows, table):
            names = sorted(r["implementation"] for r in rows if (r["table"], r["shape"]) == (table, shape))
            assert names == ["torch", "triton"], (table, shape, names)
    for row in rows:
        assert row["time_ms"] is not None and row["time_ms"] > 0 and row["note"] == "", row


@pytest.mark.triton
def test_on_a_cpu_the_roofline_is_the_h100s_and_the_title_says_so(quick):
    _, printed, rows, _ = quick
    if rows[0]["device"] != "cpu":
        pytest.skip("on a GPU the roofline is the GPU's own")
    assert "H100 SXM figures" in printed and "meaningless" in printed
    assert {r["roofline_gpu"] for r in rows} == {"H100 SXM"}
    assert {r["num_sms"] for r in rows if r["table"] == "sweep"} == {132}


@pytest.mark.triton
def test_the_rates_are_the_counts_over_the_measured_time_and_the_ideal_is_the_roofline(quick):
    rows = quick[2]
    for row in rows:
        seconds = row["time_ms"] / 1e3
        assert row["achieved_GB_per_s"] == pytest.approx(row["hbm_bytes"] / seconds / 1e9, rel=1e-12)
        assert row["achieved_TFLOP_per_s"] == pytest.approx(row["flops"] / seconds / 1e12, rel=1e-12)
        figures = gpu(row["roofline_gpu"])
        unit = "bf16" if row["table"] in ("matmul", "sweep") else "fp32"  # tensor cores, CUDA cores (§5)
        assert row["peak_FLOP_per_s"] == figures.peak_flops_per_sec(unit), row
        assert row["hbm_bandwidth_bytes_per_s"] == figures.hbm_bandwidth_bytes_per_sec
        compute, memory = row["flops"] / row["peak_FLOP_per_s"], row["hbm_bytes"] / row["hbm_bandwidth_bytes_per_s"]
        assert row["ideal_time_ms"] == pytest.approx(max(compute, memory) * 1e3, rel=1e-12)
        assert row["bound"] == ("compute" if compute >= memory else "memory")
        assert row["measured_over_ideal"] == pytest.approx(row["time_ms"] / row["ideal_time_ms"], rel=1e-9)


def reference_counts(table: str, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[int, int]:
    if table == "gelu":
        return C.elementwise_cost(*shape, dtype)
    if table == "softmax":
        return C.softmax_cost(*shape, dtype)
    return C.matmul_cost(*shape, dtype)


@pytest.mark.triton
def test_the_counts_of_the_run_agree_with_the_reference_cost_functions(quick):
    for row in quick[2]:
        shape = tuple(map(int, row["shape"].split("x")))
        expected = reference_counts(row["table"], shape, DTYPES[row["dtype"]])
        assert (row["flops"], row["hbm_bytes"]) == expected, row


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
def test_the_counts_agree_with_the_reference_at_the_gpu_shapes_and_odd_ones(dtype):
    plan = bench_kernels.make_plan("cuda", quick=False)
    odd = {"gelu": ((1,), (1000003,)), "softmax": ((1, 1), (3, 1000)), "matmul": ((1, 2, 3), (896, 2432, 4096)),
           "sweep": ((7, 11, 13),)}
    for table in bench_kernels.TABLES:
        for shape in plan.shapes[table] + odd[table]:
            got = bench_kernels.counts(table, shape, dtype.itemsize)
            assert got == reference_counts(table, shape, dtype), (table, shape, dtype)


@pytest.mark.parametrize("n", [2304, 2432, 4736])
def test_tiles_and_waves_agree_with_the_reference_at_section_6s_shapes(n):
    assert bench_kernels.output_tiles(896, n) == C.tiles(896, n, 128, 128)
    assert bench_kernels.wave_count(896, n, 132) == C.waves(896, n, 128, 128, 132)


@pytest.mark.parametrize("num_sms", [108, 132, 148])
def test_tiles_and_waves_agree_with_the_reference_over_the_sweep_and_at_whole_waves(num_sms):
    """The GPU sweep's shapes, partial edge tiles, and outputs of exactly one and two waves of tiles."""
    sweep = [(m, n) for m, n, _ in bench_kernels.make_plan("cuda", quick=False).shapes["sweep"]]
    whole = [(4 * 128, num_sms // 4 * 128), (4 * 128, num_sms // 2 * 128)]  # num_sms and 2 * num_sms tiles
    for m, n in sweep + whole + [(900, 2305), (1, 1), (129, 127)]:
        assert bench_kernels.output_tiles(m, n) == C.tiles(m, n, 128, 128), (m, n)
        assert bench_kernels.wave_count(m, n, num_sms) == C.waves(m, n, 128, 128, num_sms), (m, n, num_sms)


@pytest.mark.triton
def test_the_sweep_rows_tiles_waves_and_efficiency_agree_with_the_reference(quick):
    sweep = [r for r in quick[2] if r["table"] == "sweep"]
    assert sweep
    for row in sweep:
        m, n, _ = map(int, row["shape"].split("x"))
        sms = int(row["num_sms"])
        assert row["tiles_128x128"] == C.tiles(m, n, 128, 128) and row["waves"] == C.waves(m, n, 128, 128, sms)
        assert row["tile_efficiency"] == pytest.approx(C.tile_efficiency(m, n, 128, 128, sms), rel=1e-12)


def test_the_gpu_sweep_is_section_6s_and_crosses_both_of_its_wave_cliffs_on_132_sms():
    sweep = bench_kernels.make_plan("cuda", quick=False).shapes["sweep"]
    assert {(m, k) for m, _, k in sweep} == {(896, 4096)}
    ns = [n for _, n, _ in sweep]
    assert ns == list(range(2048, 4864 + 1, 128))
    assert bench_kernels.wave_boundaries(896, ns, 132) == [(2304, 2432), (4736, 4864)]


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H200", "H200 SXM"), ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
    ("NVIDIA B200", "B200"), ("NVIDIA H100 PCIe", None), ("NVIDIA H100 NVL", None), ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA GH200 480GB", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_a_gpu_is_named_by_its_hardware_table_entry_or_not_at_all(name, expected):
    found = bench_kernels.known_gpu(name)
    assert (found.name if found else None) == expected


def test_a_wrong_or_failing_kernel_gets_a_note_and_the_other_rows_are_still_measured():
    """Fakes for the tree's kernels (no Triton needed): a wrong GeLU, a softmax that raises, a matmul
    module that failed to import, each beside torch's row, which is still timed."""
    def broken_softmax(x):
        raise RuntimeError("boom\nsecond line")

    found = {"gelu": lambda x: x, "softmax": broken_softmax, "matmul": ImportError("no module named triton")}
    plan = bench_kernels.make_plan("cpu", quick=True)
    rows = bench_kernels.run_plan(plan, found, bench_kernels.roofline_figures("cpu"))
    notes = {(r["table"], r["implementation"]): r["note"] for r in rows}
    assert notes[("gelu", "triton")].startswith("wrong result: max |difference| from torch")
    assert notes[("softmax", "triton")] == "error: RuntimeError: boom"
    assert notes[("matmul", "triton")] == "error: importing it failed: ImportError: no module named triton"
    for row in rows:
        assert (row["time_ms"] is None) == (row["implementation"] == "triton"), row
        assert bench_kernels.failed(row) == (row["implementation"] == "triton")


@pytest.mark.triton
def test_the_stubs_give_not_implemented_rows_and_exit_0(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kernels.bench_kernels", "--quick", "--impl", "assignments",
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not implemented" in done.stdout
    rows = read_rows(tmp_path / "bench_kernels.csv")
    assert {r["table"] for r in rows} == set(bench_kernels.TABLES)
    for row in rows:
        if row["implementation"] == "triton":
            assert row["note"] == "not implemented" and row["time_ms"] is None and row["ideal_time_ms"] > 0, row
        else:
            assert row["note"] == "" and row["time_ms"] > 0, row


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine the full run would start")
def test_without_quick_on_a_cpu_it_exits_2_and_says_what_to_do(tmp_path, capsys):
    assert bench_kernels.main(["--impl", "solutions", "--out", str(tmp_path / "out")]) == 2
    message = capsys.readouterr().err
    assert "CUDA GPU" in message and "--quick" in message and "Triton interpreter" in message
    assert not (tmp_path / "out").exists()


def test_the_plots_title_names_the_assignment_by_its_number_in_the_course():
    from kernels import course

    assert bench_kernels.figure_title("solutions") == (f"Assignment {course.number('gpu_kernels')}, gpu_kernels "
                                                       "(solutions)")
