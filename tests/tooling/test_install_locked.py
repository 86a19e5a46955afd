"""scripts/install_locked.py (`make install`): the lock installed by uv with pip's own indexes, else by pip."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install_locked.py"
_spec = importlib.util.spec_from_file_location("install_locked", SCRIPT)
install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install)

LOCK = """\
# a comment
einops==0.8.1 \\
    --hash=sha256:aaaa \\
    --hash=sha256:bbbb
    # via the instructor's extras
uv==0.13.9 \\
    --hash=sha256:cccc \\
    --hash=sha256:dddd
zipp==3.23.0 ; python_full_version < '3.12' \\
    --hash=sha256:eeee
"""


def test_pips_settings_are_taken_as_pip_install_would_take_them():
    listing = ("global.find-links='/wheels'\nglobal.timeout='60'\ninstall.find-links='/install-wheels'\n"
               ":env:.timeout='180'\nglobal.extra-index-url='file:///a/simple file:///b/simple'\n")
    assert install.pip_settings(listing) == {"find-links": "/install-wheels", "timeout": "180",
                                             "extra-index-url": "file:///a/simple file:///b/simple"}


def test_each_setting_that_chooses_files_reaches_uv_as_its_own_option():
    options, environment = install.uv_options({
        "index-url": "https://mirror/simple", "extra-index-url": "file:///a/simple file:///b/simple",
        "find-links": "/wheels", "no-index": "true", "trusted-host": "mirror", "cert": "/certs.pem",
        "default-timeout": "180", "disable-pip-version-check": "1", "constraint": "/c.txt"})
    assert options == ["--extra-index-url", "file:///a/simple", "--extra-index-url", "file:///b/simple",
                       "--find-links", "/wheels", "--index-url", "https://mirror/simple", "--no-index",
                       "--allow-insecure-host", "mirror"]
    assert environment == {"SSL_CERT_FILE": "/certs.pem", "UV_HTTP_TIMEOUT": "180"}
    assert install.uv_options({"no-index": "0"}) == ([], {})


@pytest.mark.parametrize("setting", ["only-binary", "prefer-binary", "pre", "platform", "no-binary",
                                     "upgrade-strategy"])
def test_a_setting_uv_would_not_be_told_leaves_the_install_to_pip(setting):
    with pytest.raises(install.NotForUv, match=setting):
        install.uv_options({"find-links": "/wheels", setting: ":all:"})


def test_the_uv_to_install_is_the_locks_own_pin_with_its_hashes():
    assert install.requirement_of(LOCK, "uv") == "uv==0.13.9 \\\n    --hash=sha256:cccc \\\n    --hash=sha256:dddd\n"
    assert install.requirement_of(LOCK, "zipp").startswith("zipp==3.23.0 ; python_full_version")
    with pytest.raises(install.NotForUv, match="pins no uv"):
        install.requirement_of(LOCK.replace("uv==", "uvicorn=="), "uv")


def test_a_constraint_on_a_pinned_project_leaves_the_install_to_pip(tmp_path):
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# caps\ntorch<=2.14.1\nTorchVision<=0.29.1  # not in the lock\n")
    install.constraints_apart({"constraint": str(constraints)}, LOCK)  # outside the lock: uv goes without them
    constraints.write_text("torch<=2.14.1\nEinOps<0.8\n")
    with pytest.raises(install.NotForUv, match="constrains einops, which the lock pins"):
        install.constraints_apart({"constraint": str(constraints)}, LOCK)
    constraints.write_text("-c other.txt\n")
    with pytest.raises(install.NotForUv, match="holds an option"):
        install.constraints_apart({"constraint": str(constraints)}, LOCK)
    with pytest.raises(install.NotForUv, match="cannot be read"):
        install.constraints_apart({"constraint": str(tmp_path / "missing.txt")}, LOCK)


def wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> tuple[Path, str]:
    """A pure-Python wheel of project `name` holding `files`: its path and its sha256."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = files | {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                     f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}

    def record(text: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"sha256={digest},{len(text.encode())}"

    rows = [f"{member},{record(text)}" for member, text in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
        archive.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


# A stand-in for uv, pinned in the test's lock: `python -m uv` notes its arguments and SSL_CERT_FILE, installs
# nothing, and exits with $FAKE_UV_EXIT.
FAKE_UV = """import json, os, sys
with open(os.environ["FAKE_UV_LOG"], "w") as handle:
    json.dump({"argv": sys.argv[1:], "cert": os.environ.get("SSL_CERT_FILE")}, handle)
sys.exit(int(os.environ["FAKE_UV_EXIT"]))
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(python of a new virtual environment, its environment: no index, a wheel folder pip is configured with,
    holding llmsys_tiny 1.0 and the stand-in uv, a lock of both, the stand-in's log)."""
    work = tmp_path_factory.mktemp("install")
    wheels = work / "wheels"
    wheels.mkdir()
    _, tiny_hash = wheel(wheels, "llmsys_tiny", "1.0", {"llmsys_tiny.py": "VERSION = '1.0'\n"})
    _, uv_hash = wheel(wheels, "uv", "0.13.9", {"uv/__init__.py": "", "uv/__main__.py": FAKE_UV})
    lock = work / "tiny.lock"
    lock.write_text(f"llmsys-tiny==1.0 \\\n    --hash=sha256:{tiny_hash}\nuv==0.13.9 \\\n    --hash=sha256:{uv_hash}\n")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    (work / "certs.pem").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "SSL_"))}
    env |= {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": os.devnull,
            "PIP_CERT": str(work / "certs.pem"), "FAKE_UV_LOG": str(work / "uv.json")}
    return work / "venv" / "bin" / "python", env, lock, work / "uv.json"


def run(python: Path, lock: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(SCRIPT), str(lock)], env=env, capture_output=True, text=True, timeout=300)


def installed(python: Path) -> str:
    shown = subprocess.run([str(python), "-c", "import llmsys_tiny; print(llmsys_tiny.VERSION)"], capture_output=True,
                           text=True)
    return shown.stdout.strip()


def test_uv_installs_the_lock_with_the_indexes_and_certificates_pip_is_configured_with(tiny):
    python, env, lock, log = tiny
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "llmsys-tiny"], env=env, capture_output=True)
    done = run(python, lock, env | {"FAKE_UV_EXIT": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and installed(python) == "", "pip installed the lock: uv was not used"
    called = json.loads(log.read_text())
    assert called["argv"] == ["pip", "install", "--quiet", "--python", str(python), "--require-hashes",
                              "--index-strategy", "unsafe-best-match", "--find-links", env["PIP_FIND_LINKS"],
                              "--no-index", "-r", str(lock)]
    assert called["cert"] == env["PIP_CERT"]


def test_where_uv_fails_pip_installs_the_lock_and_says_why(tiny):
    python, env, lock, _ = tiny
    done = run(python, lock, env | {"FAKE_UV_EXIT": "1"})
    assert done.returncode == 0, done.stderr
    assert f"uv could not install {lock}" in done.stderr and "pip installs it instead" in done.stderr
    assert installed(python) == "1.0"


def test_a_file_that_does_not_match_the_lock_fails_the_install_whoever_installs(tiny, tmp_path):
    python, env, lock, _ = tiny
    wrong = tmp_path / "wrong.lock"
    wrong.write_text(lock.read_text().replace("llmsys-tiny==1.0 \\\n    --hash=sha256:", "llmsys-tiny==1.0 \\\n"
                                              "    --hash=sha256:0"))
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "llmsys-tiny"], env=env, capture_output=True)
    done = run(python, wrong, env | {"FAKE_UV_EXIT": "1"})
    assert done.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr
    assert installed(python) == ""
    done = run(python, wrong, env | {"LLMSYS_INSTALL_WITH": "pip", "FAKE_UV_EXIT": "0"})
    assert done.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr, "pip was not asked"


def test_a_wrong_call_names_what_to_give():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: python scripts/install_locked.py LOCK_FILE" in done.stderr
