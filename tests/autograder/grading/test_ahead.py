"""The compile checks' builds start once the tests are collected and run beside them (autograder.grading.ahead).

Graded for real, a submission's compile checks take their answers from the builds started ahead, and lose
or keep the same points as when each check builds for itself: a GPU-only mistake (fp32 tiles fed to tl.dot)
still loses the matmul's compile points, with the same message; a server that does not overlap (workers that
share the cores) builds nothing beside the tests, but when the first check asks, in the same builds' worker
(forked from the builds' zygote, so that no build starts a new interpreter). The builds of every check in one
compiler process answer as each check's own builds do. A build that failed ahead is asked of the submission's
worker as before, and a call that was not planned never waits for the builds; lazy builds start at the first
planned call only, and never once the grading stops.
"""

from __future__ import annotations

import threading

import pytest

from autograder.cohort import sample as cohort
from autograder.grading import ahead
from autograder.grading.client import ServerPool
from autograder.sandbox import forked, policy
from autograder.sandbox.process import RemoteStudent, WorkerError
from autograder.suites.gpu_kernels import scenarios as kernel_scenarios
from autograder.suites.gpu_kernels import test_gpu_compile as kernel_checks
from kernels.device import has_cuda

MATMUL = "test_matmul_matches_float64_at_random_shapes or (test_matmul_kernels_build_for_the_course_gpu and bf16)"
GELU = "test_gelu_matches_float64 or (test_gelu_kernel_builds_for_the_course_gpu and bf16)"


def outcome(report, name: str) -> tuple[str, str]:
    (found,) = [t for t in report.tests if t.name.rpartition("::")[2] == name]
    return found.status, found.message


@pytest.mark.skipif(has_cuda(), reason="on a GPU the matmul's value test runs the real kernel; CPU case here")
def test_a_gpu_only_mistake_loses_its_compile_point_with_the_builds_ahead(tmp_path, warm_grade):
    """The fp32-dot mistake (right on a CPU) loses the matmul's bf16 compile point, saying why, with the builds
    started ahead (their time is in the report) and the check's own time only its wait for them. (The
    reference and a correct alternative keep theirs so: test_timings.py, test_suites_flash_attention.py.)"""
    chosen = [m for m in cohort.MISTAKES_OF["gpu_kernels"] if m.name == "mistake-fp32-dot"]
    (tree,) = cohort.build(tmp_path, ["gpu_kernels"], chosen)
    report = warm_grade(tree, assignment="gpu_kernels", select=MATMUL)
    assert outcome(report, "test_matmul_matches_float64_at_random_shapes")[0] == "passed", report.log
    status, message = outcome(report, "test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]")
    assert status == "failed"
    for words in ("_matmul_kernel", "without tensor-core instructions", "bf16/fp16 operands"):
        assert words in message, f"{words!r} missing from the feedback:\n{message[:2000]}"
    assert report.timings["builds_ahead"] > 0, report.timings
    assert report.timings["compile"] < report.timings["builds_ahead"] + 1.0, report.timings


@pytest.mark.skipif(has_cuda(), reason="on a GPU the matmul's value test runs the real kernel; CPU case here")
def test_a_server_without_overlap_builds_when_the_first_check_asks(tmp_path):
    """A grading server that does not overlap (a batch whose workers already share the cores) builds nothing
    beside the tests: the builds start when the first check asks, the tests waiting for them (the check's time
    holds the builds'), with the same verdict; and they are made by the builds' worker, forked from the builds'
    zygote where this machine allows one, not by the submission's worker, whose Triton interprets (each of its
    builds would be a new interpreter importing torch and Triton)."""
    (tree,) = cohort.build(tmp_path, ["gpu_kernels"], [cohort.Member("correct", "solutions")])
    pool = ServerPool(overlap=False, select=GELU)
    try:
        report = pool.grade(tree)
    finally:
        pool.close()
    assert outcome(report, "test_gelu_kernel_builds_for_the_course_gpu[bf16]")[0] == "passed", report.log
    assert 0 < report.timings["builds_ahead"] < report.timings["compile"], report.timings
    assert report.timings["cpu_builds"] > 0, report.timings
    (line,) = [line for line in report.log if line.startswith("compile checks: ")]
    assert "they were built when the first check asked" in line, line
    if forked.available(policy.detect("auto"), gpu=False)[0]:
        assert line.endswith("by a worker forked from the builds' zygote"), line


def test_no_build_starts_for_a_check_that_a_static_check_fails(tmp_path, warm_grade):
    """A matmul that calls torch.matmul fails the static check of its task: its compile checks fail without
    asking for a build, so none is started ahead."""
    (tree,) = cohort.build(tmp_path, ["gpu_kernels"], [cohort.Member("correct", "solutions")])
    path = tree / "gpu_kernels" / "matmul.py"
    text = path.read_text()
    assert text.count("def matmul_triton(") == 1
    path.write_text(text.replace("def matmul_triton(", "def _unused(a, b):\n    return torch.matmul(a, b)\n\n\n"
                                 "def matmul_triton("))
    report = warm_grade(tree, assignment="gpu_kernels", select=MATMUL)
    status, message = outcome(report, "test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores[bf16]")
    assert status == "failed" and "static check" in message and "torch.matmul" in message, message
    assert report.timings["builds_ahead"] == 0, report.timings


def test_the_builds_of_every_check_in_one_process_answer_as_each_checks_own(monkeypatch):
    """gpu_builds_ahead (every check's requests in one compiler process) gives each call the answer that
    gpu_builds gives it alone, build by build (the seconds aside)."""
    calls = [kernel_checks.build_call("gelu", dtype) for dtype in ("fp16", "bf16")]

    def plain(answer: dict) -> dict:
        return {**answer, "builds": [{k: v for k, v in b.items() if k != "seconds"} for b in answer.get("builds", [])]}

    monkeypatch.setattr(kernel_scenarios, "_BUILT", {})
    together = kernel_scenarios.gpu_builds_ahead(calls)
    monkeypatch.setattr(kernel_scenarios, "_BUILT", {})
    alone = [kernel_scenarios.gpu_builds(**call) for call in calls]
    assert [plain(a) for a in together] == [plain(a) for a in alone]
    assert all(a.get("builds") and all(b["ok"] for b in a["builds"]) for a in together), together


class Refusing:
    """A second worker whose requests fail, as an overloaded or crashed one's do (the first, the submission's,
    is not asked here)."""

    def __init__(self) -> None:
        self.asked, self.stopped = [], 0

    def request(self, message: dict, timeout: float):
        self.asked.append(message)
        raise WorkerError("the worker died from SIGKILL")

    def stop(self) -> None:
        self.stopped += 1


class Asked:
    """The submission's worker as RemoteStudent sees it: records what it was asked and answers it."""

    def __init__(self) -> None:
        self.asked, self.meter = [], None

    def ready(self) -> None:
        pass

    def request(self, message: dict, timeout: float):
        self.asked.append(message["name"])
        return {"answered": "by the submission's worker"}


def test_a_build_that_failed_ahead_is_asked_of_the_submissions_worker():
    """The planned call's answer is missing when its build failed ahead: the check asks the submission's worker,
    which answers it; the second worker is stopped once its builds are done (its CPU seconds counted then),
    and twice more when the grading stops."""
    call = kernel_checks.build_call("gelu", "bf16")
    refusing = Refusing()
    builds = ahead.BuildsAhead(refusing, [(kernel_scenarios.gpu_builds, call)])
    builds.thread.join(timeout=30)
    assert refusing.stopped == 1
    assert [m["name"] for m in refusing.asked] == ["autograder.suites.gpu_kernels.scenarios:gpu_builds_ahead"]
    assert refusing.asked[0]["kwargs"] == {"calls": [call]}
    student = RemoteStudent(Asked(), timeout=5)
    student.answered_ahead = builds.take
    assert student.run(kernel_scenarios.gpu_builds, **call) == {"answered": "by the submission's worker"}
    assert student.worker.asked == ["autograder.suites.gpu_kernels.scenarios:gpu_builds"]
    builds.stop()
    assert refusing.stopped == 3


class Answering:
    """A second worker that answers the planned builds once `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def request(self, message: dict, timeout: float):
        self.release.wait(30)
        return [{"from": "ahead", **call} for call in message["kwargs"]["calls"]]

    def stop(self) -> None:
        self.release.set()


def test_a_planned_call_waits_for_its_build_and_others_never_wait():
    """A planned call gets the answer built ahead for exactly its arguments, in any order, once it is ready; a
    call with other arguments, or another scenario, goes to the submission's worker at once."""
    bf16, fp16 = (kernel_checks.build_call("matmul", dtype) for dtype in ("bf16", "fp16"))
    second = Answering()
    builds = ahead.BuildsAhead(second, [(kernel_scenarios.gpu_builds, bf16), (kernel_scenarios.gpu_builds, fp16)])
    student = RemoteStudent(Asked(), timeout=5)
    student.answered_ahead = builds.take
    assert student.run(kernel_scenarios.profile_linear, size=4, k=1) == {"answered": "by the submission's worker"}
    assert student.run(kernel_scenarios.gpu_builds, **{**bf16, "kernel": "gelu"}) == {
        "answered": "by the submission's worker"}
    assert builds.thread.is_alive(), "an unplanned call waited for the builds"
    second.release.set()
    assert student.run(kernel_scenarios.gpu_builds, **dict(reversed(fp16.items()))) == {"from": "ahead", **fp16}
    assert student.worker.asked == ["autograder.suites.gpu_kernels.scenarios:profile_linear",
                                    "autograder.suites.gpu_kernels.scenarios:gpu_builds"]


def test_the_planned_builds_are_those_of_the_collected_checks(pytestconfig):
    """builds_ahead of each compile-check module plans one build per collected build check (its kernel or part
    and its dtype), once for two checks that read the same build (the GeLU's loads and its build), none for the
    other tests, and a module that cannot say plans nothing."""
    class Item:
        def __init__(self, module, name: str, dtype: str | None = None) -> None:
            self.module, self.originalname = module, name
            self.callspec = type("Spec", (), {"params": {"dtype": dtype} if dtype else {}})()

    items = [Item(kernel_checks, "test_gelu_kernel_builds_for_the_course_gpu", "fp16"),
             Item(kernel_checks, "test_matmul_kernels_build_for_the_course_gpu_with_tensor_cores", "bf16"),
             Item(kernel_checks, "test_gelu_kernel_loads_128_bits_per_thread_on_the_course_gpu", "fp16"),
             Item(kernel_checks, "test_kernels_give_the_same_output_in_any_program_order")]
    assert ahead.planned(items) == [(kernel_scenarios.gpu_builds, kernel_checks.build_call("gelu", "fp16")),
                                    (kernel_scenarios.gpu_builds, kernel_checks.build_call("matmul", "bf16"))]

    class Broken:
        @staticmethod
        def builds_ahead(items):
            raise pytest.UsageError("LLMSYS_COURSE_GPU='sm_42' is not a target")

    assert ahead.planned([Item(Broken, "test_x")]) == []


class Counting(Answering):
    """A second worker that counts the requests it was asked, and answers them at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.asked, self.stopped = 0, 0

    def request(self, message: dict, timeout: float):
        self.asked += 1
        return super().request(message, timeout)

    def stop(self) -> None:
        self.stopped += 1


def test_lazy_builds_start_at_the_first_planned_call_only():
    """Lazy builds (a server without overlap) ask nothing of the second worker at first, nor for a call that was
    not planned; the first planned call starts every planned build, once, and takes its answer; the next takes
    its own without asking again."""
    bf16, fp16 = (kernel_checks.build_call("gelu", dtype) for dtype in ("bf16", "fp16"))
    second = Counting()
    builds = ahead.BuildsAhead(second, [(kernel_scenarios.gpu_builds, bf16), (kernel_scenarios.gpu_builds, fp16)],
                               lazy=True)
    student = RemoteStudent(Asked(), timeout=5)
    student.answered_ahead = builds.take
    assert not builds.thread.is_alive() and second.asked == 0
    assert student.run(kernel_scenarios.profile_linear, size=4, k=1) == {"answered": "by the submission's worker"}
    assert second.asked == 0, "an unplanned call started the builds"
    assert student.run(kernel_scenarios.gpu_builds, **bf16) == {"from": "ahead", **bf16}
    assert student.run(kernel_scenarios.gpu_builds, **fp16) == {"from": "ahead", **fp16}
    assert second.asked == 1 and second.stopped == 1  # both builds in one request; its worker stopped once done
    assert student.worker.asked == ["autograder.suites.gpu_kernels.scenarios:profile_linear"]
    builds.stop()


def test_lazy_builds_never_start_once_the_grading_stops():
    """A grading that stops before any check asked (its tests ended, or it was ended) starts no builds: a planned
    call after that is asked of the submission's worker, and the stop does not wait for a thread that never ran."""
    call = kernel_checks.build_call("gelu", "bf16")
    second = Counting()
    builds = ahead.BuildsAhead(second, [(kernel_scenarios.gpu_builds, call)], lazy=True)
    builds.stop()
    student = RemoteStudent(Asked(), timeout=5)
    student.answered_ahead = builds.take
    assert student.run(kernel_scenarios.gpu_builds, **call) == {"answered": "by the submission's worker"}
    assert second.asked == 0 and builds.seconds == 0.0
