"""scripts/gpu_validate.py (`make gpu-validate`): what can be checked without a GPU."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
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


# What a GPU machine without a package index needs, checked here: the steps and their report, the packages,
# and the sandbox of the gradings (installed bubblewrap, a carried .deb, the user-mode fallback, or a refusal).

def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_gradings_come_first_and_a_chosen_subset_keeps_that_order(tmp_path):
    steps = gpu_validate.plan(tmp_path)
    names = [step.name for step, _ in steps]
    assert names[:2] == ["grade-gpu_kernels", "grade-flash_attention"], "never proven on a GPU: they go first"
    assert len(set(names)) == len(names) and names[-1] == "bench"
    picked = gpu_validate.chosen(steps, ["bench", "reference", "grade-flash_attention"])
    assert [step.name for step, _ in picked] == ["grade-flash_attention", "reference", "bench"]
    with pytest.raises(ValueError, match="no step benchh; the steps: grade-gpu_kernels"):
        gpu_validate.chosen(steps, ["benchh"])


def test_the_steps_run_in_order_and_the_report_is_written_after_each(tmp_path):
    """Real steps: the second reads the report the first left (its row is there), the third does not fit the
    budget left and is reported as skipped, not run; each step's whole output is kept beside the report."""
    out, work = tmp_path / "gpu_validate.md", tmp_path / "work"
    work.mkdir()
    steps = [(gpu_validate.Step("first", python("print('first ran')"), 5), None),
             (gpu_validate.Step("second", python(f"print(open({str(out)!r}).read())"), 5), None),
             (gpu_validate.Step("third", python("print('third ran')"), 100), None)]  # needs 30 s left to start
    done = gpu_validate.run_steps(steps, out, work, time.monotonic() + 25, "GPU 0: none, a test")
    assert [s.name for s in done] == ["first", "second", "third"]
    assert "| first | 0 |" in done[1].output and "| second |" not in done[1].output, done[1].output
    report = out.read_text()
    assert "| second | 0 |" in report and "| third | - | 0 | skipped: only" in report, report
    assert done[2].returncode is None and (work / "first.log").read_text() == "first ran\n"
    assert gpu_validate.BUDGET_S + 30 < 8 * 60, "the steps and the checks before them: under 8 minutes"


def test_a_missing_package_is_named_with_how_to_get_it_before_anything_runs(tmp_path):
    """A GPU image's Python without hypothesis (find_spec finds no module where sys.modules holds None)."""
    code = ("import runpy, sys; sys.modules['hypothesis'] = None; "
            f"sys.argv = ['gpu_validate.py', '--out', {str(tmp_path / 'r.md')!r}]; "
            "runpy.run_path('scripts/gpu_validate.py', run_name='__main__')")
    done = subprocess.run(python(code), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "lacks hypothesis" in done.stderr and "PYTHON=" in done.stderr
    assert not (tmp_path / "r.md").exists()


def only_true(tmp_path: Path) -> str:
    """A PATH with no bubblewrap on it: a folder holding `true` (which the sandbox's probe runs) and nothing else."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "true").symlink_to(shutil.which("true"))
    return str(folder)


def as_nobody() -> dict:
    """subprocess.run options that run the command as uid and gid 65534 where this process is root."""
    if os.geteuid() != 0:
        return {}

    def drop() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    return {"preexec_fn": drop}


def a_python_for_nobody() -> str | None:
    """A Python that uid 65534 can start (the check needs the standard library and the grader's policy only)."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        try:
            if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=60,
                                            **as_nobody()).returncode == 0:
                return candidate
        except OSError:  # not even started: a folder on its way that this user cannot enter
            continue
    return None


def test_without_bubblewrap_or_root_it_refuses_in_one_line_saying_what_to_get():
    runner = a_python_for_nobody()
    if runner is None:
        pytest.skip("no Python here that an unprivileged user can start")
    if subprocess.run([runner, "-c", f"open({str(ROOT / 'scripts' / 'gpu_validate.py')!r}).close()"],
                      capture_output=True, timeout=60, **as_nobody()).returncode != 0:
        pytest.skip("this clone of the repository is closed to other users (a private temporary folder): the "
                    "unprivileged user cannot read the script")
    with tempfile.TemporaryDirectory() as folder:  # one the unprivileged user may read (pytest's tmp_path is 0700)
        base = Path(folder)
        base.chmod(0o755)
        (base / "carried").mkdir()
        done = subprocess.run([runner, "scripts/gpu_validate.py", "--check-sandbox", "--carried", str(base / "carried")],
                              cwd=ROOT, env={**os.environ, "PATH": only_true(base)}, capture_output=True, text=True,
                              timeout=120, **as_nobody())
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for words in ("no sandbox for the gradings", "bwrap not found", "make sandbox-debs", "apt-get download bubblewrap",
                  "build/sandbox-tools", "user mode", "not root"):
        assert words in done.stderr, (words, done.stderr)


@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("dpkg-deb") is None,
                    reason="needs bubblewrap and dpkg-deb to make a .deb of it")
def test_a_carried_bubblewrap_deb_is_unpacked_and_the_gradings_run_under_it(tmp_path):
    """Where no bubblewrap is on PATH, a .deb in the carried folder (as `make sandbox-debs` leaves it) is
    unpacked without dpkg, put first on PATH, and probed: the gradings run under it."""
    package = tmp_path / "package"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "usr" / "bin").mkdir(parents=True)
    shutil.copy(shutil.which("bwrap"), package / "usr" / "bin" / "bwrap")
    (package / "DEBIAN" / "control").write_text("Package: bubblewrap\nVersion: 0.0-test\nArchitecture: all\n"
                                                "Maintainer: nobody <nobody@localhost>\nDescription: a test copy\n")
    carried = tmp_path / "carried"
    carried.mkdir()
    subprocess.run(["dpkg-deb", "--build", "-Zxz", str(package), str(carried / "bubblewrap_0.0-test_all.deb")],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([sys.executable, "scripts/gpu_validate.py", "--check-sandbox", "--carried", str(carried)],
                          cwd=ROOT, env={**os.environ, "PATH": only_true(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"bubblewrap, unpacked from {carried / 'bubblewrap_0.0-test_all.deb'}" in done.stdout, done.stdout
    assert (carried / "unpacked" / "usr" / "bin" / "bwrap").exists()


def test_a_carried_seccomp_wheel_serves_a_python_that_lacks_it(tmp_path, monkeypatch):
    """The user mode's seccomp filter needs pyseccomp; a GPU image's Python may lack it and have no index. The
    wheel `make sandbox-debs` leaves in the carried folder (a zip, as pip downloads it) goes on the import path
    of this process and of the steps, and the filter compiles from it."""
    import importlib.util
    import zipfile

    import pyseccomp

    carried = tmp_path / "carried"
    carried.mkdir()
    wheel = carried / "pyseccomp-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(pyseccomp.__file__, "pyseccomp.py")
    lacks = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyseccomp" else lacks(name, *a))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    assert gpu_validate.carried_wheels(carried) == [wheel.name]
    assert sys.path[0] == str(wheel) and os.environ["PYTHONPATH"] == str(wheel)
    found = subprocess.run([sys.executable, "-S", "-c", "import pyseccomp; print(pyseccomp.__file__)"],
                           env={**os.environ}, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0 and str(wheel) in found.stdout, found.stderr
    monkeypatch.undo()
    assert gpu_validate.carried_wheels(carried) == [], "a Python that has it takes nothing"


def test_a_file_that_is_no_debian_package_is_refused_saying_so(tmp_path):
    (tmp_path / "bubblewrap_1_amd64.deb").write_text("<html>not found</html>")
    with pytest.raises(gpu_validate.Missing, match="is not a Debian package.*make sandbox-debs"):
        gpu_validate.unpack_deb(tmp_path / "bubblewrap_1_amd64.deb", tmp_path / "unpacked")


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
def test_make_gpu_validate_with_a_python_given_installs_nothing():
    """A GPU image without a package index: `make gpu-validate PYTHON=python3` runs the script alone (no pip, no
    apt-get: the sandbox is the script's to find), and passes GPU_VALIDATE_ARGS on."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}}
    done = subprocess.run(["make", "--no-print-directory", "-n", "gpu-validate", "PYTHON=python3",
                           "GPU_VALIDATE_ARGS=--steps grade-gpu_kernels"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == [
        "python3 scripts/gpu_validate.py --out build/gpu_validate.md --steps grade-gpu_kernels"], done.stdout
