"""Grade a cohort: every submission in a folder, in parallel, into a resumable SQLite gradebook.

    run_batch(Path("submissions"), Path("out"), workers=4)

Each entry of the folder that is a folder or a .zip is one submission, named after the entry
(without .zip). A submission whose digest matches its gradebook row is skipped, so rerunning after
a crash, or after adding or changing a few submissions, grades only what is new. Grading runs in
`workers` threads (each grading runs its own subprocesses, so threads suffice), or on a Slurm
cluster with `executor=SlurmExecutor(...)` (autograder.cohort.executors); results are written to
out/submissions/<name>/ and recorded in out/gradebook.sqlite by the main thread alone, as they arrive. At the end
every file is written again from the gradebook (autograder.cohort.publish): each submission's reports
(hand-graded points and the late policy included), out/grades.csv and the cohort report,
out/report/index.html.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.text import Text

from autograder.cohort.course import COURSE_FILE, CourseError
from autograder.cohort.executors import ExecutorError, LocalExecutor, Outcome, SlurmExecutor
from autograder.report import history, submission_folder, write_all
from autograder.report.gradebook import Gradebook
from autograder.report.text import clean
from autograder.model.results import GradeReport
from autograder.grading.intake import submission_digest, submission_name

GradeFn = Callable[[Path], GradeReport]


class BatchError(Exception):
    """The batch cannot start: the folder is missing, two entries share a name, or workers < 1."""


def submission_entries(directory: Path) -> tuple[dict[str, Path], list[str]]:
    """{name: path} of the folder's submissions, and the names of the entries that are not one.

    Hidden entries (.git, .DS_Store) are ignored. Two entries with one name (alice/ and alice.zip)
    are refused: which one to grade is the instructor's call. Any other name is fine: each submission's files
    go to a folder of its own (OUT/submissions/<name>/, autograder.report.submission_folder), apart from the
    batch's own files.
    """
    found: dict[str, Path] = {}
    ignored = []
    for entry in sorted(Path(directory).iterdir()):
        if entry.name.startswith("."):
            continue
        if not (entry.is_dir() or (entry.is_file() and entry.name.endswith(".zip"))):
            ignored.append(entry.name)
            continue
        name = submission_name(entry) if entry.is_file() else entry.name
        if name in found:
            raise BatchError(clean(f"{found[name].name} and {entry.name} in {directory} are both submission "
                                   f"{name!r}: remove or rename one of them"))
        found[name] = entry
    return found, ignored


def run_batch(directory: Path, out: Path, workers: int = 1, grade_fn: GradeFn | None = None, *,
              call_timeout: float = 60.0, console: Console | None = None, overlap: str = "auto",
              executor: LocalExecutor | SlurmExecutor | None = None, regrade: tuple[str, ...] = (),
              late: tuple | None = None, seed: int | None = None, secret: str = "",
              course: Path | None = None, command: str = "batch") -> list[dict]:
    """Grade what is new or changed in `directory`; return the gradebook's rows (Gradebook.rows()).

    Without `grade_fn`, warm grading servers grade (autograder.grading.client.ServerPool), each call into
    student code allowed `call_timeout` seconds. `overlap` ("auto", "always", "never") says whether
    each server boots the next submission's sandbox while the current one grades (autograder.grading.client.overlaps).
    `executor` (e.g. autograder.cohort.executors.SlurmExecutor) grades elsewhere; `workers`, `grade_fn` and
    `overlap` then do not apply. The submissions named in `regrade` are graded again even where current.
    `late` = (a LatePolicy, the submission times) applies the late policy to every graded submission
    (autograder.cohort.late): the gradebook keeps raw and penalised scores, and grades.csv shows both.
    Each submission's randomised tests draw from its own seed (autograder.grading.client.seed_for, with
    the course's `secret`) unless `seed` fixes one for all. A report the machine was too busy to finish
    (GradeReport.overloaded) is graded again after the others, alone; if it still cannot finish it is
    recorded as an error, graded again on the next run. `course`: the course file whose answers' release
    dates the files written at the end follow (default: grading.toml of the working folder); its roster,
    extensions and overrides go into the gradebook (autograder.cohort.roster), and its history names `command`
    where no command line set who is acting (autograder.report.history)."""
    with history.unless_acting(command):
        return _run_batch(directory, out, workers, grade_fn, call_timeout=call_timeout, console=console,
                          overlap=overlap, executor=executor, regrade=regrade, late=late, seed=seed, secret=secret,
                          course=course)


def _run_batch(directory: Path, out: Path, workers: int, grade_fn: GradeFn | None, *, call_timeout: float,
               console: Console | None, overlap: str, executor, regrade: tuple[str, ...], late: tuple | None,
               seed: int | None, secret: str, course: Path | None) -> list[dict]:
    directory, out = Path(directory), Path(out)
    if not directory.is_dir():
        raise BatchError(f"{directory} is not a folder: give a folder holding one folder or .zip "
                         "per submission")
    if workers < 1:
        raise BatchError(f"workers must be at least 1, got {workers}")
    private_folder(out)
    from autograder.grading.client import ServerPool, overlaps

    try:
        overlapping = overlaps(overlap, workers)
    except ValueError as exc:
        raise BatchError(str(exc)) from None
    pool = None
    if grade_fn is None and executor is None:  # warm grading servers, one per worker thread
        pool = ServerPool(call_timeout=call_timeout, overlap=overlapping, seed=seed, secret=secret)
        grade_fn = pool.grade
    executor = executor or LocalExecutor(workers, grade_fn)
    console = console or Console()
    entries, ignored = submission_entries(directory)
    unknown = sorted(set(regrade) - set(entries))
    if unknown:
        raise BatchError(f"no submission named {', '.join(unknown)} in {directory}: --regrade takes the names "
                         "the gradebook shows (a folder's name, or a .zip's without .zip)")
    if ignored:
        console.print(Text(clean(f"not submissions (neither a folder nor a .zip), ignored: {', '.join(ignored)}")))
    with Gradebook(out / "gradebook.sqlite") as book:
        digests = {name: submission_digest(path) for name, path in entries.items()}
        todo = {name: path for name, path in entries.items()
                if name in regrade or not book.is_current(name, digests[name])}
        console.print(Text(f"{len(entries)} submissions in {directory}: {len(todo)} to grade, "
                           f"{len(entries) - len(todo)} already graded"))
        overloaded: dict[str, GradeReport] = {}
        try:
            for name, outcome in executor.run(todo, out, console, again=set(regrade)) if todo else ():
                if isinstance(outcome, GradeReport) and outcome.overloaded and pool is not None:
                    overloaded[name] = outcome  # graded again below, alone
                else:
                    _store(name, digests[name], _overload_error(outcome), out, book, console)
        except ExecutorError as exc:
            raise BatchError(str(exc)) from None
        finally:
            if pool is not None:
                pool.close()
        if overloaded:
            console.print(Text(f"{len(overloaded)} submission(s) met an overloaded machine: graded again, one "
                               "at a time"))
            alone = ServerPool(call_timeout=call_timeout, overlap=False, seed=seed, secret=secret)
            try:
                for name in overloaded:
                    _store(name, digests[name], _overload_error(alone.grade(entries[name])), out, book, console)
            finally:
                alone.close()
        _settle(book, course or (Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None), late, console)
        rows = book.rows()
    _publish(out, console, course)
    return rows


def _settle(book: Gradebook, course: Path | None, late: tuple | None, console: Console) -> None:
    """The course file's roster, extensions and overrides into the gradebook, then the late policy
    (autograder.cohort.roster.settle), saying what they changed; a roster that cannot be matched is a
    BatchError, the grades being stored already."""
    if course is None and late is None:
        return
    from autograder.cohort.roster import settle

    try:
        settled = settle(book, course, "batch", late=late)
    except CourseError as exc:
        raise BatchError(f"{exc} (the grades are stored: run the batch again once that is corrected)") from None
    for line in settled.messages:
        console.print(Text(clean(line), style="yellow"), soft_wrap=True)


def _publish(out: Path, console: Console, course: Path | None = None) -> None:
    """Every file from the gradebook (autograder.cohort.publish), once it is complete. The grades are stored
    whatever happens here, so a failure to write the files is said, not raised."""
    from autograder.cohort.publish import publish

    notes: list[str] = []
    try:
        index = publish(out, course=course, settled=True, notes=notes)
        for line in notes:
            console.print(Text(clean(line), style="yellow"), soft_wrap=True)
        console.print(Text(f"cohort report {index}"), soft_wrap=True)
    except Exception as exc:  # noqa: BLE001 (any bug of the report must not hide the stored grades)
        console.print(Text(f"the reports could not be written ({type(exc).__name__}: {exc}); "
                           f"`python -m autograder report {out}` tries again", style="red"), soft_wrap=True)


def _store(name: str, digest: str, outcome: Outcome, out: Path, book: Gradebook, console: Console) -> None:
    """Record one outcome: a report, or the reason (a traceback, a task's end) it was not graded. A grader error
    on a submission with a grade leaves that grade, and its files, as they are."""
    if isinstance(outcome, str):
        _error(book, console, name, digest, outcome)
        return
    report = outcome
    # The gradebook first: it is what every file is written from, so a file that cannot be written (a full
    # disk, a folder in the way) costs that submission's files, never its grade or the others'.
    if report.not_gradable:  # nothing of it could be graded: listed with its reason, never a 0
        book.record(name, digest, report)
        console.print(Text(clean(f"{name}: not gradable ({report.not_gradable})"), style="yellow"), soft_wrap=True)
    elif not report.tests:
        # grade() reports a failure of the grader itself as a report without tests.
        if _error(book, console, name, digest, "; ".join(report.log) or "the grader returned no test results"):
            return
    else:
        book.record(name, digest, report)
    try:
        write_all(report, submission_folder(out, name))
    except OSError as exc:
        console.print(Text(clean(f"{name}: its grade is stored, but its files could not be written to "
                                 f"{submission_folder(out, name)} "
                                 f"({type(exc).__name__}: {exc}); `python -m autograder report {out}` writes them "
                                 "again"), style="red"), soft_wrap=True)


def private_folder(folder: Path) -> None:
    """The grader's output folder (gradebook, reports, every student's results) closed to other users: a
    worker running as a user of its own, without bubblewrap, must not read another student's report."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)


def _overload_error(outcome: Outcome) -> Outcome:
    """A report with tests the machine was too busy to finish is no grade: an error, graded again later."""
    if isinstance(outcome, GradeReport) and outcome.overloaded:
        from autograder.grading.client import overload_message

        return overload_message(outcome)
    return outcome


def _error(book: Gradebook, console: Console, name: str, digest: str, message: str) -> bool:
    """Record a grader error and say it; returns whether the submission's earlier grade stands."""
    stands = book.record_error(name, digest, message)
    last = message.strip().splitlines()[-1] if message.strip() else "no reason given"
    if stands:
        console.print(Text(clean(f"{name}: the regrade failed ({last}); its earlier grade stands, and the next run "
                                 "grades it again"), style="red"), soft_wrap=True)
    else:
        console.print(Text(clean(f"{name}: not graded ({last}); it is graded again on the next run"), style="red"))
    return stands
