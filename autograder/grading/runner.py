"""The trusted grading run of a submission: tests here, student code in a sandboxed worker.

    python -m autograder.grading.runner SUBMISSION --report PATH [--assignment NAME] [--timeout S]
    python -m autograder.grading.runner --serve [--timeout S] [--no-overlap]   # one JSON job per line on stdin

Steps: a *slot* is made first (a stage folder, the worker library, and a worker already booting on
an empty submission folder); then the submission is opened into that folder, scanned for forbidden
APIs, its written answers (<assignment>/answers.md) read and graded as text, and the public tests
and hidden suites run with pytest in this process, the `student` fixture answered by the worker;
the GradeReport is written as JSON. This process holds the reference solutions (on sys.path, for
the `reference` fixture) and never imports student code.

`--serve` grades many submissions without paying for interpreter start-up each time: it imports
torch, the reference and the test modules once, then forks one child per submission, each from
that clean, warm state (so nothing of one submission's grading reaches the next). The next child is
forked, and its worker booted, while the current one grades, and the compile checks' builds start
beside the tests in a second worker of the submission (autograder.grading.ahead); `--no-overlap` does
neither (one submission at a time, and the builds made in that second worker only when the first check
asks, the tests waiting: for workers that share the cores; `batch --overlap` chooses). Every submission
still gets its own sandbox and its own workers, never shared with another.

Lifetime: a runner started by the client (`--lifeline FD`) ends when the client does, however it ended
(SIGKILL included): the client holds the other end of that pipe, the kernel closes it when the client
exits, and tells this process with SIGIO (see watch_client). Ended so, by SIGTERM, or by Ctrl-C, a
runner stops its workers, removes its stages (each forked child its own) and exits at once, quietly;
`batch` says what it kept. Stages are private (0700, autograder.grading.stages), and each runner's
start removes those of graders that were killed before they could (stages.sweep).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import gc
import importlib
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import kernels  # noqa: F401  (Triton's mode, before anything else)
from autograder.static import checks, triton_rules
from autograder.written import answers as written
from autograder.grading import ahead, buildcache, stages
from autograder.model.results import GradeReport
from autograder.sandbox import bwrap, forked, policy, staging
from autograder.sandbox.process import RemoteStudent, Worker
from autograder.grading.intake import open_submission, packages_in
from kernels import impl
from kernels.device import has_cuda, warm_dispatch

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
JOB_LIMIT = 3600.0
CHILDREN_PATIENCE = 30.0  # seconds an ending --serve runner waits for its children to clean up
COMPILE_CHECKS = "test_gpu_compile.py"  # the suites' GPU build checks (kernels.crosscompile)
# GradeReport.timings, in seconds: the slot built (stage folder, worker library, worker launched; under
# --serve while the previous submission grades), the submission opened into the stage (copied, unpacked),
# the static checks and written answers read, the whole pytest run, and within it the compile checks
# (their tests' set-up, call and tear-down: with the builds started ahead, mostly a wait for them), the builds
# started ahead (autograder.grading.ahead: from the tests' collection to their last answer, beside the tests)
# and the calls' waits for the worker to finish booting. Then CPU seconds, not wall-clock ones: this process's
# own (its tests, the reference, the reports; from the submission's opening), the submission's workers' (their
# start, with torch's import, and the student code they ran) and the builds' (the second worker, its compilers).
TIMINGS = ("sandbox_build", "stage", "static", "tests", "compile", "builds_ahead", "sandbox_wait",
           "cpu_grader", "cpu_student", "cpu_builds", "cpu_reference")


def known_assignments() -> list[str]:
    return impl.packages(SOLUTIONS)


def rules_of(assignment: str, kind: str = "RULES") -> list:
    """The suite's static rules: RULES (checks.Rule) or TRITON_RULES (triton_rules.TritonRules)."""
    try:
        return list(getattr(importlib.import_module(f"autograder.suites.{assignment}.rules"), kind, []))
    except ModuleNotFoundError:
        return []


def test_paths(assignment: str) -> list[str]:
    paths = [ROOT / "tests" / assignment, ROOT / "autograder" / "suites" / assignment]
    return [str(p) for p in paths if p.is_dir()]


@dataclass(eq=False)  # pytest keeps plugins in sets: hash by identity
class GraderPlugin:
    """Gives the harness its remote student, and fails tests whose task broke a static check."""

    student: RemoteStudent
    violations: list = field(default_factory=list)
    report: GradeReport | None = None
    compile_seconds: float = 0.0  # of the compile checks' tests
    slot: "Slot | None" = None  # where the compile checks' builds start once the tests are collected

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        slot = self.slot
        if slot is None or slot.worker is None:
            return
        # Not the builds of a check that a static check fails anyway: it would never ask for them.
        items = [item for item in session.items if not checks.blocked(self.violations, task_of(item))]
        if not slot.worker.gpu:  # the reference's builds of those checks (made by a server at its first need)
            try:
                slot.reference_builds, slot.reference_cpu = buildcache.reference_builds(
                    buildcache.requests_of(ahead.planned(items)), make=slot.serving)
            except Exception as exc:  # noqa: BLE001  (a saving, never a grading's failure: each build compiles)
                print(f"the reference's builds were not looked for: {type(exc).__name__}: {exc}", file=sys.stderr)
        # Beside the tests; or, where this grading's workers share the cores (a server without overlap), when the
        # first check asks: either way in the builds' worker, whose compiles fork from a compiling process rather
        # than start a new interpreter each (the submission's worker interprets Triton).
        slot.ahead = ahead.start(items, slot.worker, slot.stage / "scratch-builds", slot.reference_builds,
                                 lazy=not slot.builds_ahead)
        if slot.ahead is not None:
            self.student.answered_ahead = slot.ahead.take
            slot.given_builds = slot.ahead.given
        elif not slot.worker.ran.value:  # the checks build in the submission's worker, which has run no code of it
            slot.given_builds = buildcache.seed(slot.reference_builds, slot.worker.scratch, slot.worker.scratch_inside(),
                                                own_user=slot.worker.account is not None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if COMPILE_CHECKS in report.nodeid.partition("::")[0]:
            self.compile_seconds += report.duration

    @pytest.hookimpl
    def pytest_llmsys_student(self, config: pytest.Config) -> RemoteStudent:
        return self.student

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        found = checks.blocked(self.violations, task_of(item))
        if found:
            pytest.fail("static check: " + "; ".join(v.message for v in found), pytrace=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from autograder.harness.plugin import report_of  # imported by pytest first, for assert rewriting

        self.report = report_of(session.config)


def task_of(item: pytest.Item) -> str:
    """The task a test is marked with (`task("module.symbol")`), "" for none."""
    marker = item.get_closest_marker("task")
    return marker.args[0] if marker else ""


def scan(submission, assignments: list[str]) -> list:
    """Every copied package is read (an import of the other one is followed); the graded ones' rules apply,
    and the Triton host-code rules of the graded Triton tasks."""
    folders = {name: submission.root / name for name in submission.packages}
    found = checks.scan_packages(folders, {name: rules_of(name) for name in assignments if name in folders})
    for name in (a for a in assignments if a in folders):
        found += triton_rules.scan(folders[name], name, rules_of(name, "TRITON_RULES"))
    return found


# On a GPU, Triton compiles each kernel config at its first launch, inside the call that launches it, and the
# given `_autotune_on_gpu` compiles six configs of each kernel: on an H100 (December 2026, Triton 3.6) one test
# of the reference's flash_attention took 43 s, most of it compiling, against the default 60 s of CPU per call.
# A GPU worker's calls get this many times the per-call limit, so that a slower grader's compiler never costs a
# correct submission its points; the submission's whole budget still bounds an endless loop.
GPU_CALL_FACTOR = 3.0


def call_timeout_for(timeout: float, gpu: bool) -> float:
    """The per-call CPU limit of a worker: `timeout` (--timeout), times GPU_CALL_FACTOR on a GPU."""
    return timeout * GPU_CALL_FACTOR if gpu else timeout


# The GPU rehearsal (docs/gpus.md, "Rehearsing GPU grading on a CPU"): read here only, by the grader's runner.
REHEARSAL = "LLMSYS_REHEARSE_GPU"


class RehearsalError(ValueError):
    """LLMSYS_REHEARSE_GPU is set to something other than 1, or on a machine that has a GPU."""


def rehearsing() -> bool:
    """Whether this runner rehearses a GPU grader on a machine without a GPU ($LLMSYS_REHEARSE_GPU=1): it then
    takes every branch it takes on a GPU (protections_for's limits; GPU workers, with the GPU's device files
    bound where there are any; the compile checks in a new process; the checks counted under Triton's
    interpreter in a second worker), and its GPU workers stand in for workers on a GPU (kernels.gpu_stand_in)
    while their kernels run under Triton's interpreter on the CPU. The tests marked `gpu` need CUDA: they stay
    "not graded here"."""
    value = os.environ.get(REHEARSAL, "")
    if value not in ("", "0", "1"):
        raise RehearsalError(f"{REHEARSAL} must be 1 (rehearse GPU grading on this CPU) or unset, not {value!r}")
    if value == "1" and has_cuda():
        raise RehearsalError(f"{REHEARSAL}=1 rehearses GPU grading on a machine without a GPU, and this one has "
                             "CUDA: unset it, and the grader grades on the GPU")
    return value == "1"


def protections_for(timeout: float, sandbox: str) -> tuple[policy.Protections, bool]:
    gpu = has_cuda() or rehearsing()
    limits = policy.Limits(call_timeout=call_timeout_for(timeout, gpu),
                           address_space=None if gpu else policy.Limits.address_space)
    return policy.detect(sandbox, limits), gpu


def gpu_lines(worker: Worker) -> list[str]:
    """What the grading log says of a GPU grader's branches (none on a CPU grader), and of a rehearsal."""
    if not worker.gpu:
        return []
    limits = worker.protections.limits
    devices = ", ".join(bwrap.gpu_devices()) or "none found"
    lines = [f"GPU grader: each call may use {limits.call_timeout:g} s of CPU ({GPU_CALL_FACTOR:g} times --timeout: "
             "a call also compiles the kernels it launches), no address-space limit"
             + (f"; the GPU's device files bound into bubblewrap: {devices}" if worker.protections.bwrap else "")
             + "; the compile checks build in a new process; the checks counted under Triton's interpreter run in "
             "a second worker, under the interpreter and without the GPU"]
    if worker.stand_in:
        lines.append(f"GPU REHEARSAL ({REHEARSAL}=1), not a grade: this machine has no GPU; the GPU grader's "
                     "branches are taken, its GPU workers stand in for workers on a GPU (kernels.gpu_stand_in) and "
                     "run the kernels under Triton's interpreter on the CPU; the tests that need CUDA are not graded")
    return lines


def builds_lines(slot: "Slot") -> list[str]:
    """What the compile checks compiled in this grading, counted in the Triton cache of the worker that built,
    once it stopped; and whether it was given the reference's builds (autograder.grading.buildcache)."""
    if slot.worker is None or (slot.ahead is None and slot.reference_builds is None):
        return []
    scratch = slot.ahead.worker.scratch if slot.ahead is not None else slot.worker.scratch
    made = f" (made by this grading, in {slot.reference_cpu:.1f} CPU s)" if slot.reference_cpu else ""
    where = ""
    if slot.ahead is not None:
        when = "when the first check asked" if slot.ahead.lazy else "ahead, beside the tests"
        where = f"; they were built {when}" + (", by a worker forked from the builds' zygote"
                                               if slot.ahead.worker.zygote is not None else "")
    return [f"compile checks: {buildcache.compiled(scratch)} kernel build(s) compiled in this "
            f"grading; the worker was given the reference's {slot.given_builds} build(s){made}, taken where a "
            f"kernel is the reference's{where}"]


class Slot:
    """A stage folder with the worker library, and a worker booting on its (still empty) submission folder.

    The worker sees the submission folder through a bind mount, so the files copied in later appear
    inside; it imports nothing of the submission before its first call. The stage is private (0700: under
    bubblewrap, and without isolation, the worker is this user; a user-mode worker gets in by its group).
    """

    def __init__(self, protections: policy.Protections, gpu: bool, builds_ahead: bool = True,
                 zygote: forked.Zygote | None = None, serving: bool = False) -> None:
        started = time.monotonic()
        self.worker: Worker | None = None
        # A grading server's slot makes the reference's builds where they are missing (autograder.grading.buildcache);
        # every slot gives those it finds to the worker that builds.
        self.serving = serving
        self.reference_builds: Path | None = None
        self.reference_cpu = 0.0  # CPU seconds this grading spent making them (once per reference, compiler, builds)
        self.given_builds = 0  # how many of them the worker that builds was given
        # Whether the compile checks' builds start beside the tests, on a core of their own (off where the
        # workers already share the cores, --no-overlap: they start when the first check asks); and those builds.
        self.builds_ahead = builds_ahead
        self.ahead: ahead.BuildsAhead | None = None
        if zygote is not None:  # a stage in the zygote's folder, its library the zygote's (sandbox.forked)
            self.stage = Path(tempfile.mkdtemp(prefix=stages.prefix("grade"), dir=zygote.root))
        else:
            self.stage = stages.make("grade")
        _SLOTS.append(self)  # from here on, an ending runner closes it (see _end)
        lib = zygote.lib if zygote is not None else staging.build_lib(self.stage / "lib", known_assignments())
        (self.stage / "submission").mkdir(mode=0o755)
        self.worker = Worker(lib, self.stage / "submission", self.stage / "scratch", protections, gpu,
                             stand_in=rehearsing(), zygote=zygote)
        self.worker.prestart()
        self.built = time.monotonic() - started

    def close(self) -> None:
        """Stop the worker and delete the stage; never raises (a report written before is kept)."""
        if self in _SLOTS:
            _SLOTS.remove(self)
        try:
            self.stop_workers()
        finally:
            staging.remove_tree(self.stage)

    def stop_workers(self) -> None:
        """Stop the builds' worker, then the submission's (which releases the user they share)."""
        try:
            if self.ahead is not None:
                self.ahead.stop()
        finally:
            if self.worker is not None:
                self.worker.stop()


_SLOTS: list[Slot] = []  # this process's open slots
_ZYGOTES: list[forked.Zygote] = []  # --serve: the zygote this process started (not its children's)
_CHILDREN: set[int] = set()  # --serve: the children forked and not yet reaped
_ENDING: list[int] = []  # the signal this process is ending on, once it is
_LIFELINE: list[int] = []  # the lifeline's fd, in the process that watches it


def _end(signum: int, frame=None) -> None:
    """SIGTERM, SIGINT (Ctrl-C) or the client gone: stop the workers and remove the stages of this process,
    have the --serve children do the same, and exit now, without a traceback (the terminal is the
    instructor's). Runs in the main thread, between two bytecodes of whatever it was doing."""
    if _ENDING:  # a second signal while ending (Ctrl-C reaches the whole process group): already on it
        return
    _ENDING.append(signum)
    for pid in list(_CHILDREN):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    for slot in list(_SLOTS):
        slot.close()
    for zygote in _ZYGOTES:
        stop_zygote(zygote)
    deadline = time.monotonic() + CHILDREN_PATIENCE
    while _CHILDREN and time.monotonic() < deadline:
        for pid in list(_CHILDREN):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            _CHILDREN.discard(pid)
        time.sleep(0.05)
    os._exit(128 + signum)


def watch_client(lifeline: int) -> None:
    """End this runner (as SIGTERM does) once the client's end of the `lifeline` pipe closes: when the client
    exits or is killed, even by SIGKILL, the kernel closes it. The kernel says so with SIGIO (O_ASYNC, sent
    to this process only, not to the children it forks), so nothing has to wait on the pipe: no thread, and
    the --serve loop stays as it is."""
    _LIFELINE.append(lifeline)
    signal.signal(signal.SIGIO, lambda signum, frame: _end_if_closed(lifeline))
    fcntl.fcntl(lifeline, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(lifeline, fcntl.F_SETFL, fcntl.fcntl(lifeline, fcntl.F_GETFL) | os.O_ASYNC | os.O_NONBLOCK)
    _end_if_closed(lifeline)  # the client may be gone already


def _end_if_closed(lifeline: int) -> None:
    try:
        if os.read(lifeline, 1) != b"":
            return  # the client never writes: nothing to end on
    except BlockingIOError:
        return  # still open
    _end(signal.SIGTERM)


@dataclass
class Job:
    submission: str
    report: str
    assignments: list[str] | None = None
    select: str | None = None
    seed: int | None = None


def run(job: Job, slot: Slot, protections: policy.Protections) -> GradeReport:
    started, cpu_started = time.monotonic(), time.process_time()
    submission = open_submission(Path(job.submission), slot.stage, known_assignments())
    timings = {"sandbox_build": slot.built, "stage": time.monotonic() - started}
    if submission.refused:  # nothing to grade: "not gradable", with the reason, rather than 0 points
        return GradeReport(submission.name, log=protections.lines() + submission.problems, seed=job.seed,
                           execution_time=time.monotonic() - started, not_gradable=submission.refused,
                           timings=rounded(timings))
    chosen = job.assignments or submission.packages or known_assignments()
    violations = scan(submission, chosen)
    # The written answers are read now, as the submission gave them, before any of its code runs. A
    # --select leaves them out unless it names them ("written", or e.g. "written or test_memory").
    answers = [] if job.select and "written" not in job.select else [
        r for name in chosen for r in written.written_results(name, submission.root / name, SOLUTIONS)]
    timings["static"] = time.monotonic() - started - timings["stage"]
    grader = GraderPlugin(RemoteStudent(slot.worker, protections.limits.call_timeout), violations, slot=slot)
    impl.activate(SOLUTIONS)
    # --tb=no: a result's message is its exception's own line (harness.plugin), and pytest's terminal output is
    # not kept; formatting each failure's traceback (parsing the source of every frame) was half the grader's CPU
    # on a submission that fails most tests (the stubs, for one).
    args = ["-q", "--no-header", "--tb=no", "-p", "no:cacheprovider", "-p", "no:logging",
            "-p", "no:unraisableexception", f"--rootdir={ROOT}"]
    args += ["-k", job.select] if job.select else []
    args += ["--seed", str(job.seed)] if job.seed is not None else []
    tests_started = time.monotonic()
    try:
        code = pytest.main(args + [p for a in chosen for p in test_paths(a)], plugins=[grader])
    finally:
        slot.stop_workers()
    timings.update(tests=time.monotonic() - tests_started, compile=grader.compile_seconds,
                   builds_ahead=slot.ahead.seconds if slot.ahead is not None else 0.0, sandbox_wait=slot.worker.waited,
                   cpu_student=slot.worker.cpu, cpu_builds=slot.ahead.worker.cpu if slot.ahead is not None else 0.0,
                   cpu_reference=slot.reference_cpu)
    report = grader.report or GradeReport(submission="")
    if grader.report is not None:
        report.tests = report.tests + answers
    report.submission = submission.name
    report.log = (protections.lines() + gpu_lines(slot.worker) + forked.lines(slot.worker.zygote)
                  + [f"assignments graded: {', '.join(chosen)}"]
                  + submission.problems + [f"static check: {v.message}" for v in violations]
                  + report.log + [f"worker started {slot.worker.starts} time(s); pytest exit code {int(code)}"]
                  + builds_lines(slot)
                  + [f"swept after grading, left by the worker's user: {left}" for left in slot.worker.swept])
    report.execution_time = time.monotonic() - started
    report.timings = rounded({**timings, "cpu_grader": time.process_time() - cpu_started})
    return report


def rounded(timings: dict[str, float]) -> dict[str, float]:
    """The timings taken, in the order of TIMINGS, to the millisecond."""
    return {name: round(timings[name], 3) for name in TIMINGS if name in timings}


def grade_one(job: Job, timeout: float, sandbox: str) -> None:
    # What is imported by now (torch, pytest, the grader) stays out of the collections to come: Hypothesis runs a
    # full one at its first test, which would walk all of torch's objects (as in a server, whose children fork
    # from a frozen heap).
    gc.freeze()
    protections, gpu = protections_for(timeout, sandbox)
    slot = Slot(protections, gpu)
    try:
        Path(job.report).write_text(run(job, slot, protections).to_json())
    finally:
        slot.close()


@functools.lru_cache(maxsize=None)
def builds_ahead(assignment: str) -> bool:
    """Whether the assignment's tests may build ahead: a test module of it defines `builds_ahead` (ahead.planned)."""
    return any("def builds_ahead(" in path.read_text(errors="replace")
               for folder in test_paths(assignment) for path in Path(folder).rglob("test_*.py"))


def builds_ahead_in(job: Job) -> bool:
    """Whether grading `job` may build ahead, told before its child opens the submission (from the listing of
    the submission's files; where that cannot be told, as if it may)."""
    chosen = job.assignments or packages_in(Path(job.submission), known_assignments()) or known_assignments()
    return any(builds_ahead(name) for name in chosen)


def warm(assignments: list[str]) -> None:
    """Import now what every grading needs: the reference, the test modules (assertion-rewritten by a
    collect-only pytest session) and torch's dispatch machinery (which imports torch._dynamo)."""
    impl.activate(SOLUTIONS)
    for name in assignments:
        for path in sorted((SOLUTIONS / name).glob("*.py")):
            importlib.import_module(f"{name}.{path.stem}" if path.stem != "__init__" else name)
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", f"--rootdir={ROOT}", "--impl", str(SOLUTIONS)]
                    + [p for a in assignments for p in test_paths(a)])
    warm_dispatch()
    try:  # the constants Hypothesis draws from, read from the source of every local module loaded: once here, not
        # in each child (only a saving, through a private function: a Hypothesis without it reads them there)
        from hypothesis.internal.conjecture.providers import _get_local_constants

        _get_local_constants()
    except Exception:  # noqa: BLE001
        pass


class Ready:
    """A forked child holding a slot, waiting for its job on a pipe."""

    def __init__(self, timeout: float, sandbox: str, builds_ahead: bool = True,
                 zygote: forked.Zygote | None = None) -> None:
        self.zygote = zygote
        read, self.write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            _CHILDREN.clear()  # the parent's; this child ends its own slot only (see _end)
            _ZYGOTES.clear()  # the parent's too: this child forks workers from it, and never stops it
            for fd in _LIFELINE:  # the parent watches it: SIGIO goes to its pid, which may be another's later
                os.close(fd)
            _LIFELINE.clear()
            os.close(self.write)
            self._child(read, timeout, sandbox, builds_ahead, zygote)
        _CHILDREN.add(self.pid)
        os.close(read)

    def _child(self, read: int, timeout: float, sandbox: str, builds_ahead: bool, zygote: forked.Zygote | None) -> None:
        code = 1
        try:
            protections, gpu = protections_for(timeout, sandbox)
            slot = Slot(protections, gpu, builds_ahead, zygote, serving=True)
            with os.fdopen(read, "rb") as pipe:
                text = pipe.read()
            if text:
                job = Job(**json.loads(text))
                with open(Path(job.report).with_suffix(".log"), "w") as log:
                    os.dup2(log.fileno(), 1)
                    os.dup2(log.fileno(), 2)
                Path(job.report).write_text(run(job, slot, protections).to_json())
            slot.close()
            code = 0
        finally:
            os._exit(code)

    def start(self, job: Job) -> None:
        with os.fdopen(self.write, "wb") as pipe:
            pipe.write(json.dumps(job.__dict__).encode())

    def cancel(self) -> None:
        """End the child before its job: it reads nothing, cleans up and exits."""
        os.close(self.write)
        self.wait(60)

    def wait(self, limit: float) -> int:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                _CHILDREN.discard(self.pid)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, 9)
        status = os.waitpid(self.pid, 0)[1]
        _CHILDREN.discard(self.pid)
        return os.waitstatus_to_exitcode(status)


def serve(timeout: float, sandbox: str, overlap: bool = True) -> None:
    """Grade one job per line of stdin (Job fields as JSON); answer one line per job on stdout.

    With `overlap`, the next child is forked (and its worker boots) while the current one grades, and the
    compile checks' builds start beside the tests (autograder.grading.ahead); without, the next child only
    once the current one is done, and the builds only when the first compile check asks (made then by the same
    builds' worker, the tests waiting): where the workers already share the cores (`batch --overlap auto` with
    fewer than two cores per worker), a second busy process per worker would only slow the others down."""
    zygotes = Zygotes(*protections_for(timeout, sandbox), wait=False)
    warm(known_assignments())  # while the zygote boots, on a core of its own
    zygotes.wait()
    gc.collect()
    gc.freeze()  # the warm heap stays out of the children's collections: no copy-on-write of all of it
    try:
        ready = Ready(timeout, sandbox, overlap, zygotes.take())
        for line in sys.stdin:
            job = Job(**json.loads(line))
            if zygotes.builds_missing() and builds_ahead_in(job) and zygotes.start_builds():
                # the child prepared before it started cannot reach it: a new one takes the job
                ready.cancel()
                zygotes.give_back(ready.zygote)
                ready = Ready(timeout, sandbox, overlap, zygotes.take())
            busy = ready
            busy.start(job)
            if overlap:
                ready = Ready(timeout, sandbox, overlap, zygotes.take())
            status = busy.wait(JOB_LIMIT)
            zygotes.give_back(busy.zygote)
            if not overlap:
                ready = Ready(timeout, sandbox, overlap, zygotes.take())
            print(json.dumps({"report": job.report, "status": status}), flush=True)
        os.close(ready.write)  # end of input: the waiting child reads nothing and cleans up
        ready.wait(60)
    finally:
        zygotes.close()


RETIRE_AFTER = 200  # submissions whose workers one zygote forks before a fresh one takes over


class Zygotes:
    """The grading server's zygote (sandbox.forked), replaced by a fresh one once it has served RETIRE_AFTER
    submissions or on any anomaly (it exited, or does not answer); a zygote replaced is stopped once no child of
    the server still grades with it (stopping it ends every worker it forked).

    The builds' zygote beside it (the compile checks' builds forks their worker from it, beside the tests or, without
    overlap, when the first check asks) starts at the first submission that builds, not with the server: a server
    that grades no compile check (a resource_accounting cohort) never pays its start (about 3 CPU s), and one that
    does saves more than that at each submission (a compile in a fork of the builds' worker, not a new interpreter
    that imports torch and Triton)."""

    def __init__(self, protections: policy.Protections, gpu: bool, wait: bool = True) -> None:
        """The first zygote started; with `wait=False` only launched (`wait()`, or the first `take()`, waits)."""
        self.protections, self.gpu = protections, gpu
        self.builds_failed = False  # it did not start once: the builds' workers start on their own from then on
        self.current = start_zygote(protections, gpu, wait)
        self.served = 0
        self.users: dict[int, int] = {}  # id(zygote) -> children of the server that hold it
        self.retired: list[forked.Zygote] = []

    def wait(self) -> None:
        """Wait until the first zygote answers; where it does not, workers start on their own (as where it could
        not be started)."""
        if self.current is None or self.current.pid is not None:
            return
        try:
            self.current.wait_ready(self.protections.limits.start_timeout)
        except (forked.ZygoteUnavailable, OSError) as exc:
            say_workers_start_alone(exc)
            stop_zygote(self.current)
            self.current = None

    def take(self) -> forked.Zygote | None:
        """The zygote for the next child (renewed first where due), or None: workers start on their own."""
        self.wait()  # a first zygote not waited for yet
        if self.current is not None and (self.served >= RETIRE_AFTER or not self.current.healthy()):
            self.retired.append(self.current)
            builds = self.current.builds is not None
            self.current, self.served = start_zygote(self.protections, self.gpu), 0
            if builds:
                self.start_builds()
            self._stop_unused()
        if self.current is not None:
            self.served += 1
            self.users[id(self.current)] = self.users.get(id(self.current), 0) + 1
        return self.current

    def builds_missing(self) -> bool:
        """Whether the current zygote has no builds' zygote yet (nor failed to start one)."""
        return not self.builds_failed and self.current is not None and self.current.builds is None

    def start_builds(self) -> bool:
        """Start the builds' zygote beside the current zygote where it is missing: True where it started now."""
        if not self.builds_missing():
            return False
        try:
            self.current.start_builds(self.protections.limits.start_timeout)
        except (forked.ZygoteUnavailable, OSError) as exc:
            self.builds_failed = True
            print(f"runner: the builds' workers start on their own, the builds' zygote did not start ({exc})",
                  file=sys.stderr, flush=True)
            return False
        return True

    def give_back(self, zygote: forked.Zygote | None) -> None:
        if zygote is not None:
            self.users[id(zygote)] -= 1
            self._stop_unused()

    def close(self) -> None:
        for zygote in self.retired + ([self.current] if self.current is not None else []):
            stop_zygote(zygote)
        self.retired, self.current = [], None

    def _stop_unused(self) -> None:
        for zygote in [z for z in self.retired if not self.users.get(id(z))]:
            self.retired.remove(zygote)
            stop_zygote(zygote)


def say_workers_start_alone(exc: BaseException) -> None:
    """The server's line where its zygote could not start or did not answer: each worker then starts on its own."""
    print(f"runner: workers start on their own, the zygote did not start ({exc})", file=sys.stderr, flush=True)


def start_zygote(protections: policy.Protections, gpu: bool, wait: bool = True) -> forked.Zygote | None:
    """The grading server's zygote, its workers' warm parent (sandbox.forked), where this machine allows one and
    it starts; None (each worker an interpreter of its own, as for a single grading) where not. It starts before
    the server imports the reference: nothing of the grader's own state could reach it (a new interpreter under
    bubblewrap, given no descriptor of the server's). With `wait=False`, it is only launched: its boot, a core's
    work of seconds, overlaps the server's own imports (Zygotes.wait)."""
    if os.environ.get(forked.SWITCH, "auto") == "never" or not forked.available(protections, gpu)[0]:
        return None
    root = stages.make("grade")
    try:
        lib = staging.build_lib(root / "lib", known_assignments())
        if wait:
            zygote = forked.Zygote.start(protections, root, lib, protections.limits.start_timeout)
        else:
            zygote = forked.Zygote(protections, root, lib)
    except (forked.ZygoteUnavailable, OSError) as exc:
        say_workers_start_alone(exc)
        staging.remove_tree(root)
        return None
    _ZYGOTES.append(zygote)
    return zygote


def stop_zygote(zygote: forked.Zygote) -> None:
    if zygote in _ZYGOTES:
        _ZYGOTES.remove(zygote)
    zygote.stop()
    staging.remove_tree(zygote.root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade submissions (the trusted side).")
    parser.add_argument("submission", nargs="?")
    parser.add_argument("--report")
    parser.add_argument("--serve", action="store_true", help="grade one JSON job per line of stdin")
    parser.add_argument("--assignment", action="append")
    parser.add_argument("--timeout", type=float, default=policy.Limits.call_timeout)
    parser.add_argument("--sandbox", choices=policy.MODES, default="auto")
    parser.add_argument("--select", help="only the tests matching this pytest -k expression")
    parser.add_argument("--seed", type=int, help="the seed of the randomised tests (default: random)")
    parser.add_argument("--no-overlap", dest="overlap", action="store_false",
                        help="with --serve: prepare the next submission's sandbox only after the current one is "
                             "graded, and build the compile checks' kernels only when each check asks")
    parser.add_argument("--lifeline", type=int, metavar="FD",
                        help="a pipe whose other end the client holds: end when it closes (see watch_client)")
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _end)
    if args.lifeline is not None:
        watch_client(args.lifeline)
    stages.sweep()  # the stages of graders killed before they could remove them
    try:  # fail closed: no grading without an isolation (or the instructor's explicit opt-out)
        protections_for(args.timeout, args.sandbox)
    except (policy.SandboxUnavailable, RehearsalError) as exc:
        print(exc, file=sys.stderr)
        return 3
    if args.serve:
        serve(args.timeout, args.sandbox, args.overlap)
        # Every child is reaped and nothing is left to clean up: skip the interpreter's teardown, where
        # Triton's bindings report "leaked" objects on stderr, which is the instructor's terminal.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    elif args.submission and args.report:
        grade_one(Job(args.submission, args.report, args.assignment, args.select, args.seed), args.timeout, args.sandbox)
    else:
        parser.error("give SUBMISSION and --report, or --serve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
