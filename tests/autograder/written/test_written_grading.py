"""The trusted grader reads a submission's answers.md as submitted, before any of its code runs.

One real grading run (sandboxed worker, one public test so the submission's code is imported): the
submission's modules rewrite answers.md when imported, and an answers.md with the keys lies outside
the package; neither changes what is graded. The reports carry the written results in every view.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema

from autograder.grading.client import grade
from autograder.report.gradescope import schema

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"
REWRITE = '''

import pathlib as _pathlib
for _target in (_pathlib.Path(__file__).with_name("answers.md"), _pathlib.Path("answers.md"),
                _pathlib.Path("resource_accounting/answers.md")):
    try:
        _target.write_text(_pathlib.Path(__file__).with_name("model.txt").read_text())
    except OSError:
        pass
'''


def test_answers_written_at_run_time_or_outside_the_package_change_nothing(tmp_path):
    tree = tmp_path / "mallory"
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, tree / ASSIGNMENT,
                    ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    model = (tree / ASSIGNMENT / "answers.md").read_text()
    (tree / ASSIGNMENT / "model.txt").write_text(model)
    (tree / "answers.md").write_text(model)  # outside the package: not the student's answers file
    template = (ROOT / "assignments" / ASSIGNMENT / "answers.md").read_text()
    (tree / ASSIGNMENT / "answers.md").write_text(template.replace("Q6.1.e =", "Q6.1.e = 319 sequences"))
    memory = tree / ASSIGNMENT / "memory.py"
    memory.write_text(memory.read_text() + REWRITE)
    out = tmp_path / "out"
    report = grade(tree, out, assignment=ASSIGNMENT, call_timeout=30,
                   select="written or test_float32_4x8_tensor_takes_128_bytes")
    by_name = {t.name.rsplit("::", 1)[-1]: t for t in report.tests}
    assert by_name["test_float32_4x8_tensor_takes_128_bytes"].status == "passed"  # the code ran
    written = {name: t for name, t in by_name.items() if name.startswith("written/")}
    assert written["written/Q6.1.e"].status == "passed" and written["written/Q6.1.e"].points == 1
    assert [n for n, t in written.items() if t.points] == ["written/Q6.1.e"], {n: t.message for n, t in written.items()}
    assert {t.status for n, t in written.items() if n in ("written/Q6.1", "written/Q9.1")} == {"not_implemented"}
    results = json.loads((out / "results.json").read_text())
    jsonschema.validate(results, schema())
    assert results["score"] == 2.0  # the one test and Q6.1.e
    feedback = (out / "feedback.md").read_text()
    assert "Q6.1.a: not answered yet" in feedback


def opened_written(tmp_path: Path, make) -> tuple[dict, list[str]]:
    """The written results of a submission folder after the grader's opening (what the runner reads)."""
    from autograder.grading.intake import open_submission
    from autograder.written.answers import written_results

    folder = tmp_path / "sub"
    (folder / ASSIGNMENT).mkdir(parents=True)
    (folder / ASSIGNMENT / "memory.py").write_text("x = 1\n")
    make(folder / ASSIGNMENT / "answers.md")
    sub = open_submission(folder, tmp_path / "stage", [ASSIGNMENT])
    results = written_results(ASSIGNMENT, sub.root / ASSIGNMENT)
    return {t.name: (t.status, t.points, t.message) for t in results}, sub.problems


def test_a_symlinked_huge_or_binary_answers_file_scores_nothing_with_a_reason(tmp_path):
    model = (ROOT / "solutions" / ASSIGNMENT / "answers.md").read_text()
    outside = tmp_path / "model.md"
    outside.write_text(model)
    cases = {
        "symlink": (lambda path: path.symlink_to(outside), "no resource_accounting/answers.md", "a symlink"),
        "huge": (lambda path: path.write_text(model + "x" * (6 << 20)), "no resource_accounting/answers.md",
                 "larger than 5 MB"),
        "large": (lambda path: path.write_text(model + "x" * (300 << 10)), "larger than 256 KiB", ""),
        "binary": (lambda path: path.write_bytes(model.encode() + b"\x00\xff" * 100), "not text", ""),
    }
    for name, (make, message, problem) in cases.items():
        results, problems = opened_written(tmp_path / name, make)
        assert results and all(points == 0 and message in text for _, points, text in results.values()), name
        assert not problem or any(problem in line for line in problems), (name, problems)
