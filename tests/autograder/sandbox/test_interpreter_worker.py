"""Scenarios that count under Triton's interpreter are graded on a GPU machine too.

The design checks (loads per program, the tile each program takes, program order, tl.dot calls per
tile) can only be counted under the interpreter. On a GPU grader the worker compiles, and these tests
skipped: the reference lost 7.5 of gpu_kernels' points on an H100. Now a scenario with an `interpreted`
attribute runs in a second worker of the same submission, under the interpreter and without the GPU
(process.Worker.interpreter); on a CPU grader it runs in the one worker, as before. Real workers here: a
worker started with gpu=True stands for the GPU grader's (this machine has no GPU to bind).
"""

import os
import sys
import time
from pathlib import Path

import pytest

from autograder.sandbox.process import RemoteStudent, Worker
from tests.autograder.sandbox import fake

PROBE = """
import os

TOKEN = os.urandom(8).hex()  # one per worker process that imports this module


def compiled_side():
    return TOKEN, os.environ.get("TRITON_INTERPRET", "")


def interpreted_side():
    return TOKEN, os.environ.get("TRITON_INTERPRET", "")


interpreted_side.interpreted = True
"""


def make(base: Path, gpu: bool) -> Worker:
    return fake.worker(base, "probe", {"scenarios": PROBE}, call_timeout=30, gpu=gpu)


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The folder to make the worker in (tmp_path / "w"), its probe package importable here as there."""
    monkeypatch.syspath_prepend(str(tmp_path / "w" / "submission"))
    sys.modules.pop("probe.scenarios", None)
    sys.modules.pop("probe", None)
    yield tmp_path
    sys.modules.pop("probe.scenarios", None)
    sys.modules.pop("probe", None)


def test_on_a_gpu_grader_interpreted_scenarios_run_in_their_own_interpreting_worker(probe):
    worker = make(probe / "w", gpu=True)
    import probe.scenarios as scenarios

    student = RemoteStudent(worker, timeout=30)
    try:
        main, _ = student.run(scenarios.compiled_side)
        counted, interpret = student.run(scenarios.interpreted_side)
        assert counted != main, "an interpreted scenario must not run in the worker that compiles"
        assert interpret == "1", "its worker runs Triton's interpreter"
        assert worker.interpreting is not None and worker.interpreting.gpu is False, "and sees no GPU"
        assert student.run(scenarios.interpreted_side)[0] == counted, "one interpreting worker, started once"
        assert student.run(scenarios.compiled_side)[0] == main, "the other scenarios stay where they were"
        sibling = worker.interpreting.current.popen
    finally:
        worker.stop()
    deadline = time.monotonic() + 30
    while sibling.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sibling.poll() is not None, "stopping the worker stops its interpreting sibling"
    assert worker.interpreting is None


def test_on_a_cpu_grader_they_run_in_the_one_worker(probe):
    worker = make(probe / "w", gpu=False)
    import probe.scenarios as scenarios

    student = RemoteStudent(worker, timeout=30)
    try:
        main, interpret = student.run(scenarios.compiled_side)
        assert interpret == "1"
        assert student.run(scenarios.interpreted_side)[0] == main
        assert worker.interpreting is None
    finally:
        worker.stop()


@pytest.mark.parametrize("suite", ["gpu_kernels", "flash_attention"])
def test_every_scenario_that_counts_under_the_interpreter_says_so(suite):
    """A scenario that returns None when compiled (nothing to count) must carry `interpreted`, or a GPU grader
    skips its test again; and each such scenario takes its tensors to the CPU under the interpreter."""
    import importlib
    import inspect

    module = importlib.import_module(f"autograder.suites.{suite}.scenarios")
    counting = [name for name, fn in vars(module).items() if inspect.isfunction(fn) and fn.__module__ == module.__name__
                and not name.startswith("_") and ("None when compiled" in (fn.__doc__ or "")
                                                  or "_loads_per_program(" in inspect.getsource(fn)
                                                  or "if not interpreted():" in inspect.getsource(fn))]
    assert counting, "the suite has scenarios that count under the interpreter"
    missing = [name for name in counting if getattr(getattr(module, name), "interpreted", False) is not True]
    assert not missing, f"without the `interpreted` attribute: {missing}"
    for name in counting:
        assert "interpreter_device(device)" in inspect.getsource(getattr(module, name)), name
