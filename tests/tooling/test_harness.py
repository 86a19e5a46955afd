"""The harness: the implementation switch, points, the points table, and the student seam.

Each test builds a small project (the real harness, kernels/ and conftest, a one-function
assignment `demo` in solutions/ and assignments/) and runs pytest on it in a subprocess.
"""

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SOLUTION = '''
import os


def add(a, b):
    """Handout: §1 Adding"""
    return a + b


def where():
    """Handout: §1 Adding"""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
'''

STUB = '''
def add(a, b):
    """Handout: §1 Adding"""
    raise NotImplementedError("add in demo/m.py is not implemented yet: write it (handout §1 Adding)")


def where():
    """Handout: §1 Adding"""
    raise NotImplementedError("where in demo/m.py is not implemented yet: write it (handout §1 Adding)")
'''

TESTS = '''
import sys
import pytest


@pytest.mark.points(2)
def test_add(student):
    """add adds two ints.

    Hint: use +.
    """
    assert student.module("demo.m").add(1, 2) == 3


@pytest.mark.points(3)
def test_tree(student):
    """Exactly one implementation tree is on sys.path."""
    tree = student.module("demo.m").where()
    trees = [p for p in sys.path if p.endswith(("solutions", "assignments", "submission"))]
    assert trees == [tree]
    print("TREE=" + tree)


@pytest.mark.points(4)
@pytest.mark.gpu
def test_needs_gpu(student):
    assert False, "never runs without a GPU"
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    for name in ("kernels", "autograder/harness"):
        shutil.copytree(ROOT / name, pytester.path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pyproject.toml", "autograder/__init__.py", "autograder/wire.py",
                 "autograder/results.py"):
        shutil.copyfile(ROOT / name, pytester.path / name)
    for tree, text in (("solutions", SOLUTION), ("assignments", STUB), ("submission", SOLUTION)):
        (pytester.path / tree / "demo").mkdir(parents=True)
        (pytester.path / tree / "demo" / "__init__.py").write_text("")
        (pytester.path / tree / "demo" / "m.py").write_text(text)
    (pytester.path / "tests" / "demo").mkdir(parents=True)
    (pytester.path / "tests" / "__init__.py").write_text("")
    (pytester.path / "tests" / "demo" / "__init__.py").write_text("")
    (pytester.path / "tests" / "demo" / "test_demo.py").write_text(TESTS)
    return pytester


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args)


def test_default_tree_comes_from_the_ini_setting_and_scores_full_points(project):
    result = run(project)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*TREE=*solutions", "demo*5 / 9*public points*(2/3 tests passed)*4 points need a GPU*"])


def test_the_option_selects_the_stubs_which_score_zero(project):
    result = run(project, "--impl", "assignments")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*demo*0 / 9*public points*2 not implemented yet*"])
    result.stdout.fnmatch_lines(["*NotImplementedError: add in demo/m.py is not implemented yet*"])


def test_the_environment_variable_selects_a_tree_and_the_option_wins(project, monkeypatch):
    monkeypatch.setenv("LLMSYS_IMPL", "assignments")
    assert run(project).ret == 1
    result = run(project, "--impl", "solutions")
    assert result.ret == 0


def test_any_folder_with_the_package_layout_is_a_tree(project):
    result = run(project, "--impl", str(project.path / "submission"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*TREE=*submission"])


def test_a_tree_that_is_not_a_folder_of_packages_is_a_usage_error(project):
    result = run(project, "--impl", str(project.path / "tests" / "demo"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*holds no package*point --impl at the folder that contains the packages*"])
    result = run(project, "--impl", "nowhere")
    result.stderr.fnmatch_lines(["*'nowhere' is not a folder*--impl solutions, --impl assignments or --impl PATH*"])


def test_an_assignment_test_without_points_is_refused(project):
    (project.path / "tests" / "demo" / "test_more.py").write_text("def test_unmarked(student):\n    pass\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs @pytest.mark.points(n)*", "*test_more.py::test_unmarked*"])


def test_a_run_that_collects_no_test_fails(project):
    result = run(project, "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_missing_function_fails_with_the_contract_in_the_message(project):
    (project.path / "submission" / "demo" / "m.py").write_text("def add(a, b):\n    return a + b\n")
    result = run(project, "--impl", str(project.path / "submission"))
    result.stdout.fnmatch_lines(["*demo.m has no 'where': the handout's contract requires it*"])
