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
