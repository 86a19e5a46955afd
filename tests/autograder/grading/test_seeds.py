"""Same submission, same result: the randomised tests' seed is the submission's own.

A regrade of an unchanged submission draws the same inputs (the hidden FLOP-counter test builds a random
MLP from the seed and names it in its failure message, so equal messages mean equal inputs); `--seed`
overrides it, and a course's secret changes every seed without anyone else being able to compute it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder import cli
from autograder.cohort import sample as cohort
from autograder.grading.client import grade, seed_for

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


def outcomes(report) -> list[tuple]:
    return [(t.name, t.status, t.points, t.message) for t in report.tests]


def test_grading_an_unchanged_submission_twice_gives_the_same_results_test_by_test(mistake):
    first = grade(mistake, call_timeout=20, select="flop_counter")
    second = grade(mistake, call_timeout=20, select="flop_counter")
    assert first.seed == second.seed == seed_for(mistake.name)
    assert outcomes(first) == outcomes(second)
    random_test = [t for t in first.tests if RANDOM_TEST in t.name]
    assert random_test and random_test[0].status == "failed" and "seed" in random_test[0].message
    given = grade(mistake, call_timeout=20, select=RANDOM_TEST, seed=first.seed + 1)
    assert given.seed == first.seed + 1
    assert given.tests[0].message != random_test[0].message  # another seed, other inputs: the test can tell


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
