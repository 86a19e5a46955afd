"""Gradings of the GPU rehearsal, each with one of the first GPU grading's faults put back or none.

    LLMSYS_REHEARSE_GPU=1 python -m tests.autograder.grading.rehearsal JOBS.json

JOBS.json is a list of {"fault": FAULT or null, "submission", "report", "assignments", "select", "seed"}. The
grader's runner is warmed once (the reference, the test modules, torch: as `runner --serve` does), then each
job is graded in a child forked from it, with its fault applied in that child only, by the runner's own
grade_one: its report is written to "report", its output beside it (.log).

The faults, as the first grading on an H100 met them (docs/gpus.md):
  bwrap-by-name       the worker's bubblewrap named, not the path the grader probed, and looked up on the
                      worker's PATH, which lacks it (there bubblewrap was unpacked by hand into a folder only
                      the grader's PATH held; here every folder holding a `bwrap` leaves the worker's PATH);
  forked-compile      the worker's copy of kernels/crosscompile/request.py sees no CUDA in reach, so a compile
                      check's builds are forked from a worker that has started CUDA (its stand-in here);
  interpreted-on-gpu  the scenarios counted under Triton's interpreter go to the GPU worker instead of the
                      interpreting one beside it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable

FORKED_COMPILE = '''

def _gpu_in_reach() -> bool:  # a fault put back by tests/autograder/grading/rehearsal.py: compile in a fork
    return False
'''


def bwrap_by_name() -> None:
    from autograder.sandbox import bwrap

    command, environment = bwrap.bwrap_command, bwrap.worker_env

    def by_name(*args, **kwargs) -> list[str]:
        found = command(*args, **kwargs)
        return ["bwrap", *found[1:]]

    def without_bwrap(*args, **kwargs) -> dict[str, str]:
        env = environment(*args, **kwargs)
        env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if not Path(d, "bwrap").exists())
        return env

    bwrap.bwrap_command, bwrap.worker_env = by_name, without_bwrap


def forked_compile() -> None:
    from autograder.sandbox import staging

    build = staging.build_lib

    def with_the_fault(dest: Path, assignments: list[str]) -> Path:
        lib = build(dest, assignments)
        request = lib / "kernels" / "crosscompile" / "request.py"
        assert "def _gpu_in_reach()" in request.read_text(), "run_request no longer asks _gpu_in_reach: update the fault"
        request.write_text(request.read_text() + FORKED_COMPILE)
        return lib

    staging.build_lib = with_the_fault


def interpreted_on_gpu() -> None:
    from autograder.sandbox.process import Worker

    Worker.interpreter = lambda self: self


FAULTS: dict[str, Callable[[], None]] = {"bwrap-by-name": bwrap_by_name, "forked-compile": forked_compile,
                                         "interpreted-on-gpu": interpreted_on_gpu}


def grade(job: dict) -> int:
    """Grade `job` in a child forked from this process, its fault applied there; the child's exit status."""
    from autograder.grading import runner

    fault = job.pop("fault", None)
    report = Path(job["report"])
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with open(report.with_suffix(".log"), "w") as log:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
            if fault is not None:
                FAULTS[fault]()
            runner.grade_one(runner.Job(**job), runner.policy.Limits.call_timeout, "auto")
            code = 0
        except BaseException:  # noqa: BLE001  (the test reads the traceback in the log)
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def main(argv: list[str]) -> int:
    from autograder.grading import runner

    jobs = json.loads(Path(argv[0]).read_text())
    unknown = {job["fault"] for job in jobs} - set(FAULTS) - {None}
    if unknown:
        raise SystemExit(f"unknown faults {sorted(unknown)}; known: {sorted(FAULTS)}")
    runner.rehearsing()  # refuses a malformed switch, or a machine with a GPU, before anything is graded
    runner.warm(sorted({a for job in jobs for a in job["assignments"]}))
    return max(grade(job) for job in jobs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
