"""The stub generator, and the repository's own stubs: in sync, and each raising a helpful error."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.authoring import stubs
from autograder.model.markers import MarkerError

ROOT = Path(__file__).resolve().parents[3]

SOLUTION = '''import torch


class Counter:
    """Counts.

    Handout: §2 Counting
    """

    def __init__(self):
        self.n = 0

    def bump(self, k):
        ### BEGIN SOLUTION
        self.n += k
        return self.n
        ### END SOLUTION


def double(x):
    """Doubles.

    Handout: §1 Doubling things
    """
    y = x
    ### BEGIN SOLUTION
    return 2 * y
    ### END SOLUTION
'''


def test_a_method_region_becomes_a_raise_naming_the_method_file_and_class_section():
    out = stubs.python_stub(SOLUTION, "pkg/counter.py")
    assert "self.n += k" not in out and "return 2 * y" not in out
    assert ("        raise NotImplementedError('Counter.bump in pkg/counter.py is not implemented yet: "
            "write it (handout §2 Counting)')\n") in out
    assert "    raise NotImplementedError('double in pkg/counter.py is not implemented yet: " in out
    assert "    y = x\n" in out and "self.n = 0" in out  # given code is kept


def test_a_function_without_a_handout_line_is_an_error_naming_file_and_line():
    text = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
    with pytest.raises(MarkerError, match=r"^m\.py:2: f \(or its class\) needs a docstring line 'Handout: §N Title'"):
        stubs.python_stub(text, "m.py")


def test_a_region_outside_a_function_is_an_error():
    with pytest.raises(MarkerError, match=r"^m\.py:1: a solution region must sit inside a function body"):
        stubs.python_stub("### BEGIN SOLUTION\nX = 1\n### END SOLUTION\n", "m.py")


# A written question (answered in answers.md: its model answer becomes the stub's line) and worked answers
# the tests grade through the code (nothing to write there: they go without a trace).
HANDOUT = """## §1 Counting

- **N1.** How many? The tests call count() for it.

### BEGIN SOLUTION
N1: 42, from count().
### END SOLUTION

## §2 Questions

**Q1.** *(1 point)* Why?

*Rubric (1 point):*
- *(1)* because.

### BEGIN SOLUTION
The answer is 42.
### END SOLUTION
"""
STUDENT_HANDOUT = """## §1 Counting

- **N1.** How many? The tests call count() for it.

## §2 Questions

**Q1.** *(1 point)* Why?

*Rubric (1 point):*
- *(1)* because.

*Your answer here.*
"""


def test_generate_copies_other_files_and_stubs_markdown_answers(tmp_path):
    source = tmp_path / "solutions" / "pkg"
    source.mkdir(parents=True)
    (source / "counter.py").write_text(SOLUTION)
    (source / "README.md").write_text(HANDOUT)
    (source / "data.bin").write_bytes(b"\x00\xff")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.pyc").write_bytes(b"")
    written = stubs.generate(tmp_path / "solutions", tmp_path / "assignments")
    assert written == ["pkg/README.md", "pkg/counter.py", "pkg/data.bin", "pkg/answers.md"]
    target = tmp_path / "assignments" / "pkg"
    assert (target / "README.md").read_text() == STUDENT_HANDOUT
    assert (target / "data.bin").read_bytes() == b"\x00\xff"
    assert not (target / "__pycache__").exists()


def test_check_reports_every_kind_of_drift(tmp_path):
    source = tmp_path / "solutions" / "pkg"
    source.mkdir(parents=True)
    (source / "counter.py").write_text(SOLUTION)
    (source / "other.py").write_text("X = 1\n")
    stubs.generate(tmp_path / "solutions", tmp_path / "assignments")
    assert stubs.check(tmp_path / "solutions", tmp_path / "assignments") == []
    target = tmp_path / "assignments" / "pkg"
    (target / "counter.py").write_text("edited by hand\n")
    (target / "other.py").unlink()
    (target / "extra.py").write_text("")
    assert stubs.check(tmp_path / "solutions", tmp_path / "assignments") == [
        "pkg/counter.py", "pkg/extra.py", "pkg/other.py"]


def test_a_marker_error_leaves_the_previous_tree_in_place(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "bad.py").write_text("### BEGIN SOLUTION\n")
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "keep.py").write_text("kept\n")
    with pytest.raises(MarkerError):
        stubs.generate(tmp_path / "solutions", tmp_path / "assignments")
    assert (tmp_path / "assignments" / "keep.py").read_text() == "kept\n"


def test_the_command_line_exits_1_when_out_of_sync_and_2_on_marker_errors(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "a.py").write_text("X = 1\n")
    cli = [sys.executable, "-m", "autograder.authoring.stubs", str(tmp_path / "solutions"), str(tmp_path / "out")]
    run = lambda *extra: subprocess.run(cli + list(extra), cwd=ROOT, capture_output=True, text=True)  # noqa: E731
    assert run("--check").returncode == 1
    assert run().returncode == 0
    assert run("--check").returncode == 0
    (tmp_path / "solutions" / "a.py").write_text("### END SOLUTION\n")
    result = run()
    assert result.returncode == 2 and "a.py:1: END SOLUTION without a matching BEGIN" in result.stderr


def test_assignments_folder_is_in_sync_with_solutions():
    diffs = stubs.check(ROOT / "solutions", ROOT / "assignments")
    assert diffs == [], f"assignments/ is out of sync with solutions/ (run `make assignments`): {diffs}"


def _stub_raises(root: Path):
    """(file, qualname, message) for every generated raise in the repository's stubs."""
    for path in sorted((root / "assignments").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for child in node.body:
                    child.parent_class = node.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call)
                            and getattr(stmt.exc.func, "id", "") == "NotImplementedError"):
                        qual = ".".join(filter(None, [getattr(node, "parent_class", ""), node.name]))
                        yield path, qual, stmt.exc.args[0].value


def test_every_stub_names_its_function_file_and_an_existing_handout_section():
    found = list(_stub_raises(ROOT))
    assert found, "no stub raises NotImplementedError: are the solutions marked?"
    for path, qualname, message in found:
        rel = path.relative_to(ROOT / "assignments").as_posix()
        assert message.startswith(f"{qualname} in {rel} is not implemented yet"), (path, message)
        section = re.search(r"handout (§\S+ [^)]+)\)", message).group(1)
        handout = (ROOT / "assignments" / rel.split("/")[0] / "README.md").read_text()
        assert re.search(rf"^#+ {re.escape(section)}$", handout, re.MULTILINE), (
            f"{rel}: {qualname} points to handout {section}, which is not a heading of the handout (its number "
            "and title)")
