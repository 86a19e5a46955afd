"""scripts/gpu_validate.py (`make gpu-validate`): what can be checked without a GPU."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_validate  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine the script runs for real")
def test_without_cuda_it_refuses_and_says_what_runs_on_a_cpu(tmp_path):
    out = tmp_path / "report.md"
    done = subprocess.run([sys.executable, "scripts/gpu_validate.py", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "needs a CUDA GPU" in done.stderr and "make gpu-compile" in done.stderr
    assert not out.exists()


def test_the_report_puts_each_threshold_beside_its_value_and_lists_what_failed(tmp_path):
    junit = tmp_path / "junit.xml"
    module = "tests.flash_attention.test_flash_triton"
    message = "AssertionError: Triton forward+backward 9.000 ms vs naive 10.000 ms: 1.11x faster; 1.5x needed"
    junit.write_text(textwrap.dedent(f"""\
        <testsuites><testsuite>
        <testcase classname="{module}" name="test_triton_forward_is_three_times_faster_than_naive_attention_on_gpu"/>
        <testcase classname="{module}" name="test_triton_forward_backward_is_faster_than_naive_attention_on_gpu">
        <failure message="{message}">x</failure></testcase>
        </testsuite></testsuites>"""))
    reference = gpu_validate.Step("reference", ["pytest"], 10, returncode=1, seconds=12.0,
                                  output="flash_attention     58 / 61    public points  (19/20 tests passed)\n",
                                  tests=gpu_validate.junit_outcomes(junit))
    bench = gpu_validate.Step("bench", ["bench"], 10, returncode=0, seconds=90.0, output=(
        "Speed tests (graded) and the leaderboard row (not points):\n"
        "  Triton forward / naive time (N 4096, d 64): 0.210  [<= 0.333]\n"
        "  leaderboard config (B 1, H 16, N 16384, d 64, bf16, causal, fwd+bwd), triton: 7.100 ms  "
        "[<= 5 ms (leaderboard, not points; CS336 2025 best 5.364 ms)]\n"))
    skipped = gpu_validate.Step("grade", ["grade"], 10, note="skipped: only 3 s of the budget left")
    report = gpu_validate.render([reference, bench, skipped], "GPU 0: NVIDIA H200, sm_90, 140 GiB")
    assert "| reference | 1 | 12 | flash_attention 58 / 61 public points (19/20 tests passed) |" in report
    assert "| grade | - | 0 | skipped: only 3 s of the budget left |" in report
    assert "| Triton forward / naive time (N 4096, d 64) | 0.210 | <= 0.333 |" in report
    assert "| test_triton_forward_is_three_times_faster_than_naive_attention_on_gpu | passed |" in report
    assert "1.11x faster; 1.5x needed" in report and "7.100 ms" in report and "NVIDIA H200" in report
    assert not gpu_validate.succeeded(reference) and gpu_validate.succeeded(bench)
    assert gpu_validate.succeeded(gpu_validate.Step("stubs", [], 1, returncode=1))
    assert not gpu_validate.succeeded(gpu_validate.Step("stubs", [], 1, returncode=2))


def test_the_agreement_table_sets_each_build_beside_its_launched_kernel_and_flags_a_difference():
    """The rows `make gpu-validate` prints on a GPU: a build matched to the launched kernel of its name,
    warps and stages; shared memory within 1 KiB, the same registers and the same spilled bytes agree (Triton's
    n_spills counts 4-byte words: shown as bytes); a difference is flagged, naming what differs, and fails the
    agreement step; a build never launched says so. (The launched kernels are plain records here: what the
    table reads of Triton's CompiledKernel.)"""
    from types import SimpleNamespace

    def kernel(warps, stages, shared, regs, spills):
        return SimpleNamespace(metadata=SimpleNamespace(num_warps=warps, num_stages=stages, shared=shared),
                               n_regs=regs, n_spills=spills)

    def build(kernel, warps, stages, shared, registers, spill_bytes):
        return dict(kernel=kernel, num_warps=warps, num_stages=stages, shared_bytes=shared, registers=registers,
                    spill_bytes=spill_bytes)

    builds = [build("_matmul_kernel", 8, 3, 65536, 130, 0), build("_matmul_kernel", 8, 4, 98304, 128, 0),
              build("_flash_fwd_kernel", 4, 2, 32768, 255, 40), build("_flash_fwd_kernel", 4, 3, 32768, 255, 40),
              build("_gelu_kernel", 4, 3, 0, 32, 0)]
    launched = {"_matmul_kernel": [kernel(8, 3, 65536, 130, 0), kernel(8, 4, 65536, 130, 0), kernel(4, 3, 1, 1, 0)],
                "_flash_fwd_kernel": [kernel(4, 2, 32768, 255, 10), kernel(4, 3, 32768, 255, 0)]}
    rows = gpu_validate.agreement_rows(builds, launched)
    assert "| registers per thread (CPU / GPU) | spilled bytes per thread (CPU stack / GPU n_spills x 4) |" in rows[0]
    assert rows[2] == "| _matmul_kernel | 8 | 3 | 64.0 / 64.0 | 130 / 130 | 0 / 0 | yes |"
    assert rows[3] == "| _matmul_kernel | 8 | 4 | 96.0 / 64.0 | 128 / 130 | 0 / 0 | NO: shared, registers |"
    assert rows[4] == "| _flash_fwd_kernel | 4 | 2 | 32.0 / 32.0 | 255 / 255 | 40 / 40 | yes |"
    assert rows[5] == "| _flash_fwd_kernel | 4 | 3 | 32.0 / 32.0 | 255 / 255 | 40 / 0 | NO: spills |"
    assert rows[6].startswith("| _gelu_kernel | 4 | 3 | 0.0 / not launched |") and len(rows) == 7
    assert gpu_validate.disagrees(rows) and not gpu_validate.disagrees(rows[:3] + rows[4:5] + rows[6:])


def test_a_build_is_set_beside_the_launched_specialisation_most_like_it():
    """The forward is launched causal and not, at one config: two compiled kernels of one name, warps and stages.
    Each build gets one row, beside the kernel that agrees with it, so a causal build is not judged against the
    full kernel (a false "NO" would fail make gpu-validate on its first GPU run); with no kernel like it, the
    row names the differences to the closest one."""
    from types import SimpleNamespace

    def kernel(shared, regs):
        return SimpleNamespace(metadata=SimpleNamespace(num_warps=4, num_stages=2, shared=shared), n_regs=regs,
                               n_spills=0)

    def build(shared, registers):
        return dict(kernel="_flash_fwd_kernel", num_warps=4, num_stages=2, shared_bytes=shared,
                    registers=registers, spill_bytes=0)

    launched = {"_flash_fwd_kernel": [kernel(32768, 168), kernel(40960, 200)]}
    rows = gpu_validate.agreement_rows([build(40960, 200), build(32768, 168), build(32768, 200)], launched)
    assert rows[2:] == ["| _flash_fwd_kernel | 4 | 2 | 40.0 / 40.0 | 200 / 200 | 0 / 0 | yes |",
                        "| _flash_fwd_kernel | 4 | 2 | 32.0 / 32.0 | 168 / 168 | 0 / 0 | yes |",
                        "| _flash_fwd_kernel | 4 | 2 | 32.0 / 32.0 | 200 / 168 | 0 / 0 | NO: registers |"]
    assert gpu_validate.disagrees(rows) and not gpu_validate.disagrees(rows[:4])
