"""Install a lock file (exact versions, each with its hashes) into this Python's environment: `make install`.

    .venv/bin/python scripts/install_locked.py requirements-instructor.lock

uv installs it when it can, else pip, which always can. Both check every file against the lock's hashes and
refuse a requirement the lock does not pin. uv comes from the lock itself (its version and hashes, installed by
pip first); it then unpacks the wheels on every core, where pip takes them one at a time (about 4 s instead of
24 on a 2-core machine, for the instructor's lock).

uv reads none of pip's configuration, so the indexes, wheel folders, constraints and certificates that pip is
configured with (its config files and PIP_* variables, as `pip config list` shows them) are passed to uv as its
own options. Where pip's configuration holds a setting this script does not know how to pass on, or uv fails
for any reason (no uv wheel for this platform, a network uv cannot reach), pip installs the lock as before,
and a line says why. Neither writes bytecode: `make install` compiles the environment afterwards.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PIP = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
# pip settings that change nothing about which files are installed: the install need not pass them on.
HARMLESS = {"disable-pip-version-check", "no-input", "progress-bar", "quiet", "verbose", "root-user-action",
            "no-color", "require-virtualenv", "no-warn-script-location", "no-python-version-warning", "log",
            "cache-dir", "no-cache-dir", "config-file"}
# pip settings passed to uv: (uv's option, whether pip takes several, whitespace-separated).
# (pip's constraint files are checked here instead: uv takes none without exact pins in hash-checking mode.)
OPTIONS = {"index-url": ("--index-url", False), "extra-index-url": ("--extra-index-url", True),
           "find-links": ("--find-links", True), "trusted-host": ("--allow-insecure-host", True)}
# pip settings uv takes from the environment instead.
ENVIRONMENT = {"cert": "SSL_CERT_FILE", "client-cert": "SSL_CLIENT_CERT", "proxy": "HTTPS_PROXY",
               "timeout": "UV_HTTP_TIMEOUT", "default-timeout": "UV_HTTP_TIMEOUT"}
SECTIONS = ("global", "install", ":env:")  # pip's precedence, lowest first


class NotForUv(Exception):
    """pip's configuration or the lock asks for what this script cannot give uv: pip installs the lock."""


def pip_settings(listing: str) -> dict[str, str]:
    """{setting: value} of `pip config list`'s output, each setting from the section pip would take it from
    for `pip install` (its environment over the install section over every other)."""
    found: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or not name:
            continue
        try:
            text = ast.literal_eval(value)
        except (SyntaxError, ValueError):
            text = value.strip("'\"")
        rank = SECTIONS.index(section) if section in SECTIONS else 0
        if name not in found or rank >= found[name][0]:
            found[name] = (rank, str(text))
    return {name: value for name, (_, value) in found.items()}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's command-line options and environment variables for pip's `settings`; NotForUv naming the first
    setting that uv would not be told."""
    options: list[str] = []
    environment: dict[str, str] = {}
    for name, value in sorted(settings.items()):
        if name in OPTIONS:
            flag, several = OPTIONS[name]
            for item in value.split() if several else [value]:
                options += [flag, item]
        elif name in ENVIRONMENT:
            environment[ENVIRONMENT[name]] = value
        elif name == "constraint":
            pass  # checked against the lock by constraints_apart
        elif name == "no-index":
            if value.strip().lower() in ("1", "true", "yes", "on"):
                options.append("--no-index")
        elif name not in HARMLESS:
            raise NotForUv(f"pip is configured with {name}={value!r}, which this script does not pass on to uv")
    return options, environment


def name_of(requirement: str) -> str:
    """A requirement's project name, normalised as PEP 503 does ("" for a line that names none)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", found.group(1)).lower() if found else ""


def constraints_apart(settings: dict[str, str], lock: str) -> None:
    """NotForUv where a constraint file pip is configured with names a project the lock pins: pip then judges
    the pin against it. A constraint on a project outside the lock changes nothing (with hashes required, only
    the lock's projects are installed): uv goes without it."""
    pinned = {name_of(line) for line in lock.splitlines() if "==" in line and not line[:1].isspace()}
    for path in settings.get("constraint", "").split():
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise NotForUv(f"pip's constraint file {path} cannot be read ({exc})") from exc
        for line in lines:
            line = line.split("#")[0].strip()
            if line.startswith("-"):
                raise NotForUv(f"pip's constraint file {path} holds an option ({line})")
            if line and name_of(line) in pinned:
                raise NotForUv(f"pip's constraint file {path} constrains {name_of(line)}, which the lock pins")


def requirement_of(lock: str, name: str) -> str:
    """The lock's entry for `name` (its pin, marker and hashes, continued lines and all), as a requirements file
    of that entry alone; NotForUv where the lock has none."""
    lines = lock.splitlines()
    for index, line in enumerate(lines):
        if "==" in line and not line[:1].isspace() and name_of(line) == name:
            entry = [line]
            while entry[-1].rstrip().endswith("\\") and index + len(entry) < len(lines):
                entry.append(lines[index + len(entry)])
            return "\n".join(entry).rstrip().removesuffix("\\") + "\n"
    raise NotForUv(f"the lock pins no {name}")


def install_with_uv(lock: Path) -> None:
    """Install `lock` with uv; NotForUv (or CalledProcessError) where it did not."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    if listing.returncode != 0:
        raise NotForUv(f"`pip config list` failed: {listing.stderr.strip()[-300:]}")
    settings, pins = pip_settings(listing.stdout), lock.read_text()
    options, environment = uv_options(settings)
    constraints_apart(settings, pins)
    with tempfile.TemporaryDirectory(prefix="install-uv-") as folder:
        pinned = Path(folder) / "uv.txt"
        pinned.write_text(requirement_of(pins, "uv"))
        subprocess.run([*PIP, "--require-hashes", "-r", str(pinned)], check=True)
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable, "--require-hashes",
          "--index-strategy", "unsafe-best-match", *options, "-r", str(lock)]
    # unsafe-best-match: every index considered for every package, as pip does; the hashes pin each file anyway.
    subprocess.run(uv, check=True, env=os.environ | environment)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python scripts/install_locked.py LOCK_FILE (a requirements file with hashes)", file=sys.stderr)
        return 2
    lock = Path(argv[0])
    if os.environ.get("LLMSYS_INSTALL_WITH", "") != "pip":
        try:
            install_with_uv(lock)
            return 0
        except NotForUv as exc:
            print(f"note: pip installs {lock} ({exc})", file=sys.stderr)
        except (subprocess.CalledProcessError, OSError) as exc:
            print(f"note: uv could not install {lock} ({exc}); pip installs it instead", file=sys.stderr)
    return subprocess.run([*PIP, "--require-hashes", "-r", str(lock)]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
