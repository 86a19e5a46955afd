"""Gradescope's autograder zip: its contents, its scripts, and a real run_autograder under a temporary root."""

import json
import re
import subprocess
import zipfile

import jsonschema

from autograder.package.layout import assignments
from autograder.report.gradescope import schema
from tests.autograder.package.conftest import ASSIGNMENT

REGISTRY = re.compile(r"https?://|pypi\.org|pythonhosted|download\.pytorch|index-url", re.IGNORECASE)


def test_each_zip_holds_the_scripts_and_the_grader_of_its_one_assignment(packaged):
    for name in assignments():
        with zipfile.ZipFile(packaged.dist / "gradescope" / f"{name}.zip") as archive:
            infos = {info.filename: info for info in archive.infolist()}
            run = archive.read("run_autograder").decode()
        others = [other for other in assignments() if other != name]
        assert {"setup.sh", "run_autograder", "requirements.txt", "pyproject.toml", "conftest.py",
                f"solutions/{name}/__init__.py", f"autograder/suites/{name}/conftest.py"} <= set(infos)
        assert not [f for f in infos if any(f"/{other}/" in f or f.startswith(f"{other}/") for other in others)]
        assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos.values())
        assert list(infos) == sorted(infos)
        assert [f for f, info in infos.items() if info.external_attr >> 16 & 0o111] == ["run_autograder", "setup.sh"]
        assert f'ASSIGNMENT="{name}"' in run and '--out "$ROOT/results"' in run


def test_setup_installs_bubblewrap_then_torch_then_the_requirements_and_names_no_registry(packaged):
    with zipfile.ZipFile(packaged.dist / "gradescope" / f"{ASSIGNMENT}.zip") as archive:
        setup = archive.read("setup.sh").decode()
        scripts = setup + archive.read("run_autograder").decode() + archive.read("requirements.txt").decode()
    subprocess.run(["bash", "-n"], input=setup, text=True, check=True)
    assert "apt-get install -y -qq bubblewrap" in setup
    assert setup.index("bubblewrap") < setup.index("pip install --quiet --disable-pip-version-check torch==2.13.0") \
        < setup.index("-r requirements.txt")
    assert not REGISTRY.search(scripts), REGISTRY.search(scripts)


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
