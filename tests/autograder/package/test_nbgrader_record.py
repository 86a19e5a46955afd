"""What the trusted grader writes into nbgrader's gradebook (a real SQLite gradebook, nbgrader's own API): its
score is the only one. nbgrader's own autograde runs in the student's kernel, which the student's code controls, so
its score must never show through, also where the trusted grader gave none (a notebook it could not grade)."""

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")

from autograder.package.nbgrader_scores import NotebookScore, record  # noqa: E402


def test_nbgraders_own_autograde_score_never_shows_through(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    # A new gradebook asks `alembic heads` for its schema: the environment's alembic, as nbgrader's commands find it.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    trusted = {"graded": 2.5, "not-gradable": None}
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_assignment("ps1")
        gradebook.update_or_create_notebook("ps1", "ps1")
        gradebook.update_or_create_grade_cell("test-1", "ps1", "ps1", max_score=5.0, cell_type="code")
        for student, score in trusted.items():
            gradebook.update_or_create_student(student)
            gradebook.add_submission("ps1", student)
            forged = gradebook.find_grade("test-1", "ps1", "ps1", student)
            forged.auto_score = 5.0  # what a notebook's input transformer makes nbgrader's own autograde say
            gradebook.db.commit()
            record(gradebook, "ps1", NotebookScore(student, "ps1", cells={"test-1": (score, 5.0)}), "")
        for student, score in trusted.items():
            grade = gradebook.find_grade("test-1", "ps1", "ps1", student)
            assert (grade.score, grade.auto_score) == (score or 0.0, None), student
            assert grade.needs_manual_grade == (score is None)  # not graded: left for a person, at 0 meanwhile
            assert gradebook.find_submission("ps1", student).score == (score or 0.0)
