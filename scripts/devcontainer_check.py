"""The student release's development container, set up from nothing in a clean Debian root: `make test-devcontainer`.

    python scripts/devcontainer_check.py [--work build/devcontainer]

No container engine is needed: a Debian bookworm root made by debootstrap (variant minbase: apt, no make,
no Python) stands in for the container's image. The student release is built into it (autograder.package.
release), and its `.devcontainer/setup.sh`, the command devcontainer.json runs when a container is created,
runs inside it under bubblewrap as root with the network and this machine's pip configuration (its config files and
the wheel folders or local indexes they name, read-only): apt installs make and Python's venv, then the
release's own `make install` the course's locked versions. Then `make test A=gpu_kernels` runs there and
must end with the points table, its Triton tests run, not skipped (the stubs fail them, as on a student's
first day): Triton is what the container is for.

The root is made once and kept as build/devcontainer/debian.tar; each check unpacks a fresh copy. Needs
root, debootstrap and bwrap (Debian: `apt-get install debootstrap bubblewrap`) and the network; most of
its minutes are torch's download, which TORCH_INDEX (PyTorch's CPU wheel index, as for `make install`)
makes small. Exit 0 when the set-up and the test run did what they must, 1 when not, 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.package import release  # noqa: E402  (the repository's own modules, from a script)

SUITE = "bookworm"
COURSE = "/home/student/course"  # where the release sits inside the root


def debian_root(work: Path) -> Path:
    """A fresh Debian root in work/root, unpacked from work/debian.tar (made by debootstrap the first time)."""
    archive, root = work / "debian.tar", work / "root"
    if not archive.is_file():
        made = work / "debootstrap"
        shutil.rmtree(made, ignore_errors=True)
        print(f"making a Debian {SUITE} root with debootstrap (once; kept as {archive})", flush=True)
        subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(made)], check=True, stdout=subprocess.DEVNULL)
        with tarfile.open(archive, "w") as tar:
            tar.add(made, arcname=".")
        shutil.rmtree(made)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="fully_trusted")
    return root


def pip_configuration() -> tuple[list[Path], Path | None]:
    """This machine's pip configuration, which the root uses as a student's machine uses its own: the config
    files pip reads and every local folder they or the PIP_* variables name (a wheel folder; a file:// index,
    with the folder that holds its `simple/`, where its files lie), to be bound read-only at the same
    place; and the certificate bundle pip is told to trust (a proxy's own authority may be in it), or None."""
    home = Path.home()
    files = [Path("/etc/pip.conf"), Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "pip" / "pip.conf",
             home / ".pip" / "pip.conf", *([Path(os.environ["PIP_CONFIG_FILE"])] if "PIP_CONFIG_FILE" in os.environ
                                          else [])]
    found = [f for f in files if f.is_file()]
    settings = [*(f.read_text() for f in found), *(f"{k}={v}" for k, v in os.environ.items() if k.startswith("PIP_"))]
    cert = next((Path(m[1]) for text in settings for m in re.finditer(r"(?im)^\s*(?:pip_)?cert\s*=\s*(\S+)", text)
                 if Path(m[1]).is_file()), None)
    for word in re.split(r"[\s=,]+", " ".join(settings)):
        path = Path(word.removeprefix("file://"))
        path = path.parent if path.name == "simple" else path
        if word.startswith(("/", "file:///")) and path.is_dir() and path not in found:
            found.append(path)
    return found, cert


def inside(root: Path, command: str, log: Path) -> tuple[int, str]:
    """Run `command` with sh in the release's folder inside `root`, as root with the network and this machine's
    pip configuration; its output goes to `log` and is returned."""
    env = ["--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "--setenv", "HOME", str(Path.home()), "--unsetenv", "PYTHONPATH"]
    folders, cert = pip_configuration()
    binds = [arg for path in folders for arg in ("--ro-bind", str(path), str(path))]
    if cert is not None:  # beside Debian's own bundle, which its ca-certificates writes at the usual place; every
        # variable that names it (PIP_CERT, and REQUESTS_CA_BUNDLE, which requests prefers) names the copy
        binds += ["--ro-bind", str(cert), "/run/pip-cert.pem", "--setenv", "PIP_CERT", "/run/pip-cert.pem"]
        binds += [arg for key, value in os.environ.items() if value == str(cert)
                  for arg in ("--setenv", key, "/run/pip-cert.pem")]
    done = subprocess.run(["bwrap", "--bind", str(root), "/", "--dev", "/dev", "--proc", "/proc",
                           "--perms", "1777", "--tmpfs", "/tmp", "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf",
                           *binds, "--chdir", COURSE, *env, "sh", "-c", command],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write_text(done.stdout)
    return done.returncode, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/devcontainer_check.py", description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "devcontainer", help="where the root and logs go")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("debootstrap", "bwrap") if shutil.which(tool) is None]
    if os.geteuid() != 0 or missing:
        print("make test-devcontainer needs root" + (f" and {', '.join(missing)} (Debian: apt-get install "
              f"{' '.join('bubblewrap' if t == 'bwrap' else t for t in missing)})" if missing else ""), file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    root = debian_root(args.work)
    release.build(root / COURSE.lstrip("/"))
    print(f"the student release is in a clean Debian {SUITE} root ({root}); running .devcontainer/setup.sh", flush=True)
    code, out = inside(root, "sh .devcontainer/setup.sh", args.work / "setup.log")
    print("\n".join("  " + line for line in out.splitlines()[-15:]))
    if code != 0:
        print(f"FAILED: .devcontainer/setup.sh exited {code} (its output: {args.work / 'setup.log'})")
        return 1
    code, out = inside(root, "make test A=gpu_kernels", args.work / "test.log")
    table = [line for line in out.splitlines() if "public points" in line]
    print("\n".join("  " + line for line in out.splitlines()[-6:]))
    if not table or "not started" not in out or "triton is not installed" in out:
        print(f"FAILED: `make test A=gpu_kernels` in the container did not run the public tests, Triton's among "
              f"them, to the points table (exit {code}; its output: {args.work / 'test.log'})")
        return 1
    print(f"ok: the development container's set-up installs the locked versions from nothing and make test runs "
          f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
