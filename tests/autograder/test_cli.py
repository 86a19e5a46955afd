"""The command line: parsing, usage errors (exit 2) and exit codes, with the verbs replaced by toys.

End-to-end `grade` runs with the real grader live with the grade verb's own tests.
"""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import autograder.grading.client
from autograder.cli import build_parser, main
from autograder.report import write_all
from autograder.model.results import GradeReport
from autograder.model.results import TestResult as Result
from tests.autograder.report.test_gradebook import make_cohort, toy_grade

ROOT = Path(__file__).resolve().parents[2]


def toy_pool(grade_fn, created: list | None = None):
    """A stand-in for autograder.grading.client.ServerPool (what `batch` grades with) that calls grade_fn; the
    options of each pool made are appended to `created`."""

    class ToyPool:
        def __init__(self, **options):
            if created is not None:
                created.append(options)

        def grade(self, submission):
            return grade_fn(Path(submission))

        def close(self):
            pass

    return ToyPool


@pytest.fixture
def fake_grade(monkeypatch):
    """Replace both ways of grading (the grade verb, and batch's pool) with the toy grader; record
    how the grade verb was called."""
    calls = []

    def grade(submission, out=None, assignment=None, *, call_timeout=60.0, **options):
        calls.append({"submission": Path(submission), "out": out, "assignment": assignment,
                      "call_timeout": call_timeout, **options})
        report = toy_grade(Path(submission))
        if out is not None:
            write_all(report, Path(out))
        return report

    monkeypatch.setattr(autograder.grading.client, "grade", grade)
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade))
    return calls


def test_grade_arguments_and_defaults():
    args = build_parser().parse_args(["grade", "sub.zip"])
    assert (args.submission, args.assignment, args.out, args.timeout) == (Path("sub.zip"), None, None, 60.0)
    args = build_parser().parse_args(["grade", "s", "--assignment", "flash_attention", "--out", "o", "--timeout", "5"])
    assert (args.assignment, args.out, args.timeout) == ("flash_attention", Path("o"), 5.0)


def test_batch_arguments_and_defaults():
    args = build_parser().parse_args(["batch", "cohort", "--out", "o"])
    assert (args.directory, args.out, args.timeout) == (Path("cohort"), Path("o"), 60.0)
    assert build_parser().parse_args(["batch", "c", "--out", "o", "--workers", "4"]).workers == 4


@pytest.mark.parametrize("available, workers", [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8)])
def test_the_default_workers_are_one_per_two_cores(monkeypatch, available, workers):
    """Each worker overlaps where it has two cores (the faster way on every assignment): auto, the default of
    batch and nbgrader, gives each worker its two, and at least one worker."""
    monkeypatch.setattr(autograder.cli, "cores", lambda: available)
    assert build_parser().parse_args(["batch", "c", "--out", "o"]).workers == workers
    assert build_parser().parse_args(["batch", "c", "--out", "o", "--workers", "auto"]).workers == workers
    assert build_parser().parse_args(["nbgrader", "course", "flash_attention"]).workers == workers
    assert autograder.grading.client.overlaps("auto", workers, available) == (available >= 2)


def test_batch_passes_its_timeout_to_the_grading_servers(tmp_path, monkeypatch):
    created = []
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade, created))
    make_cohort(tmp_path / "c", {"alice": 1})
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--timeout", "7"]) == 0
    assert created == [{"call_timeout": 7.0, "overlap": autograder.grading.client.overlaps("auto", 1), "seed": None,
                        "secret": ""}]


def test_batch_passes_a_fixed_seed_and_the_course_secret_to_the_grading_servers(tmp_path, monkeypatch):
    created = []
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade, created))
    make_cohort(tmp_path / "c", {"alice": 1})
    course = tmp_path / "grading.toml"
    course.write_text('[grading]\nseed_secret = "staff only"\n')
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--seed", "5", "--course",
                 str(course)]) == 0
    assert created[0]["seed"] == 5 and created[0]["secret"] == "staff only"


@pytest.mark.parametrize("flags, expected", [(["--overlap", "never"], False), (["--overlap", "always"], True),
                                             (["--workers", "3", "--overlap", "always"], True)])
def test_batch_passes_the_overlap_asked_for_to_the_grading_servers(tmp_path, monkeypatch, flags, expected):
    created = []
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade, created))
    make_cohort(tmp_path / "c", {"alice": 1})
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), *flags]) == 0
    assert created == [{"call_timeout": 60.0, "overlap": expected, "seed": None, "secret": ""}]


def test_auto_overlap_only_where_every_worker_has_two_cores():
    from autograder.grading.client import overlaps

    assert overlaps("auto", 1, available=2) and overlaps("auto", 2, available=4)
    assert not overlaps("auto", 2, available=2) and not overlaps("auto", 1, available=1)
    assert overlaps("always", 8, available=1) and not overlaps("never", 1, available=64)
    with pytest.raises(ValueError, match="overlap must be one of auto, always, never, got 'yes'"):
        overlaps("yes", 1)


@pytest.mark.parametrize("argv", [
    [],
    ["regrade", "x"],
    ["grade"],
    ["grade", "s", "--timeout", "0"],
    ["grade", "s", "--timeout", "soon"],
    ["batch", "cohort"],
    ["batch", "cohort", "--out", "o", "--workers", "0"],
    ["batch", "cohort", "--out", "o", "--workers", "many"],
])
def test_malformed_command_lines_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_grade_of_a_missing_path_exits_2_and_says_so(tmp_path, capsys, fake_grade):
    with pytest.raises(SystemExit) as exit_:
        main(["grade", str(tmp_path / "nowhere.zip")])
    assert exit_.value.code == 2
    assert "nowhere.zip does not exist" in capsys.readouterr().err
    assert fake_grade == []


def test_grade_exits_0_whatever_the_score_and_writes_reports(tmp_path, capsys, fake_grade, monkeypatch):
    make_cohort(tmp_path / "c", {"alice": 0})
    monkeypatch.chdir(tmp_path)
    assert main(["grade", str(tmp_path / "c" / "alice"), "--assignment", "alpha", "--timeout", "7"]) == 0
    (call,) = fake_grade
    assert (call["out"], call["assignment"], call["call_timeout"]) == (Path("out") / "alice", "alpha", 7.0)
    assert (tmp_path / "out" / "alice" / "results.json").exists()
    out = capsys.readouterr().out
    assert "test_toy.py::test_r0" in out and "total 0 / 1 points" in out


def test_grade_exits_1_when_the_grader_itself_failed(tmp_path, monkeypatch, capsys):
    failed = GradeReport("alice", log=["the grader failed on this submission (exit code 1)"])
    monkeypatch.setattr(autograder.grading.client, "grade", lambda *a, **k: failed)
    (tmp_path / "alice").mkdir()
    assert main(["grade", str(tmp_path / "alice"), "--out", str(tmp_path / "o")]) == 1
    assert "grading did not complete" in capsys.readouterr().out


@pytest.mark.parametrize("busy_gradings", [1, 2])
def test_grade_tries_an_overloaded_grading_again_and_never_scores_one_that_cannot_finish(tmp_path, monkeypatch,
                                                                                          capsys, busy_gradings):
    """One grading (grade, Gradescope's run_autograder, nbgrader) that meets an overloaded machine is graded again;
    if the second one cannot finish either, there is no score built from errored tests: the reports say the
    grader failed (no results.json at all, which Gradescope shows as the autograder failing, never a zero), and
    grade exits 1 so the platform shows a failure."""
    calls = []

    def busy_once(submission, *args):
        calls.append(submission)
        report = toy_grade(submission)
        if len(calls) <= busy_gradings:
            first = report.tests[0]
            report.tests[0] = Result(first.name, first.assignment, first.max_points, "error", message="overloaded")
            report.overloaded = [first.name]
        return report

    monkeypatch.setattr(autograder.grading.client, "_grade_once", busy_once)
    make_cohort(tmp_path / "c", {"alice": 2})
    out = tmp_path / "o"
    status = main(["grade", str(tmp_path / "c" / "alice"), "--out", str(out)])
    assert len(calls) == 2
    report = GradeReport.from_json((out / "report.json").read_text())
    if busy_gradings == 1:  # the second grading finished: that is the grade
        results = json.loads((out / "results.json").read_text())
        assert status == 0 and results["score"] == 2.0 and not report.overloaded
        assert "attempt 1: the grader was overloaded in 1 test(s)" in report.log
    else:
        assert status == 1 and "grading did not complete" in capsys.readouterr().out
        assert not report.tests and not (out / "results.json").exists()
        assert "grader overloaded: 1 test(s) could not finish" in " ".join(report.log)
        assert "grader overloaded" in (out / "feedback.md").read_text()


def test_batch_prints_the_gradebook_and_exits_0(tmp_path, capsys, fake_grade):
    make_cohort(tmp_path / "c", {"alice": 2, "bob_zip": 1})
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "gradebook" in out and "alice" in out and "bob_zip" in out and "2 / 3" in out
    assert (tmp_path / "o" / "grades.csv").exists()


def test_batch_exits_1_while_a_submission_is_recorded_as_an_error(tmp_path, capsys, monkeypatch):
    def broken(submission):
        return GradeReport("x") if submission.name == "bob" else toy_grade(submission)

    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(broken))
    make_cohort(tmp_path / "c", {"alice": 2, "bob": 1})
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o")]) == 1
    assert "1 submission(s) not graded: bob" in capsys.readouterr().out


def test_batch_exits_1_while_a_regrade_failed_and_the_earlier_grade_stands(tmp_path, capsys, monkeypatch):
    """A grader error on a regrade keeps the earlier grade, and is still the grader's failure to report: exit 1,
    naming the submission, until a run grades it again."""
    make_cohort(tmp_path / "c", {"alice": 2, "bob": 1})
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade))
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o")]) == 0
    monkeypatch.setattr(autograder.grading.client, "ServerPool",
                        toy_pool(lambda s: GradeReport("x") if s.name == "alice" else toy_grade(s)))
    capsys.readouterr()
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--regrade", "alice"]) == 1
    assert "1 regrade(s) failed, their earlier grades stand: alice" in capsys.readouterr().out
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade))
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o")]) == 0


def test_batch_usage_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["batch", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2 and "is not a folder" in capsys.readouterr().err
    make_cohort(tmp_path / "c", {"alice": 1})
    (tmp_path / "c" / "alice.zip").write_bytes(b"")
    with pytest.raises(SystemExit) as exit_:
        main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2 and "both submission 'alice'" in capsys.readouterr().err


def test_python_dash_m_autograder(tmp_path):
    run = [sys.executable, "-m", "autograder"]
    done = subprocess.run(run + ["--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "grade" in done.stdout and "batch" in done.stdout
    done = subprocess.run(run + ["grade", str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_a_report_the_machine_was_too_busy_to_finish_is_graded_again_alone_and_never_kept_as_a_grade(tmp_path,
                                                                                                   monkeypatch):
    """alice's first grading meets an overloaded machine and her second does not: she is graded; bob's
    never finishes: he is an error (graded again on the next run), never a score built from errored tests."""
    calls: list[tuple[str, dict]] = []

    class BusyPool:
        def __init__(self, **options):
            self.options = options

        def grade(self, submission):
            name = Path(submission).name
            calls.append((name, self.options))
            report = toy_grade(Path(submission))
            if name == "bob" or sum(c[0] == "alice" for c in calls) == 1:
                first = report.tests[0]
                report.tests[0] = Result(first.name, first.assignment, first.max_points, "error", message="overloaded")
                report.overloaded = [first.name]
            return report

        def close(self):
            pass

    monkeypatch.setattr(autograder.grading.client, "ServerPool", BusyPool)
    make_cohort(tmp_path / "c", {"alice": 2, "bob": 2})
    assert main(["batch", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--workers", "2"]) == 1
    again = [options for name, options in calls[2:]]
    assert sorted(name for name, _ in calls[2:]) == ["alice", "bob"] and all(not o["overlap"] for o in again)
    with sqlite3.connect(tmp_path / "o" / "gradebook.sqlite") as db:
        rows = dict(db.execute("SELECT name, status FROM submissions"))
        message = db.execute("SELECT message FROM submissions WHERE name = 'bob'").fetchone()[0]
    assert rows == {"alice": "graded", "bob": "error"} and "grader overloaded" in message


def test_the_output_folders_are_private_to_the_grader(tmp_path, monkeypatch):
    """A worker running as a user of its own (no bubblewrap) must not list the batch's folder or read another
    student's report: batch and grade make their --out 0700, even one that existed open."""
    monkeypatch.setattr(autograder.grading.client, "ServerPool", toy_pool(toy_grade))
    make_cohort(tmp_path / "c", {"alice": 1})
    out = tmp_path / "o"
    out.mkdir(mode=0o755)
    out.chmod(0o755)
    assert main(["batch", str(tmp_path / "c"), "--out", str(out)]) == 0
    assert out.stat().st_mode & 0o077 == 0
