"""Written answers in the nbgrader channel: one answer cell per question (`answer-<ID>`, its template the
question's section of answers.md), released by nbgrader's real generate_assignment without the model
answer, and a submitted notebook read back into the same answers.md a folder submission holds."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.package import nbgrader
from autograder.package.layout import write_text
from autograder.grading.notebook import read_modules
from autograder.grading.intake import open_submission
from autograder.written.answers import cell_id, grade_answers, handout_questions, parse_answers

ASSIGNMENT = "resource_accounting"
QUESTIONS = handout_questions(ASSIGNMENT)


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> nbformat.NotebookNode:
    """nbgrader's student version of the notebook (the course built without test cells: they are not
    what this file tests, and collecting them is slow)."""
    course = tmp_path_factory.mktemp("course")
    write_text(course / "nbgrader_config.py", (nbgrader.TEMPLATES / "nbgrader_config.py").read_text())
    nbgrader.write_source(course, ASSIGNMENT, [])
    nbgrader.generate_assignment(course, ASSIGNMENT)
    return nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)


def answer_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    return {cell.id: cell for cell in nb.cells if cell.id.startswith("answer-")}


def test_each_question_has_an_answer_cell_with_its_template_and_no_model_answer(released):
    cells = answer_cells(released)
    assert list(cells) == [cell_id(q.id) for q in QUESTIONS] == ["answer-Q6_1", "answer-Q9_1", "answer-Q10_1"]
    q61 = cells["answer-Q6_1"]
    assert q61.source.startswith("Q6.1.a =\nQ6.1.b =\nQ6.1.c =\nQ6.1.d =\nQ6.1.e =\n\nAnswer:")
    assert "319" not in q61.source and "BEGIN SOLUTION" not in q61.source and "YOUR ANSWER HERE" in q61.source
    meta = q61.metadata["nbgrader"]
    assert meta["solution"] and meta["grade"] and meta["points"] == QUESTIONS[0].rubric_points


def submitted(released: nbformat.NotebookNode, answers: dict[str, str]) -> bytes:
    nb = nbformat.from_dict(released)
    for cell in nb.cells:
        if cell.id in answers:
            cell.source = answers[cell.id]
    return nbformat.writes(nb).encode()


def test_a_submitted_notebook_becomes_the_answers_md_of_a_folder_submission(released, tmp_path):
    filled = {"answer-Q6_1": "Q6.1.a = 63\nQ6.1.b = 2,048 FLOP/byte\nQ6.1.c = 40 µs\nQ6.1.d = 556\nQ6.1.e = 319\n\n"
                             "Answer:\nThe weight is read once per step.\nYOUR ANSWER HERE",
              "answer-Q9_1": "Q9.1.a = 7\nQ9.1.b =\n\nAnswer:\n<b>memory</b> k + L/k"}
    data = submitted(released, filled)
    files, problems = read_modules(data, [ASSIGNMENT])
    notebook_answers = files[f"{ASSIGNMENT}/answers.md"].decode()
    folder_answers = "\n".join(["# Written answers", "", "## Q6.1", "", filled["answer-Q6_1"].replace(
        "YOUR ANSWER HERE", ""), "## Q9.1", "", filled["answer-Q9_1"], "## Q10.1", "",
        answer_cells(released)["answer-Q10_1"].source.replace("YOUR ANSWER HERE", "")])
    from_notebook = grade_answers(ASSIGNMENT, QUESTIONS, parse_answers(notebook_answers.encode()))
    from_folder = grade_answers(ASSIGNMENT, QUESTIONS, parse_answers(folder_answers.encode()))
    assert [(r.name, r.status, r.points, r.answer) for r in from_notebook] == \
        [(r.name, r.status, r.points, r.answer) for r in from_folder]
    scored = {r.name: (r.status, r.points) for r in from_notebook}
    assert scored["written/Q6.1.e"] == ("passed", 1) and scored["written/Q9.1.a"] == ("failed", 0)
    assert scored["written/Q6.1"] == ("manual", 0) and scored["written/Q10.1"] == ("not_implemented", 0)
    # Opened as a submission, the notebook gives the package its answers.md beside the modules.
    path = tmp_path / "alice.ipynb"
    path.write_bytes(data)
    sub = open_submission(path, tmp_path / "stage", [ASSIGNMENT])
    assert (sub.root / ASSIGNMENT / "answers.md").read_text() == notebook_answers


def test_an_answer_cell_cannot_be_used_to_write_outside_the_answers(released, tmp_path):
    """A code cell that %%writefile's answers.md is not a module: not taken; only the answer cells count."""
    nb = nbformat.from_dict(released)
    nb.cells.append(nbformat.v4.new_code_cell(f"%%writefile {ASSIGNMENT}/answers.md\n## Q6.1\nQ6.1.e = 319",
                                              id="sneaky"))
    files, problems = read_modules(nbformat.writes(nb).encode(), [ASSIGNMENT])
    answers = parse_answers(files[f"{ASSIGNMENT}/answers.md"])
    results = {r.name: r.status for r in grade_answers(ASSIGNMENT, QUESTIONS, answers)}
    assert results["written/Q6.1.e"] == "not_implemented" and any("not a module of the packages" in p for p in problems)
