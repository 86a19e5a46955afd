"""kernels.bench (the timer) and kernels.bench_attention (the `make bench` script)."""

import subprocess
import sys
from pathlib import Path

import pytest

from kernels.bench import benchmark

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_returns_a_positive_time_in_milliseconds():
    ms = benchmark(lambda: sum(range(10_000)), warmup=1, rep=5, device="cpu")
    assert type(ms) is float and 0 < ms < 1000


def test_benchmark_refuses_bad_budgets_and_devices():
    with pytest.raises(ValueError):
        benchmark(lambda: None, rep=0)
    with pytest.raises(ValueError):
        benchmark(lambda: None, device="tpu")


@pytest.mark.triton
def test_bench_attention_prints_a_table_and_writes_a_png(tmp_path):
    out = tmp_path / "bench.png"
    run = subprocess.run([sys.executable, "-m", "kernels.bench_attention", "--quick", "--triton", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    for column in ("implementation", "TFLOP/s", "peak MiB"):
        assert column in run.stdout
    for name in ("naive", "pytorch", "triton", "sdpa"):
        assert f"│ {name}" in run.stdout, f"no {name} rows in:\n{run.stdout}"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_times_are_taken_in_rounds_of_every_row_so_the_rows_compare(monkeypatch):
    """On a CPU each row is timed once per round, every row in turn, and gets the median of its rounds:
    whatever else slows the machine for a while slows every row alike (timing each row in one go let a busy
    minute make a forward slower than its forward+backward)."""
    import torch

    from kernels import bench_attention

    calls = []

    def prepare(name, mods, plan, n, d, backward):
        row = dict(impl=name, mode=bench_attention.PASSES[backward], seq=n, d=d, ms=None, tflops=None, peak_mib=1.0,
                   note="")
        return row, (lambda: calls.append((name, backward)))

    monkeypatch.setattr(bench_attention, "prepare", prepare)
    monkeypatch.setattr(bench_attention, "add_throughput", lambda row, mods, plan: None)
    plan = bench_attention.Plan(1, 1, {"naive": ((32, 16),), "sdpa": ((32, 16),)}, torch.float32, "cpu", 0, 0, 16,
                                rounds=3)
    rows = bench_attention.run_plan(plan, {}, ("naive", "sdpa"))
    one_round = [("naive", False), ("naive", True), ("sdpa", False), ("sdpa", True)]
    assert calls == one_round * 3
    assert all(row["ms"] is not None for row in rows)
    assert "median of rounds that run every row in turn" in bench_attention.CPU_CAPTION
