"""An assignment's answer key, read from the source: its written questions with their keys, rubrics and
model answers (the handout in solutions/, as autograder/written/answers.py reads it), and its hidden tests,
each by name with what it checks (the first paragraph of its docstring, as the harness reports it), read
from the hidden suite's files, never imported.

    key = answer_key("flash_attention", release)   # an autograder.report.answers.AnswerKey

When students may see it is the course file's to say (autograder/cohort/answers.py releases it).
"""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path

from autograder.report.answers import AnswerKey, HiddenTest
from autograder.written.answers import Question, handout_questions

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
SUITES = ROOT / "autograder" / "suites"


def hidden_tests(assignment: str, suites: Path = SUITES) -> list[HiddenTest]:
    """The test functions of autograder/suites/<assignment>/test_*.py, in file and source order."""
    found = []
    for path in sorted((Path(suites) / assignment).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found.append(HiddenTest(path.name, node.name, _checks(node)))
    return found


def _checks(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The docstring's first paragraph on one line (the harness's `checks`), else the name in words."""
    first = (ast.get_docstring(node) or "").partition("\n\n")[0]
    return " ".join(first.split()) or node.name.removeprefix("test_").replace("_", " ")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _points(value: float) -> str:
    return f"{value:g} point{'s' * (value != 1)}"


def questions_markdown(questions: list[Question]) -> str:
    """Each question with its parts' keys, its rubric and its model answer (Markdown without headings)."""
    lines = []
    for question in questions:
        lines += [f"**{question.id}** ({_points(question.points)}). {question.text}", ""]
        lines += [f"- **{part.id}** ({_points(part.points)}, {part.tolerance}): {part.text} "
                  f"Key: **{_number(part.key)}**" for part in question.parts]
        lines += [""] if question.parts else []
        if question.criteria:
            lines += [f"Rubric ({_points(question.rubric_points)}):", ""]
            lines += [f"- ({c.points:g}) {c.text}" for c in question.criteria] + [""]
        if question.model_answer:
            lines += ["Model answer:", "", question.model_answer, ""]
    return "\n".join(lines).strip()


def answer_key(assignment: str, release: datetime, solutions: Path = SOLUTIONS, suites: Path = SUITES) -> AnswerKey:
    return AnswerKey(assignment, release, questions_markdown(handout_questions(assignment, solutions)),
                     tuple(hidden_tests(assignment, suites)))


def course_assignments(solutions: Path = SOLUTIONS) -> list[str]:
    """The assignments of a solutions tree: its packages."""
    return sorted(p.parent.name for p in Path(solutions).glob("*/__init__.py"))
