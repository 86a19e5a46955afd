"""The roster, extensions and overrides (autograder.cohort.roster, autograder.cohort.course): submissions
matched to the roster, students with no submission kept as "missing" (score 0), unknown submissions named,
an extension that moves the late policy's due date, overrides and excuses with their audit, in the batch and
on Gradescope. The gradebooks are built directly from toy reports: nothing is graded."""

import csv
import json
import sqlite3
import tomllib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autograder.cohort.batch import BatchError, run_batch
from autograder.cohort.course import CourseError, Student, check, load_adjustments, load_roster
from autograder.cohort.late import ANY
from autograder.cohort.roster import RosterError, for_gradescope, match, settle
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result
from autograder.package.gradescope import course_file
from autograder.report import write_all
from autograder.report.gradebook import SUBMISSIONS_TABLE, Gradebook, audit, finals, roster
from tests.autograder.cohort.test_late import gradescope_metadata
from tests.autograder.report.test_gradebook import quiet, toy_grade

PACIFIC = timezone(timedelta(hours=-8))
ROSTER_CSV = "id,name,email,section\ns1,Ada Lovelace,ada@uni.edu,A\ns2,Bo Chen,bo@uni.edu,B\ns3,Cy Dahl,cy@uni.edu,A\n"
POLICY = """
[roster]
file = "roster.csv"

[assignments.alpha]
due = 2027-01-20T17:00:00-08:00
per_day = 0.5
"""
EXTENSION = """
[[extensions]]
student = "s1"
assignment = "alpha"
due = 2027-01-23T17:00:00-08:00
reason = "medical note of 2027-01-18"
"""


def report(name: str, alpha: int, beta: int = 0, names: tuple[str, str] = ("alpha", "beta")) -> GradeReport:
    """alpha: `alpha` of 3 tests passed (2 points each); beta: `beta` of 2 passed (1 point each); `names` renames
    the two assignments."""
    tests = [Result(f"tests/{names[0]}/t.py::test_{i}", names[0], 2.0, "passed" if i < alpha else "failed")
             for i in range(3)]
    tests += [Result(f"tests/{names[1]}/t.py::test_{i}", names[1], 1.0, "passed" if i < beta else "failed")
              for i in range(2)]
    return GradeReport(name, tests)


def course(tmp_path: Path, text: str, roster_csv: str = ROSTER_CSV) -> Path:
    (tmp_path / "roster.csv").write_text(roster_csv)
    (tmp_path / "grading.toml").write_text(text)
    return tmp_path / "grading.toml"


def book_of(tmp_path: Path, **reports: GradeReport) -> Gradebook:
    book = Gradebook(tmp_path / "out" / "gradebook.sqlite")
    for name, graded in reports.items():
        book.record(name, f"digest of {name}", graded)
    return book


def test_submissions_match_by_id_or_name_and_the_student_without_one_is_missing(tmp_path):
    path = course(tmp_path, "[roster]\nfile = \"roster.csv\"\n")
    with book_of(tmp_path, ada_lovelace=report("ada_lovelace", 3, 2), S2=report("S2", 1), stranger=report("x", 2)) as book:
        settled = settle(book, path, "test")
        assert {r["id"]: r["submission"] for r in roster(book)} == {"s1": "ada_lovelace", "s2": "S2", "s3": None}
        rows = {r["name"]: r for r in book.rows()}
        assert (rows["s3"]["status"], rows["s3"]["score"]) == ("missing", 0.0)
        assert rows["s3"]["assignments"] == {"alpha": [0.0, 6.0], "beta": [0.0, 2.0]}  # 0 of each maximum
        assert any("not on the roster" in m and "stranger" in m for m in settled.messages)
        assert any("s3 (Cy Dahl)" in m and "missing" in m for m in settled.messages)
        book.export_csv(tmp_path / "grades.csv")
    grades = {r["submission"] or r["id"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert (grades["s3"]["status"], grades["s3"]["total"], grades["s3"]["max"]) == ("missing", "0.0", "8.0")


def test_a_student_who_submits_later_is_no_longer_missing(tmp_path):
    path = course(tmp_path, "[roster]\nfile = \"roster.csv\"\n")
    with book_of(tmp_path, s1=report("s1", 3)) as book:
        settle(book, path, "first")
        assert {r["name"] for r in book.rows() if r["status"] == "missing"} == {"s2", "s3"}
        book.record("Cy.Dahl", "d", report("Cy.Dahl", 1))
        assert settle(book, path, "second").changed
        assert {r["name"]: r["status"] for r in book.rows()} == {"Cy.Dahl": "graded", "s1": "graded", "s2": "missing"}


def test_a_submission_matching_two_students_or_two_matching_one_is_refused():
    twins = (Student("s1", "Sam Lee"), Student("s2", "Sam Lee", "sam2@uni.edu"))
    with pytest.raises(RosterError, match="'sam_lee' matches the students s1, s2.*submission column"):
        match(twins, ["sam_lee"])
    assert match(twins, ["s1", "sam2@uni.edu"]).submissions == {"s1": "s1", "s2": "sam2@uni.edu"}
    with pytest.raises(RosterError, match="'s1' and 'sam2@uni.edu'|'S1' and 's1'"):
        match((Student("s1", "Sam Lee"),), ["s1", "S1"])


@pytest.mark.parametrize("text, roster_csv, expected", [
    ("[roster]\nfile = \"roster.csv\"\n", "id,name,email\ns1,Ada,a@u\n", "missing section"),
    ("[roster]\nfile = \"roster.csv\"\n", "id,name,email,section,github\ns1,Ada,a@u,A,ada\n", "unknown github"),
    ("[roster]\nfile = \"roster.csv\"\n", ROSTER_CSV + "s1,Ada again,x@u,B\n", "line 5: student id 's1' again"),
    ("[roster]\nfile = \"nowhere.csv\"\n", ROSTER_CSV, "cannot read the roster"),
    ("[roster]\nfile = \"roster.csv\"\nstudents = []\n", ROSTER_CSV, "either file"),
    (POLICY + EXTENSION.replace('reason = "medical note of 2027-01-18"\n', ""), ROSTER_CSV,
     "reason is missing or empty"),
    (POLICY + EXTENSION.replace('"s1"', '"s9"'), ROSTER_CSV, "'s9' is no student id of the \\[roster\\]"),
    (POLICY + EXTENSION.replace("2027-01-23", "2027-01-19"), ROSTER_CSV, "not after the assignment's due date"),
    (POLICY + EXTENSION.replace('"alpha"', '"beta"'), ROSTER_CSV, "no due date of beta to extend"),
    (POLICY + EXTENSION + EXTENSION, ROSTER_CSV, "number 2 \\(s1, alpha\\): the same student and assignment"),
    (POLICY + '[[overrides]]\nstudent = "s2"\nassignment = "alpha"\nscore = 3\nexcused = true\nreason = "x"\n',
     ROSTER_CSV, "either score = 14.5"),
    (POLICY + '[[overrides]]\nstudent = "s2"\nassignment = "alpha"\nexcused = false\nreason = "x"\n', ROSTER_CSV,
     "excused must be true"),
    (POLICY + '[export]\ncanvas_ids = { alpha = "4711" }\n', ROSTER_CSV, "canvas_ids.alpha must be Canvas's id"),
])
def test_a_wrong_roster_or_entry_is_refused_with_what_to_do(tmp_path, text, roster_csv, expected):
    with pytest.raises(CourseError, match=expected):
        check(course(tmp_path, text, roster_csv), ["alpha", "beta"])


def test_an_extension_turns_a_late_penalty_into_none_and_the_audit_says_so(tmp_path):
    path = course(tmp_path, POLICY)
    times = {("s1", ANY): datetime(2027, 1, 22, 10, tzinfo=PACIFIC)}  # two days late without the extension
    with book_of(tmp_path, s1=report("s1", 3)) as book:
        from autograder.cohort.course import load_late

        settle(book, path, "batch --times", late=(load_late(path), times))
        assert (book.late()["s1"]["alpha"]["penalty"], book.late()["s1"]["alpha"]["penalised"]) == (1.0, 0.0)
        path.write_text(POLICY + EXTENSION)
        settled = settle(book, path, "export --format canvas")  # no times given: the stored ones are used
        late = book.late()["s1"]["alpha"]
        assert (late["penalty"], late["penalised"], late["due"]) == (0.0, 6.0, "2027-01-23T17:00:00-08:00")
        assert late["note"] == "on time (due date extended)" and settled.changed
        (row,) = audit(book)
        assert {k: row[k] for k in ("command", "student", "assignment", "change", "reason")} == {
            "command": "export --format canvas", "student": "s1", "assignment": "alpha", "change": "extension",
            "reason": "medical note of 2027-01-18"}
        assert row["before"] == "due 2027-01-20T17:00:00-08:00: 2 days late: 100% off"
        assert row["after"] == "due 2027-01-23T17:00:00-08:00: on time (due date extended)"


def test_an_override_applies_after_the_late_policy_with_one_audit_row_per_change(tmp_path):
    override = '[[overrides]]\nstudent = "s2"\nassignment = "alpha"\nscore = 5\nreason = "regraded by hand"\n'
    path = course(tmp_path, "[roster]\nfile = \"roster.csv\"\n" + override)
    with book_of(tmp_path, s1=report("s1", 3), s2=report("s2", 1, 2)) as book:
        settle(book, path, "batch one")
        assert finals(book)["s2"]["alpha"][:3] == (2.0, 2.0, 5.0)  # raw, penalised, final
        (row,) = audit(book)
        assert (row["change"], row["before"], row["after"], row["reason"], row["command"]) == \
            ("override", "2", "5", "regraded by hand", "batch one")
        assert not settle(book, path, "batch two").changed and len(audit(book)) == 1  # unchanged: no new row
        path.write_text("[roster]\nfile = \"roster.csv\"\n" + override.replace("score = 5", "excused = true"))
        settle(book, path, "batch three")
        assert finals(book)["s2"]["alpha"].final is None and finals(book)["s2"]["alpha"].adjusted == "excused"
        path.write_text("[roster]\nfile = \"roster.csv\"\n")
        settle(book, path, "batch four")
        assert [(r["change"], r["before"], r["after"]) for r in audit(book)] == [
            ("override", "2", "5"), ("excused", "5", "excused"), ("excused removed", "excused", "2")]
        assert audit(book)[-1]["reason"].startswith("removed from the course file")
        assert finals(book)["s2"]["alpha"].final == 2.0


def test_an_old_gradebook_gains_the_missing_status_and_keeps_its_rows(tmp_path):
    path = tmp_path / "out" / "gradebook.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path) as db:  # a gradebook made before "missing" existed
        db.executescript(SUBMISSIONS_TABLE.replace("{table}", "submissions").replace(", 'missing'", ""))
        db.execute("INSERT INTO submissions VALUES ('s1', 'd', 'graded', 6.0, 6.0, '{\"alpha\": [6.0, 6.0]}', '', "
                   "'2027-01-01', NULL)")
    with Gradebook(path) as book:
        settle(book, course(tmp_path, "[roster]\nfile = \"roster.csv\"\n"), "test")
        assert {r["name"]: r["status"] for r in book.rows()} == {"s1": "graded", "s2": "missing", "s3": "missing"}


def test_the_batch_applies_the_course_file_and_every_file_shows_it(tmp_path):
    cohort = tmp_path / "cohort"
    for name, text in (("s1", "alpha q0 ok\nalpha q1 ok\n"), ("bo_chen", "alpha q0 ok\nalpha q1 no\n"),
                       ("stranger", "alpha q0 ok\n")):
        (cohort / name).mkdir(parents=True)
        (cohort / name / "answers.txt").write_text(text)
    path = course(tmp_path, "[roster]\nfile = \"roster.csv\"\n[[overrides]]\nstudent = \"s2\"\nassignment = "
                            "\"alpha\"\nscore = 2\nreason = \"the q1 test was wrong\"\n")
    screen = tmp_path / "screen.txt"
    from rich.console import Console

    with screen.open("w") as handle:
        run_batch(cohort, tmp_path / "out", grade_fn=toy_grade, console=Console(file=handle, width=300), course=path,
                  command="python -m autograder batch cohort")
    said = screen.read_text()
    assert "not on the roster" in said and "stranger" in said and "s3 (Cy Dahl)" in said
    grades = {r["submission"] or r["id"]: r for r in csv.DictReader((tmp_path / "out" / "grades.csv").open())}
    assert (grades["bo_chen"]["alpha"], grades["bo_chen"]["alpha final"]) == ("1.0", "2.0")
    assert grades["s3"]["status"] == "missing"
    results = json.loads((tmp_path / "out" / "submissions" / "bo_chen" / "results.json").read_text())
    assert results["score"] == 2.0 and results["output"].startswith("Set by the course staff:")
    feedback = (tmp_path / "out" / "submissions" / "bo_chen" / "feedback.md").read_text()
    assert "**2 / 2** points, set by the course staff" in feedback and "q1 test was wrong" not in feedback
    assert not (tmp_path / "out" / "submissions" / "s3").exists()  # no submission, no folder
    site = (tmp_path / "out" / "report" / "index.html").read_text()
    assert 'id="audit-table"' in site and "the q1 test was wrong" in site and "Cy Dahl" in site
    assert 'id="unknown-submissions"' in site and "<code>stranger</code>" in site
    with pytest.raises(BatchError, match="'S1' and 's1' both match student s1.*grades are stored"):
        (cohort / "S1").mkdir()
        (cohort / "S1" / "answers.txt").write_text("alpha q0 ok\n")
        run_batch(cohort, tmp_path / "out", grade_fn=toy_grade, console=quiet(), course=path)


def test_on_gradescope_the_students_extension_and_override_apply(tmp_path):
    path = course(tmp_path, POLICY + EXTENSION + '[[overrides]]\nstudent = "s1"\nassignment = "beta"\nscore = 2\n'
                                                 'reason = "a late regrade"\n')
    submission = tmp_path / "sub"
    submission.mkdir()
    (submission / "answers.txt").write_text("alpha q0 ok\nbeta r0 no\n")
    graded = toy_grade(submission)
    metadata = gradescope_metadata(tmp_path / "m.json", "2027-01-21T10:00:00-08:00", None)
    data = json.loads(metadata.read_text())
    data["users"] = [{"email": "ADA@uni.edu", "name": "someone", "sid": "x"}]  # found by the email
    metadata.write_text(json.dumps(data))
    write_all(graded, tmp_path / "results")
    lines = for_gradescope(graded, tmp_path / "results", path, metadata)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 3.0  # alpha 1 (not late: the extension), beta 2 (set)
    assert any("on time (due date extended)" in line for line in lines)
    data["users"] = [{"email": "bo@uni.edu", "name": "Bo Chen", "sid": "s2"}]
    metadata.write_text(json.dumps(data))
    write_all(graded, tmp_path / "results")
    for_gradescope(graded, tmp_path / "results", path, metadata)
    assert json.loads((tmp_path / "results" / "results.json").read_text())["score"] == 0.5  # s2: 1 day late, 50% off
    # A student who renamed themselves after s1 (Gradescope lets a student change the name) gets nothing of s1's,
    # with a roster or without one.
    data["users"] = [{"email": "mallory@uni.edu", "name": "s1", "sid": "s9"}]
    metadata.write_text(json.dumps(data))
    for roster in (True, False):
        if not roster:
            path.write_text(path.read_text().replace('[roster]\nfile = "roster.csv"\n', ""))
        write_all(graded, tmp_path / "results")
        lines = for_gradescope(graded, tmp_path / "results", path, metadata)
        assert json.loads((tmp_path / "results" / "results.json").read_text())["score"] == 0.5, (roster, lines)


def test_the_gradescope_package_carries_the_roster_and_only_its_assignments_entries(tmp_path):
    path = course(tmp_path, POLICY + EXTENSION + '[assignments.beta]\ndue = 2027-02-01T17:00:00-08:00\n'
                                                 'per_day = 0.1\n[[overrides]]\nstudent = "s2"\nassignment = "beta"\n'
                                                 'excused = true\nreason = "x"\n[export]\ncanvas_ids = { beta = 5 }\n')
    packaged = tmp_path / "alpha" / "grading.toml"
    packaged.parent.mkdir()
    packaged.write_text(course_file(path, "alpha"))
    check(packaged, ["alpha"])  # the package's grader knows alpha only
    assert [s.id for s in load_roster(packaged)] == ["s1", "s2", "s3"]
    adjustments = load_adjustments(packaged, ["alpha"])
    assert [e.student for e in adjustments.extensions] == ["s1"] and adjustments.overrides == ()
    assert "export" not in tomllib.loads(packaged.read_text())


def test_the_course_file_example_of_docs_term_is_valid(tmp_path):
    page = (Path(__file__).resolve().parents[3] / "docs" / "term.md").read_text()
    late = "[late_days]" + page.split("```toml\n[late_days]", 1)[1].split("```", 1)[0]
    example = "[roster]" + page.split("```toml\n[roster]", 1)[1].split("```", 1)[0]
    path = course(tmp_path, late + example, "id,name,email,section\ns002,Ada,a@uni.edu,A\ns003,Bo,b@uni.edu,B\n")
    check(path, ["flash_attention", "gpu_kernels", "resource_accounting"])
    adjustments = load_adjustments(path)
    assert adjustments.extensions[0].due == datetime(2027, 1, 25, 17, tzinfo=PACIFIC)
    assert adjustments.overrides[0].excused and adjustments.overrides[0].reason == "joined the course in week 4"
