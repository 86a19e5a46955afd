"""The command line, a thin face over the two verbs:

    python -m autograder grade SUBMISSION [--assignment NAME] [--out DIR] [--timeout S] [--select EXPR] [--seed N]
        [--submission-metadata submission_metadata.json] [--course grading.toml]
    python -m autograder batch DIR --out OUT [--workers N] [--timeout S] [--overlap auto|always|never] [--regrade NAME]
        [--seed N]
        [--times times.csv|EVENTS_DIR]
        [--course grading.toml] [--executor local|slurm] [--partition P] [--account A] [--qos Q]
        [--gpus-per-task G] [--constraint C] [--time MINUTES] [--per-task K] [--max-parallel N]
    python -m autograder nbgrader COURSE_DIR ASSIGNMENT [--workers N] [--timeout S]
    python -m autograder manual export OUT [--anonymous] | manual import OUT SHEET.csv
    python -m autograder similarity DIR [--out OUT] [--threshold T] [--min-tokens N] [--public KNOWN_DIR]
    python -m autograder report OUT [--course grading.toml]
    python -m autograder export --format canvas|csv OUT [--to FILE] [--course grading.toml]
    python -m autograder history STUDENT --out OUT

The verbs that change a gradebook (batch, manual, report, export) take `--by NAME`: who the gradebook's
history says made the change (default: the operating-system user running the command).

Exit codes: 0 when grading completed, whatever the score; 1 when the grader itself failed on a
submission (grade, nbgrader) or some submissions are recorded as errors (batch; rerun to retry them);
2 for a usage error; 130 (Ctrl-C) or 141 (its output pipe closed) for a batch interrupted, which keeps what it graded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autograder.cohort.course import (COURSE_FILE, EXECUTORS, ClusterOptions, CourseError, load_cluster, load_late,
                                      load_seed_secret)
from autograder.grading.client import OVERLAP_CHOICES, cores
from autograder.report.terminal import gradebook_table, print_report

DEFAULT_TIMEOUT = 60.0
CLUSTER_FLAGS = ("executor", "partition", "account", "qos", "gpus_per_task", "constraint", "time", "per_task",
                 "max_parallel", "cpus_per_task", "mem")


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def auto_workers() -> int:
    """`--workers auto`: one worker per two cores of this machine, at least one."""
    return max(1, cores() // 2)


def _workers(text: str) -> int:
    """--workers: a count, or `auto`: one per two cores, at least one. A worker that overlaps (boots the next
    submission's sandbox, and builds the compile checks beside the tests) keeps about two cores busy, and
    that is the faster way on every assignment; more workers than that only compete for the cores."""
    if text == "auto":
        return auto_workers()
    try:
        return _positive(int)(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: give a number of workers, or auto") from None


def _who() -> argparse.ArgumentParser:
    """--by, for the verbs that change a gradebook (autograder.report.history records who)."""
    who = argparse.ArgumentParser(add_help=False)
    who.add_argument("--by", metavar="NAME", help="who makes this change, as the gradebook's history records it "
                     "(default: the operating-system user)")
    return who


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="The trusted autograder.")
    verbs = parser.add_subparsers(dest="verb", required=True,
                                  metavar="{grade,batch,nbgrader,manual,similarity,report,export,history}")
    grade = verbs.add_parser("grade", help="grade one submission (a folder or a .zip)")
    grade.add_argument("submission", type=Path, help="the submission: a folder or a .zip")
    grade.add_argument("--assignment", metavar="NAME", help="grade only this assignment")
    grade.add_argument("--out", type=Path, metavar="DIR", help="where to write the reports "
                       "(default: out/<submission name>)")
    grade.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT, metavar="S",
                       help=f"seconds allowed for each call into student code (default {DEFAULT_TIMEOUT:g})")
    grade.add_argument("--select", metavar="EXPR", help="only the tests matching this pytest -k expression "
                       "(e.g. 'not hidden' for the public tests); the written answers are graded only without it, or "
                       "when it says 'written'")
    grade.add_argument("--seed", type=int, metavar="N", help="seed of the randomised tests (default: the "
                       "submission's own, from its name, or from its students with --submission-metadata, and the "
                       "course file's [grading] seed_secret)")
    grade.add_argument("--submission-metadata", type=Path, metavar="FILE", help="Gradescope's submission_metadata."
                       "json: the seed is its students' own, and the course file's late policy applies with its "
                       "created_at and the student's due date")
    grade.add_argument("--course", type=Path, metavar="FILE", help=f"the course file with the late policy (default: "
                       f"{COURSE_FILE} in the working folder, if there is one)")
    grade.set_defaults(command=grade_command, parser=grade)
    batch = verbs.add_parser("batch", help="grade every submission in a folder into a gradebook", parents=[_who()])
    batch.add_argument("directory", type=Path, help="a folder holding one folder or .zip per submission")
    batch.add_argument("--out", type=Path, required=True, metavar="OUT",
                       help="where the gradebook, grades.csv and each submission's reports go")
    batch.add_argument("--workers", type=_workers, default="auto", metavar="N",
                       help="submissions graded at once: a number, or auto (the default): one per two cores, at "
                       f"least one (here {auto_workers()})")
    batch.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT, metavar="S",
                       help=f"seconds allowed for each call into student code (default {DEFAULT_TIMEOUT:g})")
    batch.add_argument("--overlap", choices=OVERLAP_CHOICES, default="auto",
                       help="whether each worker boots the next submission's sandbox while the current one is "
                       "graded, which keeps about two cores busy per worker; auto (the default) does so when "
                       "the machine has two cores per worker")
    batch.add_argument("--regrade", action="append", default=[], metavar="NAME",
                       help="grade this submission again even if its gradebook row is current (repeatable)")
    batch.add_argument("--seed", type=int, metavar="N", help="one seed of the randomised tests for every "
                       "submission (default: each submission's own, from its name and the course file's [grading] "
                       "seed_secret: the same on every regrade)")
    batch.add_argument("--times", type=Path, metavar="CSV_OR_DIR", help="submission times, to apply the course "
                       "file's late policy: a CSV (student,time[,assignment]) or a folder of GitHub push events "
                       "(<student>.json)")
    cluster = batch.add_argument_group("cluster", "where to grade; each option can also be set in the course "
                                       "file's [cluster] table, and the command line wins")
    cluster.add_argument("--course", type=Path, metavar="FILE", help=f"the course file (default: {COURSE_FILE} in "
                         "the working folder, if there is one)")
    cluster.add_argument("--executor", choices=EXECUTORS, help="local: threads on this machine (the default); "
                         "slurm: a job array on a Slurm cluster, through submitit")
    cluster.add_argument("--partition", metavar="P", help="the Slurm partition (e.g. a course's GPU partition)")
    cluster.add_argument("--account", metavar="A", help="the Slurm account to charge")
    cluster.add_argument("--qos", metavar="Q", help="the Slurm quality of service")
    cluster.add_argument("--gpus-per-task", type=_positive(int), metavar="G", help="GPUs for each array task")
    cluster.add_argument("--constraint", metavar="C", help="a node feature, e.g. the GPU model, so that speed tests "
                         "compare like with like")
    cluster.add_argument("--time", type=_positive(int), metavar="MINUTES", help="time limit of each array task "
                         "(default 60)")
    cluster.add_argument("--per-task", type=_positive(int), metavar="K", help="submissions graded by each array "
                         "task, one warm grading server for all K (default 4)")
    cluster.add_argument("--max-parallel", type=_positive(int), metavar="N", help="array tasks running at once "
                         "(default 64)")
    cluster.add_argument("--cpus-per-task", type=_positive(int), metavar="C", help="cores of each array task "
                         "(default 2: a task boots the next sandbox while one grades)")
    cluster.add_argument("--mem", metavar="M", help="memory of each array task, as sbatch takes it (e.g. 32G)")
    batch.set_defaults(command=batch_command, parser=batch)
    course = verbs.add_parser("nbgrader", help="grade an nbgrader course's submitted notebooks into its gradebook")
    course.add_argument("course", type=Path, help="the nbgrader course directory (with nbgrader_config.py)")
    course.add_argument("assignment", help="the nbgrader assignment, e.g. resource_accounting")
    course.add_argument("--workers", type=_workers, default="auto", metavar="N",
                        help="notebooks graded at once: a number, or auto (the default): one per two cores, at "
                        f"least one (here {auto_workers()})")
    course.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"seconds allowed for each call into student code (default {DEFAULT_TIMEOUT:g})")
    course.set_defaults(command=nbgrader_command, parser=course)
    manual = verbs.add_parser("manual", help="grade written answers by hand: export grading sheets, import scores")
    steps = manual.add_subparsers(dest="step", required=True, metavar="{export,import}")
    export = steps.add_parser("export", help="write OUT/manual/<assignment>-<ID>.html and .csv per question",
                              parents=[_who()])
    export.add_argument("out", type=Path, help="the batch output folder (with gradebook.sqlite)")
    export.add_argument("--anonymous", action="store_true",
                        help="show graders each submission's opaque id, never its name (import maps the ids "
                             "back); the sheets written again after an import stay anonymous")
    export.set_defaults(command=manual_command, parser=export)
    sheet = steps.add_parser("import", help="store a filled grading sheet's scores in the gradebook",
                             parents=[_who()])
    sheet.add_argument("out", type=Path, help="the batch output folder (with gradebook.sqlite)")
    sheet.add_argument("sheet", type=Path, help="a grading sheet (.csv) written by `manual export`, filled in")
    sheet.set_defaults(command=manual_command, parser=sheet)
    similar = verbs.add_parser("similarity", help="list pairs of submissions with similar code (copydetect)")
    similar.add_argument("directory", type=Path, help="a folder holding one folder or .zip per submission")
    similar.add_argument("--out", type=Path, default=Path("out"), metavar="OUT",
                         help="where similarity.csv and report/similarity.html go (default: out)")
    similar.add_argument("--threshold", type=_positive(float), default=None, metavar="T",
                         help="list a pair when either file has at least this share of its tokens in the other "
                         "(default 0.6)")
    similar.add_argument("--min-tokens", type=_positive(int), default=None, metavar="N",
                         help="and the match covers at least N filtered tokens (default 100)")
    similar.add_argument("--public", type=Path, metavar="KNOWN_DIR",
                         help="known public solutions to compare each submission with: a package layout, or a "
                         "folder of them")
    similar.add_argument("--reference", type=Path, default=Path(__file__).resolve().parents[1] / "solutions",
                         metavar="DIR", help="the course's reference solution, compared with each submission: a "
                         "pair with it says \"the reference solution\" (default: this repository's solutions/)")
    similar.add_argument("--no-reference", action="store_true", help="do not compare with the reference solution")
    similar.set_defaults(command=similarity_command, parser=similar)
    report = verbs.add_parser("report", help="write every file again from a gradebook: each submission's reports, "
                              "grades.csv, the grading sheets, the LMS exports and the cohort report, "
                              "OUT/report/index.html", parents=[_who()])
    report.add_argument("out", type=Path, metavar="OUT", help="the --out folder of `batch` (holding gradebook.sqlite)")
    report.add_argument("--course", type=Path, metavar="FILE", help="the course file with the answers' release dates "
                        f"(default: {COURSE_FILE} in the working folder, if there is one)")
    report.set_defaults(command=report_command, parser=report)
    lms = verbs.add_parser("export", help="write the gradebook for a learning-management system, one row per "
                           "student of the course file's roster: Canvas's gradebook CSV, or a plain CSV",
                           parents=[_who()])
    lms.add_argument("out", type=Path, metavar="OUT", help="the --out folder of `batch` (holding gradebook.sqlite)")
    lms.add_argument("--format", choices=("canvas", "csv"), required=True,
                     help="canvas: Canvas's gradebook import (OUT/canvas.csv); csv: per assignment its maximum, the "
                     "raw, penalised and final scores and the percentage (OUT/lms.csv)")
    lms.add_argument("--to", type=Path, metavar="FILE", help="the file to write (default: OUT/canvas.csv or OUT/lms.csv)")
    lms.add_argument("--course", type=Path, metavar="FILE", help="the course file with the roster, extensions and "
                     f"overrides (default: {COURSE_FILE} in the working folder, if there is one)")
    lms.set_defaults(command=export_command, parser=lms)
    changes = verbs.add_parser("history", help="every change to a student's grades: when, who, by which command, "
                               "before and after, and why")
    changes.add_argument("student", help="the student: a roster id, a submission's name, an email, a login or a name")
    changes.add_argument("--out", type=Path, required=True, metavar="OUT",
                         help="the --out folder of `batch` (holding gradebook.sqlite)")
    changes.set_defaults(command=history_command, parser=changes)
    return parser


def require_isolation(args: argparse.Namespace) -> None:
    """Refuse to grade (exit 2, saying why and what to do) where nothing would isolate student code."""
    from autograder.sandbox.policy import SandboxUnavailable, detect

    try:
        detect()
    except SandboxUnavailable as exc:
        args.parser.exit(2, f"{args.parser.prog}: {exc}\n")


def grade_command(args: argparse.Namespace) -> int:
    """One submission; ended by Ctrl-C, it ends quietly (its runner stops the worker and removes its stage)."""
    try:
        return _grade(args)
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            sys.stderr.write("grading interrupted (by Ctrl-C): no report was written; run the same command again\n")
        return 130


def _grade(args: argparse.Namespace) -> int:
    require_isolation(args)
    if not args.submission.exists():
        args.parser.error(f"{args.submission} does not exist: give a submission folder or .zip")
    from autograder.grading.client import grade
    from autograder.grading.intake import submission_name

    out = args.out or Path("out") / submission_name(args.submission.resolve())
    from autograder.cohort.batch import private_folder

    private_folder(out)
    course = course_path(args) if args.submission_metadata else None
    seed_name = gradescope_seed_name(args.submission_metadata) if args.submission_metadata else None
    report = grade(args.submission, out=out, assignment=args.assignment, call_timeout=args.timeout,
                   select=args.select, seed=args.seed, seed_name=seed_name, secret=seed_secret(args),
                   released=released(args, args.course))
    console = Console()
    print_report(report, console)
    if args.submission_metadata and seed_name is None and args.seed is None:
        console.print(Text(f"{args.submission_metadata} names no student: the randomised tests drew from the "
                           "submission's own seed, which every submission of this name shares", style="yellow"),
                      soft_wrap=True)
    if course is not None and report.tests:
        from autograder.cohort.roster import for_gradescope

        for line in for_gradescope(report, out, course, args.submission_metadata):
            console.print(Text(line, style="yellow"), soft_wrap=True)
    console.print(Text(f"reports written to {out}"))
    if report.not_gradable:
        console.print(Text(f"not gradable: {report.not_gradable}", style="bold red"), soft_wrap=True)
    elif not report.tests:
        console.print(Text("grading did not complete: the log above says why", style="bold red"))
        return 1
    return 0


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """The course file's [cluster] options with those given on the command line put in."""
    course = args.course or (Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None)
    try:
        options = load_cluster(course) if course else ClusterOptions()
        return options.replace(**{name: getattr(args, name) for name in CLUSTER_FLAGS})
    except CourseError as exc:
        args.parser.error(str(exc))


def gradescope_seed_name(metadata: Path) -> str | None:
    """The name a Gradescope submission's seed is derived from (autograder.grading.client.seed_for): its
    students in submission_metadata.json, each by Gradescope id (by email without one), sorted and joined.
    Gradescope grades every upload as the same folder, so the submission's own name would give all students
    one seed; this gives each student (or group) inputs of their own, the same on every regrade. None where
    the file names no student or cannot be read: the submission's name is used then."""
    try:
        users = json.loads(Path(metadata).read_text(encoding="utf-8")).get("users")
    except (OSError, UnicodeError, ValueError, AttributeError):
        return None
    users = [user for user in users if isinstance(user, dict)] if isinstance(users, list) else []
    names = {str(user.get("id") or user.get("email") or "").strip() for user in users} - {""}
    return ",".join(sorted(names)) or None


def seed_secret(args: argparse.Namespace) -> str:
    """The course file's [grading] seed_secret ("" without a course file), once the whole file is checked
    (an unknown table is refused here as `make gradescope` refuses it)."""
    from autograder.cohort.course import check
    from autograder.grading.intake import ASSIGNMENTS

    course = args.course or (Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None)
    try:
        if course:
            check(course, sorted(p.parent.name for p in ASSIGNMENTS.glob("*/__init__.py")))
        return load_seed_secret(course) if course else ""
    except CourseError as exc:
        args.parser.error(str(exc))


def late_policy(args: argparse.Namespace, required: bool = True):
    """The course file's late policy (a usage error where it is wrong, or absent and `required`)."""
    from autograder.grading.intake import ASSIGNMENTS

    course = args.course or (Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None)
    known = sorted(p.parent.name for p in ASSIGNMENTS.glob("*/__init__.py"))
    try:
        policy = load_late(course, known) if course else None
    except CourseError as exc:
        args.parser.error(str(exc))
    if policy is None and required:
        args.parser.error(f"the late policy needs a course file ({COURSE_FILE}, or --course) with a due date per "
                          "assignment: [assignments.<name>] with due = 2027-01-20T17:00:00-08:00")
    return policy


def released(args: argparse.Namespace, course: Path | None) -> dict:
    """The answer keys whose release date (the course file's: `course`, else grading.toml of the working folder)
    has passed (autograder.cohort.answers); a usage error where a release date is wrong."""
    from autograder.cohort.answers import default_course, released_keys

    try:
        return released_keys(course or default_course())
    except CourseError as exc:
        args.parser.error(str(exc))


def late_setup(args: argparse.Namespace):
    """(late policy, submission times) for batch, or None without --times."""
    if args.times is None:
        return None
    from autograder.cohort.late import LateError, read_times

    policy = late_policy(args)
    try:
        return policy, read_times(args.times)
    except LateError as exc:
        args.parser.error(str(exc))


def batch_command(args: argparse.Namespace) -> int:
    """The batch; ended by Ctrl-C or a closed output pipe (`| head`), it ends quietly, saying what is kept."""
    try:
        return _batch(args)
    except (KeyboardInterrupt, BrokenPipeError) as exc:
        return _interrupted(args.out, exc)


class _PipeConsole(Console):
    """A console whose closed output pipe reaches batch_command as BrokenPipeError (Rich's own answer is to
    exit with status 1, silently)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to print there
        raise BrokenPipeError("the output pipe closed")


def _interrupted(out: Path, exc: BaseException) -> int:
    """Say on stderr what the gradebook keeps (each submission is stored as soon as it is graded, and the
    runners have removed their stages); 130 after Ctrl-C, 141 (as SIGPIPE) after a closed pipe."""
    if isinstance(exc, BrokenPipeError):  # stdout is gone: what Python still flushes at exit goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    book, kept = out / "gradebook.sqlite", []
    if book.is_file():
        from autograder.report.gradebook import Gradebook

        with Gradebook(book) as gradebook:
            kept = [row["status"] for row in gradebook.rows() if row["status"] != "missing"]
    how = "by Ctrl-C" if isinstance(exc, KeyboardInterrupt) else "its output pipe closed"
    errors = kept.count("error")
    with contextlib.suppress(OSError):
        sys.stderr.write(f"batch interrupted ({how}): {book} keeps {len(kept) - errors} graded submission(s)"
                         + (f" and {errors} error(s)" if errors else "")
                         + "; run the same command again to grade the rest (what is kept is not graded again); "
                         f"grades.csv and the cohort report are written when a batch completes, or by "
                         f"`python -m autograder report {out}`\n")
    return 130 if isinstance(exc, KeyboardInterrupt) else 141


def _batch(args: argparse.Namespace) -> int:
    require_isolation(args)
    from autograder.cohort.batch import BatchError, run_batch
    from autograder.cohort.executors import SlurmExecutor

    late = late_setup(args)
    options = cluster_options(args)
    secret = seed_secret(args)
    executor = (SlurmExecutor(options, call_timeout=args.timeout, seed=args.seed, secret=secret)
                if options.executor == "slurm" else None)
    console = _PipeConsole()
    try:
        rows = run_batch(args.directory, args.out, workers=args.workers, call_timeout=args.timeout,
                         console=console, overlap=args.overlap, executor=executor, regrade=tuple(args.regrade),
                         late=late, seed=args.seed, secret=secret, course=args.course, command=args.command_line)
    except BatchError as exc:
        args.parser.error(str(exc))
    from autograder.cohort.late import table
    from autograder.report.gradebook import Gradebook, finals

    with Gradebook(args.out / "gradebook.sqlite") as book:
        console.print(gradebook_table(rows, finals(book)))
        late_rows = table(book.late()) if late is not None else None
        failed = sorted(book.failed_regrades())
    if late_rows is not None and late_rows.row_count:
        console.print(late_rows)
    console.print(Text(f"gradebook {args.out / 'gradebook.sqlite'}, grades {args.out / 'grades.csv'}"))
    errors = [row["name"] for row in rows if row["status"] == "error"]
    if errors:
        console.print(Text(f"{len(errors)} submission(s) not graded: {', '.join(errors)}; "
                           "run the batch again to retry them", style="bold red"))
    if failed:
        console.print(Text(f"{len(failed)} regrade(s) failed, their earlier grades stand: {', '.join(failed)}; "
                           "run the batch again to retry them", style="bold red"))
    return 1 if errors or failed else 0


def nbgrader_command(args: argparse.Namespace) -> int:
    if not (args.course / "nbgrader_config.py").is_file():
        args.parser.error(f"{args.course} is not an nbgrader course directory (no nbgrader_config.py there)")
    require_isolation(args)
    from autograder.package.nbgrader_scores import CourseError, grade_course

    try:
        results = grade_course(args.course, args.assignment, workers=args.workers, call_timeout=args.timeout,
                               released=released(args, None))
    except CourseError as exc:
        args.parser.error(str(exc))
    console = Console()
    table = Table("student", "notebook", "trusted points", "flags")
    for result in results:
        table.add_row(Text(result.student), Text(result.notebook),
                      f"{result.points:g} / {result.max_points:g}" if result.graded else "no score",
                      str(len(result.flags)))
    console.print(table)
    console.print(Text(f"scores written to the gradebook of {args.course}; reports in {args.course / 'trusted'}"))
    failed = [r.student for r in results if r.report is None or not r.report.tests]
    if failed:
        console.print(Text(f"grading did not complete for: {', '.join(failed)}", style="bold red"))
        return 1
    return 0


def manual_command(args: argparse.Namespace) -> int:
    from autograder.report.gradebook import Gradebook
    from autograder.written.manual import ManualError, export, import_sheet

    console = Console()
    try:
        if args.step == "export":
            paths = export(args.out, anonymous=args.anonymous)
            console.print(Text(f"{len(paths) // 2} grading sheets in {args.out / 'manual'}" if paths
                               else "no written answers to grade by hand in this gradebook"))
            return 0
        left: list[str] = []
        changed = import_sheet(args.out, args.sheet, left)
    except ManualError as exc:
        console.print(Text(str(exc), style="bold red"))
        return 2
    for line in left:
        console.print(Text(line, style="yellow"), soft_wrap=True)
    from autograder.cohort.publish import publish
    from autograder.report.gradebook import finals

    notes: list[str] = []
    publish(args.out, notes=notes)  # every file from the gradebook: reports, grades.csv, the sheets, the exports
    for line in notes:
        console.print(Text(line, style="yellow"), soft_wrap=True)
    with Gradebook(args.out / "gradebook.sqlite") as book:
        console.print(gradebook_table(book.rows(), finals(book)))
    console.print(Text(f"scores imported for {len(changed)} submission(s); grades in {args.out / 'grades.csv'}"))
    return 0


def similarity_command(args: argparse.Namespace) -> int:
    from autograder.report.text import clean
    from autograder.cohort.similarity import MIN_TOKENS, REFERENCE, THRESHOLD, SimilarityError, compare, write

    try:
        result = compare(args.directory, public=args.public, threshold=args.threshold or THRESHOLD,
                         min_tokens=args.min_tokens or MIN_TOKENS, reference=None if args.no_reference else args.reference)
    except SimilarityError as exc:
        args.parser.error(str(exc))
    table, page = write(result, args.out)
    console = Console()
    for name, why in result.skipped.items():
        console.print(Text(clean(f"{name}: not compared ({why})"), style="yellow"))
    copies = sorted({p.first for p in result.pairs if p.second == REFERENCE})
    if copies:
        console.print(Text(clean(f"{len(copies)} submission(s) match the reference solution: {', '.join(copies)}"),
                           style="yellow"), soft_wrap=True)
    console.print(Text(f"{len(result.submissions)} submissions, {len(result.pairs)} pair(s) of submissions above "
                       f"{result.threshold:g}: {table}, {page}"))
    if (args.out / "gradebook.sqlite").exists():  # the cohort report links the similarity page: rewrite it
        from autograder.report.site import write_site

        write_site(args.out)
    return 0


def report_command(args: argparse.Namespace) -> int:
    """Write every file from the gradebook again (autograder.cohort.publish), the cohort report among them."""
    from autograder.cohort.publish import UnwrittenError, publish

    notes: list[str] = []
    try:
        index = publish(args.out, course=args.course, notes=notes)
    except UnwrittenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, CourseError) as exc:
        args.parser.error(str(exc))
    for line in notes:
        print(line)
    print(f"cohort report {index}")
    return 0


def export_command(args: argparse.Namespace) -> int:
    """The gradebook for an LMS (autograder.report.lms): every file written again from the gradebook once the
    course file's roster, extensions and overrides are in it (autograder.cohort.publish), then the file asked
    for, which the gradebook remembers so that every later step rewrites it too."""
    from autograder.cohort.course import check, load_canvas_ids
    from autograder.cohort.publish import UnwrittenError, publish
    from autograder.grading.intake import ASSIGNMENTS
    from autograder.report.gradebook import Gradebook
    from autograder.report.lms import FILES, LmsError, remember, write_canvas, write_plain
    from autograder.report.text import clean

    if not (args.out / "gradebook.sqlite").is_file():
        args.parser.error(f"no gradebook at {args.out / 'gradebook.sqlite'}: grade the cohort first with "
                          f"`python -m autograder batch SUBMISSIONS --out {args.out}`")
    course, known = course_path(args), sorted(p.parent.name for p in ASSIGNMENTS.glob("*/__init__.py"))
    path = args.to or args.out / FILES[args.format]
    notes: list[str] = []
    try:
        if course:
            check(course, known)
        try:
            publish(args.out, course=course, notes=notes)
        except UnwrittenError as exc:  # the export reads the gradebook alone: say it, and go on
            print(f"warning: {exc}", file=sys.stderr)
        ids = load_canvas_ids(course, known) if course else {}
        with Gradebook(args.out / "gradebook.sqlite") as book:
            notes += write_canvas(book, path, ids) if args.format == "canvas" else write_plain(book, path)
            remember(book, path, args.format, ids)
    except (CourseError, LmsError) as exc:
        args.parser.error(str(exc))
    console = Console()
    for line in notes:
        console.print(Text(clean(line), style="yellow"), soft_wrap=True)
    console.print(Text(f"wrote {path} (written again from the gradebook by every later batch, regrade, manual "
                       "import, report and export)"), soft_wrap=True)
    return 0


def history_command(args: argparse.Namespace) -> int:
    """Every change to one student's grades (autograder.report.history), oldest first."""
    from autograder.report.gradebook import Gradebook, changes_of
    from autograder.report.text import clean

    if not (args.out / "gradebook.sqlite").is_file():
        args.parser.error(f"no gradebook at {args.out / 'gradebook.sqlite'}: grade the cohort first with "
                          f"`python -m autograder batch SUBMISSIONS --out {args.out}`")
    with Gradebook(args.out / "gradebook.sqlite") as book:  # an older gradebook gets its history table here
        found, rows = changes_of(book._db, args.student)
    if not found:
        args.parser.error(f"no student or submission {args.student!r} in {args.out / 'gradebook.sqlite'}: give a "
                          "roster id, a submission's name, an email, a login or a name")
    print(clean(f"history of {', '.join(found)} in {args.out / 'gradebook.sqlite'}, oldest first:"))
    for row in rows:  # one line each, whole in any terminal or pipe
        what = " ".join(part for part in (row["submission"] or row["student"], row["assignment"]) if part)
        print(clean(f"{row['at']}  {row['by']}  {what}: {row['change']}: {row['before']} -> {row['after']}"
                    + (f" ({row['reason']})" if row["reason"] else "") + f"  [{row['command']}]"))
    if not rows:
        print("no change recorded yet")
    return 0


def course_path(args: argparse.Namespace) -> Path | None:
    """--course, else the course file of the working folder where there is one."""
    return args.course or (Path(COURSE_FILE) if Path(COURSE_FILE).is_file() else None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.command_line = "python -m autograder " + shlex.join(argv)  # what the gradebook's history names
    from autograder.report.history import acting

    try:
        with acting(getattr(args, "by", None), args.command_line):
            return args.command(args)
    except BrokenPipeError:  # `history ... | head`: the reader has what it wanted; no traceback on the way out
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
