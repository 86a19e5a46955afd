"""The user-mode worker (no bubblewrap, the grader as root): no network, nothing left behind, nothing of
the grader's to read.

Each test runs a process as one of the worker's users through the real launcher (autograder/sandbox/
launch.py), as the grader does, and checks what that process could do or left. What it leaves is tried
everywhere a user may leave something that outlives it: a file in every world-writable folder of the
machine (/run/lock among them, which the sweep once missed), a System V shared memory segment, message
queue and semaphore set (which nothing swept), and a POSIX message queue. With private namespaces none
of it reaches the machine; where they cannot be made, the sweep removes the files and the IPC objects and
the filter refuses the message queue.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autograder.sandbox import policy, syscalls, user
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


def run_as(account: user.Account, code: str, no_network: bool = True, private: bool = False,
           refuse_message_queues: bool = False) -> subprocess.CompletedProcess:
    limits = {"nproc": 64, "user": [account.uid, account.gid]}
    if no_network:
        limits["seccomp"] = syscalls.worker_filter(refuse_message_queues).hex()
    if private:
        limits["private"] = {"cover": list(user.world_writable()), "keep": []}
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


LEAVE = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
mark, places = sys.argv[1], json.loads(sys.argv[2])
done = {"files": [], "ipc": [], "mqueue": None}
for place in places:
    try:
        open(os.path.join(place, mark), "w").write("x")
        os.makedirs(os.path.join(place, mark + "-dir", "deep"))
        os.symlink("/etc", os.path.join(place, mark + "-link"))
        done["files"].append(place)
    except OSError as exc:
        done.setdefault("refused", []).append([place, exc.errno])
key = int(sys.argv[3])
IPC_CREAT = 0o1000
for kind, ident in (("shm", libc.shmget(key, 4096, IPC_CREAT | 0o666)), ("msg", libc.msgget(key + 1, IPC_CREAT | 0o666)),
                    ("sem", libc.semget(key + 2, 1, IPC_CREAT | 0o666))):
    if ident >= 0:
        done["ipc"].append(kind)
libc.mq_open.restype = ctypes.c_int
queue = libc.mq_open(("/" + mark).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
done["mqueue"] = "made" if queue >= 0 else ctypes.get_errno()
print(json.dumps(done))
"""


def _ipc_keys() -> set[int]:
    keys = set()
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        keys |= {int(line.split()[0]) for line in lines}
    return keys


def _mqueue_exists(mark: str) -> bool:
    """Whether POSIX message queue /mark exists in this IPC namespace (opened without O_CREAT)."""
    libc = ctypes.CDLL(None, use_errno=True)
    queue = libc.mq_open(f"/{mark}".encode(), os.O_RDONLY, 0, None)
    if queue >= 0:
        libc.mq_close(queue)
        libc.mq_unlink(f"/{mark}".encode())
        return True
    return False


def _left(mark: str, key: int) -> list[str]:
    files = [str(Path(p) / name) for p in user.world_writable() for name in (mark, mark + "-dir", mark + "-link")
             if os.path.lexists(Path(p) / name)]
    ipc = [f"ipc key {k}" for k in _ipc_keys() & {key, key + 1, key + 2}]
    return files + ipc + ([f"mqueue /{mark}"] if _mqueue_exists(mark) else [])


@pytest.fixture
def leaver():
    """Run LEAVE as a fresh worker user (mode: "private" or "sweep"); yields (run, mark, key); cleans up."""
    usable, note = user.probe()
    if not usable and not Path("/usr/bin/python3").exists():
        pytest.skip(f"no Python the worker's user can run: {note}")
    mark, key = f"llmsys-test-{uuid.uuid4().hex[:8]}", 0x4C4C0000 + uuid.uuid4().int % 0xFFFF * 4
    accounts = []

    def run(mode: str) -> tuple[user.Account, dict]:
        account = user.Account.acquire()
        accounts.append(account)
        done = run_as(account, f"import sys\nsys.argv[1:] = {[mark, json.dumps(user.world_writable()), str(key)]!r}\n"
                      + LEAVE, private=mode == "private", refuse_message_queues=mode == "sweep")
        assert done.returncode == 0, done.stderr
        return account, json.loads(done.stdout)

    yield run, mark, key
    for account in accounts:
        try:
            account.release()
        except OSError:
            pass
    for path in _left(mark, key):
        if path.startswith("/"):
            subprocess.run(["rm", "-rf", path])


def test_the_world_writable_folders_are_found_by_walking_the_machine():
    found = user.world_writable()
    assert "/tmp" in found and all(os.stat(p).st_mode & 0o002 for p in found)
    assert not [p for p in found if any(p != q and p.startswith(q + "/") for q in found)], "outermost only"
    if Path("/run/lock").is_dir() and os.stat("/run/lock").st_mode & 0o002:
        assert "/run/lock" in found


def test_the_walks_enter_no_folder_closed_to_every_sandbox_user(tmp_path):
    """The sweep and the search for world-writable folders do not walk a folder that no sandbox user may enter
    (no search permission for group or others, not a sandbox user's own: a grader's private temporary folder, a
    clone of this repository there). What a sandbox user owns below one it cannot have written, and a
    world-writable folder there it cannot reach; below a folder it may enter (by its mode for others, by its
    group's bits, or as its owner), both are found."""
    uid = user.FIRST_UID + user.ACCOUNTS - 1
    layout = {"open": 0o755, "group": 0o710, "closed": 0o700, "theirs": 0o700}  # theirs: the sandbox user's own
    for name, mode in layout.items():
        (tmp_path / name / "anyone").mkdir(parents=True)
        (tmp_path / name / "anyone").chmod(0o777)
        (tmp_path / name / "anyone" / "left").write_text("left by the sandbox user")
        os.chown(tmp_path / name / "anyone" / "left", uid, uid)
        (tmp_path / name).chmod(mode)
    os.chown(tmp_path / "theirs", uid, uid)
    assert user.world_writable(str(tmp_path)) == tuple(str(tmp_path / n / "anyone")
                                                      for n in ("group", "open", "theirs"))
    assert (tmp_path / "closed").stat().st_uid == 0 and user.closed_to_every_account((tmp_path / "closed").stat())
    removed = user.remove_files_of(uid, (str(tmp_path),), removed_only=True)
    assert sorted(removed) == sorted([str(tmp_path / n / "anyone" / "left") for n in ("group", "open")]
                                     + [str(tmp_path / "theirs")])
    assert (tmp_path / "closed" / "anyone" / "left").exists()  # not walked: out of every sandbox user's reach


def test_with_private_namespaces_nothing_the_worker_user_leaves_reaches_the_machine(leaver):
    """It wrote in every world-writable folder and made its IPC objects and a message queue, all inside its
    own namespaces: once it has exited, before any sweep, none of it is on the machine."""
    if not user.private_namespaces():
        pytest.skip("this machine refuses private namespaces to the grader")
    run, mark, key = leaver
    account, done = run("private")
    assert sorted(done["files"]) == sorted(user.world_writable()) and done["ipc"] == ["shm", "msg", "sem"], done
    assert done["mqueue"] == "made", done
    assert _left(mark, key) == [], "left on the machine by a worker in private namespaces"
    assert account.release() == []


def test_without_private_namespaces_the_sweep_removes_every_file_and_ipc_object(leaver):
    """The same, where no namespace can be made: the files and the IPC objects outlive the process, release()
    removes them all and says which, and the message queue, which nothing could list, was refused."""
    run, mark, key = leaver
    account, done = run("sweep")
    assert done["ipc"] == ["shm", "msg", "sem"] and done["mqueue"] == errno.EACCES, done
    assert _left(mark, key), "the worker left nothing: the sweep was not tried"
    theirs = Path("/tmp") / f"{mark}-root"
    theirs.write_text("the grader's")
    try:
        swept = account.release()
        assert _left(mark, key) == [] and theirs.read_text() == "the grader's" and Path("/etc").is_dir()
        assert {line.split()[0] for line in swept} >= {"shm", "msg", "sem"}, swept
        assert {f"file {Path(p) / mark}" for p in user.world_writable()} <= set(swept), "said in the log"
    finally:
        theirs.unlink()


def test_the_refusal_names_the_real_cause_for_a_grader_already_root():
    assert "as root already" in policy.user_fix() and sys.executable in policy.user_fix()
