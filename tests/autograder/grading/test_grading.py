"""End to end: the sample cohort graded for real (runner, sandbox, hidden suites, batch, gradebook).

The reference scores full marks, the stubs zero, each typical mistake loses points but not all, and
no cheat scores more than the bare stubs or leaves anything running. Everything here goes through
`autograder.cohort.batch.run_batch` and `autograder.grading.client.grade`, as an instructor's run would.
"""

import json
import os
import sqlite3
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

from autograder.cohort import sample as cohort
from autograder.cohort.batch import run_batch
from autograder.grading.client import ServerPool, grade
from autograder.model.results import GradeReport
from autograder.sandbox import forked, policy

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The cohort graded by batches; {name: GradeReport}, "_out": the output folder, and "_stages": the name of
    the folder that held the graders' stage folders.

    The reference and the stubs are graded on every assignment with every test, by one worker (the default on
    two cores: it overlaps, the compile checks' builds beside the tests); the others by two workers each: the
    mistakes on resource_accounting's public tests; the cheats on the public tests of every assignment (a test
    that observes behaviour, memory say, must not be passed by code that returns nothing of use),
    but the two that burn their time budget (endless loop, fork bomb) on resource_accounting's public
    float_format tests only, with 1 s per call.
    """
    base = tmp_path_factory.mktemp("cohort")
    full = [m for m in cohort.MEMBERS if m.name in ("correct", "stubs")]
    slow = tuple(m for m in cohort.CHEATS if m.name in ("cheat-endless-loop", "cheat-fork-bomb"))
    cohort.build(base / "full", None, full)
    cohort.build(base / "battery", [ASSIGNMENT], cohort.MISTAKES)
    cohort.build(base / "battery", None, [m for m in cohort.CHEATS if m not in slow])
    cohort.build(base / "burners", [ASSIGNMENT], slow)
    out = base / "out"
    # The graders' stage folders (and so every worker's mounts) go under a folder of this run's own,
    # so that the leftover check below sees this cohort's processes, not another grader's on the machine.
    stages = base / f"stages-{uuid.uuid4().hex}"
    stages.mkdir()
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(stages)
    try:
        run_batch(base / "full", out, workers=1)
        # Honest calls here take milliseconds of CPU: 2 s each bounds what a call may burn. The loop and the
        # fork bomb burn every call's budget: 1 s each, on float_format's tests (enough to show they gain nothing).
        battery = ServerPool(call_timeout=2, select="not hidden")
        burners = ServerPool(call_timeout=1, select="float_format and not hidden")
        try:
            run_batch(base / "battery", out, workers=2, grade_fn=battery.grade)
            run_batch(base / "burners", out, workers=2, grade_fn=burners.grade)
        finally:
            battery.close()
            burners.close()
    finally:
        if saved is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved
    return {p.parent.name: GradeReport.from_json(p.read_text()) for p in out.glob("submissions/*/report.json")} | {
        "_out": out, "_stages": stages.name}


def graded_points(report: GradeReport) -> float:
    return sum(t.points for t in report.tests)


def gradable_max(report: GradeReport) -> float:
    return sum(t.max_points for t in report.tests if t.status not in ("not_graded", "manual"))


def test_every_member_of_the_cohort_was_graded(graded):
    assert set(graded) - {"_out", "_stages"} == {m.name for m in cohort.MEMBERS}
    for name, report in graded.items():
        if not name.startswith("_"):
            assert report.tests, f"{name}: no results ({report.log})"


def test_the_reference_scores_every_gradable_point(graded):
    report = graded["correct"]
    # Its written answers: every numeric part right, the prose waiting for a grader.
    failing = [(t.name, t.message[:300]) for t in report.tests if t.status not in ("passed", "not_graded", "manual")]
    assert failing == []
    assert graded_points(report) == gradable_max(report) > 0
    assert any(t.visibility == "hidden" for t in report.tests), "the hidden suite did not run"


def test_the_stubs_score_zero_and_fail_as_not_implemented(graded):
    report = graded["stubs"]
    assert graded_points(report) == 0
    assert {t.status for t in report.tests} <= {"not_implemented", "not_graded"}


def public_points(report: GradeReport, assignment: str = ASSIGNMENT) -> float:
    return sum(t.points for t in report.tests if t.assignment == assignment and t.visibility == "visible")


def test_both_assignments_were_graded_with_their_hidden_suites(graded):
    report = graded["correct"]
    assert {t.assignment for t in report.tests} == {"resource_accounting", "flash_attention", "gpu_kernels"}
    for assignment in ("resource_accounting", "flash_attention", "gpu_kernels"):
        assert any(t.assignment == assignment and t.visibility == "hidden" for t in report.tests)


@pytest.mark.parametrize("member", [m.name for m in cohort.MISTAKES])
def test_a_typical_mistake_loses_points_but_not_all(graded, member):
    report = graded[member]
    assert 0 < graded_points(report) < public_points(graded["correct"])


@pytest.mark.parametrize("member", [m.name for m in cohort.CHEATS])
def test_no_cheat_scores_more_than_the_stubs(graded, member):
    report = graded[member]
    passed = [t.name for t in report.tests if t.status == "passed"]
    assert report.tests and graded_points(report) <= public_points(graded["stubs"]) == 0, passed
    assert public_points(graded["stubs"], "flash_attention") == 0


def test_a_static_check_names_the_import_of_the_grader(graded):
    report = graded["cheat-import-grader"]
    assert any("static check" in t.message and "autograder" in t.message for t in report.tests)


def test_forged_reports_do_not_replace_the_graders(graded):
    out = graded["_out"]
    results = json.loads((out / "submissions" / "cheat-forge-reports" / "results.json").read_text())
    assert results["score"] == 0
    assert not (ROOT / "results.json").exists() and not (ROOT / "report.json").exists()


def test_results_json_is_valid_for_gradescope(graded):
    schema = json.loads((ROOT / "autograder" / "report" / "gradescope_schema.json").read_text())
    for name in ("correct", "stubs", "cheat-endless-loop"):
        jsonschema.validate(json.loads((graded["_out"] / "submissions" / name / "results.json").read_text()), schema)


def test_the_gradebook_holds_each_submission_once_with_its_score(graded):
    with sqlite3.connect(graded["_out"] / "gradebook.sqlite") as db:
        rows = dict(db.execute("SELECT name, score FROM submissions"))
    assert set(rows) == {m.name for m in cohort.MEMBERS}
    assert rows["correct"] == graded_points(graded["correct"]) and rows["stubs"] == 0


def test_the_log_states_the_active_protections(graded):
    log = graded["correct"].log
    assert any(line.startswith("bubblewrap: ") for line in log)
    assert any(line.startswith("processes: ") for line in log)
    # The graders ran with this test's temporary directory, deep enough that the zygote's socket path is longer
    # than a socket's address holds: where this machine allows a zygote, the workers were forked from it all the same.
    if forked.available(policy.detect("auto"), gpu=False)[0]:
        assert any(line.startswith("workers: forked from the grading server's zygote") for line in log), log


def started_by_this_cohort(entry: Path, marker: str) -> bool:
    """A worker process (or anything a submission forked from one) whose command line, working folder or
    mounts name this run's stage folder: bubblewrap's own processes name it in their arguments, the
    sandboxed ones in their bind mounts, an unsandboxed worker in its working folder."""
    if b"autograder.sandbox.worker" not in (entry / "cmdline").read_bytes():
        return False
    if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
        return True
    try:
        if marker in os.readlink(entry / "cwd"):
            return True
    except OSError:
        pass
    return marker in (entry / "mountinfo").read_text(errors="replace")


def cohort_processes(stages: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and started_by_this_cohort(entry, stages):
                found.append(entry.name)
        except OSError:
            pass  # it exited while we looked
    return found


def test_nothing_a_submission_started_is_left_running(graded):
    # A killed process takes a moment to leave /proc on a busy machine: wait for it, with a deadline.
    deadline = time.monotonic() + 30
    while (leftovers := cohort_processes(graded["_stages"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers == []


def test_a_server_without_overlap_grades_each_submission_in_turn(tmp_path):
    """Without overlap (`batch --overlap never`, and the default where cores are few), the next
    submission's child starts only after the current one is done; each still gets its own honest grade."""
    members = [m for m in cohort.MEMBERS if m.name in ("correct", "stubs")]
    paths = {p.name: p for p in cohort.build(tmp_path, [ASSIGNMENT], members)}
    pool = ServerPool(select="memory and not hidden", overlap=False)
    try:
        reports = {name: pool.grade(paths[name]) for name in ("correct", "stubs")}
        again = pool.grade(paths["correct"])
    finally:
        pool.close()
    correct, stubs = reports["correct"], reports["stubs"]
    assert correct.tests and [t.name for t in correct.tests] == [t.name for t in again.tests]
    assert all(t.status == "passed" for t in correct.tests + again.tests)
    assert [t.name for t in stubs.tests] == [t.name for t in correct.tests]
    assert graded_points(stubs) == 0 and graded_points(correct) == graded_points(again) > 0


def test_every_edit_of_the_mistakes_still_applies(tmp_path):
    cohort.build(tmp_path, None, cohort.MISTAKES)  # raises if the reference changed under an edit


def test_a_submission_with_no_packages_is_not_gradable_with_the_reason_not_a_zero(tmp_path):
    (tmp_path / "empty").mkdir()
    report = grade(tmp_path / "empty", assignment=ASSIGNMENT, call_timeout=20, select="test_memory", seed=1234)
    assert report.tests == [] and "no files to grade" in report.not_gradable
    assert report.seed == 1234  # the runner's report says which seed the grading had, though no test drew from it
