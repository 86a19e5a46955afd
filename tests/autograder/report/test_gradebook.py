"""The SQLite gradebook and the batch: resumable, nothing lost, nothing counted twice.

A toy grade function stands in for autograder.grading.client.grade: a submission (folder or zip) holds
answers.txt with lines `assignment question answer`; an answer "ok" passes (1 point).
"""

import csv
import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from autograder.cohort.batch import BatchError, run_batch, submission_digest, submission_entries
from autograder.report import history
from autograder.report.gradebook import Gradebook
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result

ROOT = Path(__file__).resolve().parents[3]


def toy_grade(path: Path) -> GradeReport:
    if path.is_file():
        with zipfile.ZipFile(path) as archive:
            text = archive.read("answers.txt").decode()
    else:
        text = (path / "answers.txt").read_text()
    tests = []
    for line in text.splitlines():
        assignment, question, answer = line.split()
        status = "passed" if answer == "ok" else "failed"
        tests.append(Result(f"tests/{assignment}/test_toy.py::test_{question}", assignment, 1.0, status,
                            message="" if status == "passed" else f"expected ok, got {answer}"))
    return GradeReport(submission=path.name.removesuffix(".zip"), tests=tests, log=["toy grader"])


GATE = threading.Semaphore(4)


def gated_toy_grade(path: Path) -> GradeReport:
    """toy_grade for the first four submissions; the others wait (until the test kills the batch), so that
    the batch is killed part-way through however slowly the machine runs."""
    if not GATE.acquire(blocking=False):
        time.sleep(600)
    return toy_grade(path)


def answers(passed: int, failed: int = 1) -> str:
    lines = [f"alpha q{i} ok" for i in range(passed)] + [f"beta r{i} no" for i in range(failed)]
    return "\n".join(lines) + "\n"


def make_cohort(directory: Path, scores: dict[str, int]) -> None:
    """One submission per name, scoring `scores[name]`; names ending in `_zip` become zips."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, score in scores.items():
        if name.endswith("_zip"):
            with zipfile.ZipFile(directory / f"{name}.zip", "w") as archive:
                archive.writestr("answers.txt", answers(score))
        else:
            (directory / name).mkdir()
            (directory / name / "answers.txt").write_text(answers(score))


def quiet():
    from rich.console import Console

    return Console(file=open(os.devnull, "w"))


def report_of(score: int) -> GradeReport:
    tests = [Result(f"tests/alpha/t.py::test_{i}", "alpha", 2.0, "passed") for i in range(score)]
    tests.append(Result("tests/beta/t.py::test_x", "beta", 1.0, "failed", message="bad \ud800"))
    return GradeReport("s", tests)


# ---------------------------------------------------------------------------------------------- gradebook


def test_record_stores_scores_per_assignment_and_tests(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("alice", "d1", report_of(2))
        (row,) = book.rows()
        assert (row["name"], row["digest"], row["status"], row["score"], row["max_score"]) == \
            ("alice", "d1", "graded", 4.0, 5.0)
        assert row["assignments"] == {"alpha": [4.0, 4.0], "beta": [0.0, 1.0]}
        assert [t["name"] for t in book.tests("alice")] == ["tests/alpha/t.py::test_0", "tests/alpha/t.py::test_1",
                                                            "tests/beta/t.py::test_x"]
        assert book.tests("alice")[2]["message"] == "bad \\ud800"
        assert book.report("alice").score == 4.0 and row["message"] == ""


def test_a_graded_row_says_how_many_points_need_a_gpu(tmp_path):
    report = report_of(1)
    report.tests += [Result(f"tests/beta/t.py::test_gpu{i}", "beta", 1.5, "not_graded") for i in range(2)]
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("alice", "d1", report)
        (row,) = book.rows()
    assert row["message"] == "3 GPU points not graded" and row["max_score"] == 6.0


def test_is_current_only_for_the_same_digest_and_a_graded_row(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        assert not book.is_current("alice", "d1")
        book.record("alice", "d1", report_of(1))
        assert book.is_current("alice", "d1") and not book.is_current("alice", "d2")


def test_a_first_grading_that_fails_is_an_error_row_graded_again(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        assert book.record_error("alice", "d1", "Traceback ...\nRuntimeError: boom") is False
        assert not book.is_current("alice", "d1")
        (row,) = book.rows()
        assert row["status"] == "error" and row["score"] is None and row["message"].endswith("boom")
        assert book.tests("alice") == [] and book.report("alice") is None and book.failed_regrades() == {}


@pytest.mark.parametrize("digest", ["d1", "d2"], ids=["the same submission", "a new version"])
def test_a_failed_regrade_keeps_the_grade_and_every_view_says_so(tmp_path, digest):
    """The grader never loses a result: a grader error on a regrade leaves the grade, its tests and its report in
    place (of the contents it was graded from), says so in grades.csv and the history, and is graded again."""
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("alice", "d1", report_of(2))
        before = (book.rows(), book.tests("alice"), book.report("alice").to_json())
        assert book.record_error("alice", digest, "Traceback ...\nRuntimeError: the worker died") is True
        assert (book.rows(), book.tests("alice"), book.report("alice").to_json()) == before
        assert not book.is_current("alice", "d1") and not book.is_current("alice", digest)
        (failure,) = book.failed_regrades().values()
        assert failure["digest"] == digest and failure["message"].endswith("RuntimeError: the worker died")
        book.export_csv(tmp_path / "grades.csv")
        (row,) = csv.DictReader(open(tmp_path / "grades.csv"))
        assert (row["status"], row["alpha"], row["total"]) == ("graded", "4.0", "4.0")
        assert "failed (RuntimeError: the worker died): the earlier grade stands" in row["reason"]
        changes = [c for c in history.rows(book._db) if c["reason"].startswith("grader error on a regrade")]
        assert [(c["assignment"], c["before"], c["after"]) for c in changes] == [("alpha", "4 / 4", "4 / 4"),
                                                                                 ("beta", "0 / 1", "0 / 1")]
        book.record("alice", digest, report_of(1))  # the retry completes: its grade replaces the one that stood
        assert book.failed_regrades() == {} and book.is_current("alice", digest) and book.rows()[0]["score"] == 2.0


def test_recording_again_replaces_the_row_and_its_tests(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("alice", "d1", report_of(3))
        book.record("alice", "d2", report_of(1))
        (row,) = book.rows()
        assert row["digest"] == "d2" and row["score"] == 2.0
        assert len(book.tests("alice")) == 2


def test_gradebook_persists_in_wal_mode(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("alice", "d1", report_of(1))
    with Gradebook(tmp_path / "g.sqlite") as book:
        assert [r["name"] for r in book.rows()] == ["alice"]
    db = sqlite3.connect(tmp_path / "g.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_export_csv_has_one_row_per_submission(tmp_path):
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record("bob", "d", report_of(1))
        book.record("alice", "d", GradeReport("alice", [Result("tests/alpha/t.py::a", "alpha", 3.0, "passed")]))
        book.record_error("carol", "d", "boom")
        book.export_csv(tmp_path / "grades.csv")
    rows = list(csv.reader(open(tmp_path / "grades.csv")))
    parts = ["max", "max awaiting hand grading", "not counted: needing a GPU"]
    assert rows[0] == ["id", "student", "section", "email", "submission", "status", "reason",
                       "alpha", *(f"alpha {p}" for p in parts), "beta", *(f"beta {p}" for p in parts),
                       "total", *parts, "alpha final", "beta final", "total final", "total final max"]
    nobody = [""] * 4  # no roster: no id, name, section or email
    assert rows[1:] == [[*nobody, "alice", "graded", "", "3.0", "3.0", "0.0", "0.0", *[""] * 4,
                         "3.0", "3.0", "0.0", "0.0", "3.0", "", "3.0", "3.0"],
                        [*nobody, "bob", "graded", "", "2.0", "2.0", "0.0", "0.0", "0.0", "1.0", "0.0", "0.0",
                         "2.0", "3.0", "0.0", "0.0", "2.0", "0.0", "2.0", "3.0"],
                        [*nobody, "carol", "error", "boom", *[""] * 12, *[""] * 4]]


# ------------------------------------------------------------------------------------------------- digest


def test_digest_depends_on_paths_and_bytes_only(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, order in ((a, ["x.py", "pkg/y.py"]), (b, ["pkg/y.py", "x.py"])):
        for name in order:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(name)
    assert submission_digest(a) == submission_digest(b)
    (b / "x.py").write_text("changed")
    assert submission_digest(a) != submission_digest(b)
    (b / "x.py").write_text("x.py")
    (b / "x.py").rename(b / "z.py")
    assert submission_digest(a) != submission_digest(b)


def test_entries_are_folders_and_zips_and_names_must_not_clash(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 1, "bob_zip": 2})
    (tmp_path / "c" / "notes.txt").write_text("not a submission")
    (tmp_path / "c" / ".DS_Store").write_text("")
    found, ignored = submission_entries(tmp_path / "c")
    assert sorted(found) == ["alice", "bob_zip"] and ignored == ["notes.txt"]
    (tmp_path / "c" / "alice.zip").write_bytes(b"")
    with pytest.raises(BatchError, match="alice.zip .*both submission 'alice'"):
        submission_entries(tmp_path / "c")


# -------------------------------------------------------------------------------------------------- batch


def test_batch_grades_folders_and_zips_and_writes_everything(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 3, "bob_zip": 1, "carol": 0})
    rows = run_batch(tmp_path / "c", tmp_path / "out", workers=2, grade_fn=toy_grade, console=quiet())
    assert [(r["name"], r["score"], r["max_score"]) for r in rows] == \
        [("alice", 3.0, 4.0), ("bob_zip", 1.0, 2.0), ("carol", 0.0, 1.0)]
    for name in ("alice", "bob_zip", "carol"):
        assert sorted(p.name for p in (tmp_path / "out" / "submissions" / name).iterdir()) == \
            ["feedback.md", "junit.xml", "report.json", "results.json"]
    grades = list(csv.DictReader(open(tmp_path / "out" / "grades.csv")))
    assert [(g["submission"], g["alpha"], g["beta"], g["total"]) for g in grades] == \
        [("alice", "3.0", "0.0", "3.0"), ("bob_zip", "1.0", "0.0", "1.0"), ("carol", "", "0.0", "0.0")]


def test_batch_skips_what_is_graded_and_regrades_a_changed_submission(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 3, "bob": 1})
    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet())
    graded = []

    def counting(path):
        graded.append(path.name)
        return toy_grade(path)

    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=counting, console=quiet())
    assert graded == []
    (tmp_path / "c" / "bob" / "answers.txt").write_text(answers(5, failed=2))
    rows = run_batch(tmp_path / "c", tmp_path / "out", grade_fn=counting, console=quiet())
    assert graded == ["bob"]
    assert [(r["name"], r["score"], r["max_score"]) for r in rows] == [("alice", 3.0, 4.0), ("bob", 5.0, 7.0)]
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        assert len(book.tests("bob")) == 7


def test_a_crashing_grade_fn_loses_nothing_else_and_is_retried(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 2, "bob": 1, "carol": 3})

    def flaky(path):
        if path.name == "bob":
            raise RuntimeError("grader bug on bob")
        return toy_grade(path)

    rows = run_batch(tmp_path / "c", tmp_path / "out", workers=3, grade_fn=flaky, console=quiet())
    assert [(r["name"], r["status"]) for r in rows] == [("alice", "graded"), ("bob", "error"), ("carol", "graded")]
    assert "RuntimeError: grader bug on bob" in rows[1]["message"]
    rows = run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet())
    assert [(r["name"], r["status"], r["score"]) for r in rows] == \
        [("alice", "graded", 2.0), ("bob", "graded", 1.0), ("carol", "graded", 3.0)]


@pytest.mark.parametrize("failure", ["raises", "a report without tests"])
def test_a_regrade_that_fails_keeps_the_grade_and_its_files_says_so_and_is_retried(tmp_path, failure):
    make_cohort(tmp_path / "c", {"alice": 2, "bob": 1})
    out = tmp_path / "out"
    run_batch(tmp_path / "c", out, grade_fn=toy_grade, console=quiet())
    files = {p.name: p.read_bytes() for p in (out / "submissions" / "alice").iterdir()}

    def broken(path):
        if failure == "raises":
            raise RuntimeError("grader bug on a regrade")
        return GradeReport(path.name, log=["the grader failed on this submission (grader bug on a regrade)"])

    said = io.StringIO()
    rows = run_batch(tmp_path / "c", out, grade_fn=broken, regrade=("alice",), console=Console(file=said, width=300))
    assert [(r["name"], r["status"], r["score"]) for r in rows] == [("alice", "graded", 2.0), ("bob", "graded", 1.0)]
    assert "alice: the regrade failed (" in said.getvalue() and "its earlier grade stands" in said.getvalue()
    assert {p.name: p.read_bytes() for p in (out / "submissions" / "alice").iterdir()} == files
    report = (out / "report" / "index.html").read_text()
    assert 'id="failed-regrade-table"' in report and "grader bug on a regrade" in report
    assert 'id="count-failed-regrades">1<' in report and 'id="no-errors"' not in report
    graded = []

    def counting(path):
        graded.append(path.name)
        return toy_grade(path)

    rows = run_batch(tmp_path / "c", out, grade_fn=counting, console=quiet())  # no --regrade: retried all the same
    assert graded == ["alice"] and rows[0]["status"] == "graded"
    assert 'id="failed-regrade-table"' not in (out / "report" / "index.html").read_text()


def test_a_report_without_tests_is_an_error(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 2})
    failed = GradeReport("alice", log=["the grader failed on this submission (exit code 1: ...)"])
    (row,) = run_batch(tmp_path / "c", tmp_path / "out", grade_fn=lambda path: failed, console=quiet())
    assert row["status"] == "error" and "the grader failed" in row["message"]
    assert (tmp_path / "out" / "submissions" / "alice" / "report.json").exists()


def test_batch_refuses_a_missing_folder(tmp_path):
    with pytest.raises(BatchError, match="is not a folder"):
        run_batch(tmp_path / "missing", tmp_path / "out", grade_fn=toy_grade, console=quiet())


def test_batch_refuses_an_unknown_overlap(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 1})
    with pytest.raises(BatchError, match="overlap must be one of auto, always, never, got 'sometimes'"):
        run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet(), overlap="sometimes")
    assert not (tmp_path / "out" / "gradebook.sqlite").exists()


def test_a_server_that_does_not_stop_is_killed_and_the_others_still_close(tmp_path):
    from autograder.grading.client import GradingServer, ServerPool

    hung, idle = GradingServer(), GradingServer()
    hung.proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                  "signal.SIG_IGN); time.sleep(60)"], stdin=subprocess.PIPE)
    pool = ServerPool()
    pool.servers = [hung, idle]
    hung.close = lambda: GradingServer.close(hung, timeout=0.5)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 20
    assert hung.proc.returncode is not None
    assert not Path(hung.tmp.name).exists() and not Path(idle.tmp.name).exists()


def _count(database: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


BATCH_SCRIPT = """
import sys
from pathlib import Path
from autograder.cohort.batch import run_batch
from tests.autograder.report.test_gradebook import gated_toy_grade
run_batch(Path(sys.argv[1]), Path(sys.argv[2]), workers=2, grade_fn=gated_toy_grade)
"""


def test_killed_batch_resumes_with_every_submission_once(tmp_path):
    scores = {f"s{i:02d}" + ("_zip" if i % 3 == 0 else ""): i % 5 for i in range(12)}
    make_cohort(tmp_path / "c", scores)
    database = tmp_path / "out" / "gradebook.sqlite"
    batch = subprocess.Popen([sys.executable, "-c", BATCH_SCRIPT, str(tmp_path / "c"), str(tmp_path / "out")],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _count(database) < 3 and batch.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert batch.poll() is None, "the batch ended before it was killed"
    os.kill(batch.pid, signal.SIGKILL)
    _, stderr = batch.communicate()
    assert batch.returncode == -signal.SIGKILL, stderr.decode()
    recorded = _count(database)
    assert 3 <= recorded < len(scores)
    regraded = []

    def counting(path):
        regraded.append(path.name)
        return toy_grade(path)

    rows = run_batch(tmp_path / "c", tmp_path / "out", workers=3, grade_fn=counting, console=quiet())
    assert len(regraded) == len(scores) - recorded
    assert {r["name"]: r["score"] for r in rows} == {name: float(score) for name, score in scores.items()}
    db = sqlite3.connect(database)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    per_submission = dict(db.execute("SELECT submission, COUNT(*) FROM tests GROUP BY submission"))
    assert per_submission == {name: score + 1 for name, score in scores.items()}


def test_a_submission_whose_files_cannot_be_written_keeps_its_grade_and_costs_no_one_else(tmp_path):
    """bob's folder in OUT is taken by a file (as a full disk or a folder in the way would fail): the batch
    records every grade, writes alice's and carol's files and the cohort's, says what happened to bob's, and
    `report` writes bob's files once the way is clear."""
    from autograder.cli import main
    from autograder.cohort.publish import UnwrittenError, publish

    make_cohort(tmp_path / "c", {"alice": 3, "bob": 1, "carol": 2})
    out = tmp_path / "out"
    (out / "submissions").mkdir(parents=True)
    (out / "submissions" / "bob").write_text("in the way")
    console = Console(file=io.StringIO(), width=200)
    rows = run_batch(tmp_path / "c", out, grade_fn=toy_grade, console=console)
    assert [(r["name"], r["status"], r["score"]) for r in rows] == \
        [("alice", "graded", 3.0), ("bob", "graded", 1.0), ("carol", "graded", 2.0)]
    said = console.file.getvalue()
    assert "bob: its grade is stored, but its files could not be written" in said
    assert "the files of 1 submission(s) could not be written: bob" in said
    for name in ("alice", "carol"):
        assert (out / "submissions" / name / "feedback.md").is_file()
    assert (out / "report" / "index.html").is_file()
    assert [g["submission"] for g in csv.DictReader(open(out / "grades.csv"))] == ["alice", "bob", "carol"]
    with pytest.raises(UnwrittenError, match="bob"):
        publish(out)
    assert main(["report", str(out)]) == 1  # said on stderr, with what to do; no traceback
    (out / "submissions" / "bob").unlink()
    publish(out)
    assert "1" in (out / "submissions" / "bob" / "feedback.md").read_text()


def test_an_older_gradebooks_audit_becomes_the_start_of_its_history(tmp_path):
    """A gradebook made before the history kept the course file's changes in `audit`: opened now, they are the
    first rows of the history (who made them was not recorded then), and `audit` stays as it was."""
    from autograder.report.gradebook import ROSTER_SCHEMA, audit

    path = tmp_path / "gradebook.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(ROSTER_SCHEMA + """CREATE TABLE audit (at TEXT NOT NULL, command TEXT NOT NULL,
            student TEXT NOT NULL, assignment TEXT NOT NULL, change TEXT NOT NULL, before TEXT NOT NULL,
            after TEXT NOT NULL, reason TEXT NOT NULL);""")
        db.execute("INSERT INTO audit VALUES ('2027-01-01T00:00:00+00:00', 'export', 's1', 'alpha', 'override', "
                   "'2', '5', 'regraded')")
    with Gradebook(path) as book:
        book.record("alice", "d", report_of(1))
        (row,) = audit(book)
        assert (row["by"], row["command"], row["student"], row["change"], row["after"]) == \
            ("", "export", "s1", "override", "5")
    with Gradebook(path) as book:  # opened again: copied once
        assert len(audit(book)) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM audit").fetchone() == (1,)
