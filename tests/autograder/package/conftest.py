"""Fixtures of the packaging tests: every channel built once, and the slow end-to-end runs started early.

`packaged` builds dist/ (release, Gradescope, nbgrader with nbgrader's own generate_assignment,
Classroom) into a temporary folder from one collection of the tests, and starts in the background
each end-to-end run that a selected test module waits for (once, however many read it): the release's
`make test` on the stubs and on the solutions, nbgrader's real autograde of a correct and of a stub
notebook, the trusted grader on the nbgrader course, Gradescope's run_autograder, one Classroom step.
They run side by side, so the whole packaging suite takes about as long as its slowest run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from autograder import bench
from autograder.package import classroom, gradescope, nbgrader, release
from autograder.package.collect import CollectedTest, collect
from autograder.package.layout import ROOT, assignments

ASSIGNMENT = "resource_accounting"  # the end-to-end runs grade this one (the faster of the two)
JOB_TIMEOUT = 900


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would point a run at the repository instead of the copy it tests, as the
    bench runs a copy (autograder.bench.environment): make's variables too, under the repository's `make test`
    a copy's make would run as a sub-make (its messages read "make[1]:") and the harness would take it for the
    student's own make."""
    return bench.environment() | extra


@dataclass
class Job:
    """A command running in the background, its output in a file."""

    name: str
    command: list[str]
    cwd: Path
    log: Path
    env: dict[str, str] = field(default_factory=clean_env)
    process: subprocess.Popen | None = None
    started: float = 0.0

    def start(self) -> "Job":
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def wait(self) -> tuple[int, str]:
        """(exit code, output) once it ends; fails the test after JOB_TIMEOUT seconds."""
        try:
            code = self.process.wait(timeout=max(1.0, JOB_TIMEOUT - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"{self.name} ran longer than {JOB_TIMEOUT} s; its output:\n{self.output()[-3000:]}")
        return code, self.output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the job's own session: nothing else
            self.process.wait()


@dataclass
class Packaged:
    dist: Path
    tests: list[CollectedTest]
    work: Path
    jobs: dict[str, Job] = field(default_factory=dict)

    def job(self, name: str) -> Job:
        if name not in self.jobs:
            pytest.fail(f"no background job {name!r} was started (its test module was not selected?)")
        return self.jobs[name]


def solved_notebook(course: Path, assignment: str) -> nbformat.NotebookNode:
    """The student version of the notebook, with the reference code in its module cells."""
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    solutions = {cell.id: cell.source for cell in source.cells if "llmsys" in cell.metadata
                 and "module" in cell.metadata["llmsys"]}
    nb = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        cell.source = solutions.get(cell.id, cell.source)
    return nb


def stub_notebook(course: Path, assignment: str) -> nbformat.NotebookNode:
    """The student version of the notebook as nbgrader released it: nbgrader's stubs."""
    return nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)


def cheating_notebook(course: Path, assignment: str) -> nbformat.NotebookNode:
    """The stub notebook plus, after the setup cell, a cell that installs an IPython input transformer:
    the hook through which a notebook rewrites nbgrader's test cells before they run."""
    nb = stub_notebook(course, assignment)
    after_setup = [cell.id for cell in nb.cells].index("setup") + 1
    nb.cells.insert(after_setup, nbformat.v4.new_code_cell(
        "ip = get_ipython()\nip.input_transformers_post.append(lambda lines: lines)", id="cheat"))
    return nb


def submit(course: Path, assignment: str, notebooks: dict[str, nbformat.NotebookNode]) -> None:
    """Put each student's notebook where nbgrader expects a collected submission."""
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / assignment
        shutil.copytree(course / "release" / assignment, folder)
        nbformat.write(nb, folder / f"{assignment}.ipynb")


def course_copy(dist: Path, target: Path, notebooks: dict[str, nbformat.NotebookNode]) -> Path:
    shutil.copytree(dist / "nbgrader", target)
    submit(target, ASSIGNMENT, notebooks)
    return target


def release_job(packaged: Packaged, name: str, solved: bool) -> Job:
    if name in packaged.jobs:  # started for another module already
        return packaged.jobs[name]
    copy = packaged.work / name
    shutil.copytree(packaged.dist / "student", copy)
    if solved:
        for module in sorted((ROOT / "solutions").glob("*/*.py")):
            shutil.copyfile(module, copy / "assignments" / module.parent.name / module.name)
    return Job(name, ["make", "test", f"PYTHON={sys.executable}"], copy, packaged.work / f"{name}.log")


def gradescope_job(packaged: Packaged) -> Job:
    """run_autograder under a temporary root, on the reference plus code that tries to forge results.json."""
    root = packaged.work / "gradescope-root"
    shutil.unpack_archive(packaged.dist / "gradescope" / f"{ASSIGNMENT}.zip", root / "source")
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, root / "submission" / ASSIGNMENT)
    (root / "results").mkdir()
    forge = f"""

def _forge():
    import json
    for name in ("results.json", "forged"):
        try:
            with open({str(root / 'results')!r} + "/" + name, "w") as handle:
                json.dump({{"score": 1000000.0, "tests": []}}, handle)
        except OSError:
            pass


_forge()
"""
    with open(root / "submission" / ASSIGNMENT / "memory.py", "a") as handle:
        handle.write(forge)
    env = clean_env(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    return Job("gradescope", ["bash", str(root / "source" / "run_autograder")], packaged.work,
               packaged.work / "gradescope.log", env)


def nbgrader_jobs(packaged: Packaged) -> list[Job]:
    dist, work = packaged.dist, packaged.work
    correct, stub = solved_notebook(dist / "nbgrader", ASSIGNMENT), stub_notebook(dist / "nbgrader", ASSIGNMENT)
    jobs = []
    for student, nb in (("correct", correct), ("stub", stub)):
        course = course_copy(dist, work / f"course-{student}", {student: nb})
        jobs.append(Job(f"autograde-{student}", [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT,
                                                 "--create"], course, work / f"autograde-{student}.log"))
    course = course_copy(dist, work / "course-trusted",
                         {"correct": correct, "cheat": cheating_notebook(dist / "nbgrader", ASSIGNMENT)})
    jobs.append(Job("trusted", [sys.executable, "-m", "autograder", "nbgrader", str(course), ASSIGNMENT], ROOT,
                    work / "trusted.log"))
    return jobs


def classroom_job(packaged: Packaged) -> Job:
    template = packaged.work / "classroom-template"
    shutil.copytree(packaged.dist / "classroom", template)
    output = packaged.work / "classroom-output"
    path = f"tests/{ASSIGNMENT}/test_memory.py"
    points = sum(t.points for t in packaged.tests if t.path == path)
    return Job("classroom", [sys.executable, "-m", "autograder.package.classroom_step", path, "--max-score",
                             f"{points:g}"], template, packaged.work / "classroom.log",
               clean_env(GITHUB_OUTPUT=str(output)))


TEST_TIMEOUT = 2  # seconds each test of the hanging steps gets before it is stopped
# Seconds the step whose loop no signal stops gets before it is stopped: its start (torch imported) and the
# tests before the loop must fit well inside it on a loaded two-core machine, beside every other run this
# fixture starts (10 s did not, in CI; 40 s did not with those runs started together). It waits in libc's
# sleep, where Python never runs the handler of a signal another thread took, so the wait costs no CPU.
HANG_TIMEOUT = 90


def classroom_hang_job(packaged: Packaged) -> Job:
    """Three steps on a template whose memory.py is the reference but for get_memory_usage, which loops forever,
    and whose flops.py is the stubs but for ridge_point, which blocks SIGALRM and sleeps in C forever:
    test_memory.py's step must fail only the tests that call get_memory_usage, each for its own timeout;
    test_network.py's step after it must report as usual; test_flops.py's step must be stopped at its deadline,
    naming the test that hung and keeping those that finished."""
    template = packaged.work / "classroom-hang"
    shutil.copytree(packaged.dist / "classroom", template)
    package = template / "assignments" / ASSIGNMENT
    shutil.copyfile(ROOT / "solutions" / ASSIGNMENT / "memory.py", package / "memory.py")
    with open(package / "memory.py", "a") as handle:
        handle.write("\n\ndef get_memory_usage(x):\n    while True:\n        pass\n")
    with open(package / "flops.py", "a") as handle:
        handle.write("\n\ndef ridge_point(peak, bandwidth):\n    import ctypes\n    import signal\n\n"
                     "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
                     "    while True:\n        ctypes.CDLL(None).sleep(3600)\n")
    points = {name: sum(t.points for t in packaged.tests if t.path == f"tests/{ASSIGNMENT}/{name}")
              for name in ("test_memory.py", "test_network.py", "test_flops.py")}
    limits = {"test_memory.py": f" --test-timeout {TEST_TIMEOUT}",
              "test_flops.py": f" --test-timeout {TEST_TIMEOUT} --timeout {HANG_TIMEOUT}"}
    steps = [f"{sys.executable} -m autograder.package.classroom_step tests/{ASSIGNMENT}/{name} --max-score "
             f"{value:g}" + limits.get(name, "") for name, value in points.items()]
    return Job("classroom-hang", ["bash", "-c", "; ".join(steps)], template, packaged.work / "classroom-hang.log",
               clean_env(GITHUB_OUTPUT=str(packaged.work / "classroom-hang-output")))


# The background runs each test module waits for: those needing only the release and the Gradescope
# zip start first; those needing the collection (nbgrader, Classroom) start once it is done.
EARLY = {"test_release": lambda p: [release_job(p, "release-stubs", False), release_job(p, "release-solved", True)],
         "test_student_loop": lambda p: [release_job(p, "release-stubs", False)],
         "test_gradescope": lambda p: [gradescope_job(p)]}
LATE = {"test_nbgrader": nbgrader_jobs, "test_classroom": lambda p: [classroom_job(p), classroom_hang_job(p)]}


@pytest.fixture(scope="session")
def packaged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    here = Path(__file__).parent
    selected = {Path(item.path).stem for item in request.session.items if Path(item.path).parent == here}
    work = tmp_path_factory.mktemp("packaging")
    packaged = Packaged(dist=work / "dist", tests=[], work=work)

    def start(jobs: dict) -> None:
        for module, make in jobs.items():
            for job in make(packaged) if module in selected else []:
                if job.name not in packaged.jobs:  # a run two modules read is started once
                    packaged.jobs[job.name] = job.start()

    try:
        release.build(packaged.dist / "student")
        gradescope.build(packaged.dist / "gradescope")
        start(EARLY)
        packaged.tests = collect(assignments())
        nbgrader.build(packaged.dist / "nbgrader", packaged.tests)
        classroom.build(packaged.dist / "classroom", packaged.tests)
        start(LATE)
        yield packaged
    finally:  # also when a build fails: no run outlives the session
        for job in packaged.jobs.values():
            job.stop()
