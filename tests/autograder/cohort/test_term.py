"""A term walked through as a new instructor walks it: roster, late work, extensions, overrides and excusals,
hand grading, a resubmission, the LMS exports and the answers' release; each test is one problem such a walk
found, and shows that every file says the grade the gradebook holds.

The grader is a stand-in that needs no sandbox: toy tests from each submission's tests.txt
(`assignment name status`; status ok, no or gpu, the last a test needing a GPU, not graded here) and the
written answers of resource_accounting graded for real from the submission's answers.md
(autograder.written.answers, as the trusted runner grades them). The expected numbers are computed here from
the toy's rules and the handout's points, apart from the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from rich.console import Console

from autograder.cli import main
from autograder.cohort.batch import run_batch
from autograder.cohort.course import CourseError, check, load_answers_release
from autograder.cohort.late import ANY
from autograder.model.results import GradeReport, TestResult
from autograder.written.answers import handout_questions, written_results

ROOT = Path(__file__).resolve().parents[3]
RA, FA = "resource_accounting", "flash_attention"
MODEL = (ROOT / "solutions" / RA / "answers.md").read_text()
PACIFIC = timezone(timedelta(hours=-8))
DUE = datetime(2026, 12, 1, 17, 0, tzinfo=PACIFIC)
POINTS = {"ok": "passed", "no": "failed", "gpu": "not_graded"}
QUESTIONS = handout_questions(RA)
PROSE = sum(q.rubric_points for q in QUESTIONS)  # the written answers' points graded by hand
NUMERIC = sum(p.points for q in QUESTIONS for p in q.parts)
ROSTER = ("id,name,email,section,login\ns1,Alice Ames,alice@uni.edu,A,alice\ns2,Bob Burr,bob@uni.edu,B,bob\n"
          "s3,Carol Cho,carol@uni.edu,A,carol\ns4,Dave Dunn,dave@uni.edu,B,dave\n"
          "s5,Grace Hopper,ghopper@uni.edu,A,ghopper\ns6,Erin Eck,erin@uni.edu,B,erin\n")
COURSE = f"""
[roster]
file = "roster.csv"

[assignments.{RA}]
due = 2026-12-01T17:00:00-08:00
rule = "capped"
per_day = 0.1
cap = 0.3

[assignments.{FA}]
due = 2026-12-08T17:00:00-08:00
per_day = 0.1
"""


def term_grade(path: Path) -> GradeReport:
    """The toy tests of tests.txt, then resource_accounting's written answers from answers.md (none: blank)."""
    tests = []
    for line in (path / "tests.txt").read_text().splitlines():
        assignment, name, status = line.split()
        tests.append(TestResult(f"tests/{assignment}/test_toy.py::test_{name}", assignment,
                                2.0 if status == "gpu" else 1.0, POINTS[status], task=f"toy.{name}"))
    return GradeReport(path.name, tests + written_results(RA, path / RA), log=["toy grader"])


def submit(cohort: Path, name: str, tests: str, answers: str | None = MODEL) -> None:
    folder = cohort / name
    (folder / RA).mkdir(parents=True, exist_ok=True)
    (folder / "tests.txt").write_text(tests)
    if answers is None:
        (folder / RA / "answers.md").unlink(missing_ok=True)
    else:
        (folder / RA / "answers.md").write_text(answers)


ALL_OK = f"{RA} a ok\n{RA} b ok\n{RA} c gpu\n{FA} a ok\n{FA} b ok\n"
MAXIMUM = {RA: 2 + NUMERIC + PROSE, FA: 2}  # the GPU test's 2 points are not counted here


@pytest.fixture
def term(tmp_path, monkeypatch):
    """A cohort of five (erin has no submission; bob answered no written question) and the course file, in
    the working folder as the commands read it; graded once."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "grading.toml").write_text(COURSE)
    cohort = tmp_path / "cohort"
    for name in ("alice", "carol", "dave", "ghopper"):
        submit(cohort, name, ALL_OK)
    submit(cohort, "bob", f"{RA} a ok\n{RA} b no\n{RA} c gpu\n{FA} a no\n{FA} b no\n", answers=None)
    grade(tmp_path)
    return tmp_path


def grade(term: Path, late: dict | None = None, **options) -> list[dict]:
    from autograder.cohort.course import load_late

    policy = (load_late(term / "grading.toml"), late) if late is not None else None
    return run_batch(term / "cohort", term / "out", grade_fn=term_grade, console=Console(file=io.StringIO()),
                     course=term / "grading.toml", late=policy, **options)


def grades(term: Path) -> dict[str, dict[str, str]]:
    """grades.csv's rows by the roster's id."""
    return {row["id"]: row for row in csv.DictReader((term / "out" / "grades.csv").open(encoding="utf-8"))}


def canvas(term: Path, path: Path | None = None) -> tuple[list[str], dict[str, list[str]]]:
    """Canvas's file: its Points Possible row, and each student's row by the roster's id."""
    _, possible, *students = list(csv.reader((path or term / "out" / "canvas.csv").open(encoding="utf-8")))
    return possible, {row[2]: row for row in students}


def add_to_course(term: Path, text: str) -> None:
    path = term / "grading.toml"
    path.write_text(path.read_text() + text)


def test_every_submission_of_an_assignment_is_out_of_the_same_maximum(term):
    """bob answered no written question, alice answered them all (awaiting hand grading): both are out of the
    same maximum, in every file, and Canvas's Points Possible is that maximum, not the points in all with the
    GPU test's (before: the blank bob out of 229.5, alice out of 224.5, Canvas 231.5)."""
    assert main(["export", "--format", "canvas", "out"]) == 0
    assert main(["export", "--format", "csv", "out"]) == 0
    rows, lms = grades(term), {row["id"]: row for row in csv.DictReader((term / "out" / "lms.csv").open())}
    possible, students = canvas(term)
    assert possible[5:] == [f"{MAXIMUM[FA]:g}", f"{MAXIMUM[RA]:g}"]
    for student in ("s1", "s2"):
        assert float(rows[student][f"{RA} max"]) == float(lms[student][f"{RA} max"]) == MAXIMUM[RA]
        assert float(rows[student][f"{RA} not counted: needing a GPU"]) == 2
    assert float(rows["s1"][f"{RA} max awaiting hand grading"]) == PROSE  # inside the maximum, 0 until graded
    assert float(lms["s1"][f"{RA} percent"]) == round(100 * (2 + NUMERIC) / MAXIMUM[RA], 2)
    results = {name: json.loads((term / "out" / "submissions" / name / "results.json").read_text())
               for name in ("alice", "bob")}
    # Gradescope: the tests' points add up to the same figure for both; the prose is its manual question
    assert {sum(t["max_score"] for t in r["tests"]) for r in results.values()} == {MAXIMUM[RA] - PROSE + MAXIMUM[FA]}
    for name, data in results.items():
        assert data["output"].splitlines()[0].startswith(f"Score: {data['score']:g} / {sum(MAXIMUM.values()):g} points")
        feedback = (term / "out" / "submissions" / name / "feedback.md").read_text()
        assert f" / {sum(MAXIMUM.values()):g}** points" in feedback
    index = (term / "out" / "report" / "index.html").read_text()
    assert f'data-field="max_score">{MAXIMUM[RA]:g}<' in index


def final_cell(index: str, table: str, name: str) -> str:
    """The final score / max cell of `name`'s row in a table of the cohort report."""
    body = index.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    row = re.search(rf'<tr data-submission="{re.escape(name)}">(.*?)</tr>', body, re.S)
    return re.search(r'data-field="total">([^<]*)<', row.group(1)).group(1)


def test_the_report_shows_the_course_files_overrides_and_excusals(term):
    """bob's flash_attention set to 1 and ghopper's resource_accounting excused: the report's Submissions and
    Needs-help tables say what grades.csv and canvas.csv say (before: bob at his raw score, ghopper counted)."""
    add_to_course(term, f'\n[[overrides]]\nstudent = "s2"\nassignment = "{FA}"\nscore = 1\nreason = "regraded"\n'
                        f'\n[[overrides]]\nstudent = "s5"\nassignment = "{RA}"\nexcused = true\nreason = "ill"\n')
    assert main(["export", "--format", "canvas", "out"]) == 0
    rows, (_, students) = grades(term), canvas(term)
    bob_ra = float(rows["s2"][RA])
    assert (rows["s2"][f"{FA} final"], students["s2"][5]) == ("1.0", "1")
    assert (rows["s5"][f"{RA} final"], students["s5"][6]) == ("excused", "EX")
    index = (term / "out" / "report" / "index.html").read_text()
    assert final_cell(index, "submission-table", "bob") == final_cell(index, "help-lowest", "bob") == \
        f"{bob_ra + 1:g} / {sum(MAXIMUM.values()):g}" == f"{rows['s2']['total final']} / {rows['s2']['total final max']}" \
        .replace(".0 ", " ").removesuffix(".0")
    assert final_cell(index, "submission-table", "ghopper") == f"{MAXIMUM[FA]:g} / {MAXIMUM[FA]:g}"  # RA left out
    assert '<td class="num" data-final="resource_accounting">excused</td>' in index


def test_every_export_is_written_again_by_every_step_that_changes_a_grade(term):
    """canvas.csv, lms.csv and a Canvas file written elsewhere with --to follow a resubmission, a hand grade and
    a regrade: each step rewrites them from the gradebook (before: canvas.csv kept carol's old score)."""
    elsewhere = term / "lms" / "for-canvas.csv"
    for argv in (["--format", "canvas", "out"], ["--format", "csv", "out"], ["--format", "canvas", "out", "--to",
                                                                             str(elsewhere)]):
        assert main(["export", *argv]) == 0

    def agree() -> None:
        rows = grades(term)
        lms = {row["id"]: row for row in csv.DictReader((term / "out" / "lms.csv").open())}
        for path in (term / "out" / "canvas.csv", elsewhere):
            _, students = canvas(term, path)
            for student, row in rows.items():
                assert students[student][5:] == [row[f"{FA} final"].removesuffix(".0"),
                                                 row[f"{RA} final"].removesuffix(".0")], (path, student)
        for student, row in rows.items():
            assert (lms[student][f"{RA} final"], lms[student]["total final"]) == (row[f"{RA} final"],
                                                                                 row["total final"])

    submit(term / "cohort", "carol", f"{RA} a no\n{RA} b no\n{RA} c gpu\n{FA} a ok\n{FA} b no\n")
    grade(term)
    assert grades(term)["s3"][RA] == str(NUMERIC)  # the resubmission's score
    agree()
    from autograder.written.manual import export

    export(term / "out")
    sheet = term / "out" / "manual" / f"{RA}-Q9.1.csv"
    table = list(csv.reader(sheet.open()))
    first = table[0].index(next(c for c in table[0] if c.startswith("c1")))
    for row in table[1:]:
        row[first:first + 2] = ["1", "1"]
    with sheet.open("w", newline="") as handle:
        csv.writer(handle).writerows(table)
    assert main(["manual", "import", "out", str(sheet)]) == 0
    assert float(grades(term)["s1"][RA]) == 2 + NUMERIC + 2  # Q9.1's 2 points, graded by hand
    agree()


def test_a_changed_extension_is_seen_by_every_command_and_recorded_once(term, capsys):
    """dave is 3 days late; the course file then gives him an extension: `report` applies it (before, only
    `export` did), the history has one row for it however many commands read the course file after."""
    grade(term, late={("dave", ANY): DUE + timedelta(days=3)})
    assert grades(term)["s4"][f"{RA} days late"] == "3"
    add_to_course(term, f'\n[[extensions]]\nstudent = "s4"\nassignment = "{RA}"\ndue = 2026-12-05T17:00:00-08:00\n'
                        'reason = "a medical note"\n')
    assert main(["report", "out"]) == 0
    rows = grades(term)
    assert (rows["s4"][f"{RA} days late"], rows["s4"][f"{RA} penalised"]) == ("0", rows["s4"][RA])
    assert "on time (due date extended)" in (term / "out" / "submissions" / "dave" / "feedback.md").read_text()
    for argv in (["report", "out"], ["export", "--format", "csv", "out"]):
        assert main(argv) == 0
    capsys.readouterr()
    assert main(["history", "s4", "--out", "out"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("extension") == 1 and "a medical note" in shown


def test_the_history_says_who_changed_what_and_when(term, capsys):
    """Hand scores (and their replacement), an override, an excusal, a regrade, submission times and a late
    penalty, each with who made it (--by, else the operating-system user), before and after."""
    from autograder.report.history import _user
    from autograder.written.manual import export

    export(term / "out")
    sheet = term / "out" / "manual" / f"{RA}-Q6.1.csv"
    table = list(csv.reader(sheet.open()))
    column = table[0].index(next(c for c in table[0] if c.startswith("c1")))
    for score in ("0", "1"):
        for row in table[1:]:
            row[column] = score
        with sheet.open("w", newline="") as handle:
            csv.writer(handle).writerows(table)
        assert main(["manual", "import", "out", str(sheet), "--by", "ta-ursula"]) == 0
    add_to_course(term, f'\n[[overrides]]\nstudent = "s1"\nassignment = "{FA}"\nscore = 1.5\nreason = "a typo"\n')
    assert main(["report", "out", "--by", "prof-ada"]) == 0
    grade(term, late={("alice", ANY): DUE + timedelta(days=2)})
    submit(term / "cohort", "alice", ALL_OK.replace(f"{FA} b ok", f"{FA} b no"))
    grade(term)
    capsys.readouterr()
    assert main(["history", "Alice Ames", "--out", "out"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()[1:]
    assert any("ta-ursula" in line and "hand score written/Q6.1" in line and "awaiting" in line for line in lines)
    assert any("ta-ursula" in line and "0 / 1" in line and "1 / 1" in line for line in lines)  # replaced, kept
    assert any("prof-ada" in line and "override" in line and "a typo" in line for line in lines)
    assert any("submission time" in line and _user() in line for line in lines)
    assert any("late penalty" in line and "20% off" in line for line in lines)
    assert any("graded: 2 / 2 -> 1 / 2 (graded again: a new version of the submission)" in line for line in lines)
    assert any("graded: - -> 2 / 2 (graded)" in line for line in lines)
    assert "bob" not in text.lower()


def test_answers_released_while_late_work_is_accepted_are_refused_and_a_later_submission_is_too_late(term):
    """The course file's last accepted date: answers released before it are refused; a submission after it
    (or, without one, after the answers' release) is recorded too late, 0 points, and said (before: graded at
    70% after the capped penalty, without a word)."""
    path = term / "grading.toml"
    text = path.read_text()
    path.write_text(text.replace("cap = 0.3\n", "cap = 0.3\nlast_accepted = 2026-12-08T17:00:00-08:00\n"
                                                "answers_release = 2026-12-05T17:00:00-08:00\n"))
    with pytest.raises(CourseError, match="before resource_accounting's last accepted date 2026-12-08"):
        check(path, [RA, FA])
    path.write_text(text.replace("cap = 0.3\n", "cap = 0.3\nanswers_release = 2026-12-05T17:00:00-08:00\n"))
    assert load_answers_release(path, [RA, FA])[RA].day == 5
    screen = io.StringIO()
    from autograder.cohort.course import load_late

    run_batch(term / "cohort", term / "out", grade_fn=term_grade, console=Console(file=screen, width=300),
              course=path, late=(load_late(path), {("bob", ANY): datetime(2026, 12, 6, 10, tzinfo=PACIFIC),
                                                   ("carol", ANY): datetime(2026, 12, 5, 10, tzinfo=PACIFIC)}))
    rows = grades(term)
    assert rows["s2"][f"{RA} penalised"] == "0.0" and float(rows["s2"][RA]) > 0
    assert float(rows["s3"][f"{RA} penalised"]) == round(float(rows["s3"][RA]) * 0.7, 2)  # in time: capped
    assert "bob: resource_accounting too late" in screen.getvalue()
    assert "too late: submitted 2026-12-06T10:00-08:00, after the answers' release" in \
        (term / "out" / "submissions" / "bob" / "feedback.md").read_text()


def test_needs_help_lists_everyone_the_term_is_going_wrong_for(term):
    """erin (no submission), a submission that cannot be graded and a penalised one, beside the lowest scores
    (before: the list ranked graded raw scores alone)."""
    (term / "cohort" / "zoe").mkdir()  # tests.txt missing: the toy grader fails on it, a grader error
    grade(term, late={("dave", ANY): DUE + timedelta(days=3)})
    index = (term / "out" / "report" / "index.html").read_text()
    body = index.split('id="help-lowest"', 1)[1].split("</table>", 1)[0]
    listed = re.findall(r'<tr data-submission="([^"]+)">', body)
    assert listed[:2] == ["s6", "zoe"]  # no submission, then the grader error, before any score
    assert "dave" in listed and "bob" in listed  # dave penalised 30%: below the others' full marks
    assert listed.index("bob") < listed.index("dave")
    assert 'id="count-graded">5<' in index and 'id="count-missing">1<' in index


def test_grades_csv_names_the_roster_and_the_report_page_shows_no_section_marks(term):
    grade(term, late={("carol", ANY): DUE + timedelta(days=1)})
    rows = grades(term)
    assert [(r["id"], r["student"], r["section"], r["email"], r["submission"]) for r in rows.values()][:2] == \
        [("s1", "Alice Ames", "A", "alice@uni.edu", "alice"), ("s2", "Bob Burr", "B", "bob@uni.edu", "bob")]
    assert (rows["s6"]["submission"], rows["s6"]["status"]) == ("", "missing")
    page = next((term / "out" / "report" / "submissions").glob("*-carol.html")).read_text()
    assert "&lt;!-- late policy --&gt;" not in page and "Late policy:" in page
    charts = (term / "out" / "report" / "charts")
    assert f"points (of {MAXIMUM[RA]:g})" in next(charts.glob(f"*{RA}*.svg")).read_text()


def test_the_terminal_table_keeps_the_status_whole_in_a_pipe(term):
    from autograder.report.gradebook import Gradebook, finals
    from autograder.report.terminal import gradebook_table

    console = Console(file=io.StringIO(), width=80)
    with Gradebook(term / "out" / "gradebook.sqlite") as book:
        console.print(gradebook_table(book.rows(), finals(book)))
    text = console.file.getvalue()
    assert re.search(r"│ graded\s*│", text) and re.search(r"│ missing\s*│", text)
    assert {len(line) for line in text.splitlines() if line.startswith("│")} == {80}  # no column cut off


def test_the_history_read_through_a_pipe_that_closes_ends_quietly(term):
    """`history ... | head -1`: the reader closes the pipe (here before the first line, so that the history
    certainly writes into a closed pipe); no traceback, the status of SIGPIPE."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    reader = subprocess.Popen([sys.executable, "-m", "autograder", "history", "alice", "--out", "out"], cwd=term,
                              env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, bufsize=0)
    reader.stdout.close()
    errors = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 141 and "Traceback" not in errors, errors
