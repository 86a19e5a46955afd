"""The lock files: what pyproject.toml asks for, at one version each, with hashes, and nothing machine-specific.

`make lock` needs the package index, so the suite does not run it; instead each file's header holds the
digest of the inputs it was resolved from, and the first test compares it with pyproject.toml and the
Makefile's TORCH_PIN as they are now.
"""

import importlib.metadata
import re
from dataclasses import dataclass

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from autograder.package import lock
from autograder.package.layout import ROOT

LOCKS = {item.file: item for item in lock.LOCKS}
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
# Where students and graders run: Linux (x86-64 and ARM) and macOS, every Python the course supports.
PLATFORMS = [{"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"},
             {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix"},
             {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64", "os_name": "posix"}]
ENVIRONMENTS = [platform | {"python_version": version, "python_full_version": f"{version}.0",
                            "implementation_name": "cpython", "platform_python_implementation": "CPython"}
                for platform in PLATFORMS for version in ("3.11", "3.12", "3.13")]


@dataclass
class Entry:
    version: str
    marker: Marker | None
    hashes: list[str]


def torch_pin() -> str:
    """The Makefile's TORCH_PIN: what `make install` installs first and `make lock` resolves with."""
    return re.search(r"^TORCH_PIN \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)


def entries(name: str) -> dict[str, Entry]:
    """The pins of a lock file by their normalised names, as pip reads them (continuation lines joined)."""
    found = {}
    for line in (ROOT / name).read_text().replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement, *hashes = line.split("--hash=")
        parsed = Requirement(requirement.strip())
        [spec] = parsed.specifier
        assert spec.operator == "==", f"{name}: {line!r} is not pinned to one version"
        key = canonicalize_name(parsed.name)
        assert key not in found, f"{name} pins {key} twice (one version for every platform and Python is the rule)"
        found[key] = Entry(spec.version, parsed.marker, [h.strip() for h in hashes])
    return found


def applies(marker: Marker | None, environment: dict) -> bool:
    return marker is None or marker.evaluate(environment)


@pytest.mark.parametrize("name", LOCKS)
def test_each_lock_was_resolved_from_pyproject_and_the_torch_pin_as_they_are_now(name):
    text = (ROOT / name).read_text()
    assert lock.locked_digest(text) == lock.digest(LOCKS[name], torch_pin()), (
        f"{name} was resolved from other dependencies than pyproject.toml's now (or another TORCH_PIN): "
        "run `make lock` and commit the lock files")
    assert f"after {torch_pin()}" in text.replace("\n# ", " ")


@pytest.mark.parametrize("name", LOCKS)
def test_every_dependency_pyproject_names_is_locked_within_its_range_wherever_it_applies(name):
    locked = entries(name)
    wanted = lock.inputs(LOCKS[name], torch_pin())
    requirements = [Requirement(r) for key, value in wanted.items() if isinstance(value, list) for r in value]
    assert any(r.name == "triton" and r.marker for r in requirements)  # a dependency with a marker is among them
    for requirement in requirements:
        key = canonicalize_name(requirement.name)
        if key == "torch":
            assert key not in locked, f"{name} locks torch: the Makefile installs it first, from TORCH_PIN"
            assert requirement.specifier.contains(torch_pin().split("==")[1]), "TORCH_PIN is outside pyproject's range"
            continue
        assert key in locked, f"{name} has no {key}, which pyproject.toml names: run `make lock`"
        assert requirement.specifier.contains(locked[key].version), f"{name}: {key}=={locked[key].version} " \
            f"is outside pyproject.toml's {requirement}"
        for environment in ENVIRONMENTS:
            if applies(requirement.marker, environment):
                assert applies(locked[key].marker, environment), f"{name} leaves {key} out of {environment}"


@pytest.mark.parametrize("name", LOCKS)
def test_every_pin_has_hashes_and_the_file_names_no_index_url_or_local_path(name):
    text = (ROOT / name).read_text()
    for key, entry in entries(name).items():
        assert entry.hashes and all(SHA256.fullmatch(h) for h in entry.hashes), f"{name}: {key} has no sha256"
    assert not re.search(r"://|index-url|find-links|--trusted-host|(^|[\s(])(/|~/)\w", text, re.MULTILINE)
    assert not lock.NOT_PORTABLE.search(text)


@pytest.mark.parametrize("name", LOCKS)
def test_torch_and_its_cuda_libraries_are_left_out_and_triton_and_numpy_are_locked_for_every_platform(name):
    locked = entries(name)
    assert not [key for key in locked if key == "torch" or key.startswith(("nvidia-", "cuda-"))]
    assert str(locked["triton"].marker) == 'sys_platform == "linux"'
    # numpy ships a wheel per platform and Python: the hashes of all of them, not only this machine's one.
    assert len(locked["numpy"].hashes) >= 10, locked["numpy"].hashes


def test_the_student_lock_pins_the_instructor_locks_versions_and_hashes():
    student, instructor = entries(lock.STUDENT.file), entries(lock.INSTRUCTOR.file)
    assert set(student) < set(instructor)
    for key, entry in student.items():
        assert (entry.version, sorted(entry.hashes)) == (instructor[key].version, sorted(instructor[key].hashes)), key
    assert {"pytest-xdist", "execnet", "uv", "nbgrader"} <= set(instructor) - set(student)


def test_what_torch_and_each_locked_package_need_here_is_locked_too():
    """Every requirement of torch and of each locked package, as installed in this environment (where its
    version is the locked one), is itself locked: the lock is complete without torch in it."""
    locked = entries(lock.INSTRUCTOR.file)
    checked = 0
    for key in ["torch", *locked]:
        try:
            dist = importlib.metadata.distribution(key)
        except importlib.metadata.PackageNotFoundError:
            continue
        if key != "torch" and dist.version != locked[key].version:
            continue  # not the locked version here (PYTHON=... an environment of its own): nothing to learn
        for text in dist.requires or []:
            needed = Requirement(text)
            need = canonicalize_name(needed.name)
            if (needed.marker and not needed.marker.evaluate({"extra": ""})) or need.startswith(("nvidia-", "cuda-")):
                continue
            assert need in locked, f"{key} needs {needed}, which {lock.INSTRUCTOR.file} does not lock"
            assert needed.specifier.contains(locked[need].version, prereleases=True), \
                f"{key} needs {needed}; the lock has {need}=={locked[need].version}"
        checked += 1
    if checked < 10:
        pytest.skip("this environment does not hold the locked versions (make install installs them)")


@pytest.mark.parametrize("text", ["--index-url https://example.org/simple\n", "--find-links /var/wheels\n",
                                  "numpy==2.0 \\\n    # via -r /tmp/lock/requirements.in\n",
                                  "--extra-index-url file:///srv/pypi\n", "-e ./local\n"])
def test_the_lock_writer_refuses_an_option_a_url_or_a_local_path(text):
    assert lock.NOT_PORTABLE.search(text)
    assert not lock.NOT_PORTABLE.search("numpy==2.0 ; sys_platform == 'linux' \\\n    --hash=sha256:" + "0" * 64
                                        + "\n    # via\n    #   -c requirements-instructor.lock\n")


def test_make_lock_refuses_a_torch_that_is_not_one_exact_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        lock.main(["--torch", "torch>=2.4"])
    assert exit_info.value.code == 2 and "not an exact pin" in capsys.readouterr().err
