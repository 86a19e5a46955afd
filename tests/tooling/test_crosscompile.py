"""kernels.crosscompile: the project's Triton kernels built for a GPU on a machine without one.

The build subset here (sm_90, bf16, d 64, each kernel's first config) is what `make test` runs so that
a change which breaks the GPU build fails CI; `make gpu-compile` builds the whole matrix.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.crosscompile import build_problems, require_compiler
from kernels.hardware import SHARED_MEMORY_PER_BLOCK

pytestmark = pytest.mark.triton
ROOT = Path(__file__).resolve().parents[2]
FLASH_KERNELS = {"_flash_fwd_kernel", "_flash_bwd_preprocess_kernel", "_flash_bwd_dkdv_kernel", "_flash_bwd_dq_kernel"}
GPU_KERNELS = {"_gelu_tanh_kernel", "_softmax_kernel", "_matmul_kernel"}


def test_every_kernel_builds_for_an_h100_in_bf16(tmp_path):
    """The quick matrix exits 0; every FlashAttention kernel, demo and gpu_kernels kernel is built, fits in
    227 KiB, and the kernels with a dot use wgmma (Hopper's tensor-core instruction)."""
    out = tmp_path / "builds.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-m", "kernels.crosscompile", "--quick", "--jobs", "1", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    builds = json.loads(out.read_text())
    assert {b["kernel"] for b in builds} == FLASH_KERNELS | GPU_KERNELS | {"_add_kernel", "_gelu_kernel"}
    for b in builds:
        assert b["ok"] and b["target"] == "sm_90" and 0 <= b["shared_bytes"] <= 227 * 1024, b
        assert 0 < b["registers"] <= 255 and b["spill_bytes"] >= 0, b
        assert b["tensor_cores"] == ("wgmma" if b["dots"] else ""), b
    assert {b["kernel"] for b in builds if b["dots"]} == FLASH_KERNELS - {"_flash_bwd_preprocess_kernel"} | {
        "_matmul_kernel"}
    forward = [b for b in builds if b["kernel"] == "_flash_fwd_kernel"]
    assert forward and all(b["spill_bytes"] == 0 for b in forward), "the forward spills registers on an H100 at d 64"
    assert "_flash_fwd_kernel" in done.stdout and "0 with problems" in done.stdout


def test_an_interpreted_process_is_refused_with_what_to_do():
    """This pytest process interprets Triton on a CPU; building here would be wrong, so it is refused."""
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine Triton is not interpreted")
    with pytest.raises(RuntimeError, match="python -m kernels.crosscompile"):
        require_compiler()


def test_the_shared_memory_limits_are_the_programming_guides():
    assert SHARED_MEMORY_PER_BLOCK == {"sm_80": 163 * 1024, "sm_90": 227 * 1024, "sm_100": 227 * 1024}


def test_a_build_is_judged_from_plain_data():
    ok = dict(target="sm_90", ok=True, shared_bytes=100 * 1024, dots=2, tensor_cores="wgmma")
    assert build_problems(ok, 227 * 1024) == []
    assert build_problems({**ok, "shared_bytes": 240 * 1024}, 227 * 1024) == [
        "shared memory 240 KiB > 227 KiB on sm_90: smaller tiles or fewer stages"]
    assert "without tensor-core instructions" in build_problems({**ok, "tensor_cores": ""}, 227 * 1024)[0]
    assert build_problems({**ok, "shared_bytes": None}, 227 * 1024) == ["no shared-memory size reported"]
    failed = dict(target="sm_90", ok=False, error="boom", where="k.py:3", source_line="x = 1")
    assert build_problems(failed, 227 * 1024) == ["does not compile for sm_90: boom (at k.py:3: x = 1)"]


def test_the_launch_recorder_captures_types_and_constexprs():
    from kernels import demos
    from kernels.launches import record_launches

    x = torch.randn(100, dtype=torch.float32, device="cuda" if torch.cuda.is_available() else "cpu")
    with record_launches() as launches:
        demos.add(x, x)
    (launch,) = launches.launches
    assert launch["name"] == "_add_kernel" and launch["module"] == "kernels.demos"
    assert launch["args"] == [{"name": "x_ptr", "type": "*fp32"}, {"name": "y_ptr", "type": "*fp32"},
                              {"name": "out_ptr", "type": "*fp32"}, {"name": "n", "type": "i32"},
                              {"name": "BLOCK", "constexpr": 1024}]
