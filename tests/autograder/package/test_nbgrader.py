"""The nbgrader course: the source notebooks, nbgrader's release of them, nbgrader's real autograde on
a correct and a stub notebook, and the trusted grader writing its scores into nbgrader's gradebook."""

import csv
import subprocess
import sys

import nbformat
import pytest

from autograder.package.layout import ROOT, assignments
from autograder.grading.notebook import read_modules
from autograder.package.notebook_tests import counted
from autograder.model.results import GradeReport
from autograder.report.parts import fraction, parts_of
from autograder.sandbox import forked, policy
from autograder.written.answers import handout_questions
from tests.autograder.package.conftest import ASSIGNMENT, clean_env


def source_notebook(packaged, name):
    return nbformat.read(packaged.dist / "nbgrader" / "source" / name / f"{name}.ipynb", as_version=4)


def released_notebook(packaged, name):
    return nbformat.read(packaged.dist / "nbgrader" / "release" / name / f"{name}.ipynb", as_version=4)


def gradebook_scores(course, students):
    """{student: (score, max score, {cell: score})} read through nbgrader's own Gradebook API."""
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            submission = gradebook.find_submission(ASSIGNMENT, student)
            cells = {grade.cell.name: grade.score for nb in submission.notebooks for grade in nb.grades}
            comments = [c.manual_comment or "" for nb in submission.notebooks for c in nb.comments]
            scores[student] = (submission.score, submission.max_score, cells, "\n".join(comments))
    return scores


def test_the_release_holds_the_measurements_the_questions_read(packaged):
    """gpu_kernels' T10 reads the staff's measurements: nbgrader's release has them where the other releases do,
    in the package's folder beside the modules the notebook writes."""
    measured = sorted((ROOT / "assignments" / "gpu_kernels" / "measured").iterdir())
    assert measured
    for file in measured:
        released = packaged.dist / "nbgrader" / "release" / "gpu_kernels" / "gpu_kernels" / "measured" / file.name
        assert released.read_bytes() == file.read_bytes(), released


@pytest.mark.parametrize("name", assignments())
def test_the_source_notebook_holds_each_module_and_gives_back_the_solutions(packaged, name):
    nb = source_notebook(packaged, name)
    modules = {cell.metadata["llmsys"]["module"]: cell for cell in nb.cells if "module" in cell.metadata.get("llmsys", {})}
    expected = sorted(f"{name}/{p.name}" for p in (ROOT / "solutions" / name).glob("*.py") if p.name != "__init__.py")
    assert sorted(modules) == expected
    for rel, cell in modules.items():
        assert cell.source.startswith(f"%%writefile {rel}\n") and cell.metadata["nbgrader"]["solution"]
    files, problems = read_modules(nbformat.writes(nb).encode(), assignments())
    assert problems == []
    for rel in expected:
        assert files[rel].decode() == (ROOT / "solutions" / rel).read_text(), rel


@pytest.mark.parametrize("name", assignments())
def test_test_cells_carry_the_points_of_the_tests_the_notebook_runs(packaged, name):
    nb = source_notebook(packaged, name)
    cells = {cell.metadata["llmsys"]["group"]: cell for cell in nb.cells if "group" in cell.metadata.get("llmsys", {})}
    ours = [t for t in packaged.tests if t.assignment == name and counted(t.gpu, t.reference)]
    assert sorted(cells) == sorted({t.group for t in ours})
    for group, cell in cells.items():
        tests = [t for t in ours if t.group == group]
        assert cell.metadata["nbgrader"]["points"] == sum(t.points for t in tests) > 0
        assert cell.metadata["nbgrader"]["grade"] and cell.metadata["nbgrader"]["locked"]
        assert ("### BEGIN HIDDEN TESTS" in cell.source) == any(not t.public for t in tests)
        for path in {t.path for t in tests}:
            assert f"run_tests({path!r}" in cell.source
        assert cell.source.rstrip().endswith("\npoints")


@pytest.mark.parametrize("name", assignments())
def test_nbgraders_release_has_stubs_and_no_solution_or_hidden_test(packaged, name):
    release = packaged.dist / "nbgrader" / "release" / name
    text = (release / f"{name}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "autograder/suites" not in text
    modules = [cell for cell in released_notebook(packaged, name).cells if "module" in cell.metadata.get("llmsys", {})]
    assert modules and all("raise NotImplementedError()" in cell.source for cell in modules)
    files = {p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file()}
    assert not [f for f in files if f.startswith(("solutions/", "autograder/suites/"))]
    assert {"tests/__init__.py", "autograder/package/notebook_tests.py", "conftest.py", "pytest.ini"} <= files


def by_hand(packaged) -> float:
    """The points of the written answers' cells, which nbgrader's formgrader grades by hand."""
    cells = source_notebook(packaged, ASSIGNMENT).cells
    return sum(c.metadata["nbgrader"]["points"] for c in cells if "question" in c.metadata.get("llmsys", {}))


def trusted_only(packaged) -> float:
    """The points of the trusted grader's cell: what only the trusted grader awards (autograder.package.nbgrader)."""
    cells = source_notebook(packaged, ASSIGNMENT).cells
    return sum(c.metadata["nbgrader"]["points"] for c in cells if c.metadata.get("llmsys", {}).get("trusted"))


def test_the_courses_config_gives_each_cell_ten_minutes_and_each_kernel_five_to_start(packaged):
    """nbgrader's own Execute preprocessor, configured by the course as nbgrader configures it: a test cell runs a
    whole test file (nbgrader's 30 s is too short), and a kernel started while the machine grades the class may
    take more than nbgrader's 60 s to answer."""
    from nbgrader.preprocessors import Execute

    from autograder.package.nbgrader import course_config

    execute = Execute(config=course_config(packaged.dist / "nbgrader"))
    assert (execute.timeout, execute.startup_timeout) == (600, 300)


def test_nbgrader_autograde_gives_the_correct_notebook_full_marks(packaged):
    """Full marks on every cell nbgrader can grade: not the written answers (formgrader's) nor the trusted
    grader's cell, which nbgrader's own autograde gives 0 (it cannot run those tests)."""
    code, output = packaged.job("autograde-correct").wait()
    assert code == 0, output[-3000:]
    score, maximum, cells, _ = gradebook_scores(packaged.work / "course-correct", ["correct"])["correct"]
    assert score == maximum - by_hand(packaged) - trusted_only(packaged) > 100 and by_hand(packaged) > 0, cells
    assert cells["trusted_grader"] == 0


def test_nbgrader_autograde_gives_the_stub_notebook_zero(packaged):
    code, output = packaged.job("autograde-stub").wait()
    assert code == 0, output[-3000:]
    score, maximum, cells, _ = gradebook_scores(packaged.work / "course-stub", ["stub"])["stub"]
    assert score == 0 and maximum > 100, cells


def test_the_trusted_grader_writes_its_scores_into_the_gradebook_and_flags_ipython_tricks(packaged):
    code, output = packaged.job("trusted").wait()
    assert code == 0, output[-3000:]
    course = packaged.work / "course-trusted"
    scores = gradebook_scores(course, ["correct", "cheat"])
    score, maximum, _, note = scores["correct"]
    # the notebook answers no written question: its written answers' cells and numeric parts score nothing
    numeric = sum(part.points for question in handout_questions(ASSIGNMENT) for part in question.parts)
    assert score == maximum - by_hand(packaged) - numeric > 100 and "trusted grader" in note and "Flagged" not in note
    assert trusted_only(packaged) > numeric > 0  # the tests that need the reference are in the trusted cell
    score, maximum, _, note = scores["cheat"]
    assert score == 0 and maximum > 100 and "input_transformers_post" in note
    feedback = (course / "trusted" / "cheat" / ASSIGNMENT / ASSIGNMENT / "feedback.md").read_text()
    assert "touches IPython's machinery" in feedback and "input_transformers_post" in feedback
    # graded as a batch is, by a warm grading server: where this machine allows a zygote, each notebook's worker was
    # forked from it, not started afresh
    if forked.available(policy.detect("auto"), gpu=False)[0]:
        for student in ("correct", "cheat"):
            log = GradeReport.from_json((course / "trusted" / student / ASSIGNMENT / ASSIGNMENT / "report.json")
                                        .read_text()).log
            assert any(line.startswith("workers: forked from the grading server's zygote") for line in log), log


def test_nbgraders_export_is_the_trusted_grade_same_points_same_maximum(packaged):
    """`nbgrader export` (nbgrader's own command, on the course the trusted grader scored) gives each student
    the score and maximum of the trusted feedback: its score out of the maximum, the written answers (graded in
    formgrader) awaiting hand grading inside it. (Before the trusted grader's cell, the export left out the 9
    points of the tests that need the reference and of the numeric parts: 215.5 / 220.5 against 224.5 / 229.5.)"""
    code, output = packaged.job("trusted").wait()
    assert code == 0, output[-3000:]
    course = packaged.work / "course-trusted"
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", "export.csv"], cwd=course,
                          env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    exported = {row["student_id"]: row for row in csv.DictReader((course / "export.csv").open())
                if row["assignment"] == ASSIGNMENT}
    for student in ("correct", "cheat"):
        report = GradeReport.from_json((course / "trusted" / student / ASSIGNMENT / ASSIGNMENT / "report.json")
                                       .read_text())
        parts = parts_of(report.tests)
        assert (float(exported[student]["score"]), float(exported[student]["max_score"])) == \
            (parts.score, parts.maximum), student
        feedback = (course / "trusted" / student / ASSIGNMENT / ASSIGNMENT / "feedback.md").read_text()
        assert f"Score: **{fraction(parts)}** points" in feedback


def test_the_nbgrader_verb_refuses_a_folder_that_is_not_a_course(tmp_path):
    done = subprocess.run([sys.executable, "-m", "autograder", "nbgrader", str(tmp_path), ASSIGNMENT], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True)
    assert done.returncode == 2 and "not an nbgrader course directory" in done.stderr


def test_the_nbgrader_verb_refuses_a_gradebook_without_the_assignment_or_a_cell_before_grading(packaged, tmp_path):
    """A gradebook that lacks the assignment (nbgrader's generate_assignment never ran), or a cell of the source
    notebook (generated from another version of it), is named with the command that fixes it, before any
    notebook is graded: not a traceback after the whole class was graded."""
    from tests.autograder.package.conftest import course_copy, solved_notebook

    def verb(course):
        return subprocess.run([sys.executable, "-m", "autograder", "nbgrader", str(course), ASSIGNMENT], cwd=ROOT,
                              env=clean_env(), capture_output=True, text=True, timeout=300)

    correct = solved_notebook(packaged.dist / "nbgrader", ASSIGNMENT)
    course = course_copy(packaged.dist, tmp_path / "no-assignment", {"correct": correct})
    (course / "gradebook.db").unlink()
    done = verb(course)
    assert done.returncode == 2 and f"has no assignment '{ASSIGNMENT}'" in done.stderr, done.stderr[-3000:]
    assert f"nbgrader generate_assignment {ASSIGNMENT} --force" in done.stderr and "Traceback" not in done.stderr
    assert not (course / "trusted").exists()

    course = course_copy(packaged.dist, tmp_path / "other-version", {"correct": correct})
    source = course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    nb = nbformat.read(source, as_version=4)
    graded = next(cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")
                  and "group" in cell.metadata.get("llmsys", {}))  # a test cell, whose score grading writes
    graded.metadata["nbgrader"]["grade_id"] += "-renamed"
    nbformat.write(nb, source)
    done = verb(course)
    assert done.returncode == 2 and "has no cell" in done.stderr and "-renamed" in done.stderr, done.stderr[-3000:]
    assert not (course / "trusted").exists()


def hidden_test_names(packaged) -> set[str]:
    """The hidden tests' function names (without parametrisation), which feedback must never show."""
    return {t.nodeid.split("::")[-1].split("[")[0] for t in packaged.tests
            if t.assignment == ASSIGNMENT and t.visibility == "hidden"}


def test_nbgraders_own_feedback_after_its_autograde_shows_no_hidden_test(packaged):
    code, output = packaged.job("autograde-correct").wait()
    assert code == 0, output[-3000:]
    course = packaged.work / "course-correct"
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"], cwd=course,
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    html = (course / "feedback" / "correct" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    names = hidden_test_names(packaged)
    assert names
    assert not [name for name in names if name in html]
    assert "HIDDEN TESTS" not in html and "autograder/suites" not in html


def test_the_trusted_grader_writes_nbgraders_feedback_files_without_hidden_tests(packaged):
    code, output = packaged.job("trusted").wait()
    assert code == 0, output[-3000:]
    course = packaged.work / "course-trusted"
    for student in ("correct", "cheat"):
        html = (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "<h1>Feedback:" in html and "Score: <strong>" in html
        assert not [name for name in hidden_test_names(packaged) if name in html]
    cheat = (course / "feedback" / "cheat" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "input_transformers_post" in cheat and "<script" not in cheat
