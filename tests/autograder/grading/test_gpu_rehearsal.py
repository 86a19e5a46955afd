"""The GPU rehearsal: the grader with every branch it takes on a GPU, on this CPU (docs/gpus.md, "Rehearsing
GPU grading on a CPU").

With LLMSYS_REHEARSE_GPU=1 the runner believes it has a GPU: 3 times the CPU per call and no address-space
limit, GPU workers (bubblewrap by the probed path, /dev/nvidia* bound where there are any, no
TRITON_INTERPRET given), the compile checks in a new process, the checks counted under Triton's interpreter
in a second, interpreting worker. Its GPU workers stand in for workers on a GPU (kernels.gpu_stand_in:
CUDA counts as started in them, and they count nothing under the interpreter) while their kernels run
interpreted on the CPU; the tests marked `gpu` stay "not graded here".

`make test` grades in one warm runner (tests/autograder/grading/rehearsal.py): the reference of the three
assignments at the tests that take each branch, a planted GPU-only mistake, and the reference again with
each fault of the first GPU grading put back, one at a time: every fault must cost points or the grading.
`make rehearse-gpu` (LLMSYS_REHEARSE_ALL=1) adds the reference of every assignment graded in full, and the
planted mistake, end to end through `python -m autograder grade`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cohort.sample import Edit, Member, build_member
from autograder.grading import runner
from autograder.harness.plugin import NOT_GRADED
from autograder.model.results import GRADER_FAULT, GradeReport
from autograder.sandbox import policy
from kernels import gpu_stand_in
from kernels.device import has_cuda

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENTS = ["resource_accounting", "gpu_kernels", "flash_attention"]
SEED = 1
FULL = os.environ.get("LLMSYS_REHEARSE_ALL") == "1"

pytestmark = [
    pytest.mark.skipif(has_cuda(), reason="the rehearsal stands in for a GPU on a machine without one"),
    pytest.mark.skipif(shutil.which("bwrap") is None or not policy.bwrap_status()[0],
                       reason="the rehearsal runs its workers under bubblewrap (install Debian's 'bubblewrap')"),
]

# The tests that take each branch: a value test and a test marked gpu of each assignment; the checks counted
# under the interpreter (program order, the loads per element, tl.dot calls per tile) with the ordinary tests
# they count with; a compile check of each Triton assignment.
VALUES = ("test_memory_usage_is_numel or test_flop_counter_counts_cuda or test_softmax_matches_float64_at_random or "
          "test_softmax_half_precision_on_gpu or test_triton_forward_matches_float64_at_random_shapes or "
          "test_triton_forward_is_several_times_faster")
COUNTED = ("(order and softmax) or test_softmax_reads_each_element_once_per_pass or "
           "test_triton_causal_forward_skips_the_tiles_above_the_diagonal")
BUILT = "test_gelu_matches_float64_at_random or (gelu_kernel_builds and bf16)"
COUNTED_TESTS = ("test_kernels_give_the_same_output_in_any_program_order[softmax]",
                 "test_softmax_reads_each_element_once_per_pass",
                 "test_triton_causal_forward_skips_the_tiles_above_the_diagonal")
GPU_TESTS = {"test_flop_counter_counts_cuda_programs_like_flop_counter_mode", "test_softmax_half_precision_on_gpu[bf16]",
             "test_softmax_half_precision_on_gpu[fp16]",
             "test_triton_forward_is_several_times_faster_than_naive_attention_on_gpu"}

# A GPU-only mistake: each softmax program masks its store against the end of the output, not of its row, and
# writes zeros past its row, which the next row's program overwrites when the programs run in increasing order
# (the interpreter's), but not in the order a GPU may run them. Every value test passes; only the interpreting
# worker, which runs the programs in other orders, sees it.
PAST_THE_ROW = Member("gpu-only-store-past-the-row", "solutions", (Edit(
    "gpu_kernels/softmax.py", "tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), mask=mask)",
    "tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), "
    "mask=row * stride_yr + cols < tl.num_programs(0) * stride_yr)"),))


def rehearse(folder: Path, jobs: dict[str, dict]) -> dict[str, GradeReport | str]:
    """{name: its GradeReport, or the log of a grading that wrote none} of the jobs (name -> {"fault",
    "submission", "assignments", "select"}), graded in one warm rehearsing runner."""
    listed = [{"fault": None, "seed": SEED, **job, "report": str(folder / f"{name}.json")} for name, job in jobs.items()]
    (folder / "jobs.json").write_text(json.dumps(listed))
    env = {**os.environ, runner.REHEARSAL: "1"}
    done = subprocess.run([sys.executable, "-m", "tests.autograder.grading.rehearsal", str(folder / "jobs.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    found = {}
    for name in jobs:
        report, log = folder / f"{name}.json", folder / f"{name}.log"
        found[name] = (GradeReport.from_json(report.read_text()) if report.exists() else
                       (log.read_text() if log.exists() else "") + done.stdout[-2000:] + done.stderr[-3000:])
    return found


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory) -> dict[str, GradeReport | str]:
    folder = tmp_path_factory.mktemp("rehearsal")
    planted = build_member(PAST_THE_ROW, folder / "cohort", ["gpu_kernels"])
    reference = {"submission": str(ROOT / "solutions"), "assignments": ASSIGNMENTS}
    kernels = {"submission": str(ROOT / "solutions"), "assignments": ["gpu_kernels"]}
    return rehearse(folder, {
        "reference": {**reference, "select": f"{VALUES} or {COUNTED} or {BUILT}"},
        "planted": {"submission": str(planted), "assignments": ["gpu_kernels"],
                    "select": "test_softmax_matches_float64_at_random or (order and softmax)"},
        "bwrap-by-name": {**kernels, "fault": "bwrap-by-name", "select": "test_softmax_matches_float64_at_random"},
        "forked-compile": {**kernels, "fault": "forked-compile", "select": BUILT},
        "interpreted-on-gpu": {**reference, "fault": "interpreted-on-gpu", "select": COUNTED},
    })


def graded(rehearsed: dict, name: str) -> GradeReport:
    report = rehearsed[name]
    assert isinstance(report, GradeReport), f"the rehearsal's grading {name!r} wrote no report:\n{report}"
    return report


def by_name(report: GradeReport) -> dict[str, tuple[str, str]]:
    """{test name without its file: (status, message)}."""
    return {t.name.rpartition("::")[2]: (t.status, t.message) for t in report.tests}


def test_the_reference_takes_every_gpu_branch_and_keeps_every_point(rehearsed):
    report = graded(rehearsed, "reference")
    found = by_name(report)
    log = "\n".join(report.log)
    assert "GPU grader: each call may use 180 s of CPU" in log and "no address-space limit (GPU)" in log, log
    assert "GPU REHEARSAL" in log, log
    not_passed = {name: result for name, result in found.items() if result[0] != "passed"}
    assert {name for name, (status, message) in not_passed.items() if (status, message) == ("not_graded", NOT_GRADED)} \
        == GPU_TESTS, not_passed
    assert set(not_passed) == GPU_TESTS, f"only the tests that need CUDA may go without their points: {not_passed}"
    assert all(name in found for name in COUNTED_TESTS), sorted(found)
    assert "test_gelu_kernel_builds_for_the_course_gpu[bf16]" in found
    assert report.timings["builds_ahead"] > 0 and report.timings["cpu_builds"] > 0, report.timings


def test_a_gpu_only_mistake_loses_its_points(rehearsed):
    """A store past the row: right in the interpreter's order, so every value test passes; the program-order
    check, which only the interpreting worker beside the GPU worker can run, fails it."""
    found = by_name(graded(rehearsed, "planted"))
    assert found["test_softmax_matches_float64_at_random_shapes_views_and_blocks"][0] == "passed", found
    status, message = found["test_kernels_give_the_same_output_in_any_program_order[softmax]"]
    assert status == "failed" and "softmax_triton" in message, (status, message[:2000])


def test_bubblewrap_run_by_name_fails_the_rehearsal(rehearsed):
    """Fault 1: bubblewrap run by its name on the worker's PATH, which lacks it. No worker starts, and the
    grader says it is its own fault, naming what it could not run; nothing counts as the student's failure."""
    report = graded(rehearsed, "bwrap-by-name")
    assert report.tests and report.score == 0, [(t.name, t.status) for t in report.tests]
    assert {t.status for t in report.tests} == {"error"} and len(report.overloaded) == len(report.tests)
    assert all(GRADER_FAULT in t.message and "could not run 'bwrap'" in t.message for t in report.tests), \
        report.tests[0].message[-2000:]


def test_a_compile_forked_from_the_gpu_worker_fails_the_rehearsal(rehearsed):
    """Fault 2: the compile checks' builds forked from a worker that has started CUDA (its stand-in here) lose
    their points with CUDA's own error, as on the H100."""
    status, message = by_name(graded(rehearsed, "forked-compile"))["test_gelu_kernel_builds_for_the_course_gpu[bf16]"]
    assert status == "failed" and "Cannot re-initialize CUDA in forked subprocess" in message, (status, message[:2000])


def test_counted_checks_sent_to_the_gpu_worker_fail_the_rehearsal(rehearsed):
    """Fault 3: the checks counted under Triton's interpreter sent to the GPU worker, which counts nothing, lose
    their points: skipped, as on the H100, or failed where the code under test took its GPU path there (the
    reference's forward autotunes over several configs, which a worker without a GPU cannot run)."""
    report = graded(rehearsed, "interpreted-on-gpu")
    found = by_name(report)
    assert {found[name][0] for name in COUNTED_TESTS} <= {"skipped", "failed"}, found
    assert found[COUNTED_TESTS[0]][0] == "skipped", found
    assert report.score == 0 and report.max_score > 0


def test_the_switch_is_one_or_unset_and_never_on_a_gpu(monkeypatch):
    monkeypatch.setenv(runner.REHEARSAL, "yes")
    with pytest.raises(runner.RehearsalError, match="must be 1"):
        runner.rehearsing()
    monkeypatch.setenv(runner.REHEARSAL, "1")
    assert runner.rehearsing()
    monkeypatch.setattr(runner, "has_cuda", lambda: True)
    with pytest.raises(runner.RehearsalError, match="this one has CUDA"):
        runner.rehearsing()
    monkeypatch.delenv(runner.REHEARSAL)
    assert not runner.rehearsing()


def test_a_stand_in_refuses_a_compile_in_a_child_forked_from_it(monkeypatch):
    """CUDA's rule, as the stand-in keeps it: the process that started as a GPU worker compiles (in a new
    process), a child forked from it cannot."""
    monkeypatch.setattr(gpu_stand_in, "_started_in", None)
    assert not gpu_stand_in.start() and not gpu_stand_in.cuda_in_reach(), "nothing without the grader's variable"
    monkeypatch.setenv(gpu_stand_in.VARIABLE, "1")
    assert gpu_stand_in.start() and gpu_stand_in.cuda_in_reach()
    assert gpu_stand_in.VARIABLE not in os.environ, "taken out of the environment: the new process does not start"
    gpu_stand_in.refuse_a_forked_compile()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            gpu_stand_in.refuse_a_forked_compile()
            said = b"compiled"
        except RuntimeError as exc:
            said = str(exc).encode()
        os.write(write, said)
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    said = os.read(read, 4096).decode()
    os.close(read)
    assert said.startswith("Cannot re-initialize CUDA in forked subprocess"), said


@pytest.mark.skipif(not FULL, reason="the full rehearsal, every assignment graded: make rehearse-gpu")
def test_every_assignment_of_the_reference_keeps_every_point_but_the_gpu_tests(tmp_path):
    """`python -m autograder grade solutions` rehearsing: every test of the three assignments passes but those
    marked gpu, which are not graded here, and the written answers that wait for hand grading."""
    report = grade_cli(tmp_path, ROOT / "solutions")
    gpu_marked = marked_gpu()
    assert {t.assignment for t in report.tests} == set(ASSIGNMENTS)
    wrong = [(t.name, t.status, t.message[:300]) for t in report.tests if t.status != "passed" and not (
        (t.status, t.message) == ("not_graded", NOT_GRADED) and t.name in gpu_marked) and t.status != "manual"]
    assert not wrong, wrong
    assert {t.name for t in report.tests if t.status == "not_graded"} == gpu_marked & {t.name for t in report.tests}


@pytest.mark.skipif(not FULL, reason="the full rehearsal, every assignment graded: make rehearse-gpu")
def test_the_gpu_only_mistake_loses_only_the_program_order_points(tmp_path):
    planted = build_member(PAST_THE_ROW, tmp_path / "cohort", ["gpu_kernels"])
    report = grade_cli(tmp_path, planted)
    lost = sorted(t.name.rpartition("::")[2] for t in report.tests if t.status not in ("passed", "not_graded", "manual"))
    assert lost == ["test_kernels_give_the_same_output_in_any_program_order[softmax]"], lost


def grade_cli(tmp_path: Path, submission: Path) -> GradeReport:
    out = tmp_path / "out"
    env = {**os.environ, runner.REHEARSAL: "1"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submission), "--seed", str(SEED), "--out",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert (out / "report.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = GradeReport.from_json((out / "report.json").read_text())
    assert any("GPU REHEARSAL" in line for line in report.log), report.log
    return report


def marked_gpu() -> set[str]:
    """The node ids of every test of the three assignments marked gpu."""
    paths = [p for a in ASSIGNMENTS for p in runner.test_paths(a)]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                           "--impl", str(ROOT / "solutions"), *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    found = {line.strip() for line in done.stdout.splitlines() if "::" in line}
    assert found, done.stdout[-2000:] + done.stderr[-2000:]
    return {str(Path(p.partition("::")[0]).resolve().relative_to(ROOT)) + "::" + p.partition("::")[2] for p in found}
