"""The harness: the implementation switch, points, the points table, the student seam, and what a
student's run prints.

Each test builds a small project (the real harness, kernels/ and conftest, a small assignment `demo`
in solutions/ and assignments/) and runs pytest on it in a new process.
"""

import shutil
from pathlib import Path

import pytest

from autograder.package.layout import HARNESS
from tests.pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[3]

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
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("MAKELEVEL", raising=False)  # the runs are pytest's own, even under `make test`
    # The plugins of the installed packages stay out (their imports were a second of each run); xdist's own test
    # names it.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in ("kernels", "conftest.py", "pyproject.toml", *HARNESS):  # what the student release ships
        (pytester.path / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, pytester.path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
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
    """pytest run on the project in a new process, as `python -m pytest` there would (tests/pytest_run.py: a fork of a
    process that imported torch and pytest once, so that each of this module's runs does not pay for them)."""
    done = run_pytest(["-p", "no:cacheprovider", "-s", f"--basetemp={project.path / 'basetemp'}", *args], project.path)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), 0.0)


def test_default_tree_comes_from_the_ini_setting_and_scores_full_points(project):
    result = run(project)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*TREE=*solutions", "demo*5 / 9*public points*(2/3 tests passed)*4 points need a GPU*"])


def test_the_option_selects_the_stubs_which_score_zero(project):
    result = run(project, "--impl", "assignments")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*demo*0 / 9*public points*2 not implemented yet*"])
    result.stdout.fnmatch_lines(["demo: not started: 2 tasks, §1 (2 tests, 5 points)"])


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


# What a student's run prints. A second module of the demo assignment, written in handout order
# (§1 first, §2 second) while its tests run §2's task first, and a tree with wrong answers.

MODULE_STUB = '''
import torch


def first(n):
    """Handout: §1 Adding"""
    raise NotImplementedError("first in demo/n.py is not implemented yet: write it (handout §1 Adding)")


def second(n):
    """Handout: §2 Vectors"""
    raise NotImplementedError("second in demo/n.py is not implemented yet: write it (handout §2 Vectors)")


def doubled(n):
    """Handout: §2 Vectors"""
    raise NotImplementedError("doubled in demo/n.py is not implemented yet: write it (handout §2 Vectors)")


def filled(n):
    """Handout: §2 Vectors"""
    raise NotImplementedError("filled in demo/n.py is not implemented yet: write it (handout §2 Vectors)")
'''

MODULE_WRONG = '''
import json

import torch


def first(n):
    """Handout: §1 Adding"""
    return json.loads("{" * n)


def second(n):
    """Handout: §2 Vectors"""
    v = torch.arange(float(n))
    v[n // 2] += 3
    return v


def doubled(n):
    """Handout: §2 Vectors"""
    return 2 * second(n)


class _fill_kernel:
    """Stands in for a Triton kernel: launched as _fill_kernel[grid](out, n)."""

    def __class_getitem__(cls, grid):
        return lambda out, n: out.extend(range(1, n + 1))


def filled(n):
    """Handout: §2 Vectors"""
    out = []
    _fill_kernel[(1,)](out, n)
    return out
'''

MODULE_TESTS = '''
import pytest
import torch


@pytest.mark.points(2)
@pytest.mark.task("n.second")
def test_second_is_a_range(student):
    """second(n) is torch.arange(float(n)).

    Hint: count from zero.
    Hint (nan): a range holds no NaN.
    Hint (raised): second must not raise.
    """
    torch.testing.assert_close(student.module("demo.n").second(1000), torch.arange(1000.0), rtol=0, atol=0)


@pytest.mark.points(1)
@pytest.mark.task("n.second")
def test_second_equals_a_range(student):
    """second(n) equals torch.arange(float(n)) exactly."""
    assert torch.equal(student.module("demo.n").second(1000), torch.arange(1000.0))


@pytest.mark.points(1)
@pytest.mark.task("n.doubled")
def test_doubled_is_twice_a_range(student):
    """doubled(n) is 2 · torch.arange(float(n))."""
    torch.testing.assert_close(student.module("demo.n").doubled(10), 2 * torch.arange(10.0), rtol=0, atol=0)


@pytest.mark.points(1)
@pytest.mark.task("n.filled")
def test_filled_is_a_list_from_zero(student):
    """filled(n) is [0, 1, ..., n - 1]."""
    assert student.module("demo.n").filled(3) == [0, 1, 2]


@pytest.mark.points(3)
@pytest.mark.task("n.first")
@pytest.mark.parametrize("n", [1, 2])
def test_first_is_a_dict(student, n):
    """first(n) is an empty dict."""
    assert student.module("demo.n").first(n) == {}
'''


@pytest.fixture
def tasks_project(project: pytest.Pytester) -> pytest.Pytester:
    (project.path / "assignments" / "demo" / "n.py").write_text(MODULE_STUB)
    (project.path / "tests" / "demo" / "test_n.py").write_text(MODULE_TESTS)
    shutil.copytree(project.path / "assignments", project.path / "wrong")
    (project.path / "wrong" / "demo" / "n.py").write_text(MODULE_WRONG)
    return project


def points_table(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "public points" in line]


def test_unimplemented_tasks_are_one_line_each_in_handout_order_then_the_next_step(tasks_project):
    """An assignment not started is one line (the first run fits on one screen); once one of its tests runs the
    student's code, each task still a stub is one line, in handout order."""
    result = run(tasks_project, "--impl", "assignments", "tests/demo/test_n.py")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*= not implemented yet =*", "demo: not started: 4 tasks, §1 to §2 (6 tests, 11 points)",
                                 "*= points =*"])
    assert "NotImplementedError" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    assert result.outlines[-1] == ("next: demo §1 n.first does not pass yet; run only its tests with: "
                                   "python -m pytest --task n.first")
    result.stdout.fnmatch_lines(["*= 6 failed in *"])  # still failures: pytest's count and exit status
    shutil.copytree(tasks_project.path / "assignments", tasks_project.path / "halfway")
    (tasks_project.path / "halfway" / "demo" / "n.py").write_text(
        MODULE_STUB.replace('raise NotImplementedError("first in demo/n.py', 'return {}  # ("first in demo/n.py'))
    started = run(tasks_project, "--impl", "halfway", "tests/demo/test_n.py")
    started.stdout.fnmatch_lines(["*= not implemented yet =*", "demo",
                                  "  §2 n.second: not implemented yet (2 tests, 3 points)",
                                  "  §2 n.doubled: not implemented yet (1 test, 1 point)",
                                  "  §2 n.filled: not implemented yet (1 test, 1 point)", "*= points =*"],
                                 consecutive=True)


def test_verbose_or_an_explicit_tb_shows_every_traceback_with_the_same_points_and_status(tasks_project):
    short = run(tasks_project, "--impl", "assignments", "tests/demo/test_n.py")
    for option in ("-v", "--tb=long"):
        full = run(tasks_project, "--impl", "assignments", "tests/demo/test_n.py", option)
        assert full.ret == short.ret == 1 and points_table(full) == points_table(short) != []
        assert full.stdout.str().count("NotImplementedError: first in demo/n.py is not implemented yet") >= 2
        assert "not implemented yet ===" not in full.stdout.str()


def test_the_task_option_runs_only_that_tasks_tests(tasks_project):
    result = run(tasks_project, "--impl", "assignments", "--task", "n.second")
    result.stdout.fnmatch_lines(["*7 deselected / 2 selected*", "*= 2 failed, 7 deselected in *"])
    assert "demo: not started: 4 tasks" in run(tasks_project, "--impl", "assignments", "--task", "n").stdout.str()
    unknown = run(tasks_project, "--impl", "assignments", "--task", "n.third")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*no test exercises the task 'n.third'; the tasks are: n.doubled, n.filled, "
                                  "n.first, n.second*"])


def failure(result: pytest.RunResult, test: str) -> list[str]:
    """The lines of one test's failure block: from its header to the next header or section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {test}" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("__", "==")))
    return lines[start:end]


def test_a_wrong_answer_is_a_short_note_that_ends_at_the_students_line_without_harness_frames(tasks_project):
    result = run(tasks_project, "--impl", "wrong", "tests/demo/test_n.py")
    assert result.ret == 1
    for test in ("test_first_is_a_dict[1]", "test_second_is_a_range", "test_second_equals_a_range"):
        block = failure(result, test)
        assert len(block) <= 25, "\n".join(block)
        text = "\n".join(block)
        assert "autograder/" not in text and "harness" not in text and "pluggy" not in text, text
    raised = "\n".join(failure(result, "test_first_is_a_dict[1]"))
    assert "wrong/demo/n.py:9: in first" in raised and "json.decoder.JSONDecodeError" in raised, raised
    assert "json/decoder.py" not in raised and "json/__init__.py" not in raised, raised  # ends at the student's line
    assert "your code: wrong/demo/n.py:9 n.first, where it raised (handout §1 Adding)" in raised, raised
    close = "\n".join(failure(result, "test_second_is_a_range"))
    assert "got shape (1000,) torch.float32, expected shape (1000,) torch.float32; 1 of 1000 elements differ" \
        in close and "worst at index (500,): got 503, expected 500" in close, close
    assert "Hint: count from zero." in close and "checks: second(n) is torch.arange(float(n))." in close, close
    assert "NaN" not in close and "must not raise" not in close, close  # hints for other failures are not shown
    equal = "\n".join(failure(result, "test_second_equals_a_range"))
    assert "tensor(<1-d, values" in equal and "999." not in equal, equal  # never printed whole
    assert points_table(result) == ["demo      0 / 11    public points  (0/6 tests passed)"]
    assert result.outlines[-1].startswith("next: demo §1 n.first does not pass yet")


def test_your_code_points_at_the_function_the_failure_is_in(tasks_project):
    """Not at the task whose test failed, but where its result went wrong: a function of the task's module that
    it calls and whose own test fails (doubled calls a wrong second), or the kernel it launches."""
    result = run(tasks_project, "--impl", "wrong", "tests/demo/test_n.py")
    doubled = "\n".join(failure(result, "test_doubled_is_twice_a_range"))
    assert "your code: wrong/demo/n.py:12 n.second, which doubled calls: its own tests fail, fix it first " \
           "(handout §2 Vectors)" in doubled, doubled
    filled = "\n".join(failure(result, "test_filled_is_a_list_from_zero"))
    assert "your code: wrong/demo/n.py:24 n._fill_kernel, the kernel filled launches" in filled, filled


def test_a_tensor_summary_names_shapes_dtypes_the_count_off_and_the_worst_element():
    torch = pytest.importorskip("torch")
    from autograder.harness.terminal import summarise

    expected = torch.arange(6.0).reshape(2, 3)
    got = expected.clone()
    got[1, 2] += 1.0
    got[0, 1] += 1e-4
    assert summarise(got, expected) == ("got shape (2, 3) torch.float32, expected shape (2, 3) torch.float32; 2 of 6 "
                                        "elements differ (tolerance: exact); worst at index (1, 2): got 6, expected 5")
    assert "1 of 6 elements differ (tolerance: atol=0.001 + rtol=0 * |expected|)" in summarise(got, expected, (0, 1e-3))
    got[0, 0] = float("nan")
    assert "worst at index (0, 0): got nan, expected 0" in summarise(got, expected, (0, 1e-3))
    assert summarise(got.T, expected).endswith("expected shape (2, 3) torch.float32")


EDGE_TESTS = '''
import pytest


@pytest.mark.points(1)
@pytest.mark.task("m.add")
def test_add_value(student):
    assert student.module("demo.m").add(2, 2) == 4


@pytest.mark.points(6)
@pytest.mark.edge
@pytest.mark.task("m.add")
def test_add_edge(student):
    """Passes on any tree: counts only where test_add_value passes."""
'''


def test_a_worker_process_hands_every_result_to_the_points_table(project):
    """Under pytest-xdist the tests run in worker processes (one here: the hand-off is the same for any
    number); the controller's table must still count every result, and settle the edge cases on all of
    them: on the stubs, test_add_edge passes but counts nothing, since test_add_value failed."""
    pytest.importorskip("xdist", reason="pytest-xdist (an instructor dependency) is not installed")
    (project.path / "tests" / "demo" / "test_edges.py").write_text(EDGE_TESTS)
    serial = run(project, "--impl", "assignments")
    parallel = run(project, "--impl", "assignments", "-p", "xdist", "-n", "1")
    assert points_table(parallel) == points_table(serial), (points_table(serial), points_table(parallel))
    assert "0 / 16" in points_table(parallel)[0] and "(0/5 tests passed)" in points_table(parallel)[0]


def test_edge_tests_that_pass_but_wait_for_their_task_say_what_they_wait_for(project):
    """pytest counts test_add_edge as passed; the points table counts it for nothing while test_add_value fails:
    the student's run says so, just before the table, in short and in verbose runs."""
    (project.path / "tests" / "demo" / "test_edges.py").write_text(EDGE_TESTS)
    (project.path / "submission" / "demo" / "m.py").write_text(SOLUTION.replace("return a + b", "return a - b"))
    for options in ((), ("-v",)):
        result = run(project, "--impl", str(project.path / "submission"), "tests/demo/test_edges.py", *options)
        result.stdout.fnmatch_lines(["*= edge tests waiting for their task =*", "demo",
                                     "  §1 m.add: 1 edge test passes in pytest and counts (6 points) only once "
                                     "test_add_value passes", "*= points =*", "demo*0 / 7*(0/2 tests passed)*"],
                                    consecutive=True)
    solved = run(project, "--impl", "solutions", "tests/demo/test_edges.py")
    assert "edge tests waiting" not in solved.stdout.str()


def test_a_not_implemented_error_of_the_students_own_is_a_failure_not_a_stub(project):
    """Only a stub's NotImplementedError (the stub generator's "... is not implemented yet", or nbgrader's bare
    one) makes a task "not implemented yet": torch raises one for a meta tensor's data, and a student may raise
    one for a case they leave out; those are failures, shown with their traceback."""
    (project.path / "submission" / "demo" / "m.py").write_text(
        SOLUTION.replace("return a + b", 'raise NotImplementedError("only floats for now")'))
    result = run(project, "--impl", str(project.path / "submission"), "tests/demo/test_demo.py::test_add")
    assert "not implemented yet (" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*NotImplementedError: only floats for now*", "demo*0 / 2*(0/1 tests passed)"])
