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

from autograder.grade import grade
from autograder.report.gradescope import schema

ROOT = Path(__file__).resolve().parents[2]
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
