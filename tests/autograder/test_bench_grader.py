"""The grading-loop benchmark (`make bench-grader`): its cohorts, its nbgrader notebooks, its tables.

The benchmark itself runs for minutes and is not run here; these tests check that what it compares
is comparable: each assignment's cohort cycles through the reference and every typical mistake, and
each nbgrader notebook holds exactly its submission's code, as the trusted grader reads a notebook
back; and that its tables and projection are the arithmetic they say, from canned figures.
"""

from pathlib import Path

import nbformat
import pytest

from autograder import bench
from autograder.cohort import sample as cohort
from autograder.grading.notebook import read_modules
from autograder.model.results import GradeReport
from autograder.grading.runner import COMPILE_CHECKS, TIMINGS
from kernels.impl import packages

ROOT = Path(__file__).resolve().parents[2]


def modules(folder: Path, package: str) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted((folder / package).glob("*.py")) if p.name != "__init__.py"}


def test_every_assignment_has_typical_mistakes_for_its_cohort():
    assert sorted(bench.ASSIGNMENTS) == sorted(packages(ROOT / "solutions"))
    assert all(len(cohort.MISTAKES_OF[name]) >= 2 for name in bench.ASSIGNMENTS)


@pytest.mark.parametrize("assignment", bench.ASSIGNMENTS)
def test_the_cohort_cycles_through_the_reference_and_each_typical_mistake(tmp_path, assignment):
    mistakes = cohort.MISTAKES_OF[assignment]
    paths = bench.build_cohort(tmp_path, assignment, len(mistakes) + 2)  # raises if an edit no longer applies
    kinds = ["correct"] + [m.name for m in mistakes] + ["correct"]
    assert [p.name for p in paths] == [f"student-{i + 1:02d}-{kind}" for i, kind in enumerate(kinds)]
    assert [sorted(p.iterdir()) for p in paths] == [[p / assignment] for p in paths]
    assert modules(paths[0], assignment) == modules(paths[-1], assignment)
    assert all(modules(p, assignment) != modules(paths[0], assignment) for p in paths[1:-1]), \
        "a mistake left the reference unchanged"


def test_each_nbgrader_notebook_holds_exactly_its_submissions_code(tmp_path):
    cohorts = {name: bench.build_cohort(tmp_path / "cohort" / name, name, 2) for name in bench.ASSIGNMENTS}
    course = tmp_path / "course"
    bench.notebooks_course(course, cohorts)
    for name, paths in cohorts.items():
        for path in paths:
            folder = course / "submitted" / path.name / name
            nb = nbformat.read(folder / f"{name}.ipynb", as_version=4)
            assert any(cell.metadata.get("nbgrader", {}).get("grade") for cell in nb.cells), "no graded test cell"
            files, problems = read_modules((folder / f"{name}.ipynb").read_bytes(), [name])
            assert problems == []
            # The code; the notebook's written answers (answers.md, from its answer cells) are not code.
            code = {rel: data for rel, data in files.items() if rel.endswith(".py") and not rel.endswith("__init__.py")}
            assert code == modules(path, name)


def rows(assignment: str = "", **seconds: float) -> dict[str, bench.Row]:
    return {name: bench.Row(name, value, 20, assignment=assignment) for name, value in seconds.items()}


def test_the_ratios_of_an_assignment_graded_both_ways():
    measured = rows(always1=40.0, always2=38.0, never1=60.0, never2=32.0)
    lines = bench.ratios(measured, available=2)
    assert lines[0] == "throughput gain of the second worker, --overlap never: 1.88x (3.00 s to 1.60 s per submission)"
    assert lines[1] == "throughput gain of the second worker, --overlap always: 1.05x (2.00 s to 1.90 s per submission)"
    assert lines[2] == "overlap within one worker: 1.50x"
    # On 2 cores the default overlaps with one worker, not with two.
    assert lines[3] == "the default (--overlap auto), one worker to two: 2.00 s to 1.60 s per submission (1.25x)"
    assert len(lines) == 4


def test_an_assignment_graded_the_default_way_only_has_the_default_ratio():
    assert bench.ratios(rows(always1=40.0, never2=32.0), available=2) == [
        "the default (--overlap auto), one worker to two: 2.00 s to 1.60 s per submission (1.25x)"]


def test_the_default_compared_is_the_one_auto_picks_for_the_machine():
    measured = rows(always1=40.0, always2=22.0, never1=60.0, never2=32.0)
    assert bench.ratios(measured, available=4)[3].startswith("the default (--overlap auto), one worker to two: "
                                                             "2.00 s to 1.10 s")
    assert bench.ratios(measured, available=1)[3].startswith("the default (--overlap auto), one worker to two: "
                                                             "3.00 s to 1.60 s")


def test_only_the_cheapest_assignment_is_graded_both_ways():
    assert bench.batch_runs("resource_accounting", available=2) == [("always", 1), ("always", 2), ("never", 1),
                                                                    ("never", 2)]
    assert bench.batch_runs("flash_attention", available=2) == [("always", 1), ("never", 2)]
    assert bench.batch_runs("gpu_kernels", available=4) == [("always", 1), ("always", 2)]


def test_the_comparison_gives_seconds_per_submission_and_nbgrader_over_the_grader():
    measured = {"resource_accounting": rows(always1=40.0, always2=38.0, never1=60.0, never2=32.0, nbgrader=300.0),
                "flash_attention": rows(always1=100.0, never2=80.0)}
    header, body = bench.comparison_rows(measured, available=2)
    assert header[0] == "assignment" and header[-2:] == ["nbgrader / grader, 1 worker", "nbgrader / grader, 2 workers"]
    assert body == [["resource_accounting", "2.00", "1.60", "15.00", "7.5x", "9.4x"],
                    ["flash_attention", "5.00", "4.00", "", "", ""]]
    assert bench.seconds_per_submission(measured, available=2) == {"resource_accounting": 2.0, "flash_attention": 5.0}


def report(name: str, **timings: float) -> GradeReport:
    return GradeReport(name, timings=timings)


def test_where_the_time_goes_from_the_reports_timings():
    reports = [report("a", sandbox_build=0.02, stage=0.1, static=0.3, tests=6.0, compile=3.0, builds_ahead=7.0,
                      sandbox_wait=0.5),
               report("b", sandbox_build=0.08, stage=0.3, static=0.5, tests=8.0, compile=5.0, builds_ahead=9.0,
                      sandbox_wait=1.5)]
    parts = bench.stage_breakdown(reports, batch_seconds=20.0, reports_seconds=1.0)
    # Means per submission; the sandbox's build and the wait for its boot; the tests less the compile checks
    # and that wait; the rest of the batch's 10 s per submission is what none of the steps holds. The builds
    # started ahead ran beside the tests: shown, but not taken from the rest.
    assert parts == pytest.approx({"batch": 10.0, "stage": 0.2, "static": 0.4, "sandbox": 1.05, "tests": 2.0,
                                   "compile": 4.0, "reports": 0.5, "rest": 1.85, "ahead": 8.0})
    header, body = bench.breakdown_rows({"flash_attention": parts})
    assert header == ["assignment", "batch (s)", "stage (s)", "static checks (s)", "sandbox start (s)", "tests (s)",
                      "compile checks (s)", "reports (s)", "rest (s)", "builds, beside the tests (s)"]
    assert body == [["flash_attention", "10.00", "0.20", "0.40", "1.05", "2.00", "4.00", "0.50", "1.85", "8.00"]]


def test_cpu_seconds_per_submission_and_the_least_time_of_a_fresh_interpreter_per_submission():
    reports = [report("a", cpu_grader=1.0, cpu_student=3.0, cpu_builds=6.0, cpu_reference=1.0),
               report("b", cpu_grader=2.0, cpu_student=5.0, cpu_builds=0.0), GradeReport("not graded")]
    cpu = {"flash_attention": bench.cpu_use(reports),
           "resource_accounting": bench.cpu_use([report("c", cpu_grader=0.5, cpu_student=1.0, cpu_builds=0.0)])}
    # The reference's builds, made by the first grading only, are shared by every submission of the cohort.
    assert cpu["flash_attention"] == pytest.approx({"grader": 1.5, "student": 4.0, "builds": 3.0, "reference": 0.5,
                                                    "total": 9.0})
    # nbgrader at 15 s per flash_attention submission: ten times faster is 1.5 s; its 9 CPU s take at least
    # 4.5 s on 2 cores, its workers' 4 CPU s alone 2 s. resource_accounting (nbgrader 10 s): 1.5 CPU s, 0.75 s
    # on 2 cores, its workers' 1 CPU s 0.5 s, both under a tenth of 10 s.
    measured = {"flash_attention": rows(nbgrader=300.0), "resource_accounting": rows(nbgrader=200.0)}
    header, body, lines = bench.cpu_rows(cpu, measured, available=2)
    assert header == ["assignment", "grading process (CPU s)", "submission's workers (CPU s)", "builds (CPU s)",
                      "reference's builds (CPU s)", "total (CPU s)", "total over 2 cores (s)",
                      "workers over 2 cores (s)", "nbgrader / 10 (s)"]
    assert body == [["flash_attention", "1.50", "4.00", "3.00", "0.50", "9.00", "4.50", "2.00", "1.50"],
                    ["resource_accounting", "0.50", "1.00", "0.00", "0.00", "1.50", "0.75", "0.50", "1.00"]]
    assert lines[0] == ("flash_attention: ten times nbgrader's speed is 1.50 s per submission; this grader's 9.00 "
                        "CPU s per submission take at least 4.50 s on 2 cores (out of reach), the submission's "
                        "workers' 4.00 CPU s alone 2.00 s (out of reach)")
    assert lines[1].endswith("at least 0.75 s on 2 cores (within reach), the submission's workers' 1.00 CPU s "
                             "alone 0.50 s (within reach)")
    # Without nbgrader, no comparison; without CPU seconds in any report, an error that says so.
    assert bench.cpu_rows(cpu, {"flash_attention": {}, "resource_accounting": {}}, available=4)[2] == []
    with pytest.raises(RuntimeError, match="CPU seconds"):
        bench.cpu_use([report("a", stage=1.0)])


def test_reports_without_timings_are_left_out_and_none_at_all_is_an_error():
    timed = report("a", stage=1.0, static=1.0, tests=2.0, compile=0.0, sandbox_wait=0.0, sandbox_build=1.0)
    parts = bench.stage_breakdown([timed, GradeReport("failed")], batch_seconds=10.0, reports_seconds=0.0)
    assert parts["stage"] == 1.0 and parts["batch"] == 5.0
    with pytest.raises(RuntimeError, match="timings"):
        bench.stage_breakdown([GradeReport("failed")], batch_seconds=10.0, reports_seconds=0.0)


def test_the_runner_times_what_the_breakdown_reads():
    assert set(TIMINGS) == {"sandbox_build", "stage", "static", "tests", "compile", "builds_ahead", "sandbox_wait",
                            "cpu_grader", "cpu_student", "cpu_builds", "cpu_reference"}
    assert {f"cpu_{part}" for part in bench.CPU_PARTS} <= set(TIMINGS)
    assert bench.COMPILE_CHECKS == COMPILE_CHECKS


def test_the_markdown_holds_the_same_tables():
    measured = rows("resource_accounting", always1=40.0, nbgrader=300.0)
    tables = [("Grading loop", *bench.runs_rows(list(measured.values()) + [bench.Row("student", 3.3)]))]
    text = bench.report_text(tables, ["a line"], 20, "a machine", ["resource_accounting"])
    assert "Cohort: 20 submissions of each of resource_accounting" in text and "Machine: a machine." in text
    assert "| assignment | run | seconds | per submission | note |\n| --- | --- | ---: | ---: | --- |" in text
    assert "| resource_accounting | always1 | 40.0 | 2.00 |" in text
    assert "| resource_accounting | nbgrader | 300.0 | 15.00 |" in text
    assert "|  | student | 3.3 |  |" in text and "- a line" in text


def test_the_projection_sums_each_assignments_seconds_and_runs_tasks_in_waves():
    # 600 submissions, 8 per task: 75 tasks of 2 s overhead + 8 x (1 s + 2 s + 3 s of the assignments
    # + 57 s of GPU tests) = 506 s each; 75 waves on one node, 10 on 8 nodes (the last partly full), 3 on 32.
    seconds = {"resource_accounting": 1.0, "flash_attention": 2.0, "gpu_kernels": 3.0}
    assert bench.projection(seconds, task=2.0, gpu=57.0) == [(1, 75 * 506.0), (8, 10 * 506.0), (32, 3 * 506.0)]
    text = bench.projection_markdown(seconds, 2.0, 57.0, "57 s per submission, assumed")
    assert "| 8 | 84 min | 427 |" in text and "Assumptions:" in text
    assert "resource_accounting 1.0 s; flash_attention 2.0 s; gpu_kernels 3.0 s, 6.0 s in all" in text
    assert "(half precision, speed): 57 s per submission, assumed" in text


def test_the_gpu_tests_are_assumed_without_a_gpu_and_measured_with_one():
    seconds, note = bench.gpu_seconds(45.0, has_gpu=False)
    assert seconds == 45.0 and "assumed, not measured" in note and "--gpu-seconds" in note
    seconds, note = bench.gpu_seconds(45.0, has_gpu=True, gpu_name="NVIDIA H100")
    assert seconds == 0.0 and "NVIDIA H100" in note


def test_the_compile_counts_per_assignment_with_each_kernels_share():
    """The figures of autograder.grading.compiles.count, one row per assignment."""
    flash = {"assignment": "flash_attention", "compiles": 181, "seconds": 260.7, "one_config": 32,
             "seconds_one_config": 45.2, "calls": 318, "partial": ["a", "b"],
             "kernels": {"flash_attention.flash_triton._flash_fwd_kernel": {"compiles": 79, "one_config": 14,
                                                                           "seconds_each": 1.54},
                         "flash_attention.flash_triton._flash_bwd_dq_kernel": {"compiles": 102, "one_config": 18,
                                                                              "seconds_each": 1.36}}}
    plain = {"assignment": "resource_accounting", "compiles": 0, "seconds": 0.0, "one_config": 0,
             "seconds_one_config": 0.0, "calls": 500, "partial": [], "kernels": {}}
    header, body = bench.compile_rows([flash, plain])
    assert header[:4] == ["assignment", "compilations a grading", "estimated compile seconds",
                          "autotuning every config (s)"]
    assert body[0] == ["flash_attention", "32", "45", "181 (261)",
                       "_flash_fwd_kernel 14 x 1.54; _flash_bwd_dq_kernel 18 x 1.36", "318 (2)"]
    assert body[1][4] == "none (no Triton kernel)"


def test_the_arguments():
    args = bench.parse_args([])
    assert (args.size, args.assignments, args.nbgrader, args.slurm) == (4, list(bench.ASSIGNMENTS), True, True)
    assert args.compiles and not bench.parse_args(["--no-compiles"]).compiles
    assert args.gpu_seconds == 60.0 and args.out == Path("build/bench_grader.md")
    args = bench.parse_args(["--size", "3", "--assignments", "gpu_kernels, resource_accounting,gpu_kernels",
                             "--no-nbgrader", "--no-slurm", "--gpu-seconds", "20"])
    assert (args.size, args.assignments, args.nbgrader, args.slurm, args.gpu_seconds) == (
        3, ["gpu_kernels", "resource_accounting"], False, False, 20.0)


@pytest.mark.parametrize("argv", [["--assignments", "flash_atention"], ["--assignments", ","], ["--size", "1"]])
def test_wrong_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert "error:" in capsys.readouterr().err


def test_the_student_loops_first_failure_is_found_in_a_real_release(tmp_path, monkeypatch):
    """The seconds until a student's first failure: the release's `make test -x` on its stubs prints the harness's
    section of the tasks not implemented yet (no traceback), which the benchmark must recognise. Run from a make
    whose command line set a variable the release's Makefile uses (PYTEST here), the release's make does not
    take it: its make is not a sub-make of the caller's."""
    from autograder.package import release

    monkeypatch.setenv("MAKEFLAGS", " -- PYTEST=false")
    monkeypatch.setenv("MAKELEVEL", "1")
    release.build(tmp_path / "student")
    make = ["make", "--no-print-directory", "test", f"PYTHON={bench.sys.executable}"]
    row = bench.first_failure(tmp_path / "student", make)
    assert row.what == "student: first failure message" and 0 < row.seconds < 300
