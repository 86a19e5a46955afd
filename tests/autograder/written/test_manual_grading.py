"""Written answers graded by hand: `manual export` writes grading sheets out of a real SQLite gradebook,
`manual import` validates a filled sheet and stores its scores once; totals, grades.csv, feedback.md
and the terminal table include them. Rows are keyed by an opaque id (names a spreadsheet alters cannot move a
score; `--anonymous` sheets show no name), comments round-trip as written.

The batch runs with a grade function that grades only the written answers (autograder.written.answers on the
submission folder's answers.md, as the trusted runner does) plus one toy test, so no sandbox is needed.
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from pathlib import Path

import pytest
from markupsafe import escape
from rich.console import Console

from autograder.cohort.batch import run_batch
from autograder.cohort.publish import publish
from autograder.cli import main
from autograder.report.gradebook import Gradebook, manual_scores
from autograder.report.terminal import gradebook_table
from autograder.report.text import FORMULA_START, safe_cell
from autograder.model.results import GradeReport, TestResult
from autograder.written.answers import handout_questions, written_results
from autograder.written.manual import ManualError, export, import_sheet, row_ids

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


def write_sheet(path: Path, table: list[list[str]]) -> Path:
    text = io.StringIO()
    csv.writer(text).writerows(table)
    path.write_text(text.getvalue(), encoding="utf-8")
    return path


def column_at(table: list[list[str]], name: str) -> int:
    """The index of a sheet's column: `c1` is the one whose header starts `c1 (max`."""
    return next(i for i, header in enumerate(table[0]) if header == name or header.startswith(f"{name} (max "))


def criteria_headers(question: str) -> list[str]:
    """The criteria's columns as the export names them: number, maximum and the rubric's words."""
    found = next(q for q in handout_questions(ASSIGNMENT) if q.id == question)
    words = [" ".join(c.text.split()) for c in found.criteria]
    return [f"c{i} (max {c.points:g}): {w if len(w) <= 60 else w[:57] + '...'}"
            for i, (c, w) in enumerate(zip(found.criteria, words), start=1)]


def fill(path: Path, scores: dict[str, list[str]], comment: str = "", key: str = "submission") -> Path:
    """Give each row whose `key` column is in `scores` those criteria (c1, c2, ...) and `comment`."""
    table = read_sheet(path)
    first = column_at(table, "c1")
    for row in table[1:]:
        if row[table[0].index(key)] in scores:
            values = scores[row[table[0].index(key)]]
            row[first: first + len(values)] = values
            row[-1] = comment
    return write_sheet(path, table)


def test_the_batch_totals_count_the_numeric_parts_and_leave_the_prose_to_grade(out):
    numeric = sum(p.points for q in handout_questions(ASSIGNMENT) for p in q.parts)
    assert rows(out) == {"alice": (1 + numeric, 11), "bob": (1 + 3, 11), "carol": (1 + numeric - 1, 11)}
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert f"Score: **{1 + numeric:g} / 11** points; 5 of them awaiting hand grading." in feedback
    assert "To be graded by hand: 3 answers" in feedback


def test_export_writes_a_sheet_per_question_with_answers_escaped_beside_the_rubric(out):
    paths = export(out)
    names = sorted(p.name for p in paths)
    assert names == sorted(f"{ASSIGNMENT}-{q}.{ext}" for q in ("Q6.1", "Q9.1", "Q10.1") for ext in ("csv", "html"))
    html = (out / "manual" / f"{ASSIGNMENT}-Q6.1.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;" in html
    assert "the direction with its reason" in html  # the rubric beside the answers
    q91 = read_sheet(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv")
    assert q91[0] == ["id", "submission", "assignment", "question", "answer_id", "answer",
                      *criteria_headers("Q9.1"), "comment"]
    assert q91[0][6].startswith("c1 (max 1): ") and len(q91[0][6]) > len("c1 (max 1): ") + 10  # the rubric's words
    assert [row[1] for row in q91[1:]] == ["alice", "carol"]  # bob wrote no answer: nothing to grade
    assert q91[1][5].startswith("'" + FORMULA)  # shown as text by a spreadsheet, never run


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
    grades = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert float(grades["alice"]["total"]) == before + 0.5
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "Graded by hand: 1 answer" in feedback and "written/Q9.1" in feedback and "see k = √L" in feedback
    with Gradebook(out / "gradebook.sqlite") as book:
        table = Console(file=io.StringIO(), width=200)
        table.print(gradebook_table(book.rows()))
        assert re.search(rf"{before + 0.5:g} / 11 +│[^\n]*\n[^\n]*\(3 by hand\)", table.file.getvalue())  # 3 still by hand
        report = book.report("alice")
    assert next(t for t in report.tests if t.name == "written/Q9.1").status == "hand_graded"
    exported = read_sheet(export(out)[-1].with_name(f"{ASSIGNMENT}-Q9.1.csv"))
    assert exported[1][6:] == ["0", "0.5", "'=1+1 see k = √L"]  # kept, shown as text


@pytest.mark.parametrize("edit, words", [
    (lambda row: row.__setitem__(0, "s-000000000000"), "no submission has this id in this gradebook"),
    (lambda row: row.__setitem__(0, ""), "no submission has this id in this gradebook"),
    (lambda row: row.__setitem__(3, "Q7.1"), "has no written question 'Q7.1'"),
    (lambda row: row.__setitem__(6, "2"), "outside 0 to 1"),
    (lambda row: row.__setitem__(6, "-1"), "outside 0 to 1"),
    (lambda row: row.__setitem__(6, "one"), "not a number"),
    (lambda row: row.__setitem__(6, "nan"), "outside 0 to 1"),
    (lambda row: row.__setitem__(4, "0" * 16), "the answer changed since this sheet was exported"),
])
def test_a_wrong_sheet_is_refused_whole_and_changes_nothing(out, edit, words):
    export(out)
    sheet = fill(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv", {"alice": ["1", "1"], "carol": ["1", "1"]})
    table = read_sheet(sheet)
    edit(table[2])  # carol's row; alice's row is right, and must not be imported either
    write_sheet(sheet, table)
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        before = db.execute("SELECT name, score, report FROM submissions ORDER BY name").fetchall()
    with pytest.raises(ManualError) as caught:
        import_sheet(out, sheet)
    assert words in str(caught.value) and "row 3" in str(caught.value) and "nothing imported" in str(caught.value)
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        assert db.execute("SELECT name, score, report FROM submissions ORDER BY name").fetchall() == before


def test_a_row_filled_for_one_criterion_is_left_for_later_and_the_others_are_imported(out, capsys):
    """carol's row has c1 and not c2: it is still being graded, so nothing of it is stored and the command says
    so; alice's full row is imported (before: the whole sheet was refused)."""
    export(out)
    sheet = fill(out / "manual" / f"{ASSIGNMENT}-Q9.1.csv", {"alice": ["1", "1"], "carol": ["1", ""]})
    assert main(["manual", "import", str(out), str(sheet)]) == 0
    said = capsys.readouterr().out
    assert "c2 left blank: the row is still being graded" in " ".join(said.split())
    with Gradebook(out / "gradebook.sqlite") as book:
        assert manual_scores(book, "alice")["written/Q9.1"]["criteria"] == [1.0, 1.0]
        assert "written/Q9.1" not in manual_scores(book, "carol")


def test_identical_answers_are_next_to_each_other_and_said_to_be(tmp_path):
    cohort = tmp_path / "cohort"
    for name in ("amy", "bea", "cal"):
        submission(cohort / name, MODEL if name != "bea" else MODEL.replace("For an R × D activation", "Other. For"))
    run_batch(cohort, tmp_path / "out", grade_fn=grade_written, console=Console(file=io.StringIO()))
    export(tmp_path / "out")
    names = [row[1] for row in read_sheet(tmp_path / "out" / "manual" / f"{ASSIGNMENT}-Q6.1.csv")[1:]]
    assert names == ["amy", "cal", "bea"]  # amy's and cal's answers are the same: together
    html = (tmp_path / "out" / "manual" / f"{ASSIGNMENT}-Q6.1.html").read_text()
    assert html.count("the same answer as 1 other") == 2


def test_a_row_for_an_answer_not_written_is_refused(out):
    export(out)
    with Gradebook(out / "gradebook.sqlite") as book:
        bob = row_ids(book)["bob"]
    sheet = out / "manual" / "bob.csv"
    sheet.write_text("id,assignment,question,answer_id,answer,c1,c2,comment\n"
                     f"{bob},{ASSIGNMENT},Q9.1,{'0' * 16},,1,1,\n")
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


# ---- rows keyed by an opaque id; anonymous sheets -----------------------------------------------------------

# Names a spreadsheet alters: `'quoted` is read back as quoted, a formula is run, `a,b` splits a naive line,
# a leading space is trimmed. Each is a submission of its own.
NAMES = ("'quoted", "quoted", "=SUM(A1)", "a,b", " spaced")
SHOWN = ("quoted", "SUM(A1)", "a,b", "spaced")  # what of each name would show through any escaping
ID = r"s-[0-9a-f]{12}"
Q91 = f"{ASSIGNMENT}-Q9.1"


def record_cohort(out: Path, cohort: Path) -> Path:
    """A gradebook of NAMES recorded directly (no batch): the n-th one's Q9.1 answer opens with `Marker n.`, so a
    grader tells the answers apart by their text alone."""
    with Gradebook(out / "gradebook.sqlite") as book:
        for number, name in enumerate(NAMES):
            submission(cohort / name, MODEL.replace("With L layers in k segments",
                                                    f"Marker {number}. With L layers in k segments", 1))
            book.record(name, f"digest {number}", grade_written(cohort / name))
    return out


@pytest.fixture
def tricky(tmp_path):
    return record_cohort(tmp_path / "out", tmp_path / "cohort")


def grade_by_marker(sheet: Path, scores: list[list[str]], comment: str = "") -> Path:
    """Fill the sheet as a grader would, from the answers: `scores[n]` for the answer that says `Marker n.`."""
    table = read_sheet(sheet)
    answer, first = table[0].index("answer"), column_at(table, "c1")
    for row in table[1:]:
        number = int(row[answer].split("Marker ", 1)[1].split(".", 1)[0])
        row[first: first + 2], row[-1] = scores[number], comment
    return write_sheet(sheet, table)


EXPECTED = [["0", "0"], ["0.5", "0"], ["1", "0"], ["1", "0.5"], ["1", "1"]]  # a different total per submission


def stored_criteria(out: Path) -> dict[str, list[float]]:
    with Gradebook(out / "gradebook.sqlite") as book:
        return {name: manual_scores(book, name).get("written/Q9.1", {}).get("criteria") for name in NAMES}


def test_anonymous_sheets_show_stable_ids_and_no_name_anywhere(tricky, tmp_path):
    assert not any(shown in MODEL for shown in SHOWN)  # a hit below could only come from a name
    assert main(["manual", "export", "--anonymous", str(tricky)]) == 0
    files = sorted((tricky / "manual").iterdir())
    assert {p.suffix for p in files} == {".csv", ".html"}
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not [shown for shown in SHOWN if shown in text], path.name
    table = read_sheet(tricky / "manual" / f"{Q91}.csv")
    assert table[0] == ["id", "assignment", "question", "answer_id", "answer", *criteria_headers("Q9.1"), "comment"]
    ids = [row[0] for row in table[1:]]
    assert len(set(ids)) == len(NAMES) and all(re.fullmatch(ID, i) for i in ids) and ids == sorted(ids)
    html = (tricky / "manual" / f"{Q91}.html").read_text(encoding="utf-8")
    assert all(f"<td>{i}</td>" in html for i in ids) and "<th>submission</th>" not in html
    export(tricky)  # the next export of the same gradebook: the same ids, still anonymous
    assert [row[0] for row in read_sheet(tricky / "manual" / f"{Q91}.csv")[1:]] == ids
    assert main(["manual", "export", str(tricky)]) == 0  # named again, on request; the ids stay
    named = read_sheet(tricky / "manual" / f"{Q91}.csv")
    assert sorted(row[0] for row in named[1:]) == ids and [row[1] for row in named[1:]][:2] == [" spaced", "'quoted"]
    other = record_cohort(tmp_path / "other", tmp_path / "cohort2")  # the same names, another gradebook
    with Gradebook(other / "gradebook.sqlite") as book:
        assert not set(row_ids(book).values()) & set(ids)  # an id cannot be made from the name alone


def test_an_anonymous_sheet_imports_each_score_to_its_submission_and_stays_anonymous(tricky):
    assert main(["manual", "export", "--anonymous", str(tricky)]) == 0
    sheet = grade_by_marker(tricky / "manual" / f"{Q91}.csv", EXPECTED)
    assert main(["manual", "import", str(tricky), str(sheet)]) == 0
    assert stored_criteria(tricky) == {name: [float(v) for v in EXPECTED[n]] for n, name in enumerate(NAMES)}
    for path in (tricky / "manual").iterdir():  # the sheets the import wrote again are anonymous too
        assert not [shown for shown in SHOWN if shown in path.read_text(encoding="utf-8")], path.name


def test_names_a_spreadsheet_alters_cannot_move_a_score_to_another_row(tricky):
    export(tricky)
    sheet = tricky / "manual" / f"{Q91}.csv"
    table = read_sheet(sheet)
    assert sorted(row[1] for row in table[1:]) == sorted([" spaced", "'quoted", "'=SUM(A1)", "a,b", "quoted"])
    # a spreadsheet that reads `'x` as x and trims every cell, saved back
    write_sheet(sheet, [[cell.removeprefix("'").strip() for cell in row] for row in table])
    import_sheet(tricky, grade_by_marker(sheet, EXPECTED))
    assert stored_criteria(tricky) == {name: [float(v) for v in EXPECTED[n]] for n, name in enumerate(NAMES)}


@pytest.mark.parametrize("comment", ["=half credit", "+1 for the units", "-0.5: no reason", "@TA see me",
                                     "'twas well argued", "a, \"quoted\" word"])
def test_a_comment_round_trips_as_written_and_reaches_the_student_without_the_sheets_quote(tricky, comment):
    assert main(["manual", "export", str(tricky)]) == 0
    sheet = fill(tricky / "manual" / f"{Q91}.csv", {"'quoted": ["1", "0"]}, comment=comment, key="submission")
    table = read_sheet(sheet)
    row = next(r for r in table if r[1] == "'quoted")
    assert row[-1] == comment  # as a grader typed it, unescaped
    for _ in range(2):  # import, then import the sheet the import wrote again, unchanged
        assert main(["manual", "import", str(tricky), str(sheet)]) == 0
        with Gradebook(tricky / "gradebook.sqlite") as book:
            assert manual_scores(book, "'quoted")["written/Q9.1"]["comment"] == comment
        shown = next(r for r in read_sheet(sheet) if r[1] == "'quoted")[-1]
        assert shown == safe_cell(comment)  # the sheet shows it as text: `'=half credit`
    escaped = "'" + comment
    feedback = [p for p in tricky.rglob("feedback.md") if comment in p.read_text(encoding="utf-8")]
    assert len(feedback) == 1  # '`quoted`'s own, and no other's
    html = (tricky / "manual" / f"{Q91}.html").read_text(encoding="utf-8")
    assert str(escape(comment)) in html
    if comment.startswith(FORMULA_START):
        forms = {escaped, str(escape(escaped)), escaped.replace("'", "&#x27;")}  # as text, as HTML
        leaks = [p for p in tricky.rglob("*") if p.is_file() and p.suffix != ".csv" and "gradebook" not in p.name
                 and any(form in p.read_bytes().decode("utf-8", "replace") for form in forms)]
        assert leaks == []  # the sheet's `'` reaches no feedback, report or page


@pytest.mark.parametrize("column, named", [("answer", "'answer'"), ("id", "'id'"), ("comment", "'comment'"),
                                           ("c1", "c1"), ("c2", "c2")])
def test_a_sheet_with_a_column_deleted_is_refused_naming_it(tricky, column, named):
    export(tricky)
    sheet = grade_by_marker(tricky / "manual" / f"{Q91}.csv", EXPECTED)
    table = read_sheet(sheet)
    at = column_at(table, column)
    write_sheet(sheet, [row[:at] + row[at + 1:] for row in table])
    with pytest.raises(ManualError) as caught:
        import_sheet(tricky, sheet)
    message = str(caught.value)
    assert f"no column {named}" in message and "export the sheet again" in message
    assert all(value is None for value in stored_criteria(tricky).values())


def test_a_row_of_an_unknown_id_is_an_error_even_with_no_score(tricky):
    export(tricky, anonymous=True)
    sheet = grade_by_marker(tricky / "manual" / f"{Q91}.csv", EXPECTED)
    table = read_sheet(sheet)
    table.append(["s-0123456789ab", ASSIGNMENT, "Q9.1", "", "", "", "", "a note"])
    write_sheet(sheet, table)
    with pytest.raises(ManualError, match=f"row {len(table)} .*no submission has this id"):
        import_sheet(tricky, sheet)
    assert all(value is None for value in stored_criteria(tricky).values())
