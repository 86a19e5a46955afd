"""The grader loads no plugin from the installed packages' entry points, neither pytest's nor Hypothesis's: a
plugin a grading machine happens to have (pytest-randomly reorders and reseeds, others add hooks; a Hypothesis
plugin may load a settings profile of fewer examples) cannot change a grade, and its import costs no runner
anything."""

import os
import subprocess
import sys
from pathlib import Path

from autograder.grading.client import grade

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"

# A plugin installed the way pip installs one: a module, and a distribution whose pytest11 entry point names it,
# and whose hypothesis entry point names its function that Hypothesis calls when it is imported.
PLUGIN = '''
import os


def pytest_configure(config):
    with open(os.environ["LLMSYS_PLUGIN_MARK"], "a") as out:
        out.write("pytest\\n")


def hypothesis_setup():
    with open(os.environ["LLMSYS_PLUGIN_MARK"], "a") as out:
        out.write("hypothesis\\n")
'''


def install_plugin(site: Path) -> None:
    (site / "llmsys_stray_plugin.py").write_text(PLUGIN)
    info = site / "llmsys_stray_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llmsys-stray-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nstray = llmsys_stray_plugin\n\n"
                                          "[hypothesis]\nstray = llmsys_stray_plugin:hypothesis_setup\n")


def test_a_plugin_installed_on_the_machine_is_not_loaded_by_the_grader(tmp_path, monkeypatch):
    site, mark = tmp_path / "site", tmp_path / "loaded.txt"
    site.mkdir()
    install_plugin(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("LLMSYS_PLUGIN_MARK", str(mark))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("HYPOTHESIS_NO_PLUGINS", raising=False)
    # The plugin is installed: pytest run by hand loads it, and the tests' Hypothesis calls it.
    subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", f"tests/{ASSIGNMENT}/test_training.py"],
                   cwd=ROOT, env=os.environ, capture_output=True, check=True, timeout=300)
    assert sorted(mark.read_text().split()) == ["hypothesis", "pytest"]
    mark.unlink()
    report = grade(ROOT / "solutions", assignment=ASSIGNMENT, select="test_memory and not hidden", call_timeout=20)
    assert report.tests and all(t.status == "passed" for t in report.tests), report.log
    assert not mark.exists(), f"the grader loaded the machine's installed plugin: {mark.read_text().split()}"
