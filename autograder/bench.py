"""Benchmarks of the grading loop, per assignment: the trusted grader against nbgrader, where the grader's
time goes, a projection for a cluster, and the student's `make test`.

    python -m autograder.bench [--size 4] [--assignments a,b] [--out build/bench_grader.md]
                               [--no-nbgrader] [--no-slurm] [--gpu-seconds S]

All in one run, on one cohort of `--size` submissions per assignment (each of the `--assignments`, all
three by default) built from the reference and the assignment's typical mistakes
(autograder.cohort.sample.MISTAKES_OF), so that every figure is measured under the same load:

1. per assignment, the trusted grader's `batch` (public and hidden tests and the compile checks, a
   sandboxed worker per submission) with one worker, then with two, each into a fresh gradebook, with
   the overlap that `--overlap auto` picks on this machine. resource_accounting, the cheapest, is also
   graded the other way, so that both are measured: `--overlap always` (a worker boots the next
   submission's sandbox while the current one grades, and so keeps about two cores busy) and
   `--overlap never` (strictly one submission at a time per worker: one core each, which shows how
   grading scales with workers). `auto` is the first where the machine has two cores per worker;
2. where the grader's time goes, per assignment, from the one-worker batch's reports
   (GradeReport.timings, autograder.grading.runner.TIMINGS), seconds per submission: the stage (the
   submission copied or unpacked), the static checks (and the written answers read), the sandbox's
   start (its stage folder and worker library built, the worker launched, and what the tests waited
   for the worker to boot), the tests, the compile checks (the suites' test_gpu_compile.py), the reports
   (every file written from the gradebook, as the batch does at its end, timed again here) and the
   rest (the grading server's start, spread over the cohort, and the batch's bookkeeping); and, apart
   from the sum, the compile checks' builds, which start once the tests are collected and run beside
   them (autograder.grading.ahead): the compile checks' own column is then mostly their wait for them;
   and the CPU seconds per submission: the grading process's, the submission's workers' (their start,
   torch's import, the student code) and the builds'. Over the machine's cores, with every core busy all
   the time, the total is the least time per submission this grader can reach, and the workers' alone
   that of any grader that starts each submission's code in a fresh sandboxed interpreter (even one whose
   tests and builds cost nothing); both are set beside a tenth of nbgrader's time (grading ten times
   faster than nbgrader);
3. nbgrader's own `nbgrader autograde` (the real command), per assignment, on the same submissions as
   notebooks of the nbgrader course (`make nbgrader`, which holds every assignment): each notebook is
   the released one with its module cells holding that submission's files, so both graders run the
   same code through the same tests (nbgrader's test cells leave out those that need a GPU or the
   reference solution); and the ratio nbgrader / grader, seconds per submission. Each autograde starts
   from an empty Triton cache, but its submissions share it, as they share the kernel's process:
   one whose kernels are another's (a mistake outside the Triton code) builds none of them, where
   the grader builds them again in each submission's sandbox;
4. the first assignment's cohort through `batch --executor slurm` on a single-node Slurm that the
   bench starts and stops (autograder/cohort/cluster/slurm-up.sh; root and apt-get, else the output
   says why it is missing), and an array of as many tasks that do nothing for the overhead per task;
   from it and each assignment's seconds per submission (1.), a projection of the wall time for 600
   submissions, each holding every assignment, on 1, 8 and 32 GPU nodes. The tests that need a GPU
   (half precision, speed) are graded in the batches where this machine has CUDA; elsewhere they are
   not, and the projection adds `--gpu-seconds` per submission for them, an assumption it states
   (`--no-slurm` leaves this out);
5. the student loop: `make test` in the student release (`make release`), after install, on the
   stubs, for each assignment and for all; and the time until the first failure's message is on the
   screen with `PYTEST_ARGS=-x` (stop at the first failure, print it);
6. the kernel compilations a grading of the reference triggers on a GPU, per assignment, counted on this
   CPU (autograder.grading.compiles: the suites' calls replayed by the dry run; every distinct signature,
   specialisation, constexprs and config; an autotuned kernel at its first config, as the grader's GPU
   worker launches it (kernels.first_config), and beside it every config at each new key, as autotuning
   would) and their compile seconds, estimated from a sample of each kernel's builds compiled here
   (`--no-compiles` leaves this out).

Seconds are wall-clock seconds of whole commands; the ratios compare runs of this one process on this
one machine. With the default size the whole run takes about 15 minutes on an idle 2-core machine.
The tables are printed and written as Markdown to `--out`.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autograder.cohort import sample as cohort
from autograder.grading.client import cores, overlaps
from autograder.model.results import GradeReport
from autograder.report import submission_folder

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = tuple(cohort.MISTAKES_OF)
BOTH_WAYS = "resource_accounting"  # graded with and without overlap: the cheapest assignment
CLUSTER = ROOT / "autograder" / "cohort" / "cluster"
PER_TASK = 4  # submissions per array task on the single-node Slurm
DEFAULT_SIZE = 4
DEFAULT_GPU_SECONDS = 60.0
# autograder.grading.runner.COMPILE_CHECKS, not imported: the runner's imports set the Triton mode in this
# process's environment, which every command the bench runs would inherit.
COMPILE_CHECKS = "test_gpu_compile.py"
# The columns of where the grader's time goes (stage_breakdown's keys), with their headers.
STAGES = {"batch": "batch", "stage": "stage", "static": "static checks", "sandbox": "sandbox start",
          "tests": "tests", "compile": "compile checks", "reports": "reports", "rest": "rest",
          "ahead": "builds, beside the tests"}


@dataclass
class Row:
    """One measured line of the table."""

    what: str
    seconds: float
    count: int = 1
    note: str = ""
    assignment: str = ""

    @property
    def per_item(self) -> float:
        return self.seconds / self.count


def kinds(assignment: str) -> tuple[cohort.Member, ...]:
    """What the assignment's cohort cycles through: the reference, then each typical mistake."""
    return (cohort.Member("correct", "solutions"),) + cohort.MISTAKES_OF[assignment]


def build_cohort(dest: Path, assignment: str, size: int) -> list[Path]:
    """`size` submissions of `assignment`, named student-NN-<kind>, cycling through the reference and the mistakes."""
    members = [cohort.Member(f"student-{i + 1:02d}-{kind.name}", kind.base, kind.edits)
               for i, kind in zip(range(size), kinds(assignment) * size)]
    return cohort.build(dest, [assignment], members)


def default_way(workers: int, available: int | None = None) -> str:
    """The overlap `--overlap auto` picks for `workers` on a machine with `available` cores."""
    return "always" if overlaps("auto", workers, available) else "never"


def batch_runs(assignment: str, available: int | None = None) -> list[tuple[str, int]]:
    """The (overlap, workers) of the batches of one assignment: one worker then two, the default way;
    both ways for BOTH_WAYS."""
    if assignment == BOTH_WAYS:
        return [(way, n) for way in ("always", "never") for n in (1, 2)]
    return [(default_way(n, available), n) for n in (1, 2)]


# What a run of the bench must not take from the caller: where Python finds the repository and which tree it
# grades; pytest's options; and make's own variables. Under `make bench-grader` (or the suite's `make test`),
# the student release's `make test` would otherwise run as a sub-make and take the caller's command-line
# variables (`make test PYTEST=...`) for its own.
NOT_PASSED_ON = ("PYTHONPATH", "LLMSYS_IMPL", "PYTEST_ADDOPTS", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def environment() -> dict[str, str]:
    """This environment (less NOT_PASSED_ON) with this interpreter's scripts first on PATH (nbgrader runs
    `alembic` by name)."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED_ON}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env or environment(), capture_output=True, text=True)
    return time.perf_counter() - started, done


def trusted_batch(cohort_dir: Path, out: Path, workers: int, overlap: str, assignment: str) -> Row:
    """The grader's batch verb, as an instructor runs it, into a fresh gradebook."""
    flags = ["--workers", str(workers), "--overlap", overlap]
    seconds, done = timed([sys.executable, "-m", "autograder", "batch", str(cohort_dir), "--out", str(out), *flags], ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"autograder batch failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    count = len(list(cohort_dir.iterdir()))
    auto = " (the default here)" if default_way(workers) == overlap else ""
    builds = ", compile checks" if (ROOT / "autograder" / "suites" / assignment / COMPILE_CHECKS).is_file() else ""
    return Row(f"trusted grader, batch {' '.join(flags)}", seconds, count,
               f"public + hidden tests{builds}, sandboxed{auto}", assignment)


def reports_of(out: Path, submissions: list[Path]) -> list[GradeReport]:
    """The reports a batch wrote into `out`, one per submission."""
    return [GradeReport.from_json((submission_folder(out, path.name) / "report.json").read_text())
            for path in submissions]


def time_reports(out: Path) -> float:
    """Seconds to write every file of a graded batch from its gradebook (what the batch does at its end)."""
    from autograder.cohort.publish import publish

    started = time.perf_counter()
    publish(out)
    return time.perf_counter() - started


def stage_breakdown(reports: list[GradeReport], batch_seconds: float, reports_seconds: float) -> dict[str, float]:
    """Seconds per submission in each step of the grading (STAGES), from the reports' timings
    (autograder.grading.runner.TIMINGS), the batch's wall time and the time its reports took to write.

    `sandbox` is the slot's build (under overlap, done while the previous submission grades) and what the
    tests waited for the worker to boot, `tests` the pytest run less that wait and the compile checks (which,
    with the builds started ahead, mostly wait for them), `rest` the batch's time per submission that none of
    the others holds. `ahead` is the builds started once the tests are collected (autograder.grading.ahead),
    which run beside the tests: not a step of its own, so not in the sum."""
    timed_reports = [r.timings for r in reports if r.timings]
    if not timed_reports:
        raise RuntimeError("no report holds the grading's timings (GradeReport.timings)")

    def mean(key: str) -> float:
        return sum(t.get(key, 0.0) for t in timed_reports) / len(timed_reports)

    parts = {"stage": mean("stage"), "static": mean("static"), "sandbox": mean("sandbox_build") + mean("sandbox_wait"),
             "tests": max(mean("tests") - mean("compile") - mean("sandbox_wait"), 0.0), "compile": mean("compile"),
             "reports": reports_seconds / len(reports)}
    batch = batch_seconds / len(reports)
    return {"batch": batch, **parts, "rest": batch - sum(parts.values()), "ahead": mean("builds_ahead")}


# The CPU seconds a grading used (autograder.grading.runner.TIMINGS' cpu_*), with their headers.
CPU_PARTS = {"grader": "grading process", "student": "submission's workers", "builds": "builds",
             "reference": "reference's builds"}


def cpu_use(reports: list[GradeReport]) -> dict[str, float]:
    """CPU seconds per submission, from the reports' timings: the grading process's own (tests, reference,
    reports), the submission's workers' (their start, torch's import, the student code they ran), the
    builds' (the second worker and its compilers) and the reference's builds' (made once, by the first grading
    that needs them: autograder.grading.buildcache), and their total."""
    timed = [r.timings for r in reports if "cpu_student" in r.timings]
    if not timed:
        raise RuntimeError("no report holds the grading's CPU seconds (GradeReport.timings' cpu_student)")
    parts = {key: sum(t.get(f"cpu_{key}", 0.0) for t in timed) / len(timed) for key in CPU_PARTS}
    return {**parts, "total": sum(parts.values())}


def cpu_rows(cpu: Mapping[str, Mapping[str, float]], measured: Mapping[str, Mapping[str, Row]], available: int
             ) -> tuple[list[str], list[list[str]], list[str]]:
    """The table of CPU seconds per submission, and a line per assignment that nbgrader was measured for: what
    ten times nbgrader's speed asks (a tenth of its seconds per submission) against the least time per
    submission that this CPU allows on the `available` cores, every core busy all the time: all of it (this
    grader, however well it overlapped), and the submission's workers' alone (any grader that starts each
    submission's code in a fresh sandboxed interpreter, even if its tests and builds cost nothing)."""
    header = (["assignment"] + [f"{title} (CPU s)" for title in CPU_PARTS.values()]
              + ["total (CPU s)", f"total over {available} cores (s)", f"workers over {available} cores (s)",
                 "nbgrader / 10 (s)"])
    body, lines = [], []
    for name, parts in cpu.items():
        least, workers = parts["total"] / available, parts["student"] / available
        nb = measured[name].get("nbgrader")
        body.append([name] + [f"{parts[key]:.2f}" for key in (*CPU_PARTS, "total")]
                    + [f"{least:.2f}", f"{workers:.2f}", f"{nb.per_item / 10:.2f}" if nb else ""])
        if nb:
            tenth = nb.per_item / 10
            lines.append(f"{name}: ten times nbgrader's speed is {tenth:.2f} s per submission; this grader's "
                         f"{parts['total']:.2f} CPU s per submission take at least {least:.2f} s on {available} "
                         f"cores ({'out of' if least > tenth else 'within'} reach), the submission's workers' "
                         f"{parts['student']:.2f} CPU s alone {workers:.2f} s "
                         f"({'out of' if workers > tenth else 'within'} reach)")
    return header, body, lines


def breakdown_rows(breakdowns: Mapping[str, Mapping[str, float]]) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the table of where the grader's time goes, one row per assignment."""
    header = ["assignment"] + [f"{title} (s)" for title in STAGES.values()]
    return header, [[name] + [f"{parts[key]:.2f}" for key in STAGES] for name, parts in breakdowns.items()]


def comparison_rows(measured: Mapping[str, Mapping[str, Row]], available: int | None = None
                    ) -> tuple[list[str], list[list[str]]]:
    """Per assignment: seconds per submission of the grader (its default overlap, one worker and two) and of
    nbgrader, and nbgrader / grader."""
    header = ["assignment", "grader, 1 worker (s)", "grader, 2 workers (s)", "nbgrader (s)",
              "nbgrader / grader, 1 worker", "nbgrader / grader, 2 workers"]
    body = []
    for name, rows in measured.items():
        one, two = (rows[default_way(n, available) + str(n)].per_item for n in (1, 2))
        nb = rows.get("nbgrader")
        tail = [f"{nb.per_item:.2f}", f"{nb.per_item / one:.1f}x", f"{nb.per_item / two:.1f}x"] if nb else ["", "", ""]
        body.append([name, f"{one:.2f}", f"{two:.2f}"] + tail)
    return header, body


def seconds_per_submission(measured: Mapping[str, Mapping[str, Row]], available: int | None = None) -> dict[str, float]:
    """Each assignment's seconds per submission: its one-worker batch with the default overlap."""
    return {name: rows[default_way(1, available) + "1"].per_item for name, rows in measured.items()}


EMPTY_ARRAY = """
import sys, submitit
from autograder.cohort.course import ClusterOptions
from autograder.cohort.executors import sbatch_parameters
executor = submitit.SlurmExecutor(folder=sys.argv[1] + "/%j")
executor.update_parameters(**sbatch_parameters(ClusterOptions(executor="slurm", partition="cpu")))
jobs = executor.map_array(abs, range(int(sys.argv[2])))
assert [job.result() for job in jobs] == list(range(int(sys.argv[2])))
"""


def slurm_path(cohort_dir: Path, work: Path, per_task: int, assignment: str) -> tuple[list[Row], float]:
    """The cohort through `batch --executor slurm` on a single-node Slurm started here
    (autograder/cohort/cluster/slurm-up.sh), and an array of as many tasks that do nothing (the overhead).

    Returns the rows and the seconds per task of the empty array."""
    state = work / "slurm"
    up = subprocess.run([str(CLUSTER / "slurm-up.sh"), str(state)], capture_output=True, text=True)
    try:
        if up.returncode != 0:
            raise RuntimeError(f"Slurm could not be started here: {up.stderr.strip()[-500:]}")
        env = environment()
        env.update(SLURM_CONF=str(state / "slurm.conf"), PATH=f"{CLUSTER / 'bin'}{os.pathsep}{env['PATH']}")
        flags = ["--executor", "slurm", "--partition", "cpu", "--per-task", str(per_task)]
        seconds, done = timed([sys.executable, "-m", "autograder", "batch", str(cohort_dir), "--out",
                               str(work / "grades-slurm"), *flags], ROOT, env)
        if done.returncode != 0:
            raise RuntimeError(f"batch --executor slurm failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        count = len(list(cohort_dir.iterdir()))
        tasks = -(-count // per_task)
        empty, done = timed([sys.executable, "-c", EMPTY_ARRAY, str(work / "empty-array"), str(tasks)], ROOT, env)
        if done.returncode != 0:
            raise RuntimeError(f"the empty job array failed:\n{done.stderr[-3000:]}")
    finally:
        subprocess.run([str(CLUSTER / "slurm-down.sh"), str(state)], capture_output=True, text=True)
    rows = [Row(f"trusted grader, batch {' '.join(flags)}", seconds, count,
                f"{tasks} array task(s), cpus_per_task 2, on a single-node Slurm on this machine", assignment),
            Row(f"Slurm overhead: an array of {tasks} task(s) that do nothing", empty, tasks,
                "per task: scheduling, Python and submitit start-up, result file")]
    return rows, empty / tasks


def gpu_seconds(assumed: float, has_gpu: bool, gpu_name: str = "") -> tuple[float, str]:
    """Seconds per submission the projection adds for the tests that need a GPU, and what it says of them:
    none where this machine has one (the batches graded them, so the measured seconds hold them),
    else `assumed`."""
    if has_gpu:
        return 0.0, (f"graded in the batches measured here, on {gpu_name}, so they are in each assignment's "
                     "seconds per submission")
    return assumed, (f"{assumed:g} s per submission for all of them together, assumed, not measured: this machine "
                     "has no GPU, so they were not graded here (on a GPU node, make bench-grader measures them in "
                     "the batches; BENCH_GRADER_ARGS=--gpu-seconds S sets another assumption)")


def projection(per_submission: Mapping[str, float], task: float, gpu: float, per_task: int = 8, count: int = 600,
               nodes: tuple[int, ...] = (1, 8, 32)) -> list[tuple[int, float]]:
    """Wall seconds to grade `count` submissions, each holding every assignment, on each number of GPU
    nodes: tasks of `per_task` submissions, one task per node at a time, each task `task` seconds of
    overhead plus `per_task` x (the assignments' seconds per submission, summed, + `gpu`) of grading;
    waves of tasks until all are done."""
    tasks = -(-count // per_task)
    one_task = task + per_task * (sum(per_submission.values()) + gpu)
    return [(n, -(-tasks // n) * one_task) for n in nodes]


def projection_markdown(per_submission: Mapping[str, float], task: float, gpu: float, gpu_note: str,
                        per_task: int = 8) -> str:
    names = ", ".join(per_submission)
    lines = ["", f"Projection: 600 submissions ({names}), {per_task} per array task", "",
             "| GPU nodes | wall time | submissions per hour |", "|---:|---:|---:|"]
    for n, seconds in projection(per_submission, task, gpu, per_task):
        lines.append(f"| {n} | {seconds / 60:.0f} min | {600 / seconds * 3600:.0f} |")
    measured = "; ".join(f"{name} {seconds:.1f} s" for name, seconds in per_submission.items())
    lines += ["", "Assumptions:",
              f"- each submission is graded as here, per assignment (a batch with one worker, the grading server's "
              f"start spread over the cohort): {measured}, {sum(per_submission.values()):.1f} s in all; a GPU "
              "node's CPU is usually faster;",
              f"- the tests that need a GPU (half precision, speed): {gpu_note};",
              f"- each task costs {task:.1f} s of overhead (the empty array measured here) on top;",
              "- one task per node at a time, each with one GPU; tasks run in waves of as many as there are nodes;",
              "- no queue wait: the course's partition and QoS give the nodes at once; no task is preempted."]
    return "\n".join(lines) + "\n"


def notebooks_course(course: Path, cohorts: Mapping[str, list[Path]]) -> None:
    """The nbgrader course with each submission of each assignment collected as a notebook in
    submitted/<name>/<assignment>/."""
    import nbformat

    from autograder.package import nbgrader

    nbgrader.build(course)
    for assignment, submissions in cohorts.items():
        released = course / "release" / assignment
        template = nbformat.read(released / f"{assignment}.ipynb", as_version=4)
        for submission in submissions:
            nb = nbformat.from_dict(template)
            for cell in nb.cells:
                rel = cell.metadata.get("llmsys", {}).get("module")
                if rel:
                    code = (submission / rel).read_text(encoding="utf-8")
                    cell.source = f"%%writefile {rel}\n{code.rstrip()}"
            folder = course / "submitted" / submission.name / assignment
            shutil.copytree(released, folder)
            nbformat.write(nb, folder / f"{assignment}.ipynb")


def nbgrader_autograde(course: Path, assignment: str, count: int) -> Row:
    """`nbgrader autograde` of one assignment, with a Triton cache of its own: nothing built before this
    run is reused (the grader's workers start from an empty one each)."""
    env = environment()
    env["TRITON_CACHE_DIR"] = str(Path(tempfile.mkdtemp(prefix=f"triton-{assignment}-", dir=course)))
    seconds, done = timed([sys.executable, "-m", "nbgrader", "autograde", assignment, "--create"], course, env)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader autograde {assignment} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return Row("nbgrader autograde", seconds, count, "public + hidden test cells, in the student's kernel", assignment)


def student_loop(release: Path, assignments: list[str]) -> list[Row]:
    """`make test` in the student release on the stubs: each assignment, all, and the first failure."""
    make = ["make", "--no-print-directory", "test", f"PYTHON={sys.executable}"]
    rows = []
    for label, args in [(name, f"tests/{name}") for name in assignments] + [("all assignments", "")]:
        seconds, _ = timed(make + [f"PYTEST_ARGS={args}"], release)
        rows.append(Row(f"student make test: {label}", seconds, note="stubs, after install"))
    rows.append(first_failure(release, make))
    return rows


def first_failure(release: Path, make: list[str]) -> Row:
    """Seconds until the first failure's message is printed, with -x (what docs/students.md suggests)."""
    started = time.perf_counter()
    process = subprocess.Popen(make + ["PYTEST_ARGS=-x"], cwd=release, env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen = None
    for line in process.stdout:
        # a traceback's error line, or the harness's section of the tasks a stub still holds (a stub's failure)
        if seen is None and ("NotImplementedError" in line or "not implemented yet" in line or line.startswith("E ")):
            seen = time.perf_counter() - started
    process.wait()
    if seen is None:
        raise RuntimeError("make test -x on the stubs printed no failure")
    return Row("student: first failure message", seen, note="make test PYTEST_ARGS=-x on the stubs")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    import torch

    return (f"{cpu}, {cores()} cores, Python {platform.python_version()}, torch {torch.__version__}, "
            f"{platform.system()} {platform.release()}")


def ratios(rows: Mapping[str, Row], available: int | None = None) -> list[str]:
    """One assignment's comparisons: where it was graded both ways, the second worker's gain each way and
    the overlap's; always the default's (`--overlap auto` on a machine with `available` cores) gain."""
    lines = []
    if all(f"{way}{n}" in rows for way in ("always", "never") for n in (1, 2)):
        for way in ("never", "always"):
            one, two = rows[f"{way}1"], rows[f"{way}2"]
            lines.append(f"throughput gain of the second worker, --overlap {way}: {one.seconds / two.seconds:.2f}x "
                         f"({one.per_item:.2f} s to {two.per_item:.2f} s per submission)")
        lines.append(f"overlap within one worker: {rows['never1'].seconds / rows['always1'].seconds:.2f}x")
    default = {n: rows[default_way(n, available) + str(n)] for n in (1, 2)}
    lines.append(f"the default (--overlap auto), one worker to two: {default[1].per_item:.2f} s to "
                 f"{default[2].per_item:.2f} s per submission ({default[1].seconds / default[2].seconds:.2f}x)")
    return lines


TEXT_COLUMNS = ("assignment", "run", "note")  # left-aligned; the others hold numbers


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    align = ["---" if cell in TEXT_COLUMNS else "---:" for cell in header]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, align, *body]) + "\n"


def rich_table(title: str, header: list[str], body: list[list[str]]) -> Table:
    table = Table(*header, title=title)
    for cells in body:
        table.add_row(*cells)
    return table


def compile_rows(counts: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Per assignment (autograder.grading.compiles.count's figures): the compilations of a GPU grading of the
    reference, each autotuned kernel launched at its first config as the grader's GPU worker does
    (kernels.first_config), their estimated seconds, the same with every config autotuned, each kernel's
    count and seconds a build, and the calls replayed."""
    header = ["assignment", "compilations a grading", "estimated compile seconds", "autotuning every config (s)",
              "kernels (compilations x s each)", "calls (replayed in part)"]
    body = [[one["assignment"], str(one["one_config"]), f"{one['seconds_one_config']:.0f}",
             f"{one['compiles']} ({one['seconds']:.0f})",
             "; ".join(f"{kernel.rpartition('.')[2]} {k['one_config']} x {k['seconds_each']:.2f}"
                       for kernel, k in one["kernels"].items()) or "none (no Triton kernel)",
             f"{one['calls']} ({len(one['partial'])})"] for one in counts]
    return header, body


def runs_rows(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    header = ["assignment", "run", "seconds", "per submission", "note"]
    return header, [[row.assignment, row.what, f"{row.seconds:.1f}", f"{row.per_item:.2f}" if row.count > 1 else "",
                     row.note] for row in rows]


def report_text(tables: list[tuple[str, list[str], list[list[str]]]], lines: list[str], size: int, host: str,
                assignments: list[str]) -> str:
    """The Markdown of `--out`: the cohort and machine, then each table under its title, then the lines."""
    out = [f"Cohort: {size} submissions of each of {', '.join(assignments)} (the reference and its typical "
           f"mistakes). Machine: {host}.", ""]
    for title, header, body in tables:
        out += [f"{title}:", "", markdown_table(header, body)]
    return "\n".join(out + [f"- {line}" for line in lines]) + "\n"


def grade_assignment(assignment: str, work: Path, size: int, console: Console
                     ) -> tuple[dict[str, Row], list[Path], dict[str, float], dict[str, float]]:
    """One assignment's cohort through the grader's batches; its rows, its submissions, where its time goes and
    its CPU seconds per submission (the one-worker batch with the default overlap)."""
    submissions = build_cohort(work / "cohort" / assignment, assignment, size)
    rows: dict[str, Row] = {}
    for way, n in batch_runs(assignment):
        console.print(f"{assignment}: grading {size} submissions with the trusted grader, {n} worker(s), "
                      f"--overlap {way} ...")
        rows[f"{way}{n}"] = trusted_batch(work / "cohort" / assignment, work / f"grades-{assignment}-{way}-{n}", n,
                                          way, assignment)
    out = work / f"grades-{assignment}-{default_way(1)}-1"
    reports = reports_of(out, submissions)
    breakdown = stage_breakdown(reports, rows[f"{default_way(1)}1"].seconds, time_reports(out))
    return rows, submissions, breakdown, cpu_use(reports)


def run(size: int, out: Path, with_nbgrader: bool, console: Console, with_slurm: bool = True,
        assumed_gpu: float = DEFAULT_GPU_SECONDS, assignments: list[str] | None = None,
        with_compiles: bool = True) -> str:
    assignments = list(assignments or ASSIGNMENTS)
    measured: dict[str, dict[str, Row]] = {}
    cohorts: dict[str, list[Path]] = {}
    breakdowns: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    cluster_rows: list[Row] = []
    cluster_text = ""
    with tempfile.TemporaryDirectory(prefix="llmsys-bench-") as tmp:
        work = Path(tmp)
        for name in assignments:
            measured[name], cohorts[name], breakdowns[name], cpu[name] = grade_assignment(name, work, size, console)
        if with_nbgrader:
            console.print("the same submissions as notebooks through nbgrader autograde ...")
            notebooks_course(work / "course", cohorts)
            for name in assignments:
                measured[name]["nbgrader"] = nbgrader_autograde(work / "course", name, size)
        if with_slurm:
            first = assignments[0]
            console.print(f"{first} through --executor slurm on a single-node Slurm, {PER_TASK} per task ...")
            try:
                cluster_rows, task = slurm_path(work / "cohort" / first, work, PER_TASK, first)
                import torch

                has_gpu = torch.cuda.is_available()
                gpu, gpu_note = gpu_seconds(assumed_gpu, has_gpu, torch.cuda.get_device_name() if has_gpu else "")
                cluster_text = projection_markdown(seconds_per_submission(measured), task, gpu, gpu_note)
            except RuntimeError as exc:
                cluster_text = f"\nThe Slurm path was not measured: {exc}\n"
        console.print("the student loop: make test in the student release ...")
        from autograder.package import release

        release.build(work / "student")
        student = student_loop(work / "student", assignments)
        counts = []
        if with_compiles:
            from autograder.grading import compiles

            console.print("the kernel compilations of a GPU grading of the reference, counted here ...")
            counts = [compiles.count(name) for name in assignments]
    rows = [row for name in assignments for row in measured[name].values()] + cluster_rows + student
    tables = [("Grading loop", *runs_rows(rows)),
              ("Seconds per submission, trusted grader (its default overlap) and nbgrader", *comparison_rows(measured)),
              ("Where the trusted grader's time goes, seconds per submission (one worker)",
               *breakdown_rows(breakdowns))]
    cpu_header, cpu_body, floors = cpu_rows(cpu, measured, cores())
    tables.append((f"CPU seconds per submission (one worker), and the least seconds per submission they allow on "
                   f"{cores()} cores", cpu_header, cpu_body))
    if counts:
        tables.append(("Kernel compilations of a grading of the reference on a GPU (counted on this CPU; seconds "
                       "compiled here for sm_90)", *compile_rows(counts)))
    lines = [f"{name}: {line}" for name in assignments for line in ratios(measured[name], cores())] + floors
    for title, header, body in tables:
        console.print(rich_table(title, header, body))
    for line in lines:
        console.print(line)
    console.print(cluster_text)
    text = report_text(tables, lines, size, machine(), assignments) + cluster_text
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"wrote {out}")
    return text


def assignment_list(text: str) -> list[str]:
    """`--assignments a,b`: known assignments, each once, in the order given."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in ASSIGNMENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'none given'}: name one or more of "
                                         f"{', '.join(ASSIGNMENTS)}, separated by commas")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"submissions in each assignment's cohort (default {DEFAULT_SIZE})")
    parser.add_argument("--assignments", type=assignment_list, default=list(ASSIGNMENTS), metavar="A,B",
                        help=f"only these assignments (default: {','.join(ASSIGNMENTS)})")
    parser.add_argument("--out", type=Path, default=Path("build/bench_grader.md"), help="the Markdown tables")
    parser.add_argument("--no-nbgrader", dest="nbgrader", action="store_false", help="leave nbgrader out")
    parser.add_argument("--no-slurm", dest="slurm", action="store_false",
                        help="leave out the Slurm path and the projection (a single-node Slurm: root and apt-get)")
    parser.add_argument("--no-compiles", dest="compiles", action="store_false",
                        help="leave out the count of the kernel compilations a GPU grading triggers")
    parser.add_argument("--gpu-seconds", type=float, default=DEFAULT_GPU_SECONDS, metavar="S",
                        help="for the projection where there is no GPU: seconds per submission of the tests that "
                        f"need one, all assignments together (default {DEFAULT_GPU_SECONDS:g}, an assumption; "
                        "graded and measured instead where CUDA is available)")
    args = parser.parse_args(argv)
    if args.size < 2:
        parser.error("--size must be at least 2 (two workers need two submissions)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run(args.size, args.out, args.nbgrader, Console(), args.slurm, args.gpu_seconds, args.assignments, args.compiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
