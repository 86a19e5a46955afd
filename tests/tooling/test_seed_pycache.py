"""scripts/seed_pycache.py (`make test`): the environment's bytecode read under the suite's PYTHONPYCACHEPREFIX."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "seed_pycache.py"
TAG = sys.implementation.cache_tag


def environment(folder: Path) -> Path:
    """A folder of packages as an install leaves it: a module and a package, each compiled into __pycache__."""
    site = folder / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "alone.py").write_text("VALUE = 'alone'\n")
    (site / "pkg" / "__init__.py").write_text("from .inner import VALUE\n")
    (site / "pkg" / "inner.py").write_text("VALUE = 'inner'\n")
    for path in (site / "alone.py", site / "pkg" / "__init__.py", site / "pkg" / "inner.py"):
        compiled = path.parent / "__pycache__" / f"{path.stem}.{TAG}"  # where an install writes it, whatever
        py_compile.compile(str(path), cfile=f"{compiled}.pyc", doraise=True)  # this process's prefix
        py_compile.compile(str(path), cfile=f"{compiled}.opt-1.pyc", doraise=True, optimize=1)  # read with -O only
    return site


def seed(site: Path, prefix: Path) -> subprocess.CompletedProcess:
    code = ("import runpy, sys; module = runpy.run_path(sys.argv[1]); "
            "print(module['seed'](module['Path'](sys.pycache_prefix), [sys.argv[2]]))")
    return subprocess.run([sys.executable, "-c", code, str(SCRIPT), str(site)], capture_output=True, text=True,
                          env=os.environ | {"PYTHONPYCACHEPREFIX": str(prefix)}, check=True)


def under(prefix: Path, source: Path) -> Path:
    return prefix / str(source.parent).lstrip(os.sep) / f"{source.stem}.{TAG}.pyc"


def imported(site: Path, prefix: Path, module: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.VALUE)"], capture_output=True,
                          text=True, env=env | {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_compiled_module_is_where_python_looks_under_the_prefix_and_is_read_from_there(tmp_path):
    site, prefix = environment(tmp_path), tmp_path / "prefix"
    assert seed(site, prefix).stdout.strip() == "3"
    sources = [site / "alone.py", site / "pkg" / "__init__.py", site / "pkg" / "inner.py"]
    for source in sources:
        seeded = under(prefix, source)
        assert seeded.is_file(), f"{seeded} missing"
        assert seeded.read_bytes() == (source.parent / "__pycache__" / f"{source.stem}.{TAG}.pyc").read_bytes()
    mirrored = prefix / str(site).lstrip(os.sep)  # (the seeding process's own stdlib imports land beside it)
    assert sorted(p.name for p in mirrored.rglob("*.pyc")) == sorted(f"{s.stem}.{TAG}.pyc" for s in sources)
    before = {source: under(prefix, source).stat().st_ino for source in sources}
    assert imported(site, prefix, "pkg") == "inner" and imported(site, prefix, "alone") == "alone"
    # Read, not compiled again: Python would have written a new file (a new inode) in each place.
    assert {source: under(prefix, source).stat().st_ino for source in sources} == before


def test_a_source_changed_since_its_install_is_compiled_again_and_the_environment_keeps_its_own(tmp_path):
    site, prefix = environment(tmp_path), tmp_path / "prefix"
    seed(site, prefix)
    installed = (site / "__pycache__" / f"alone.{TAG}.pyc").read_bytes()
    (site / "alone.py").write_text("VALUE = 'changed since the install'\n")
    assert imported(site, prefix, "alone") == "changed since the install"
    assert (site / "__pycache__" / f"alone.{TAG}.pyc").read_bytes() == installed  # a link, not written through


def test_what_is_already_under_the_prefix_is_kept_and_a_second_seed_adds_nothing(tmp_path):
    site, prefix = environment(tmp_path), tmp_path / "prefix"
    mine = under(prefix, site / "alone.py")
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"compiled by the suite")
    assert seed(site, prefix).stdout.strip() == "2"
    assert mine.read_bytes() == b"compiled by the suite"
    assert seed(site, prefix).stdout.strip() == "0"


def test_the_script_runs_once_per_install_and_refuses_to_run_without_a_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    env = os.environ | {"PYTHONPYCACHEPREFIX": str(prefix)}
    assert subprocess.run([sys.executable, str(SCRIPT)], env=env, timeout=120).returncode == 0
    markers = list(prefix.glob(".seeded-*"))
    assert len(markers) == 1 and int(markers[0].read_text()) > 100  # this environment: torch and the rest
    assert any(prefix.rglob(f"torch/__init__.{TAG}.pyc"))
    assert subprocess.run([sys.executable, str(SCRIPT)], env=env, timeout=120).returncode == 0
    assert list(prefix.glob(".seeded-*")) == markers and int(markers[0].read_text()) > 100  # not seeded again
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"})
    assert done.returncode == 2 and "PYTHONPYCACHEPREFIX is not set" in done.stderr


def test_make_test_seeds_before_the_suite_runs():
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}}
    plan = subprocess.run(["make", "--no-print-directory", "-n", "-o", "install", "-o", "sandbox-tools", "-o",
                           "browser-tools", "test"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60).stdout.splitlines()
    seeding = [i for i, line in enumerate(plan) if "scripts/seed_pycache.py" in line]
    suite = [i for i, line in enumerate(plan) if " -m pytest " in line]
    assert len(seeding) == 1 and suite and seeding[0] < suite[0]
    assert "PYTHONPYCACHEPREFIX=" in plan[seeding[0]] and "PYTHONPYCACHEPREFIX=" in plan[suite[0]]
