"""autograder.grading.compiles: the kernel compilations a GPU grading triggers, counted on a CPU.

The recording of a whole suite and the compile timings take minutes (`make bench-grader`); here: a call's
arguments written down and rebuilt with their layout, the autotuner's rule on launches as the dry run records
them, and real calls replayed by the dry run in a process where Triton compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autograder.grading import compiles

ROOT = Path(__file__).resolve().parents[3]


def test_a_calls_tensors_are_written_down_by_layout_and_rebuilt_with_it():
    base = torch.zeros(7, 9, dtype=torch.bfloat16)
    view = base[1:, ::2]
    written = json.loads(json.dumps(compiles.describe({"x": view, "dtype": torch.float16, "sizes": (3, [4, None])})))
    again = compiles.rebuilt(written)
    assert (again["x"].shape, again["x"].stride(), again["x"].storage_offset(), again["x"].dtype) == \
        (view.shape, view.stride(), view.storage_offset(), view.dtype)
    assert again["dtype"] is torch.float16 and again["sizes"] == [3, [4, None]]
    with pytest.raises(TypeError, match="cannot be replayed"):
        compiles.rebuilt(compiles.describe({"f": print}))


def launch(name: str, head_dim: int, n_divisible: bool, configs: int = 6) -> dict:
    """A launch as the dry run records it: an autotuned kernel (key HEAD_DIM) over `configs` configs."""
    return {"name": name, "module": "m", "options": {},
            "args": [{"name": "Q", "type": "*bf16", "divisibility": 16},
                     {"name": "N", "type": "i32", **({"divisibility": 16} if n_divisible else {})},
                     {"name": "HEAD_DIM", "constexpr": head_dim}],
            "configs": [{"kwargs": {}, "num_warps": w, "num_stages": s} for w, s in
                        [(4, 2), (4, 3), (4, 4), (8, 2), (8, 3), (8, 4)][:configs]]}


def test_an_autotuned_kernel_compiles_every_config_at_a_new_key_and_one_for_another_specialisation():
    keys = {"m.fwd": ["HEAD_DIM"]}
    first = launch("fwd", 64, True)
    found = compiles.compilations([first, first], keys)
    assert len(found["m.fwd"]) == 6, "every config at the first launch of a key, once"
    found = compiles.compilations([first, launch("fwd", 64, False)], keys)
    assert len(found["m.fwd"]) == 7, "the same key with N not divisible by 16: the chosen config compiled again"
    found = compiles.compilations([first, launch("fwd", 64, False), launch("fwd", 128, True)], keys)
    assert len(found["m.fwd"]) == 13, "a new key: every config again"
    plain = {**launch("plain", 64, True, configs=0), "options": {"num_warps": 8}}
    assert len(compiles.compilations([plain, plain, {**plain, "options": {"num_warps": 4}}], {})["m.plain"]) == 2


def test_the_suites_calls_replayed_as_on_a_gpu_launch_what_a_gpu_compiles(tmp_path):
    """Real calls of the suites, as the recording writes them down: gelu in fp32 and bf16 (a transposed view:
    made dense first), gelu's and softmax's invalid arguments (raised on the CPU too: not partial), and a
    call that does not resolve (partial, said so). The dry run launches the reference's kernels with a GPU's
    types and specialisation; nothing is compiled (--sample 0)."""
    x = compiles.describe(torch.zeros(33, 40))
    half = compiles.describe(torch.zeros(33, 40, dtype=torch.bfloat16))
    calls = [{"op": "scenario", "target": "autograder.suites.gpu_kernels.scenarios:gelu",
              "kwargs": {"x": x, "view": "t", "device": "cuda"}},
             {"op": "scenario", "target": "autograder.suites.gpu_kernels.scenarios:gelu",
              "kwargs": {"x": half, "view": None, "device": "cuda"}},
             {"op": "call", "target": "gpu_kernels.elementwise:gelu_triton", "args": [[1, 2]], "kwargs": {},
              "raised": True},
             {"op": "scenario", "target": "autograder.suites.gpu_kernels.scenarios:absent", "kwargs": {}}]
    (tmp_path / "calls.json").write_text(json.dumps({"calls": calls, "tests": 3}))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "autograder.grading.compiles", "--replay", str(tmp_path / "calls.json"),
                           "--assignment", "gpu_kernels", "--sample", "0", "--out", str(tmp_path / "out.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "out.json").read_text())
    assert found["calls"] == 4 and found["compiles"] == 2, found
    assert list(found["kernels"]) == ["gpu_kernels.elementwise._gelu_tanh_kernel"]
    assert len(found["partial"]) == 1 and "absent" in found["partial"][0], found["partial"]
