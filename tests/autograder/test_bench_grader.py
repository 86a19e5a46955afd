"""The grading-loop benchmark (`make bench-grader`): its cohort, its nbgrader notebooks, its table.

The benchmark itself runs for minutes and is not run here; these tests check that what it compares
is comparable: the cohort cycles through the reference and every typical mistake, and each nbgrader
notebook holds exactly its submission's code, as the trusted grader reads a notebook back.
"""

from pathlib import Path

import nbformat

from autograder import bench
from autograder.cohort import sample as cohort
from autograder.grading.notebook import read_modules

PACKAGE = bench.ASSIGNMENT


def modules(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted((folder / PACKAGE).glob("*.py")) if p.name != "__init__.py"}


def test_the_cohort_cycles_through_the_reference_and_each_typical_mistake(tmp_path):
    size = len(cohort.MISTAKES) + 2
    paths = bench.build_cohort(tmp_path, size)
    kinds = ["correct"] + [m.name for m in cohort.MISTAKES] + ["correct"]
    assert [p.name for p in paths] == [f"student-{i + 1:02d}-{kind}" for i, kind in enumerate(kinds)]
    assert [sorted(p.iterdir()) for p in paths] == [[p / PACKAGE] for p in paths]
    assert modules(paths[0]) == modules(paths[-1])
    assert all(modules(p) != modules(paths[0]) for p in paths[1:-1]), "a mistake left the reference unchanged"


def test_each_nbgrader_notebook_holds_exactly_its_submissions_code(tmp_path):
    paths = bench.build_cohort(tmp_path / "cohort", 2)
    course = tmp_path / "course"
    bench.notebooks_course(course, paths)
    for path in paths:
        folder = course / "submitted" / path.name / PACKAGE
        nb = nbformat.read(folder / f"{PACKAGE}.ipynb", as_version=4)
        assert any(cell.metadata.get("nbgrader", {}).get("grade") for cell in nb.cells), "no graded test cell"
        files, problems = read_modules((folder / f"{PACKAGE}.ipynb").read_bytes(), [PACKAGE])
        assert problems == []
        # The code; the notebook's written answers (answers.md, from its answer cells) are not code.
        code = {rel: data for rel, data in files.items() if rel.endswith(".py") and not rel.endswith("__init__.py")}
        assert code == modules(path)


def rows(**seconds: float) -> dict[str, bench.Row]:
    return {name: bench.Row(name, value, 20) for name, value in seconds.items()}


def test_the_table_gives_seconds_per_submission_and_the_ratios():
    measured = rows(always1=40.0, always2=38.0, never1=60.0, never2=32.0, nbgrader=300.0)
    lines = bench.ratios(measured, available=2)
    assert lines[0] == "throughput gain of the second worker, --overlap never: 1.88x (3.00 s to 1.60 s per submission)"
    assert lines[1] == "throughput gain of the second worker, --overlap always: 1.05x (2.00 s to 1.90 s per submission)"
    assert lines[2] == "overlap within one worker: 1.50x"
    # On 2 cores the default overlaps with one worker, not with two.
    assert lines[3] == "the default (--overlap auto), one worker to two: 2.00 s to 1.60 s per submission (1.25x)"
    assert lines[4].endswith("7.50x with one worker, 9.38x with two")
    text = bench.markdown(list(measured.values()) + [bench.Row("student", 3.3)], lines, 20, "a machine")
    assert "| always1 | 40.0 | 2.00 |" in text and "| nbgrader | 300.0 | 15.00 |" in text
    assert "| student | 3.3 |  |" in text
    assert "Machine: a machine." in text and "- throughput gain" in text


def test_the_default_compared_is_the_one_auto_picks_for_the_machine():
    measured = rows(always1=40.0, always2=22.0, never1=60.0, never2=32.0)
    assert bench.ratios(measured, available=4)[3].startswith("the default (--overlap auto), one worker to two: "
                                                             "2.00 s to 1.10 s")
    assert bench.ratios(measured, available=1)[3].startswith("the default (--overlap auto), one worker to two: "
                                                             "3.00 s to 1.60 s")


def test_the_projection_runs_tasks_in_waves_of_as_many_as_there_are_nodes():
    # 600 submissions, 8 per task: 75 tasks of 2 s overhead + 8 x (3 s + 60 s) = 506 s each;
    # 75 waves on one node, 10 on 8 nodes (the last one partly full), 3 on 32.
    assert bench.projection(inside=3.0, task=2.0, gpu=60.0) == [(1, 75 * 506.0), (8, 10 * 506.0), (32, 3 * 506.0)]
    text = bench.projection_markdown({"inside": 3.0, "task": 2.0}, 60.0, "60 s per submission, assumed")
    assert "| 8 | 84 min | 427 |" in text and "Assumptions:" in text and "assumed" in text
