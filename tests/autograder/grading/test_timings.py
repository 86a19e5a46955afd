"""Where a grading's time goes: the runner times its steps into GradeReport.timings (make bench-grader reads them).

The steps are autograder.grading.runner.TIMINGS: the sandbox built, the submission staged, the static
checks, the pytest run, and within it the compile checks and the waits for the worker's boot; and the CPU
seconds of the grading process, of the submission's workers and of the builds. A report written before they
were timed still reads, with no timings.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from autograder.cohort import sample as cohort
from autograder.grading.client import grade
from autograder.model.results import GradeReport
from autograder.grading.runner import TIMINGS, GraderPlugin

COMPILE_TEST = "autograder/suites/gpu_kernels/test_gpu_compile.py::test_gelu_kernel_builds_for_the_course_gpu[bf16]"


def test_a_report_keeps_its_timings_and_one_from_before_them_reads_without():
    report = GradeReport("alice", timings={"stage": 0.25, "tests": 3.5})
    assert GradeReport.from_json(report.to_json()).timings == {"stage": 0.25, "tests": 3.5}
    older = json.loads(GradeReport("bob").to_json())
    del older["timings"]
    assert GradeReport.from_json(json.dumps(older)).timings == {}


def test_the_compile_checks_are_the_durations_of_their_tests_only():
    plugin = GraderPlugin(student=None)
    for nodeid, duration in [(COMPILE_TEST, 0.5), (COMPILE_TEST, 4.0), (COMPILE_TEST, 0.25),
                             ("tests/gpu_kernels/test_elementwise.py::test_gelu_matches_float64[0]", 2.0),
                             ("autograder/suites/gpu_kernels/test_hidden_kernels.py::test_gpu_compile_named[x]", 1.0)]:
        plugin.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    assert plugin.compile_seconds == 4.75  # set-up, call and tear-down of the compile test


def test_a_grading_times_each_of_its_steps(tmp_path):
    (reference,) = cohort.build(tmp_path, ["gpu_kernels"], [cohort.Member("correct", "solutions")])
    report = grade(reference, assignment="gpu_kernels",
                   select="test_gelu_matches_float64 or (test_gelu_kernel_builds_for_the_course_gpu and bf16)")
    assert {t.name.rpartition("::")[2].split("[")[0] for t in report.tests if t.status == "passed"} >= {
        "test_gelu_matches_float64", "test_gelu_kernel_builds_for_the_course_gpu"}, report.log
    timings = report.timings
    assert list(timings) == list(TIMINGS)
    assert all(seconds >= 0 for seconds in timings.values())
    assert timings["sandbox_build"] > 0 and timings["tests"] > 0
    assert 0 < timings["compile"] < timings["tests"]  # the gelu correctness tests ran beside the build
    assert timings["builds_ahead"] > 0  # the build started once the tests were collected (grading.ahead)
    assert timings["sandbox_wait"] <= timings["tests"]
    assert timings["stage"] + timings["static"] + timings["tests"] <= report.execution_time
    # CPU seconds: the worker's start alone imports torch (about a second), the build's compiler more; the
    # grading process ran the tests.
    assert timings["cpu_student"] > 0.3 and timings["cpu_builds"] > 0.3 and timings["cpu_grader"] > 0.05, timings
