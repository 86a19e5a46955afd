"""How long the cohort report takes to write: for a graded cohort's folder, and for a synthetic cohort.

    python -m autograder.report.site_bench [--sample build/grades] [--size 500] [--work build/report_bench]

A synthetic cohort is a gradebook filled directly, without grading: `size` submissions of the shape of
this course (two assignments, about 300 tests each, some hidden, some needing a GPU), their scores drawn
from a seeded random ability per student, a few recorded as grader errors, each with the files `batch`
writes beside the gradebook (feedback.md and the rest). The tests of the report use small ones.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

from autograder.report import submission_folder, write_all
from autograder.report.gradebook import Gradebook
from autograder.model.results import GradeReport, TestResult

# (assignment, module, tasks, test functions per task, cases per function)
LAYOUT = (("resource_accounting", "flops", 16, 3, 3), ("flash_attention", "flash", 14, 3, 4))
FAILURES = ("AssertionError: expected {a}, got {b}",
            "TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
            "AssertionError: Tensor-likes are not close! Mismatched elements: {a} / {b}",
            "autograder.sandbox.process.WorkerError: the call timed out after 15 s")


def synthetic_report(name: str, rng: random.Random, layout=LAYOUT) -> GradeReport:
    """One submission's report: each case passes with the student's ability, lowered for harder tasks."""
    ability = rng.betavariate(4, 1.5)
    tests = []
    for assignment, module, tasks, functions, cases in layout:
        for task in range(tasks):
            difficulty = task / tasks
            for function in range(functions):
                visibility = "hidden" if function == functions - 1 else "visible"
                for case in range(cases):
                    gpu = task == tasks - 1 and case > 0  # the last task's cases but the first need a GPU
                    status = ("not_graded" if gpu else "passed" if rng.random() < ability * (1.1 - difficulty / 2)
                              else "not_implemented" if ability < 0.3 else "failed")
                    message = "" if status in ("passed", "not_graded") else (
                        "not implemented yet" if status == "not_implemented"
                        else rng.choice(FAILURES).format(a=rng.randint(0, 3), b=4))
                    tests.append(TestResult(
                        f"tests/{assignment}/test_{module}{task}.py::test_property_{function}[case{case}]",
                        assignment, 1.0 + (task % 3) * 0.5, status, message=message, visibility=visibility,
                        task=f"{module}.task_{task}", checks=f"task {task} satisfies property {function}."))
    return GradeReport(name, tests, log=["synthetic cohort: not graded"], execution_time=1.0)


def synthetic_cohort(out: Path, size: int, seed: int = 0, errors: int | None = None, layout=LAYOUT) -> list[str]:
    """Fill out/gradebook.sqlite (and out/submissions/<name>/) with `size` submissions, `errors` of them (default one
    in fifty) recorded as grader errors; return their names."""
    rng = random.Random(seed)
    errors = max(1, size // 50) if errors is None else errors
    names = [f"student-{i:04d}" for i in range(size)]
    with Gradebook(out / "gradebook.sqlite") as book:
        for index, name in enumerate(names):
            digest = f"{seed}-{index}"
            if index < errors:
                book.record_error(name, digest, "Traceback (most recent call last):\n...\n"
                                  "RuntimeError: the grading server died")
                continue
            report = synthetic_report(name, rng, layout)
            write_all(report, submission_folder(out, name))
            book.record(name, digest, report)
        book.export_csv(out / "grades.csv")
    return names


def timed(out: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of writing OUT's report, the modules already imported (the CPU time is
    this process's: the report is written in one thread, so on a busy machine it is the steadier figure)."""
    from autograder.report.site import write_site

    wall, cpu = time.perf_counter(), time.process_time()
    write_site(out)
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time the cohort report.")
    parser.add_argument("--sample", type=Path, default=Path("build/grades"),
                        help="a graded cohort's folder (make grade writes build/grades)")
    parser.add_argument("--size", type=int, default=500, help="submissions of the synthetic cohort")
    parser.add_argument("--work", type=Path, default=Path("build/report_bench"),
                        help="where the synthetic cohort is written (emptied first)")
    args = parser.parse_args(argv)
    rows = []
    if (args.sample / "gradebook.sqlite").is_file():
        rows.append((f"sample cohort ({args.sample})", _count(args.sample), timed(args.sample)))
    else:
        print(f"no gradebook in {args.sample}: run `make grade` first to time the sample cohort")
    shutil.rmtree(args.work, ignore_errors=True)
    synthetic_cohort(args.work, args.size)
    rows.append((f"synthetic cohort ({args.work})", args.size, timed(args.work)))
    print(f"{'cohort':<50} {'submissions':>11} {'wall s':>7} {'CPU s':>7}")
    for name, size, (wall, cpu) in rows:
        print(f"{name:<50} {size:>11} {wall:>7.2f} {cpu:>7.2f}")
    return 0


def _count(out: Path) -> int:
    with Gradebook(out / "gradebook.sqlite") as book:
        return len(book.rows())


if __name__ == "__main__":
    sys.exit(main())
