"""Written answers graded by hand: `manual export` writes grading sheets out of a real SQLite gradebook,
`manual import` validates a filled sheet and stores its scores once; totals, grades.csv, feedback.md
and the terminal table include them.

The batch runs with a grade function that grades only the written answers (autograder.written.answers on the
submission folder's answers.md, as the trusted runner does) plus one toy test, so no sandbox is needed.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from autograder.cohort.batch import run_batch
from autograder.cohort.publish import publish
from autograder.cli import main
from autograder.report.gradebook import Gradebook
from autograder.report.terminal import gradebook_table
from autograder.grading.results import GradeReport, TestResult
from autograder.written.answers import handout_questions, written_results
from autograder.written.manual import ManualError, export, import_sheet

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"
MODEL = (ROOT / "solutions" / ASSIGNMENT / "answers.md").read_text()
SCRIPT = "<script>alert('x')</script> & <b>bold</b>"
FORMULA = '=HYPERLINK("http://example.invalid","click")'


def grade_written(path: Path) -> GradeReport:
    toy = TestResult(f"tests/{ASSIGNMENT}/test_toy.py::test_ok", ASSIGNMENT, 1.0, "passed")
    return GradeReport(submission=path.name, tests=[toy, *written_results(ASSIGNMENT, path / ASSIGNMENT)])


def submission(folder: Path, answers: str) -> None:
    (folder / ASSIGNMENT).mkdir(parents=True)
    (folder / ASSIGNMENT / "answers.md").write_text(answers)


@pytest.fixture
def out(tmp_path):
    cohort = tmp_path / "cohort"
    submission(cohort / "alice", MODEL.replace("For an R × D activation", f"{SCRIPT}\nFor an R × D activation", 1)
               .replace("With L layers in k segments", f"{FORMULA}\nWith L layers in k segments", 1))
    submission(cohort / "bob", MODEL.split("## Q9.1")[0])  # Q9.1 and Q10.1 left out
    submission(cohort / "carol", MODEL.replace("Q6.1.e = 319", "Q6.1.e = 318"))
    run_batch(cohort, tmp_path / "out", workers=1, grade_fn=grade_written, console=Console(file=io.StringIO()))
    return tmp_path / "out"


def rows(out: Path) -> dict[str, tuple[float, float]]:
    with Gradebook(out / "gradebook.sqlite") as book:
        return {row["name"]: (row["score"], row["max_score"]) for row in book.rows()}


def read_sheet(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def fill(path: Path, scores: dict[str, list[str]], comment: str = "") -> Path:
    table = read_sheet(path)
    for row in table[1:]:
        if row[0] in scores:
            values = scores[row[0]]
            row[5: 5 + len(values)] = values
            row[-1] = comment
    text = io.StringIO()
    csv.writer(text).writerows(table)
    path.write_text(text.getvalue(), encoding="utf-8")
    return path


def test_the_batch_totals_count_the_numeric_parts_and_leave_the_prose_to_grade(out):
    numeric = sum(p.points for q in handout_questions(ASSIGNMENT) for p in q.parts)
    assert rows(out) == {"alice": (1 + numeric, 11), "bob": (1 + 3, 11), "carol": (1 + numeric - 1, 11)}
    feedback = (out / "alice" / "feedback.md").read_text()
    assert "; 5 awaiting hand grading; 11 in all" in feedback and "To be graded by hand: 3 answers" in feedback


def test_export_writes_a_sheet_per_question_with_answers_escaped_beside_the_rubric(out):
    paths = export(out)
    names = sorted(p.name for p in paths)
    assert names == sorted(f"{ASSIGNMENT}-{q}.{ext}" for q in ("Q6.1", "Q9.1", "Q10.1") for ext in ("csv", "html"))
    html = (out / "manual" / f"{ASSIGNMENT}-Q6.1.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;" in html
    assert "the direction with its reason" in html  # the rubric beside the answers
    q91 = read_sheet(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv")
    assert q91[0] == ["submission", "assignment", "question", "answer_id", "answer", "c1 (max 1)", "c2 (max 1)",
                      "comment"]
    assert [row[0] for row in q91[1:]] == ["alice", "carol"]  # bob wrote no answer: nothing to grade
    assert q91[1][4].startswith("'" + FORMULA)  # shown as text by a spreadsheet, never run


def test_import_adds_the_scores_once_and_every_view_shows_them(out, capsys):
    export(out)
    sheet = fill(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv", {"alice": ["1", "0.5"]}, comment="=1+1 see k = √L")
    before = rows(out)["alice"][0]
    assert main(["manual", "import", str(out), str(sheet)]) == 0
    assert rows(out)["alice"][0] == before + 1.5
    assert main(["manual", "import", str(out), str(sheet)]) == 0  # again: replaced, not added
    assert rows(out)["alice"][0] == before + 1.5
    fill(sheet, {"alice": ["0", "0.5"]}, comment="=1+1 see k = √L")
    import_sheet(out, sheet)
    publish(out)  # what `manual import` does next: every file from the gradebook
    assert rows(out)["alice"][0] == before + 0.5
    grades = {row["name"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert float(grades["alice"]["total"]) == before + 0.5
    feedback = (out / "alice" / "feedback.md").read_text()
    assert "Graded by hand: 1 answer" in feedback and "written/Q9.1" in feedback and "see k = √L" in feedback
    with Gradebook(out / "gradebook.sqlite") as book:
        table = Console(file=io.StringIO(), width=200)
        table.print(gradebook_table(book.rows()))
        assert f"{before + 0.5:g}/8 +3 by hand" in table.file.getvalue()  # out of those graded; 3 still by hand
        report = book.report("alice")
    assert next(t for t in report.tests if t.name == "written/Q9.1").status == "hand_graded"
    exported = read_sheet(export(out)[-1].with_name(f"{ASSIGNMENT}-Q9.1.csv"))
    assert exported[1][5:] == ["0", "0.5", "=1+1 see k = √L".join(["'", ""])]  # kept, shown as text


@pytest.mark.parametrize("edit, words", [
    (lambda row: row.__setitem__(0, "mallory"), "no graded submission of that name"),
    (lambda row: row.__setitem__(2, "Q7.1"), "has no written question 'Q7.1'"),
    (lambda row: row.__setitem__(5, "2"), "outside 0 to 1"),
    (lambda row: row.__setitem__(5, "-1"), "outside 0 to 1"),
    (lambda row: row.__setitem__(5, "one"), "not a number"),
    (lambda row: row.__setitem__(5, "nan"), "outside 0 to 1"),
    (lambda row: row.__setitem__(3, "0" * 16), "the answer changed since this sheet was exported"),
])
def test_a_wrong_sheet_is_refused_whole_and_changes_nothing(out, edit, words):
    export(out)
    sheet = fill(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv", {"alice": ["1", "1"], "carol": ["1", "1"]})
    table = read_sheet(sheet)
    edit(table[2])  # carol's row; alice's row is right, and must not be imported either
    text = io.StringIO()
    csv.writer(text).writerows(table)
    sheet.write_text(text.getvalue())
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        before = db.execute("SELECT name, score, report FROM submissions ORDER BY name").fetchall()
    with pytest.raises(ManualError) as caught:
        import_sheet(out, sheet)
    assert words in str(caught.value) and "row 3" in str(caught.value) and "nothing imported" in str(caught.value)
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        assert db.execute("SELECT name, score, report FROM submissions ORDER BY name").fetchall() == before


def test_a_row_for_an_answer_not_written_is_refused(out):
    export(out)
    sheet = out / "manual" / "bob.csv"
    sheet.write_text("submission,assignment,question,answer_id,answer,c1,c2,comment\n"
                     f"bob,{ASSIGNMENT},Q9.1,{'0' * 16},,1,1,\n")
    with pytest.raises(ManualError, match="no answer to grade by hand for Q9.1"):
        import_sheet(out, sheet)


def test_a_regrade_keeps_hand_scores_of_the_same_answer_only(out):
    export(out)
    import_sheet(out, fill(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv", {"alice": ["1", "1"], "carol": ["1", "0"]}))
    scored = rows(out)
    with Gradebook(out / "gradebook.sqlite") as book:
        cohort = out.parent / "cohort"
        book.record("alice", "new digest", grade_written(cohort / "alice"))  # the same answers, graded again
        answers = cohort / "carol" / ASSIGNMENT / "answers.md"
        answers.write_text(answers.read_text().replace("With L layers", "Another answer. With L layers"))
        book.record("carol", "new digest", grade_written(cohort / "carol"))
    assert rows(out)["alice"] == scored["alice"]
    assert rows(out)["carol"][0] == scored["carol"][0] - 1  # a changed answer waits for a new hand score


def test_the_cli_exports_and_names_a_folder_without_a_gradebook(out, tmp_path, capsys):
    assert main(["manual", "export", str(out)]) == 0
    assert "3 grading sheets in" in capsys.readouterr().out
    assert main(["manual", "export", str(tmp_path / "nowhere")]) == 2
    assert "gradebook.sqlite does not exist" in capsys.readouterr().out.replace("\n", "")
