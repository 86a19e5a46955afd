"""Gradescope's autograder zip: its contents, its scripts, and a real run_autograder under a temporary root."""

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import jsonschema
import pytest

from autograder.package import gradescope
from autograder.package.layout import ROOT, assignments
from autograder.report.gradescope import schema
from tests.autograder.package.conftest import ASSIGNMENT, clean_env

# A registry's address or an index flag with a value: `--index-url "$TORCH_INDEX"` (empty unless given) is not one.
REGISTRY = re.compile(r"https?://|pypi\.org|pythonhosted|download\.pytorch|index-url(?! \"\$TORCH_INDEX\")", re.IGNORECASE)


def test_each_zip_holds_the_scripts_and_the_grader_of_its_one_assignment(packaged):
    for name in assignments():
        with zipfile.ZipFile(packaged.dist / "gradescope" / f"{name}.zip") as archive:
            infos = {info.filename: info for info in archive.infolist()}
            run = archive.read("run_autograder").decode()
        others = [other for other in assignments() if other != name]
        assert {"setup.sh", "run_autograder", "requirements-instructor.lock", "pyproject.toml", "conftest.py",
                f"solutions/{name}/__init__.py", f"autograder/suites/{name}/conftest.py"} <= set(infos)
        assert not [f for f in infos if any(f"/{other}/" in f or f.startswith(f"{other}/") for other in others)]
        assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos.values())
        assert list(infos) == sorted(infos)
        assert [f for f, info in infos.items() if info.external_attr >> 16 & 0o111] == ["run_autograder", "setup.sh"]
        assert f'ASSIGNMENT="{name}"' in run and '--out "$ROOT/results"' in run


def test_setup_installs_bubblewrap_then_torch_then_the_lock_with_its_hashes_and_names_no_registry(packaged):
    with zipfile.ZipFile(packaged.dist / "gradescope" / f"{ASSIGNMENT}.zip") as archive:
        setup = archive.read("setup.sh").decode()
        locked = archive.read("requirements-instructor.lock")
        scripts = setup + archive.read("run_autograder").decode() + locked.decode()
    assert locked == (ROOT / "requirements-instructor.lock").read_bytes()  # the versions the course's grader runs
    subprocess.run(["bash", "-n"], input=setup, text=True, check=True)
    assert "apt-get install -y -qq bubblewrap" in setup
    pip = "pip install --quiet --disable-pip-version-check "
    assert setup.index("bubblewrap") < setup.index(pip + "torch==2.13.0") \
        < setup.index(pip + "--require-hashes -r requirements-instructor.lock\n")
    assert setup.count(" -m pip install ") == 2
    assert not REGISTRY.search(scripts), REGISTRY.search(scripts)
    assert 'TORCH_INDEX=""' in setup  # without `make gradescope TORCH_INDEX=...`, pip's own default


def test_run_autograder_writes_valid_results_and_a_submission_cannot_forge_them(packaged):
    code, output = packaged.job("gradescope").wait()
    results = packaged.work / "gradescope-root" / "results"
    assert code == 0, output[-3000:]
    data = json.loads((results / "results.json").read_text())
    jsonschema.validate(data, schema())
    # The submission is the reference plus code that, at import, writes results.json and a marker file.
    gpu = sum(t["max_score"] for t in data["tests"] if "needs a GPU" in t["output"])
    assert data["score"] == sum(t["max_score"] for t in data["tests"]) - gpu > 100, output[-3000:]
    assert len(data["tests"]) > 100
    if "bubblewrap: active" in data["output"]:  # the sandbox gives the worker no view of the results
        assert not (results / "forged").exists(), "the submission wrote into the results folder"


# A course file as docs/term.md suggests for `batch`: every assignment's section, and the course's tables.
COURSE = """
[cluster]
executor = "local"
setup = ["module load cuda/12.4"]

[late_days]
budget = 4
after = "zero"

[assignments.resource_accounting]
due = 2027-01-20T17:00:00-08:00
grace_minutes = 15
rule = "capped"
per_day = 0.1
cap = 0.3

[assignments.flash_attention]
due = "2027-02-10T17:00:00Z"
rule = "late_days"

[assignments.gpu_kernels]
due = 2027-03-01T17:00:00+01:00
per_day = 0.2
"""

# What the packaged grader runs of the course file: `grade --assignment <a> --submission-metadata ...` in
# the zip's folder reads grading.toml there with autograder.cli.late_policy (grade_command).
LOAD = """
import json, sys, autograder
from autograder.cli import build_parser, late_policy
args = build_parser().parse_args(["grade", "submission", "--assignment", sys.argv[1], "--submission-metadata",
                                  "submission_metadata.json"])
policy = late_policy(args, required=False)
print(json.dumps({"grader": autograder.__file__, "due": {n: p.due.isoformat() for n, p in policy.assignments.items()},
                  "budget": policy.late_days.budget}))
"""


def test_each_package_reads_its_own_section_of_a_course_file_of_all_assignments(tmp_path):
    (tmp_path / "grading.toml").write_text(COURSE)
    zips = gradescope.build(tmp_path / "dist", tmp_path / "grading.toml")
    assert [z.stem for z in zips] == assignments() == ["flash_attention", "gpu_kernels", "resource_accounting"]
    course = tomllib.loads(COURSE)
    due = {"resource_accounting": "2027-01-20T17:00:00-08:00", "flash_attention": "2027-02-10T17:00:00+00:00",
           "gpu_kernels": "2027-03-01T17:00:00+01:00"}
    for name in assignments():
        source = tmp_path / name / "source"
        shutil.unpack_archive(tmp_path / "dist" / f"{name}.zip", source)
        assert sorted(p.name for p in (source / "assignments").iterdir() if p.is_dir()) == [name]
        packaged = tomllib.loads((source / "grading.toml").read_text())
        assert packaged == course | {"assignments": {name: course["assignments"][name]}}
        run = subprocess.run([sys.executable, "-c", LOAD, name], cwd=source, env=clean_env(), capture_output=True,
                             text=True)
        assert run.returncode == 0, run.stderr[-3000:]
        loaded = json.loads(run.stdout)
        assert loaded["grader"].startswith(str(source)), "the packaged grader was not the one that ran"
        assert loaded["due"] == {name: due[name]} and loaded["budget"] == 4


@pytest.mark.parametrize("text, expected", [
    (COURSE.replace("per_day = 0.2", "per_dya = 0.2"), r"\[assignments.gpu_kernels\]: unknown key\(s\) per_dya"),
    (COURSE + "\n[assignments.flash_atention]\ndue = 2027-02-10T17:00:00Z\n",
     r"\[assignments.flash_atention\]: no such assignment; the assignments are flash_attention, gpu_kernels"),
    (COURSE.replace("budget = 4", "budget = -1"), r"\[late_days\]: budget must be a whole number"),
    (COURSE.replace('executor = "local"', 'executor = "kubernetes"'), r"\[cluster\] executor must be one of"),
    (COURSE + "\n[late_day]\nbudget = 2\n", r"unknown table or key 'late_day' at the top level"),
    ("[assignments.resource_accounting\n", "is not valid TOML"),
], ids=["misspelt key", "misspelt assignment", "bad budget", "bad executor", "unknown table", "not TOML"])
def test_make_gradescope_refuses_a_wrong_course_file_naming_the_key(tmp_path, capsys, text, expected):
    (tmp_path / "grading.toml").write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        gradescope.main([str(tmp_path / "dist"), "--course", str(tmp_path / "grading.toml")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert re.search(expected, error) and str(tmp_path / "grading.toml") in error, error
    assert "No zip was written: correct the course file" in error and not (tmp_path / "dist").exists()


def test_setup_takes_torch_from_the_index_given_and_refuses_one_it_cannot_quote(tmp_path):
    """`make gradescope TORCH_INDEX=...` writes the index into setup.sh; bash expands the pip line to it (and to
    nothing without one); a value that could break out of setup.sh's quotes is refused before any zip."""
    from autograder.package.gradescope import main, stage

    index = "https://wheels.example.org/cpu"
    for given, expected in ((index, ["--index-url", index]), ("", [])):
        folder = tmp_path / (given and "with" or "without")
        stage(ASSIGNMENT, folder, torch_index=given)
        setup = (folder / "setup.sh").read_text()
        line = next(line for line in setup.splitlines() if "torch==2.13.0" in line and "pip install" in line)
        assignment = next(line for line in setup.splitlines() if line.startswith("TORCH_INDEX="))
        # The pip line's arguments as bash expands them (the command itself printed, not run).
        words = subprocess.run(["bash", "-c", f'{assignment}\nprintf "%s\\n" {line.split("torch==2.13.0", 1)[1]}'],
                               capture_output=True, text=True, check=True).stdout.split()
        assert words == expected
    for bad in ('https://x.org/"; rm -rf ~; "', "ftp://x.org", "https://x.org/$(id)", "not a url"):
        with pytest.raises(SystemExit) as exit:
            main([str(tmp_path / "dist"), "--torch-index", bad])
        assert exit.value.code == 2
    assert not (tmp_path / "dist").exists()


def test_a_submission_that_cannot_be_graded_is_a_failed_run_on_gradescope_never_a_zero(tmp_path):
    """Gradescope's format has no "no score": a results.json without one needs a score on each test, and any
    score reads as a 0. What run_autograder runs writes no results.json for an empty upload, which Gradescope
    documents as the autograder failing (the run is marked failed; the staff see the grader's output, which
    says why first); feedback.md, beside it, says why too. A graded upload's results.json follows the format."""
    from autograder.sandbox.policy import SandboxUnavailable, detect

    try:
        detect()
    except SandboxUnavailable as exc:
        pytest.skip(f"the grade verb refuses to grade here: {exc}")
    (tmp_path / "submission").mkdir()
    results = tmp_path / "results"
    results.mkdir()
    (results / "results.json").write_text('{"score": 0, "tests": []}')  # a stale one must not stay
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "submission"), "--assignment",
                           ASSIGNMENT, "--out", str(results)], cwd=ROOT, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (results / "results.json").exists()
    assert done.stdout.startswith("not gradable: submission is empty")
    feedback = (results / "feedback.md").read_text()
    assert "**Not gradable**" in feedback and "Score" not in feedback
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"score": None, "tests": []}, schema())
