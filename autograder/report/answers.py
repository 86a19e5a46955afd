"""The answers of an assignment as students see them once released: its written questions' keys, rubrics
and model answers, and each hidden test with what it checks. autograder/written/answer_key.py reads them
from the handout and the hidden suite; autograder/cohort/answers.py releases them at the course file's date.

feedback.md (a section per released assignment, level 2), results.json (one entry per assignment) and the
bundle of `make answers` (a file per assignment, level 1) all show `key_markdown`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from autograder.model.results import TestResult


@dataclass(frozen=True)
class HiddenTest:
    file: str  # "test_hidden_flops.py"
    function: str  # "test_flop_counter_counts_random_programs"
    checks: str  # what it checks: its docstring's first paragraph

    @property
    def name(self) -> str:
        """As feedback names a test: `test_hidden_flops.py::test_...` (autograder.report.text.short_name)."""
        return f"{self.file}::{self.function}"


@dataclass(frozen=True)
class AnswerKey:
    assignment: str
    release: datetime  # from when students may see it
    written: str  # the written questions with their keys, rubrics and model answers, Markdown without headings
    hidden: tuple[HiddenTest, ...]


def _scores(results: Sequence[TestResult]) -> dict[str, tuple[float, float]]:
    """(points, max points) of each test function of `results`, by its short name without parametrisation."""
    scores: dict[str, tuple[float, float]] = {}
    for test in results:
        path, _, rest = test.name.partition("::")
        name = f"{path.rsplit('/', 1)[-1]}::{rest.split('[', 1)[0]}"
        got, total = scores.get(name, (0.0, 0.0))
        scores[name] = (got + test.points, total + test.max_points)
    return scores


def key_markdown(key: AnswerKey, level: int = 1, results: Sequence[TestResult] = ()) -> str:
    """The answer key as Markdown, its title a heading of `level`; with a student's `results`, each hidden
    test also shows the points it gave."""
    top, sub = "#" * level, "#" * (level + 1)
    lines = [f"{top} Answers: `{key.assignment}`", "",
             f"Released {key.release.isoformat()}: the written questions' keys, rubrics and model answers, and "
             "what each hidden test checks.", ""]
    if key.written:
        lines += [f"{sub} Written questions", "", key.written, ""]
    if key.hidden:
        scores = _scores(results)
        lines += [f"{sub} Hidden tests: {len(key.hidden)}", ""]
        for test in key.hidden:
            got = f" ({scores[test.name][0]:g} / {scores[test.name][1]:g})" if test.name in scores else ""
            lines.append(f"- `{test.name}`{got}: {test.checks}")
        lines.append("")
    return "\n".join(lines)
