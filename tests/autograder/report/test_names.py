"""Names and strings the grader did not expect: what a student names a submission lands escaped wherever it
is written (CSV cells a spreadsheet reads as text, terminal lines without escape sequences)."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from autograder.cohort.batch import BatchError, run_batch, submission_entries
from autograder.report.gradebook import Gradebook
from autograder.report.text import safe_cell
from tests.autograder.report.test_gradebook import toy_grade

FORMULAS = ["=HYPERLINK(\"https://x.example\",\"grade\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]
ESCAPES = "\x1b[2J\x1b]52;c;aGk=\x07\x1b[1A40 submissions graded, 0 errors"


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_is_text_in_a_cell(text):
    cell = safe_cell(text)
    assert (cell.startswith("'") or not cell.startswith(("=", "+", "-", "@", "\t", "\r"))) and "\r" not in cell


def test_plain_names_are_kept_as_they_are():
    assert safe_cell("alice") == "alice" and safe_cell("o'brien") == "o'brien"


def test_hostile_names_are_escaped_in_grades_csv_and_on_the_terminal(tmp_path):
    cohort = tmp_path / "cohort"
    for name in (FORMULAS[0], "bob" + ESCAPES):
        (cohort / name).mkdir(parents=True)
        (cohort / name / "answers.txt").write_text("alpha q0 ok\n")
    (cohort / ("notes" + ESCAPES + ".txt")).write_text("not a submission")
    out, screen = tmp_path / "out", io.StringIO()
    run_batch(cohort, out, grade_fn=toy_grade, console=Console(file=screen, width=200))
    rows = list(csv.reader((out / "grades.csv").open(encoding="utf-8")))
    names = [row[4] for row in rows[1:]]  # the submission column
    assert all(not n.startswith(("=", "+", "-", "@")) and "\x1b" not in n for n in names), names
    assert "\x1b" not in screen.getvalue() and "\x07" not in screen.getvalue()
    assert "\\x1b" in screen.getvalue()  # said, visibly escaped


def test_a_duplicate_name_is_refused_with_its_names_escaped(tmp_path):
    name = "eve" + ESCAPES
    (tmp_path / name).mkdir()
    (tmp_path / name / "a").write_text("x")
    with zipfile.ZipFile(tmp_path / f"{name}.zip", "w") as archive:
        archive.writestr("a", "x")
    with pytest.raises(BatchError) as raised:
        submission_entries(tmp_path)
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value)


# The batch's own files in OUT, and names a submission could take to collide with them had its files gone
# beside them (OUT/<name>/): a submission folder named report wrote into the cohort report's folder, one named
# grades.csv made publish fail with IsADirectoryError. Each submission now has OUT/submissions/<name>/.
OWN_FILES = ["report", "grades.csv", "gradebook.sqlite", "gradebook.sqlite-wal", "manual", "similarity.csv",
             "canvas.csv", "submissions"]


def test_a_submission_named_like_the_batchs_own_files_is_graded_in_a_folder_of_its_own(tmp_path):
    """Submissions named like every file the batch writes into OUT (and like OUT/submissions itself), in any
    case, as folders and zips, are graded beside alice; each one's files are in OUT/submissions/<name>/, the
    gradebook, grades.csv and the cohort report are the batch's, and a second run (publish again) works."""
    folder, out = tmp_path / "c", tmp_path / "out"
    names = OWN_FILES + ["Grades.CSV", "alice"]
    folder.mkdir()
    for index, name in enumerate(names):
        if index % 2:
            with zipfile.ZipFile(folder / f"{name}.zip", "w") as zipped:
                zipped.writestr("answers.txt", "alpha q0 ok\nalpha q1 no\n")
        else:
            (folder / name).mkdir()
            (folder / name / "answers.txt").write_text("alpha q0 ok\nalpha q1 no\n")
    for _ in range(2):  # the second run grades nothing new and writes every file again
        rows = run_batch(folder, out, grade_fn=toy_grade, console=Console(file=io.StringIO()))
        assert sorted((row["name"], row["status"], row["score"]) for row in rows) == \
            sorted((name, "graded", 1.0) for name in names)
        assert sorted(p.name for p in (out / "submissions").iterdir()) == sorted(names)
        for name in names:
            assert sorted(p.name for p in (out / "submissions" / name).iterdir()) == \
                ["feedback.md", "junit.xml", "report.json", "results.json"]
        assert (out / "gradebook.sqlite").is_file() and (out / "report" / "index.html").is_file()
        assert sorted(row["submission"] for row in csv.DictReader((out / "grades.csv").open())) == sorted(names)


# Names a file system takes (no "/" or NUL; not hidden): control characters,
# bidirectional overrides, quotes, markup, formula starts, spaces, any script.
NAME_CHARACTERS = st.characters(exclude_categories=("Cs",), exclude_characters="/\x00")
NAMES = st.text(NAME_CHARACTERS, min_size=1, max_size=40).filter(
    lambda n: not n.startswith(".") and len(n.encode()) < 200
    and n.casefold() != "alice")


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_any_name_round_trips_in_the_gradebook_and_lands_escaped_in_every_file(tmp_path_factory, name):
    """Fuzzed submission names, graded beside alice: the gradebook keeps the name exactly (SQL parameters), its
    folder is named so, grades.csv holds it as safe_cell writes it, the terminal shows no control character, and
    the cohort report shows it as text (no markup of it survives)."""
    base = tmp_path_factory.mktemp("fuzz")
    cohort, out, screen = base / "c", base / "out", io.StringIO()
    for who in (name, "alice"):
        (cohort / who).mkdir(parents=True)
        (cohort / who / "answers.txt").write_text("alpha q0 ok\nalpha q1 no\n")
    rows = run_batch(cohort, out, grade_fn=toy_grade, console=Console(file=screen, width=200))
    assert sorted(row["name"] for row in rows) == sorted([name, "alice"])
    assert all(row["score"] == 1.0 for row in rows)
    with Gradebook(out / "gradebook.sqlite") as book:
        assert sorted(row["name"] for row in book.rows()) == sorted([name, "alice"])
    assert (out / "submissions" / name / "feedback.md").is_file()
    assert (out / "submissions" / name / "report.json").is_file()
    cells = [row[4] for row in csv.reader((out / "grades.csv").open(encoding="utf-8", newline=""))][1:]
    assert sorted(cells) == sorted([safe_cell(name), "alice"])
    said = screen.getvalue()
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", said), repr(said[-500:])
    page = Page()
    page.feed((out / "report" / "index.html").read_bytes().decode("utf-8"))  # as written: no newline translation
    # Read back by an HTML parser, the name is a row's attribute value and a cell's text, whole: had any of
    # it been taken as markup, the parser would have split it into tags.
    assert name in page.values and any(name.strip() and name in text or text == name for text in page.texts)
    assert not [tag for tag, attrs in page.tags if tag == "script" and "src" not in attrs or
                any(attr.startswith("on") for attr in attrs)]


class Page(HTMLParser):
    """A page's start tags (name, {attribute: value}), attribute values and texts, character references read."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags, self.values, self.texts = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.values += [value for _, value in attrs if value is not None]

    def handle_data(self, data):
        self.texts.append(data)
