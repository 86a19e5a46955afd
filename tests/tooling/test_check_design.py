"""`make check-design` (kernels.check_design): the hidden design checks of gpu_kernels, on the student's own code
at public sizes; each planted design mistake is named, the rest pass, and stubs are named, not failed."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]

# A correct kernel with one design mistake each, as the handout warns of them.
PLANTED = {
    "elementwise.py": [("tl.program_id(0).to(tl.int64) * BLOCK", "tl.program_id(0) * BLOCK")],  # int32 offsets
    "matmul.py": [  # row-major tiles; GeLU written again in the epilogue instead of calling gelu_tanh
        ("    tile_m = first_m + (pid % per_group) % rows_in_group\n    tile_n = (pid % per_group) // rows_in_group\n",
         "    tile_m = pid // tiles_n\n    tile_n = pid % tiles_n\n"),
        ("        acc = gelu_tanh(acc)\n",
         "        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)\n"
         "        e = tl.exp(-2.0 * tl.abs(inner))\n"
         "        acc = 0.5 * acc * (1.0 + tl.where(inner < 0, -1.0, 1.0) * (1.0 - e) / (1.0 + e))\n"),
    ],
}


def check_design(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernels.check_design", "--impl", str(tree)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                            "TRITON_INTERPRET": "1"})


def test_each_planted_design_mistake_is_named_and_the_rest_pass(tmp_path):
    shutil.copytree(ROOT / "solutions" / "gpu_kernels", tmp_path / "gpu_kernels",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for file, changes in PLANTED.items():
        path = tmp_path / "gpu_kernels" / file
        text = path.read_text()
        for right, wrong in changes:
            assert right in text, (file, right)
            text = text.replace(right, wrong)
        path.write_text(text)
    done = check_design(tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert [line.split(":", 1)[1].strip() for line in lines if line.startswith("  FAILS")] == [
        "int64 offsets: a program far into a huge grid loads nothing",
        "_tile_of gives each pid the tile of the grouped order",
        "the epilogue calls elementwise.gelu_tanh"], done.stdout
    assert "their offsets wrapped around in int32" in done.stdout and "programs take another tile" in done.stdout
    assert "did not call elementwise.gelu_tanh in its epilogue" in done.stdout
    assert sum(line.startswith("  ok ") for line in lines) == 4 and "4 of 7 pass, 3 fails" in done.stdout


def test_stubs_are_named_not_failed():
    done = check_design(ROOT / "assignments")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 of 7 pass, 7 not implemented yet" in done.stdout
    assert "_tile_of in gpu_kernels/matmul.py is not implemented yet" in done.stdout


def test_it_refuses_to_count_without_the_interpreter():
    done = subprocess.run([sys.executable, "-m", "kernels.check_design", "--impl", "solutions"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "0"})
    assert done.returncode == 2 and "run them with TRITON_INTERPRET=1" in done.stderr
