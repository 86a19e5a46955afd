"""What every executor shares, shown with the local one and the toy grader: regrading by name, and the
atomic report files the cluster's tasks write."""

import pytest

from autograder.cohort.batch import BatchError, run_batch
from autograder.cohort.executors import done, read_report, write_atomically
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result
from tests.autograder.report.test_gradebook import make_cohort, quiet, toy_grade


def test_regrade_grades_the_named_submissions_again_and_only_them(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 2, "bob_zip": 1, "carol": 0})
    run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet())
    graded = []

    def counting(path):
        graded.append(path.name)
        return toy_grade(path)

    rows = run_batch(tmp_path / "c", tmp_path / "out", grade_fn=counting, console=quiet(), regrade=("bob_zip",))
    assert graded == ["bob_zip.zip"]
    assert [(r["name"], r["score"]) for r in rows] == [("alice", 2.0), ("bob_zip", 1.0), ("carol", 0.0)]


def test_regrade_refuses_a_name_that_is_not_in_the_folder(tmp_path):
    make_cohort(tmp_path / "c", {"alice": 2})
    with pytest.raises(BatchError, match="no submission named alicia in .*--regrade takes the names"):
        run_batch(tmp_path / "c", tmp_path / "out", grade_fn=toy_grade, console=quiet(), regrade=("alicia",))


def test_a_report_file_is_whole_or_absent_and_a_damaged_one_is_removed(tmp_path):
    report = GradeReport("alice", [Result("tests/a/t.py::test_x", "a", 2.0, "passed")])
    target = tmp_path / "reports" / "alice" / "d1.json"
    write_atomically(target, report.to_json())
    assert [p.name for p in target.parent.iterdir()] == ["d1.json"]  # no temporary left behind
    assert read_report(target).score == 2.0 and done(read_report(target))
    assert not done(GradeReport("alice", log=["the grader failed"])) and not done(None)
    target.write_text('{"submission": "alice", "tests": [')
    assert read_report(target) is None and not target.exists()


def test_a_failed_task_is_explained_by_its_error_line_not_by_the_log_paths_after_it():
    """submitit's account of a failed task: its traceback between two dashed lines, then the log files."""
    from autograder.cohort.executors import last_error_line

    account = ("Job (task=0) failed during processing with trace:\n----------------------\n"
               "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
               "subprocess.CalledProcessError: Command '['scontrol', 'requeue', '7']' returned non-zero exit status 1.\n"
               "----------------------\nYou can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
               "  - /logs/7_0_log.err\n  - /logs/7_0_log.out\n")
    assert last_error_line(account) == ("subprocess.CalledProcessError: Command '['scontrol', 'requeue', '7']' "
                                        "returned non-zero exit status 1.")
    assert last_error_line("RuntimeError: plain\n") == "RuntimeError: plain"
    assert last_error_line("") == ""
