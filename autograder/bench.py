"""Benchmarks of the grading loop: the trusted grader against nbgrader, and the student's `make test`.

    python -m autograder.bench [--size 20] [--out build/bench_grader.md] [--no-nbgrader] [--no-slurm]

All in one run, on one cohort of `--size` resource_accounting submissions built from the reference
and its typical mistakes (autograder.cohort.sample), so that every figure is measured under the same load:

1. the trusted grader's `batch` (public and hidden tests, sandboxed worker per submission) with one
   worker, then with two, each into a fresh gradebook, each way: `--overlap always` (a worker boots
   the next submission's sandbox while the current one grades, and so keeps about two cores busy)
   and `--overlap never` (strictly one submission at a time per worker: one core each, which shows
   how grading scales with workers). The default, `auto`, is the first where the machine has two
   cores per worker and the second otherwise;
2. nbgrader's own `nbgrader autograde` (the real command) on the same submissions as notebooks of
   the nbgrader course (`make nbgrader`): each notebook is the released one with its module cells
   holding that submission's files, so both graders run the same code through the same tests;
3. the same cohort through `batch --executor slurm` on a single-node Slurm that the bench starts and
   stops (autograder/cohort/cluster/slurm-up.sh; root and apt-get, else the table says why it is missing),
   with an array of as many tasks that do nothing for the overhead per task; from these and the
   seconds to grade flash_attention on one GPU (measured where CUDA is available, else
   `--gpu-seconds`), a projection of the wall time for 600 submissions on 1, 8 and 32 GPU nodes,
   with its assumptions beside it (`--no-slurm` leaves this out);
4. the student loop: `make test` in the student release (`make release`), after install, on the
   stubs, for each assignment and for both; and the time until the first failure's message is on
   the screen with `PYTEST_ARGS=-x` (stop at the first failure, print it).

Seconds are wall-clock seconds of whole commands; the ratios compare runs of this one process on
this one machine. The table is printed and written as Markdown to `--out`.
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
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autograder.cohort import sample as cohort
from autograder.grading.client import cores, overlaps
from autograder.grading.results import GradeReport

ASSIGNMENT = "resource_accounting"
ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "autograder" / "cohort" / "cluster"
PER_TASK = 4  # submissions per array task on the single-node Slurm
# The cohort cycles through these: the reference and each typical mistake.
KINDS = (cohort.Member("correct", "solutions"),) + cohort.MISTAKES


@dataclass
class Row:
    """One measured line of the table."""

    what: str
    seconds: float
    count: int = 1
    note: str = ""

    @property
    def per_item(self) -> float:
        return self.seconds / self.count


def build_cohort(dest: Path, size: int) -> list[Path]:
    """`size` submissions, named student-NN-<kind>, cycling through the reference and the mistakes."""
    members = [cohort.Member(f"student-{i + 1:02d}-{kind.name}", kind.base, kind.edits)
               for i, kind in zip(range(size), KINDS * size)]
    return cohort.build(dest, [ASSIGNMENT], members)


def environment() -> dict[str, str]:
    """This environment with this interpreter's scripts first on PATH (nbgrader runs `alembic` by name)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LLMSYS_IMPL", "PYTEST_ADDOPTS")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def timed(command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env or environment(), capture_output=True, text=True)
    return time.perf_counter() - started, done


def trusted_batch(cohort_dir: Path, out: Path, workers: int, overlap: str) -> Row:
    """The grader's batch verb, as an instructor runs it, into a fresh gradebook."""
    flags = ["--workers", str(workers), "--overlap", overlap]
    seconds, done = timed([sys.executable, "-m", "autograder", "batch", str(cohort_dir), "--out", str(out), *flags], ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"autograder batch failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    count = len(list(cohort_dir.iterdir()))
    auto = " (the default here)" if overlaps("auto", workers) == (overlap == "always") else ""
    return Row(f"trusted grader, batch {' '.join(flags)}", seconds, count, f"public + hidden tests, sandboxed{auto}")


EMPTY_ARRAY = """
import sys, submitit
from autograder.cohort.course import ClusterOptions
from autograder.cohort.executors import sbatch_parameters
executor = submitit.SlurmExecutor(folder=sys.argv[1] + "/%j")
executor.update_parameters(**sbatch_parameters(ClusterOptions(executor="slurm", partition="cpu")))
jobs = executor.map_array(abs, range(int(sys.argv[2])))
assert [job.result() for job in jobs] == list(range(int(sys.argv[2])))
"""


def slurm_path(cohort_dir: Path, work: Path, per_task: int) -> tuple[list[Row], dict[str, float]]:
    """The same cohort through `batch --executor slurm` on a single-node Slurm started here
    (autograder/cohort/cluster/slurm-up.sh), and an array of as many tasks that do nothing (the overhead).

    Returns the rows and the figures the projection needs: seconds to grade one submission inside a
    task (the reports' execution_time, warm server) and seconds per task of the empty array."""
    state = work / "slurm"
    up = subprocess.run([str(CLUSTER / "slurm-up.sh"), str(state)], capture_output=True, text=True)
    try:
        if up.returncode != 0:
            raise RuntimeError(f"Slurm could not be started here: {up.stderr.strip()[-500:]}")
        env = environment()
        env.update(SLURM_CONF=str(state / "slurm.conf"), PATH=f"{CLUSTER / 'bin'}{os.pathsep}{env['PATH']}")
        out = work / "grades-slurm"
        flags = ["--executor", "slurm", "--partition", "cpu", "--per-task", str(per_task)]
        seconds, done = timed([sys.executable, "-m", "autograder", "batch", str(cohort_dir), "--out", str(out),
                               *flags], ROOT, env)
        if done.returncode != 0:
            raise RuntimeError(f"batch --executor slurm failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        count = len(list(cohort_dir.iterdir()))
        tasks = -(-count // per_task)
        inside = [GradeReport.from_json(p.read_text()).execution_time for p in (out / ".slurm" / "reports").glob("*/*.json")]
        empty, done = timed([sys.executable, "-c", EMPTY_ARRAY, str(work / "empty-array"), str(tasks)], ROOT, env)
        if done.returncode != 0:
            raise RuntimeError(f"the empty job array failed:\n{done.stderr[-3000:]}")
    finally:
        subprocess.run([str(CLUSTER / "slurm-down.sh"), str(state)], capture_output=True, text=True)
    rows = [Row(f"trusted grader, batch {' '.join(flags)}", seconds, count,
                f"{tasks} array task(s), cpus_per_task 2, on a single-node Slurm on this machine"),
            Row(f"Slurm overhead: an array of {tasks} task(s) that do nothing", empty, tasks,
                "per task: scheduling, Python and submitit start-up, result file")]
    return rows, {"inside": sum(inside) / len(inside), "task": empty / tasks}


def gpu_seconds(assumed: float) -> tuple[float, str]:
    """Seconds to grade flash_attention (the GPU tests among them) on one GPU: measured on the reference
    where this machine has a CUDA GPU, else `assumed`."""
    import torch

    if not torch.cuda.is_available():
        return assumed, (f"{assumed:g} s per submission, assumed (no GPU here: make bench-grader on a GPU node "
                         "measures it, or pass BENCH_GRADER_ARGS=--gpu-seconds S)")
    with tempfile.TemporaryDirectory(prefix="llmsys-gpu-") as tmp:
        (reference,) = cohort.build(Path(tmp), ["flash_attention"], [cohort.Member("correct", "solutions")])
        from autograder.grading.client import grade

        report = grade(reference, assignment="flash_attention")
    return report.execution_time, (f"{report.execution_time:.1f} s per submission, measured on the reference "
                                   f"on {torch.cuda.get_device_name()}")


def projection(inside: float, task: float, gpu: float, per_task: int = 8, count: int = 600,
               nodes: tuple[int, ...] = (1, 8, 32)) -> list[tuple[int, float]]:
    """Wall seconds to grade `count` submissions on each number of GPU nodes: tasks of `per_task`
    submissions, one task per node at a time, each task `task` seconds of overhead plus `per_task` x
    (`inside` + `gpu`) seconds of grading; waves of tasks until all are done."""
    tasks = -(-count // per_task)
    one_task = task + per_task * (inside + gpu)
    return [(n, -(-tasks // n) * one_task) for n in nodes]


def projection_markdown(figures: dict[str, float], gpu: float, gpu_note: str, per_task: int = 8) -> str:
    lines = ["", f"Projection: 600 submissions, {per_task} per array task, both assignments", "",
             "| GPU nodes | wall time | submissions per hour |", "|---:|---:|---:|"]
    for n, seconds in projection(figures["inside"], figures["task"], gpu, per_task):
        lines.append(f"| {n} | {seconds / 60:.0f} min | {600 / seconds * 3600:.0f} |")
    lines += ["", "Assumptions:",
              f"- resource_accounting takes {figures['inside']:.1f} s per submission inside a task (its grading "
              "server's start included), as measured here through Slurm; a GPU node's CPU is usually faster;",
              f"- flash_attention, whose GPU tests need the GPU: {gpu_note};",
              f"- each task costs {figures['task']:.1f} s of overhead (the empty array measured here) on top;",
              "- one task per node at a time, each with one GPU; tasks run in waves of as many as there are nodes;",
              "- no queue wait: the course's partition and QoS give the nodes at once; no task is preempted."]
    return "\n".join(lines) + "\n"


def notebooks_course(course: Path, submissions: list[Path]) -> None:
    """The nbgrader course with each submission collected as a notebook in submitted/<name>/."""
    import nbformat

    from autograder.package import nbgrader

    nbgrader.build(course)
    released = course / "release" / ASSIGNMENT
    template = nbformat.read(released / f"{ASSIGNMENT}.ipynb", as_version=4)
    for submission in submissions:
        nb = nbformat.from_dict(template)
        for cell in nb.cells:
            rel = cell.metadata.get("llmsys", {}).get("module")
            if rel:
                code = (submission / rel).read_text(encoding="utf-8")
                cell.source = f"%%writefile {rel}\n{code.rstrip()}"
        folder = course / "submitted" / submission.name / ASSIGNMENT
        shutil.copytree(released, folder)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")


def nbgrader_autograde(course: Path, count: int) -> Row:
    seconds, done = timed([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--create"], course)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader autograde failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return Row("nbgrader autograde", seconds, count, "public + hidden test cells, in the student's kernel")


def student_loop(release: Path) -> list[Row]:
    """`make test` in the student release on the stubs: each assignment, both, and the first failure."""
    make = ["make", "--no-print-directory", "test", f"PYTHON={sys.executable}"]
    rows = []
    for label, args in ((ASSIGNMENT, f"tests/{ASSIGNMENT}"), ("flash_attention", "tests/flash_attention"),
                        ("gpu_kernels", "tests/gpu_kernels"), ("all assignments", "")):
        seconds, _ = timed(make + [f"PYTEST_ARGS={args}"], release)
        rows.append(Row(f"student make test: {label}", seconds, note="stubs, after install"))
    rows.append(first_failure(release, make))
    return rows


def first_failure(release: Path, make: list[str]) -> Row:
    """Seconds until the first failure's message is printed, with -x (what the README suggests)."""
    started = time.perf_counter()
    process = subprocess.Popen(make + ["PYTEST_ARGS=-x"], cwd=release, env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen = None
    for line in process.stdout:
        if seen is None and ("NotImplementedError" in line or "not implemented yet (" in line or line.startswith("E ")):
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


def ratios(rows: dict[str, Row], available: int | None = None) -> list[str]:
    """The comparisons: the second worker's gain each way, the overlap's, and nbgrader against the
    default (`--overlap auto` on a machine with `available` cores)."""
    lines = []
    for way in ("never", "always"):
        one, two = rows[f"{way}1"], rows[f"{way}2"]
        lines.append(f"throughput gain of the second worker, --overlap {way}: {one.seconds / two.seconds:.2f}x "
                     f"({one.per_item:.2f} s to {two.per_item:.2f} s per submission)")
    lines.append(f"overlap within one worker: {rows['never1'].seconds / rows['always1'].seconds:.2f}x")
    default = {n: rows[("always" if overlaps("auto", n, available) else "never") + str(n)] for n in (1, 2)}
    lines.append(f"the default (--overlap auto), one worker to two: {default[1].per_item:.2f} s to "
                 f"{default[2].per_item:.2f} s per submission ({default[1].seconds / default[2].seconds:.2f}x)")
    if "nbgrader" in rows:
        nb = rows["nbgrader"]
        lines.append(f"nbgrader autograde / trusted batch (default), per submission: "
                     f"{nb.per_item / default[1].per_item:.2f}x with one worker, {nb.per_item / default[2].per_item:.2f}x with two")
    return lines


def markdown(rows: list[Row], lines: list[str], size: int, host: str) -> str:
    out = [f"Cohort: {size} resource_accounting submissions (the reference and its typical mistakes). "
           f"Machine: {host}.", "", "| run | seconds | per submission | note |", "|---|---:|---:|---|"]
    for row in rows:
        per = f"{row.per_item:.2f}" if row.count > 1 else ""
        out.append(f"| {row.what} | {row.seconds:.1f} | {per} | {row.note} |")
    return "\n".join(out + [""] + [f"- {line}" for line in lines]) + "\n"


def run(size: int, out: Path, with_nbgrader: bool, console: Console, with_slurm: bool = True,
        assumed_gpu: float = 60.0) -> str:
    cluster_rows: list[Row] = []
    cluster_text = ""
    with tempfile.TemporaryDirectory(prefix="llmsys-bench-") as tmp:
        work = Path(tmp)
        submissions = build_cohort(work / "cohort", size)
        measured: dict[str, Row] = {}
        for way in ("always", "never"):
            console.print(f"grading {size} submissions with the trusted grader, --overlap {way}, one worker then two ...")
            for n in (1, 2):
                measured[f"{way}{n}"] = trusted_batch(work / "cohort", work / f"grades-{way}-{n}", n, way)
        if with_slurm:
            console.print(f"the same submissions through --executor slurm on a single-node Slurm, {PER_TASK} per task ...")
            try:
                cluster_rows, figures = slurm_path(work / "cohort", work, PER_TASK)
                gpu, gpu_note = gpu_seconds(assumed_gpu)
                cluster_text = projection_markdown(figures, gpu, gpu_note)
            except RuntimeError as exc:
                cluster_text = f"\nThe Slurm path was not measured: {exc}\n"
        if with_nbgrader:
            console.print("the same submissions as notebooks through nbgrader autograde ...")
            notebooks_course(work / "course", submissions)
            measured["nbgrader"] = nbgrader_autograde(work / "course", size)
        console.print("the student loop: make test in the student release ...")
        from autograder.package import release

        release.build(work / "student")
        student = student_loop(work / "student")
    rows = list(measured.values()) + cluster_rows + student
    host = machine()
    table = Table("run", "seconds", "per submission", "note", title="grading loop")
    for row in rows:
        table.add_row(row.what, f"{row.seconds:.1f}", f"{row.per_item:.2f}" if row.count > 1 else "", row.note)
    console.print(table)
    lines = ratios(measured, cores())
    for line in lines:
        console.print(line)
    text = markdown(rows, lines, size, host) + cluster_text
    console.print(cluster_text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"wrote {out}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20, help="submissions in the cohort (default 20)")
    parser.add_argument("--out", type=Path, default=Path("build/bench_grader.md"), help="the Markdown table")
    parser.add_argument("--no-nbgrader", dest="nbgrader", action="store_false", help="leave nbgrader out")
    parser.add_argument("--no-slurm", dest="slurm", action="store_false",
                        help="leave out the Slurm path (which starts a single-node Slurm: root and apt-get)")
    parser.add_argument("--gpu-seconds", type=float, default=60.0, metavar="S",
                        help="for the projection where there is no GPU: seconds to grade flash_attention on one "
                        "GPU (default 60, an assumption; measured instead where CUDA is available)")
    args = parser.parse_args(argv)
    if args.size < 2:
        parser.error("--size must be at least 2 (two workers need two submissions)")
    run(args.size, args.out, args.nbgrader, Console(), args.slurm, args.gpu_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
