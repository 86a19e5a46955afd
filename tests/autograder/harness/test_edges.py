"""Edge cases count only with the ordinary case (autograder.harness.edges, the `edge` marker)."""

import pytest

from autograder.harness.edges import settle
from autograder.model.results import GradeReport, TestResult


def result(name: str, status: str, task: str = "memory.get_memory_usage", assignment: str = "resource_accounting"):
    return TestResult(name=name, assignment=assignment, max_points=1.0, status=status, task=task)


def settled(tests: list[TestResult], edges: set[str]) -> dict[str, tuple[str, float]]:
    report = GradeReport(submission="s", tests=tests)
    settle(report, edges)
    return {t.name: (t.status, t.points) for t in report.tests}


def test_an_edge_case_counts_when_its_tasks_ordinary_tests_pass():
    got = settled([result("ordinary", "passed"), result("empty", "passed")], {"empty"})
    assert got == {"ordinary": ("passed", 1.0), "empty": ("passed", 1.0)}


def test_an_edge_case_earns_nothing_when_an_ordinary_test_of_its_task_fails():
    report = GradeReport(submission="s", tests=[result("ordinary", "passed"), result("other", "failed"),
                                                result("rejects", "passed")])
    settle(report, {"rejects"})
    rejects = report.tests[2]
    assert (rejects.status, rejects.points, report.score) == ("failed", 0.0, 1.0)
    assert "counts only when the ordinary tests of memory.get_memory_usage pass: other did not pass" in rejects.message


def test_an_edge_case_earns_nothing_when_no_ordinary_test_of_its_task_ran():
    got = settled([result("rejects", "passed"), result("gpu", "not_graded"),
                   result("elsewhere", "passed", task="flops.mfu")], {"rejects"})
    assert got["rejects"] == ("failed", 0.0)


def test_tests_that_could_not_run_here_neither_help_nor_hurt():
    got = settled([result("ordinary", "passed"), result("gpu", "not_graded"), result("mac", "skipped"),
                   result("rejects", "passed")], {"rejects"})
    assert got["rejects"] == ("passed", 1.0)


def test_only_the_same_task_of_the_same_assignment_counts():
    got = settled([result("ordinary", "failed", assignment="flash_attention"), result("ordinary2", "passed"),
                   result("other task", "failed", task="memory.float_format"), result("rejects", "passed")],
                  {"rejects"})
    assert got["rejects"] == ("passed", 1.0)


def test_a_failed_edge_case_keeps_its_own_message_and_edge_cases_do_not_count_as_ordinary():
    tests = [result("ordinary", "passed"), result("e1", "failed"), result("e2", "passed")]
    tests[1].message = "expected ValueError"
    report = GradeReport(submission="s", tests=tests)
    settle(report, {"e1", "e2"})
    assert [(t.status, t.message) for t in report.tests[1:]] == [("failed", "expected ValueError"), ("passed", "")]


def test_a_visible_edge_case_does_not_name_a_hidden_test():
    hidden = result("tests/x::test_secret_case", "failed")
    hidden.visibility = "hidden"
    report = GradeReport(submission="s", tests=[result("ordinary", "passed"), hidden, result("rejects", "passed")])
    settle(report, {"rejects"})
    assert report.tests[2].status == "failed" and "secret" not in report.tests[2].message
    assert report.tests[2].message.endswith("a hidden test of it did not pass")


def test_a_stub_called_inside_a_triton_kernel_is_not_implemented_not_a_failure():
    """A @triton.jit helper that is still a stub raises through the interpreter's InterpreterError: the
    stub's NotImplementedError is what counts, wherever the stub is first called."""
    from autograder.harness.student import unwrap_stub

    errors = pytest.importorskip("triton.runtime.errors", reason="triton cannot be installed on this OS")
    stub = NotImplementedError("_tile_of in gpu_kernels/matmul.py is not implemented yet")
    try:
        try:
            raise stub
        except NotImplementedError as inner:
            raise errors.InterpreterError(repr(inner)) from inner
    except errors.InterpreterError as wrapped:
        assert unwrap_stub(wrapped) is stub
    plain = ValueError("a wrong answer")
    assert unwrap_stub(plain) is plain
    other = errors.InterpreterError("an index out of range")
    assert unwrap_stub(other) is other

