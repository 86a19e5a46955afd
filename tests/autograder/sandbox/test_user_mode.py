"""The user-mode worker (no bubblewrap, the grader as root): no network, nothing left behind, nothing of
the grader's to read.

Each test runs a process as one of the worker's users through the real launcher (autograder/sandbox/
launch.py), as the grader does, and checks what that process could do or left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autograder.sandbox import policy, user
from autograder.sandbox.process import LAUNCHER

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="running as the worker's user needs root")

PROBE = """
import socket, sys
for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
    try:
        socket.socket(family, socket.SOCK_RAW if family == socket.AF_PACKET else socket.SOCK_STREAM
                      if family != socket.AF_NETLINK else socket.SOCK_RAW)
        print("open", int(family))
    except OSError as exc:
        print("refused", int(family), exc.errno)
a, b = socket.socketpair()
a.sendall(b"x")
print("unix", b.recv(1).decode())
"""


def run_as(account: user.Account, code: str, no_network: bool = True) -> subprocess.CompletedProcess:
    limits = {"nproc": 64, "user": [account.uid, account.gid], "no_network": no_network}
    return subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(limits), "--", "/usr/bin/python3"
                           if Path("/usr/bin/python3").exists() else sys.executable, "-I", "-c", code],
                          capture_output=True, text=True, timeout=120, cwd="/")


@pytest.fixture
def account():
    usable, note = user.probe()
    if not usable and not Path("/usr/bin/python3").exists():
        pytest.skip(f"no Python the worker's user can run: {note}")
    held = user.Account.acquire()
    yield held
    held.release()


def test_the_worker_user_has_no_network_but_local_pipes(account):
    done = run_as(account, PROBE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert "open" not in lines, done.stdout
    assert done.stdout.count("refused") == 4 and "unix x" in done.stdout


def test_the_filter_is_what_closes_it(account):
    """The same probe without the filter: an inet socket opens, so the test above can fail."""
    done = run_as(account, PROBE, no_network=False)
    assert done.returncode == 0, done.stderr
    assert f"open {int(__import__('socket').AF_INET)}" in done.stdout


def test_what_the_worker_user_leaves_in_world_writable_folders_is_removed_on_release():
    usable, note = user.probe()
    if not usable and not Path("/usr/bin/python3").exists():
        pytest.skip(f"no Python the worker's user can run: {note}")
    account = user.Account.acquire()
    mark = f"llmsys-test-{uuid.uuid4().hex[:8]}"
    places = [Path(p) for p in user.WORLD_WRITABLE if Path(p).is_dir()]
    code = (f"import os\nfor place in {[str(p) for p in places]!r}:\n"
            f"    open(os.path.join(place, {mark!r}), 'w').write('x')\n"
            f"    os.makedirs(os.path.join(place, {mark!r} + '-dir', 'deep'))\n"
            f"    open(os.path.join(place, {mark!r} + '-dir', 'deep', 'f'), 'w').write('x')\n"
            f"    os.symlink('/etc', os.path.join(place, {mark!r} + '-link'))\n")
    theirs = Path("/tmp") / f"{mark}-root"
    theirs.write_text("the grader's")
    try:
        done = run_as(account, code)
        assert done.returncode == 0, done.stderr
        assert all((p / mark).exists() for p in places)
    finally:
        account.release()
    try:
        left = [str(p / name) for p in places for name in (mark, mark + "-dir", mark + "-link")
                if os.path.lexists(p / name)]
        assert left == [] and theirs.read_text() == "the grader's" and Path("/etc").is_dir()
    finally:
        theirs.unlink()


def test_the_refusal_names_the_real_cause_for_a_grader_already_root():
    assert "as root already" in policy.user_fix() and sys.executable in policy.user_fix()
