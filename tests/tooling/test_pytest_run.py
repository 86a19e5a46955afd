"""tests/pytest_run.py: pytest in a forked process behaves as `python -m pytest` in a new interpreter."""

import subprocess
import sys

import pytest

from tests.pytest_run import run_pytest

PROBE = '''
import os
import sys


def test_sees_its_environment_and_folder():
    print("MARK=" + os.environ.get("PROBE_MARK", "<unset>"), "CWD=" + os.getcwd(), "PATH0=" + sys.path[0])
    assert "resource_accounting" not in sys.modules  # the caller's imports do not leak in
    assert "tests.pytest_run" not in sys.modules and "tests" not in sys.modules  # nor what started the run


def test_fails():
    assert os.environ.get("PROBE_FAIL") != "1"
'''


def test_a_run_has_the_given_environment_folder_and_exit_status(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    import resource_accounting  # noqa: F401  (imported here, in the caller: the run must not see it)

    done = run_pytest(["-q", "-s", "-p", "no:cacheprovider", "test_probe.py"], tmp_path,
                      env={"PATH": "/usr/bin:/bin", "PROBE_MARK": "yes", "PROBE_FAIL": "1"})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"MARK=yes CWD={tmp_path} PATH0={tmp_path}" in done.stdout
    assert "1 failed, 1 passed" in done.stdout
    again = run_pytest(["-q", "-p", "no:cacheprovider", "test_probe.py"], tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert again.returncode == 0 and "2 passed" in again.stdout
    assert sys.path[0] != str(tmp_path)  # the caller's own path is untouched


def test_a_run_past_its_deadline_is_killed(tmp_path):
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_pytest(["-q", "-p", "no:cacheprovider", "test_slow.py"], tmp_path, timeout=5)


MODE_PROBE = '''
import triton.language.standard as standard


def test_reports_the_mode_of_tritons_own_kernels():
    print("MODE=" + type(standard.cdiv).__name__)
'''


def test_a_run_gets_the_triton_mode_its_environment_asks_for(tmp_path):
    """The forkserver imported Triton in one mode (triton.language's jitted functions are made then): a run whose
    environment asks for the other still gets it, as in a new interpreter."""
    pytest.importorskip("triton", reason="Triton's wheels are Linux only")
    (tmp_path / "test_mode.py").write_text(MODE_PROBE)
    found = {}
    for value in ("1", "0", "1"):
        done = run_pytest(["-q", "-s", "-p", "no:cacheprovider", "test_mode.py"], tmp_path,
                          env={"PATH": "/usr/bin:/bin", "TRITON_INTERPRET": value})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        found.setdefault(value, set()).add(done.stdout.split("MODE=")[1].split()[0])
    assert found == {"1": {"InterpretedFunction"}, "0": {"JITFunction"}}


FROZEN_PROBE = """
import gc
import sys


def test_reports_what_is_frozen():
    print("FROZEN=%d" % gc.get_freeze_count(), "TORCH=%s" % ("torch" in sys.modules))
"""


def test_a_run_starts_with_the_forkservers_imports_frozen_out_of_the_collector(tmp_path):
    """torch and the other preloads are imported and frozen (gc.freeze) before the fork: a run's collections do
    not walk them."""
    (tmp_path / "test_frozen.py").write_text(FROZEN_PROBE)
    done = run_pytest(["-q", "-s", "-p", "no:cacheprovider", "test_frozen.py"], tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    frozen = int(done.stdout.split("FROZEN=")[1].split()[0])
    assert frozen > 100_000 and "TORCH=True" in done.stdout, done.stdout[-2000:]  # torch alone is over 200 000
