"""The LMS export (autograder.report.lms, `python -m autograder export`): Canvas's gradebook CSV read as
Canvas's importer reads it (its student columns, "Points Possible", "<name> (<id>)", "EX" for excused, 0 for
a missing submission, empty where nothing could be graded), and the plain CSV with each assignment's
maximum, raw, penalised and final score and percentage. Gradebooks are built from toy reports."""

import csv
import re
from datetime import datetime

import pytest

from autograder.cli import main
from autograder.cohort.course import load_late
from autograder.cohort.late import ANY
from autograder.cohort.roster import settle
from autograder.model.results import GradeReport
from autograder.report.gradebook import Gradebook, audit
from autograder.report.lms import LmsError, write_canvas, write_plain
from tests.autograder.cohort.test_roster import PACIFIC, POLICY, book_of, course, report

ROSTER_CSV = ("id,name,email,section,login\n"
              "s1,Ada Lovelace,ada@uni.edu,A,alovelace\n"
              "s2,\"=HYPERLINK(\"\"http://x\"\",\"\"hi\"\")\",eve@uni.edu,B,\n"
              "s3,Cy Dahl,cy@uni.edu,A,\n"
              "s4,Di Eng,di@uni.edu,B,\n")
ADJUSTED = POLICY + """
[[overrides]]
student = "s3"
assignment = "alpha"
excused = true
reason = "dean's letter"

[[overrides]]
student = "s1"
assignment = "beta"
score = 1.5
reason = "regraded by hand"

[export]
canvas_ids = { alpha = 4711 }
"""


def cohort_book(tmp_path):
    """s1 graded (one day late on alpha), s2 graded, s3 with no submission, s4 not gradable, and a stranger."""
    path = course(tmp_path, ADJUSTED, ROSTER_CSV)
    book = book_of(tmp_path, alovelace=report("alovelace", 3, 1), s2=report("s2", 1, 2), stranger=report("x", 3, 2),
                   s4=GradeReport("s4", not_gradable="the zip is corrupt"))
    settle(book, path, "test", late=(load_late(path), {("alovelace", ANY): datetime(2027, 1, 21, 10, tzinfo=PACIFIC)}))
    return book


def rows_of(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_the_canvas_file_is_what_canvas_imports(tmp_path):
    with cohort_book(tmp_path) as book:
        notes = write_canvas(book, tmp_path / "canvas.csv", {"alpha": 4711})
    header, possible, *students = rows_of(tmp_path / "canvas.csv")
    # Canvas's importer: Student, ID, then SIS User ID and SIS Login ID, then Section; assignments "<title> (<id>)"
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "alpha (4711)", "beta"]
    assert re.fullmatch(r"(.*) \((\d+)\)", header[5]).groups() == ("alpha", "4711")
    assert possible == ["Points Possible", "", "", "", "", "6", "2"]
    by_id = {row[2]: row for row in students}
    assert [row[2] for row in students] == ["s1", "s2", "s3", "s4"]  # the roster's order; the stranger left out
    assert by_id["s1"] == ["Ada Lovelace", "", "s1", "alovelace", "A", "3", "1.5"]  # 50% off alpha; beta set
    assert by_id["s3"][5:] == ["EX", "0"]  # no submission: excused where excused, else 0
    assert by_id["s4"][5:] == ["", ""]  # not gradable: no score, never a 0
    assert by_id["s2"][0] == "'=HYPERLINK(\"http://x\",\"hi\")" and by_id["s2"][3] == "eve@uni.edu"
    assert any("stranger" in note and "not on the roster" in note for note in notes)
    assert any("s4 (not_gradable)" in note for note in notes)


def test_the_canvas_file_needs_the_roster(tmp_path):
    with book_of(tmp_path, s1=report("s1", 3)) as book, pytest.raises(LmsError, match="needs the roster"):
        write_canvas(book, tmp_path / "canvas.csv", {})


def test_the_plain_file_has_maximum_raw_penalised_final_and_percentage(tmp_path):
    with cohort_book(tmp_path) as book:
        notes = write_plain(book, tmp_path / "lms.csv")
    rows = {row["id"] or row["submission"]: row for row in csv.DictReader(open(tmp_path / "lms.csv", encoding="utf-8"))}
    ada = rows["s1"]
    assert {k: ada[f"alpha {k}"] for k in ("max", "awaiting hand grading", "raw", "penalised", "final", "percent")} \
        == {"max": "6.0", "awaiting hand grading": "0.0", "raw": "6.0", "penalised": "3.0", "final": "3.0",
            "percent": "50.0"}
    assert (ada["beta raw"], ada["beta final"], ada["total final"], ada["total percent"]) == ("1.0", "1.5", "4.5", "56.25")
    cy = rows["s3"]
    assert (cy["status"], cy["alpha final"], cy["alpha percent"], cy["total max"], cy["total final"]) == \
        ("missing", "excused", "", "2.0", "0.0")  # the excused assignment is left out of the total
    assert rows["s2"]["name"].startswith("'=")
    assert (rows["s4"]["status"], rows["s4"]["total final"], rows["s4"]["note"]) == ("not_gradable", "", "the zip is corrupt")
    assert (rows["stranger"]["note"], rows["stranger"]["total final"]) == ("not on the roster", "8.0")
    assert notes == ["not on the roster: stranger"]


def test_the_export_command_applies_the_course_file_then_writes_every_file_again(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = ("resource_accounting", "flash_attention")  # the command knows the course's own assignments
    path = course(tmp_path, ADJUSTED.replace("alpha", real[0]).replace("beta", real[1]), ROSTER_CSV)
    with book_of(tmp_path, alovelace=report("alovelace", 3, 1, real), s2=report("s2", 1, 2, real)) as book:
        settle(book, path, "test")
    path.write_text(path.read_text().replace("score = 1.5", "score = 2"))
    assert main(["export", "--format", "canvas", "out", "--course", "grading.toml"]) == 0
    said = capsys.readouterr().out
    assert "override: s1, flash_attention: 1.5 -> 2 (regraded by hand)" in said and "out/canvas.csv" in said
    header, _, ada, *_ = rows_of(tmp_path / "out" / "canvas.csv")
    assert (header[5:], ada[5:]) == (["flash_attention", "resource_accounting (4711)"], ["2", "6"])
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        assert audit(book)[-1]["command"] == "python -m autograder export --format canvas out --course grading.toml"
    grades = {row["submission"]: row for row in csv.DictReader(open(tmp_path / "out" / "grades.csv"))}
    assert grades["alovelace"]["flash_attention final"] == "2.0"  # written again from the changed gradebook
    assert main(["export", "--format", "csv", "out", "--to", "plain.csv"]) == 0
    assert rows_of(tmp_path / "plain.csv")[0][:6] == ["id", "name", "email", "section", "submission", "status"]
    with pytest.raises(SystemExit):
        main(["export", "--format", "canvas", "nowhere"])
    assert "no gradebook at nowhere/gradebook.sqlite" in capsys.readouterr().err
