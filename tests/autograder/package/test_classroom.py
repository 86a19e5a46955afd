"""GitHub Classroom: the template repository, its workflow as the grading reporter reads it, one real step."""

import base64
import json
import shlex
import subprocess

import yaml

from autograder.package.classroom import REPORTER, WORKFLOW
from autograder.package.classroom_step import STEP_TIMEOUT, result
from autograder.model.results import GradeReport, TestResult
from autograder.package.layout import ROOT
from tests.autograder.package.conftest import ASSIGNMENT, HANG_TIMEOUT, TEST_TIMEOUT, clean_env


def workflow(packaged) -> dict:
    return yaml.safe_load((packaged.dist / "classroom" / WORKFLOW).read_text())


def grading_steps(packaged) -> list[dict]:
    steps = workflow(packaged)["jobs"]["run-autograding-tests"]["steps"]
    return [step for step in steps if "classroom_step" in step.get("run", "")]


def test_the_template_is_the_student_release_plus_the_workflow_and_its_step_script(packaged):
    template, student = packaged.dist / "classroom", packaged.dist / "student"
    files = {p.relative_to(template).as_posix() for p in template.rglob("*") if p.is_file()}
    released = {p.relative_to(student).as_posix() for p in student.rglob("*") if p.is_file()}
    assert files - released == {WORKFLOW, "autograder/package/__init__.py", "autograder/package/classroom_step.py"}
    assert released <= files


def test_the_workflow_has_the_one_job_and_name_the_reporter_requires(packaged):
    flow = workflow(packaged)
    assert flow["name"] == "Autograding Tests" and list(flow["jobs"]) == ["run-autograding-tests"]
    assert "push" in flow["on"]
    steps = flow["jobs"]["run-autograding-tests"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@") and {"run": "make install"}.items() <= steps[2].items()
    # The repository's TORCH_INDEX variable reaches the Makefile's `TORCH_INDEX ?=` through the environment.
    assert steps[2]["env"] == {"TORCH_INDEX": "${{ vars.TORCH_INDEX }}"}


def test_the_workflows_make_install_takes_torch_then_the_templates_lock_with_its_hashes(packaged):
    """What the install step runs: the template's Makefile with the TORCH_INDEX the workflow passes on."""
    template = packaged.dist / "classroom"
    plan = subprocess.run(["make", "-n", "install"], cwd=template, env=clean_env(TORCH_INDEX="file:///cpu-wheels"),
                          capture_output=True, text=True, check=True).stdout
    pips = [line for line in plan.splitlines() if " -m pip install " in line]
    # Each pip's arguments, without the redirection of its output to .venv/install.log that follows them.
    assert [pip.split("--disable-pip-version-check ")[1].split(" >>")[0] for pip in pips] == [
        "torch==2.13.0 --index-url file:///cpu-wheels", "--require-hashes -r requirements.lock"]
    assert (template / "requirements.lock").read_bytes() == (ROOT / "requirements.lock").read_bytes()


def test_the_reporter_reads_every_grading_step_by_its_id(packaged):
    steps = workflow(packaged)["jobs"]["run-autograding-tests"]["steps"]
    reporter = steps[-1]
    ids = [step["id"] for step in grading_steps(packaged)]
    assert reporter["uses"] == REPORTER and len(ids) == len(set(ids)) > 0
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}


def test_the_steps_points_add_up_to_the_public_total_one_step_per_public_file(packaged):
    steps = grading_steps(packaged)
    commands = [shlex.split(step["run"]) for step in steps]
    files = [command[command.index("autograder.package.classroom_step") + 1] for command in commands]
    points = [float(command[command.index("--max-score") + 1]) for command in commands]
    public = [t for t in packaged.tests if t.public]
    assert sorted(files) == sorted({t.path for t in public})
    assert sum(points) == sum(t.points for t in public) > 200
    for path, value in zip(files, points):
        assert value == sum(t.points for t in public if t.path == path), path


def test_a_real_step_on_the_stubs_reports_zero_of_its_points_in_the_reporters_format(packaged):
    code, output = packaged.job("classroom").wait()
    assert code == 0, output[-3000:]
    line = (packaged.work / "classroom-output").read_text().strip()
    assert line.startswith("result=")
    outcome = json.loads(base64.b64decode(line.removeprefix("result=")))
    path = f"tests/{ASSIGNMENT}/test_memory.py"
    assert (outcome["version"], outcome["status"]) == (1, "fail")
    assert outcome["max_score"] == sum(t.points for t in packaged.tests if t.path == path)
    assert outcome["tests"] and all(t["score"] == 0 and t["status"] == "fail" for t in outcome["tests"])
    assert "points" in output  # pytest's own output, the points table included, is in the step's log


def hang_outcomes(packaged) -> list[dict]:
    code, output = packaged.job("classroom-hang").wait()
    assert code == 0, output[-3000:]
    lines = (packaged.work / "classroom-hang-output").read_text().split()
    return [json.loads(base64.b64decode(line.removeprefix("result="))) for line in lines]


def test_an_endless_loop_fails_only_the_tests_that_call_it_each_naming_its_timeout(packaged):
    hung, after, _ = hang_outcomes(packaged)
    path = f"tests/{ASSIGNMENT}/test_memory.py"
    assert hung["status"] == "fail" and hung["max_score"] == sum(t.points for t in packaged.tests if t.path == path)
    failed = {t["name"]: t["message"] for t in hung["tests"] if t["status"] == "fail"}
    assert sorted(failed) == ["test_float32_4x8_tensor_takes_128_bytes", "test_gpt3_ffn_matrix_takes_2304_mib_"
                              "measured_on_a_meta_tensor", "test_memory_usage_is_numel_times_element_size"]
    for message in failed.values():
        assert f"timed out after {TEST_TIMEOUT} s, in get_memory_usage (assignments/{ASSIGNMENT}/memory.py:" in message
    passed = [t for t in hung["tests"] if t["status"] == "pass"]
    assert len(passed) > 10 and all(t["score"] > 0 for t in passed)  # the rest of the file graded as usual
    assert after["status"] == "fail" and after["tests"] and all(t["score"] == 0 for t in after["tests"])


def test_a_loop_no_signal_stops_is_stopped_at_the_steps_deadline_naming_the_test(packaged):
    *_, stopped = hang_outcomes(packaged)
    assert stopped["status"] == "error" and f"did not finish within {HANG_TIMEOUT} s" in stopped["message"]
    assert "while running test_h100_ridge_point_is_about_295_flop_per_byte" in stopped["message"]
    assert stopped["max_score"] == sum(t.points for t in packaged.tests if t.path == f"tests/{ASSIGNMENT}/test_flops.py")
    finished = [t["name"] for t in stopped["tests"]]
    assert "test_matmul_flops_is_2mnp" in finished and not any(name.startswith("test_h100_ridge") for name in finished)


def test_every_grading_step_and_the_reporter_run_whatever_came_before(packaged):
    steps = workflow(packaged)["jobs"]["run-autograding-tests"]["steps"]
    assert all(step.get("if") == "always()" for step in grading_steps(packaged) + [steps[-1]])
    assert all(step["timeout-minutes"] * 60 > STEP_TIMEOUT for step in grading_steps(packaged))


def report(*statuses: str) -> GradeReport:
    return GradeReport("s", [TestResult(f"t.py::test_{i}", "a", 1.5, status) for i, status in enumerate(statuses)])


def test_a_step_passes_with_gpu_tests_left_out_of_its_tests_and_its_max_score():
    outcome = result(report("passed", "not_graded", "passed"), "t.py", 4.5)
    assert (outcome["status"], outcome["max_score"]) == ("pass", 3.0)
    assert [t["score"] for t in outcome["tests"]] == [1.5, 1.5]
    assert "1 test(s) worth 1.5 points need a GPU" in outcome["message"]
    assert result(report("passed", "failed"), "t.py", 3)["status"] == "fail"


def test_a_step_whose_points_disagree_with_the_workflow_is_an_error():
    outcome = result(report("passed"), "t.py", 2)
    assert outcome["status"] == "error" and "make classroom" in outcome["message"]
    assert result(None, "t.py", 2)["status"] == "error"
