"""Same submission, same result: the randomised tests' seed is the submission's own.

A regrade of an unchanged submission draws the same inputs (the hidden FLOP-counter test builds a random
MLP from the seed and names it in its failure message, so equal messages mean equal inputs); `--seed`
overrides it, and a course's secret changes every seed without anyone else being able to compute it.
Where every submission of a channel has the same name (Gradescope grades each upload as the same folder,
nbgrader names it after the notebook), the seed is the student's: no two students draw the same inputs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.cohort import sample as cohort
from autograder.grading import client
from autograder.grading.client import grade, seed_for
from autograder.model.results import GradeReport
from autograder.package import nbgrader_scores
from autograder.package.layout import ROOT
from autograder.report.gradebook import Gradebook

ASSIGNMENT = "resource_accounting"
RANDOM_TEST = "test_flop_counter_matches_flop_counter_mode_on_random_mlps"


def test_a_seed_is_a_function_of_the_name_and_the_secret():
    assert seed_for("alice") == seed_for("alice")
    assert seed_for("alice") != seed_for("bob")
    assert seed_for("alice", "course secret") != seed_for("alice")
    assert all(0 <= seed_for(name) < 2**31 for name in ("", "alice", "x" * 10_000, "\udcff"))


@pytest.fixture(scope="module")
def mistake(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("seeds")
    member = next(m for m in cohort.MISTAKES if m.name == "mistake-matmul-flops")
    return cohort.build(base, [ASSIGNMENT], [member])[0]


SELECT = "matmul_flops or flop_counter"  # the FLOP counter's random MLPs and a Hypothesis property of 2mnp


@pytest.fixture(scope="module")
def alone(mistake):
    """The mistake's single grading (`grade`, as `make grade SUBMISSION=...` does), with its own seed."""
    return grade(mistake, call_timeout=20, select=SELECT)


def outcomes(report) -> list[tuple]:
    return [(t.name, t.status, t.points, t.message) for t in report.tests]


def test_grading_an_unchanged_submission_twice_gives_the_same_results_test_by_test(mistake, alone):
    first = alone
    second = grade(mistake, call_timeout=20, select=SELECT)
    assert first.seed == second.seed == seed_for(mistake.name)
    assert outcomes(first) == outcomes(second)
    random_test = [t for t in first.tests if RANDOM_TEST in t.name]
    assert random_test and random_test[0].status == "failed" and "seed" in random_test[0].message
    given = grade(mistake, call_timeout=20, select=RANDOM_TEST, seed=first.seed + 1)
    assert given.seed == first.seed + 1
    assert given.tests[0].message != random_test[0].message  # another seed, other inputs: the test can tell


def test_a_grading_servers_child_draws_what_a_grading_of_its_own_draws(mistake, alone, warm_grade):
    """A grading server's children are forked from a parent that imported the suites and read, once, the constants
    Hypothesis draws from (autograder.grading.runner.warm); their draws are a fresh process's: the same results,
    messages (which name the values drawn) included, as a single grading's of the same seed. (The server is this
    test process's, which may have graded other submissions before: their draws must not move this one's.)"""
    served = warm_grade(mistake, select=SELECT)
    assert served.seed == alone.seed
    assert outcomes(served) == outcomes(alone)
    # The Hypothesis property fails, its message naming what it drew (2mnp of the drawn sizes).
    assert any(t.status == "failed" and "at_random_sizes" in t.name and "==" in t.message for t in alone.tests)


def test_the_course_file_secret_reaches_the_seed(tmp_path, monkeypatch):
    course = tmp_path / "grading.toml"
    course.write_text('[grading]\nseed_secret = "only the staff know"\n')
    args = cli.build_parser().parse_args(["grade", str(tmp_path), "--course", str(course)])
    assert cli.seed_secret(args) == "only the staff know"
    course.write_text('[grading]\nseed_secret = 3\n')
    with pytest.raises(SystemExit):
        cli.seed_secret(args)
    course.write_text('[grading]\nsecret = "x"\n')
    with pytest.raises(SystemExit):
        cli.seed_secret(args)


def gradescope_metadata(path: Path, *users: dict) -> Path:
    """A submission_metadata.json as Gradescope writes it, with the fields the grader reads."""
    path.write_text(json.dumps({"created_at": "2027-01-20T10:00:00-08:00", "users": list(users)}))
    return path


ADA = {"id": 1001, "email": "ada@uni.edu", "name": "Ada Lovelace", "sid": "s1"}
BO = {"id": 1002, "email": "bo@uni.edu", "name": "Bo Chen", "sid": "s2"}


@pytest.fixture
def seeds_used(monkeypatch, tmp_path) -> list[int]:
    """The seed each grading hands the runner, which these tests leave out (it grades with the seed it is
    given); they run in an empty folder, where no course file adds a secret."""
    used = []

    def graded(submission, assignment, call_timeout, sandbox, select, seed):
        used.append(seed)
        return GradeReport(submission=submission.name, seed=seed)

    def served(server, job):  # a grading server's job: "" says the report is written; none is, so none is read
        used.append(job["seed"])
        return ""

    monkeypatch.setattr(client, "_grade_once", graded)
    monkeypatch.setattr(client.GradingServer, "_exchange", served)
    monkeypatch.chdir(tmp_path)
    return used


def test_gradescope_metadata_names_the_seed_by_its_students(tmp_path):
    assert cli.gradescope_seed_name(gradescope_metadata(tmp_path / "a.json", ADA)) == "1001"
    assert cli.gradescope_seed_name(gradescope_metadata(tmp_path / "g.json", BO, ADA)) == "1001,1002"
    assert cli.gradescope_seed_name(gradescope_metadata(tmp_path / "g.json", ADA, BO)) == "1001,1002"
    assert cli.gradescope_seed_name(gradescope_metadata(tmp_path / "e.json", {"email": "ada@uni.edu"})) == "ada@uni.edu"
    assert cli.gradescope_seed_name(gradescope_metadata(tmp_path / "n.json")) is None
    (tmp_path / "broken.json").write_text("{")
    assert cli.gradescope_seed_name(tmp_path / "broken.json") is None
    assert cli.gradescope_seed_name(tmp_path / "missing.json") is None


def test_on_gradescope_each_student_has_a_seed_of_their_own_the_same_on_a_regrade(tmp_path, seeds_used, capsys):
    submission = tmp_path / "submission"  # Gradescope's one folder, whoever submitted
    submission.mkdir()
    ada = gradescope_metadata(tmp_path / "ada.json", ADA)
    bo = gradescope_metadata(tmp_path / "bo.json", BO)
    nobody = gradescope_metadata(tmp_path / "nobody.json")
    for metadata in (ada, bo, ada, nobody):
        cli.main(["grade", str(submission), "--out", str(tmp_path / "out"), "--submission-metadata", str(metadata)])
    assert seeds_used == [seed_for("1001"), seed_for("1002"), seed_for("1001"), seed_for("submission")]
    assert len(set(seeds_used)) == 3
    assert "nobody.json names no student" in capsys.readouterr().out
    cli.main(["grade", str(submission), "--out", str(tmp_path / "out"), "--submission-metadata", str(ada),
              "--seed", "7"])
    assert seeds_used[-1] == 7


def nbgrader_course(course: Path, assignment: str, students: list[str]) -> Path:
    """The smallest nbgrader course: the configuration, an empty source notebook, one submission per student."""
    course.mkdir()
    config = ROOT / "autograder" / "package" / "templates" / "nbgrader_config.py"
    (course / "nbgrader_config.py").write_text(config.read_text(encoding="utf-8"))
    for folder in [course / "source" / assignment, *(course / "submitted" / s / assignment for s in students)]:
        folder.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), folder / f"{assignment}.ipynb")
    return course


def test_nbgrader_grades_each_student_with_their_own_seed(tmp_path, seeds_used, monkeypatch):
    """The nbgrader verb's grading server is handed, for each notebook, the seed of the student's id (every
    student submits the same notebook name), the same on a regrade; the report it stores holds it."""
    # nbgrader's gradebook is not the point here: this course has none
    monkeypatch.setattr(nbgrader_scores, "check_gradebook", lambda *args: None)
    monkeypatch.setattr(nbgrader_scores, "record", lambda *args: None)
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # grade_course puts this interpreter's scripts first
    course = nbgrader_course(tmp_path / "course", ASSIGNMENT, ["alice", "bob"])
    for _ in range(2):  # a regrade
        results = nbgrader_scores.grade_course(course, ASSIGNMENT)
        assert [r.student for r in results] == ["alice", "bob"]
        assert [r.report.seed for r in results] == [seed_for("alice"), seed_for("bob")]
    assert seeds_used == [seed_for("alice"), seed_for("bob")] * 2
    assert seed_for("alice") != seed_for("bob")
    stored = course / "trusted" / "bob" / ASSIGNMENT / ASSIGNMENT / "report.json"
    assert GradeReport.from_json(stored.read_text()).seed == seed_for("bob")


def says_seed(text: str, seed: int) -> bool:
    return re.search(rf"\bseed {seed}\b", text) is not None


def test_the_students_seed_is_in_every_file_of_a_gradescope_grading_and_in_the_gradebook(mistake, tmp_path,
                                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    metadata = gradescope_metadata(tmp_path / "submission_metadata.json", ADA)
    cli.main(["grade", str(mistake), "--select", RANDOM_TEST, "--timeout", "20", "--out", str(out),
              "--submission-metadata", str(metadata)])
    seed = seed_for("1001")
    assert seed != seed_for(mistake.name)
    report = GradeReport.from_json((out / "report.json").read_text())
    assert report.seed == seed and report.tests
    notes = (out / "feedback.md").read_text().split("## Grading notes", 1)[1]
    assert says_seed(notes, seed)
    assert says_seed(json.loads((out / "results.json").read_text())["output"], seed)
    with Gradebook(tmp_path / "gradebook.sqlite") as book:  # as a batch keeps it, from which it writes its files
        book.record("ada", "digest", report)
        stored = book.report("ada")
    assert stored.seed == seed and says_seed("\n".join(stored.log), seed)
