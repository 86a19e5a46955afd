"""One submission, one grade, whatever the machine is doing: the sample cohort graded on an idle machine
and again beside busy CPUs with more workers than cores, test by test.

    python -m autograder.cohort.load_check [--work build/load_check] [--timeout 15] [--hogs N] [--member NAME ...]
    (make load-check)

Both runs use the same command as `make grade` (`python -m autograder batch`, the same per-call budget);
the loaded run adds N busy processes (default: one per core) and grades with one worker more than the
machine has cores. Each submission's seed is its own (autograder.grading.client.seed_for), so both runs
draw the same inputs. It prints every test whose status or points differ between the runs (there should
be none), the submissions either run could not grade or graded differently (not gradable, or absent), and
both runs' times; it writes the same as Markdown to WORK/load_check.md, with the commit it ran on, and exits 1
when anything differs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from autograder.cohort import sample
from autograder.grading.client import cores

ROOT = Path(__file__).resolve().parents[2]
HOG = "while True: pass"


def grade(cohort: Path, out: Path, workers: int, timeout: float) -> float:
    """Grade the cohort into `out` with `python -m autograder batch`; the seconds it took."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "autograder", "batch", str(cohort), "--out", str(out), "--workers",
                    str(workers), "--timeout", str(timeout)], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    return time.monotonic() - started


def results(out: Path) -> tuple[dict[tuple[str, str], tuple[str, float]], dict[str, str]]:
    """{(submission, test): (status, points)} and {submission: why it is not graded} from a gradebook."""
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        tests = {(s, n): (status, points) for s, n, status, points in
                 db.execute("SELECT submission, name, status, points FROM tests")}
        errors = dict(db.execute("SELECT name, message FROM submissions WHERE status = 'error'"))
    return tests, errors


def statuses(out: Path) -> dict[str, str]:
    """{submission: its status in the gradebook} (graded, not_gradable, error ...)."""
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        return dict(db.execute("SELECT name, status FROM submissions"))


def compare(idle: Path, loaded: Path) -> list[str]:
    """A line for each difference between the two gradebooks (none when the grades held): a submission
    either run could not grade, one that is absent from a run or has another status there, and each test
    whose status or points differ (of a submission with the same status in both: the line above says the rest)."""
    first, first_errors = results(idle)
    second, second_errors = results(loaded)
    lines = [f"{name}: not graded {label} ({why.splitlines()[-1] if why.strip() else 'no reason'})"
             for label, errors in (("idle", first_errors), ("loaded", second_errors)) for name, why in errors.items()]
    first_status, second_status = statuses(idle), statuses(loaded)
    for name in sorted(set(first_status) | set(second_status)):
        pair = first_status.get(name, "absent"), second_status.get(name, "absent")
        if pair[0] != pair[1] and "error" not in pair:  # an error has its line above
            lines.append(f"{name}: idle {pair[0]}, loaded {pair[1]}")
    for key in sorted(set(first) | set(second)):
        if first.get(key) != second.get(key) and first_status.get(key[0]) == second_status.get(key[0]):
            lines.append(f"{key[0]} {key[1]}: idle {first.get(key)}, loaded {second.get(key)}")
    return lines


def commit(root: Path = ROOT) -> str:
    """The short hash of the commit checked out at `root` (`git rev-parse --short HEAD`); "unknown" outside
    git, or without git."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def conclude(work: Path, count: int, runs: list[str], timeout: float) -> int:
    """Compare WORK/idle with WORK/loaded, write the summary to WORK/load_check.md and print it: how many
    submissions (`count`) and test results, the commit, each run (`runs`, a line each), the per-call budget
    and every difference. The exit status: 1 when anything differs, else 0."""
    differences = compare(work / "idle", work / "loaded")
    tests = len(results(work / "idle")[0])
    summary = [f"# Grades idle and under load: {count} submissions, {tests} test results each run", "",
               f"- commit: {commit()}", *[f"- {line}" for line in runs],
               f"- per-call budget: {timeout:g} CPU seconds", "",
               f"{len(differences)} difference(s)" + (":" if differences else ": every test result is the same.")]
    summary += [f"- {line}" for line in differences]
    text = "\n".join(summary) + "\n"
    (work / "load_check.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 1 if differences else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "load_check")
    parser.add_argument("--timeout", type=float, default=15.0, help="CPU seconds per call (make grade's 15)")
    parser.add_argument("--hogs", type=int, default=cores(), help="busy processes beside the loaded run")
    parser.add_argument("--member", action="append", help="only these members of the sample cohort")
    args = parser.parse_args(argv)
    cohort = args.work / "cohort"
    shutil.rmtree(cohort, ignore_errors=True)
    sample.build(cohort)
    if args.member:
        for path in cohort.iterdir():
            if path.name not in args.member:
                shutil.rmtree(path)
    count = len(list(cohort.iterdir()))
    workers = min(2, cores())
    idle_s = grade(cohort, args.work / "idle", workers, args.timeout)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    try:
        loaded_workers = cores() + 1
        loaded_s = grade(cohort, args.work / "loaded", loaded_workers, args.timeout)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    runs = [f"idle: {workers} workers, {idle_s:.0f} s",
            f"loaded: {args.hogs} busy processes beside {loaded_workers} workers on {cores()} cores, {loaded_s:.0f} s"]
    return conclude(args.work, count, runs, args.timeout)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
