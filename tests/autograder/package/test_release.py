"""The student release: exactly what students need, and its `make test` works on stubs and on solutions."""

import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from autograder.package import release
from autograder.package.layout import HARNESS, ROOT, assignments, files_of
from tests.autograder.package.conftest import clean_env
from tests.autograder.test_docs import make_targets, problems

POINTS_LINE = re.compile(r"^(?P<name>\w+)\s+(?P<got>[\d.]+) / (?P<total>[\d.]+)\s+public points\s+"
                         r"\((?P<passed>\d+)/(?P<tests>\d+) tests passed\)(?P<rest>.*)$", re.MULTILINE)


def points_lines(output: str) -> dict[str, dict]:
    """The points table at the end of a run: per assignment, its numbers and the notes after them."""
    return {m["name"]: m.groupdict() for m in POINTS_LINE.finditer(output)}


def count(text: str, what: str) -> int:
    """The number before `what` in text (0 when absent): `3 failed`, `68 not implemented yet`."""
    found = re.search(rf"(\d+) {what}", text)
    return int(found.group(1)) if found else 0


def final_line(output: str) -> str:
    """pytest's last line: `== 167 failed, 10 skipped, 2 errors in 24.17s ==`."""
    return next(line for line in reversed(output.splitlines()) if re.search(r" in [\d.]+s", line))


def test_the_release_holds_stubs_public_tests_kernels_and_the_harness_and_nothing_else(packaged):
    student = packaged.dist / "student"
    files = sorted(p.relative_to(student).as_posix() for p in student.rglob("*") if p.is_file())
    expected = set(files_of("assignments")) | set(files_of("kernels")) | {"tests/__init__.py", "conftest.py"}
    expected |= set(files_of(".devcontainer"))
    for name in assignments():
        expected |= set(files_of(f"tests/{name}"))
    for rel in HARNESS:
        expected |= set(files_of(rel))
    assert set(files) == expected | {"Makefile", "README.md", "pyproject.toml", ".gitignore", "requirements.lock"}
    assert (student / "requirements.lock").read_bytes() == (ROOT / "requirements.lock").read_bytes()
    for rel in files_of("assignments"):
        assert (student / rel).read_bytes() == (ROOT / rel).read_bytes(), f"{rel} is not the stub"
    # The grader's files are the repository's own (the markers' parser and the handouts' reader name the markers);
    # no other Python file holds a solution region.
    harness = {rel for name in HARNESS for rel in files_of(name)}
    assert all((student / rel).read_bytes() == (ROOT / rel).read_bytes() for rel in harness)
    assert not any("BEGIN SOLUTION" in (student / rel).read_text() for rel in files
                   if rel.endswith(".py") and rel not in harness)


def test_the_release_pyproject_has_the_student_dependencies_and_tests_the_stubs(packaged):
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())
    theirs = tomllib.loads((packaged.dist / "student" / "pyproject.toml").read_text())
    assert theirs["project"]["dependencies"] == ours["project"]["dependencies"]
    assert "optional-dependencies" not in theirs["project"]
    options = theirs["tool"]["pytest"]["ini_options"]
    assert (options["llmsys_impl"], options["testpaths"]) == ("assignments", ["tests"])


def test_the_student_readme_is_docs_students_md_with_its_links_from_the_release_root(packaged):
    source = (ROOT / "docs" / "students.md").read_text()
    assert "](../assignments/" in source  # the page links to the handouts from docs/
    assert (packaged.dist / "student" / "README.md").read_text() == source.replace("](../", "](")


def test_the_student_readme_names_only_targets_of_the_release_makefile_and_files_it_holds(packaged):
    """Every `make TARGET` of the student README is a rule of the release's own Makefile and plans with
    `make -n` there, its real `make help` lists each of them, and every link and path it names is in the
    release (tests/autograder/test_docs.py's checker, run on the release)."""
    student = packaged.dist / "student"
    readme = (student / "README.md").read_text()
    assert problems(student / "README.md", student / "Makefile", student) == []
    named = make_targets(readme)
    assert {"test", "test-public", "check-answers", "gpu-compile", "help"} <= named, named
    for target in sorted(named):
        plan = subprocess.run(["make", "-n", target, f"PYTHON={sys.executable}"], cwd=student, env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert plan.returncode == 0, f"the student README names `make {target}`; `make -n {target}`: {plan.stderr}"
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=student, env=clean_env(),
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    listed = set(re.findall(r"^make ([\w-]+)", shown.stdout, re.MULTILINE))
    assert named - {"help"} <= listed, f"`make help` in the release does not list {sorted(named - {'help'} - listed)}"


# What exists only in the instructor's repository: a student README that names one sends students nowhere.
INSTRUCTOR_ONLY = ("solutions/", "--impl solutions", "autograder/suites/", "scripts/", "requirements-instructor.lock",
                   "bench-grader", "gpu-validate", "test-gpu-grading", "python -m autograder ", "docs/")


def test_the_student_readme_names_nothing_only_the_instructor_has(packaged):
    readme = (packaged.dist / "student" / "README.md").read_text()
    named = [word for word in INSTRUCTOR_ONLY if word in readme]
    assert not named, f"the student README (docs/students.md) names what the release lacks: {named}"


def test_a_student_page_that_links_to_an_instructor_page_is_refused(tmp_path, monkeypatch):
    page = tmp_path / "docs" / "students.md"
    page.parent.mkdir()
    page.write_text("See [the handout](../assignments/x/README.md), [above](#top) and [grading](grading.md).\n")
    monkeypatch.setattr(release, "ROOT", tmp_path)
    monkeypatch.setattr(release, "STUDENT_README", page)
    with pytest.raises(release.ReleaseError, match=r"docs/students.md links to grading.md, which the student release "
                                                   r"does not hold"):
        release.student_readme()
    page.write_text("See [the handout](../assignments/x/README.md) and [above](#top).\n")
    assert release.student_readme() == "See [the handout](assignments/x/README.md) and [above](#top).\n"


def test_the_student_makefile_installs_torch_first_then_the_student_lock_with_its_hashes(packaged):
    plan = subprocess.run(["make", "-n", "test"], cwd=packaged.dist / "student", env=clean_env(),
                          capture_output=True, text=True, check=True).stdout
    torch = plan.index("pip install --quiet --disable-pip-version-check torch==2.13.0 >>.venv/install.log 2>&1")
    rest = plan.index("pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock "
                      ">>.venv/install.log 2>&1")
    assert "-m venv .venv" in plan and torch < rest < plan.index("-m pytest")
    assert plan.count(" -m pip install ") == 2


def test_the_student_install_stamp_follows_the_lock(packaged, tmp_path):
    """A changed requirements.lock (a course that re-locked) reinstalls; an unchanged one never does."""
    student = tmp_path / "student"
    shutil.copytree(packaged.dist / "student", student)

    def stamp() -> str:
        plan = subprocess.run(["make", "-n", "install"], cwd=student, env=clean_env(), capture_output=True, text=True,
                              check=True).stdout
        return plan.splitlines()[-1].removeprefix("touch ")

    first = stamp()
    with open(student / "requirements.lock", "a") as handle:
        handle.write("# re-locked\n")
    assert stamp() != first


def test_make_test_on_the_stubs_scores_zero_and_every_failure_is_not_implemented(packaged):
    code, output = packaged.job("release-stubs").wait()
    assert code != 0, output[-3000:]  # the tests fail, so make does
    table = points_lines(output)
    assert set(table) == set(assignments()), output[-3000:]
    assert all(float(row["got"]) == 0 and row["passed"] == "0" for row in table.values()), table
    summary = final_line(output)
    failures = count(summary, "failed") + count(summary, "errors?")
    not_implemented = sum(count(row["rest"], "not implemented yet") for row in table.values())
    assert failures == not_implemented > 0, f"{summary}; points table: {table}"


def test_make_test_with_the_solutions_copied_over_the_stubs_passes_every_public_test(packaged):
    code, output = packaged.job("release-solved").wait()
    assert code == 0, output[-3000:]
    table = points_lines(output)
    assert set(table) == set(assignments()), output[-3000:]
    for row in table.values():
        needs_gpu = re.search(r"([\d.]+) points need a GPU", row["rest"])
        assert float(row["got"]) + (float(needs_gpu.group(1)) if needs_gpu else 0) == float(row["total"]), row
    summary = final_line(output)
    assert count(summary, "failed") == count(summary, "errors?") == 0 and count(summary, "passed") > 0, summary


def functions_students_write() -> set[str]:
    """Every module-level function whose stub in assignments/ raises NotImplementedError: the answers."""
    import ast

    names = set()
    for path in (ROOT / "assignments").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s) for s in node.body):
                names.add(node.name)
    return names


# Given code that shares a name with an answer on purpose: kernels.bench.benchmark is the course's own
# do_bench-based timer (milliseconds, time budgets); gpu_kernels' measure.py may not use it (handout §9).
SAME_NAME_NOT_AN_ANSWER = {"kernels/bench.py: benchmark"}


def test_no_given_code_of_the_release_defines_an_answer(packaged):
    """The stubs are the only definitions of what students write: no kernel, test or conftest ships one."""
    student = packaged.dist / "student"
    answers = functions_students_write()
    assert {"attention", "arithmetic_intensity", "attainable_flops_per_sec"} <= answers
    found = []
    for path in student.rglob("*.py"):
        if path.relative_to(student).parts[0] == "assignments":
            continue
        for name in answers:
            if re.search(rf"^def {name}\(", path.read_text(), re.MULTILINE):
                found.append(f"{path.relative_to(student)}: {name}")
    assert set(found) <= SAME_NAME_NOT_AN_ANSWER, found


def test_the_release_points_students_to_handouts_it_contains(packaged):
    student = packaged.dist / "student"
    for path in student.rglob("*.py"):
        for handout in re.findall(r"handout: (\S+README\.md)", path.read_text()):
            assert (student / handout).is_file(), f"{path.relative_to(student)} names {handout}, not in the release"


def test_the_cpu_wheel_index_is_a_make_variable_off_by_default(packaged):
    """`make install TORCH_INDEX=URL` installs the pinned torch from that index; without it, no index is named."""
    def torch_line(*extra: str) -> str:
        done = subprocess.run(["make", "-n", "install", "VENV=venv-that-does-not-exist", *extra],
                              cwd=packaged.dist / "student", capture_output=True, text=True, check=True)
        return next(line for line in done.stdout.splitlines() if "torch==" in line)

    assert "--index-url" not in torch_line()
    assert "torch==2.13.0 --index-url file:///cpu-wheels >>" in torch_line("TORCH_INDEX=file:///cpu-wheels")


def test_make_check_answers_in_the_release_shows_what_the_grader_reads_and_no_key(packaged, tmp_path):
    """The release's `make check-answers` reads each assignment's answers.md as the grader does: the template
    reads as not answered (make succeeds), the model answers as every number and every prose answer, and a line
    the grader cannot read is marked and fails the command. The release's handouts hold no key, so no key shows
    unless the student wrote it."""
    copy = tmp_path / "student"
    shutil.copytree(packaged.dist / "student", copy)

    def check(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "check-answers", f"PYTHON={sys.executable}", *args],
                              cwd=copy, capture_output=True, text=True, env=clean_env(), timeout=120)

    template = check()
    assert template.returncode == 0, template.stdout + template.stderr
    assert "T10.a" in template.stdout and "not answered yet" in template.stdout
    assert "0 of 41 numbers read, 0 of 10 prose answers written" in template.stdout
    for name in assignments():
        shutil.copyfile(ROOT / "solutions" / name / "answers.md", copy / "assignments" / name / "answers.md")
    model = check("A=gpu_kernels")
    assert model.returncode == 0, model.stdout + model.stderr
    assert "41 of 41 numbers read, 10 of 10 prose answers written" in model.stdout
    assert "T2.b   reads 270336 (from '270336')" in model.stdout
    answers = copy / "assignments" / "gpu_kernels" / "answers.md"
    text = answers.read_text()
    answers.write_text(text.replace("T2.b = 270336", "T2.b = about a quarter MiB")
                       .replace("T2.c = 16", "T2.c = 16\nT2.c = 17"))
    broken = check("A=gpu_kernels")
    assert broken.returncode != 0
    assert "! T2.b   expected a number after `T2.b =`; found 'about a quarter MiB'" in broken.stdout
    assert "! T2.c   answered on 2 lines" in broken.stdout
    assert "fix it before you submit" in broken.stdout
    unknown = check("A=nonesuch")
    assert unknown.returncode == 2 and "no such assignment" in unknown.stdout + unknown.stderr
