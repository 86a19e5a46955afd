"""Grading fails closed, and Gradescope's case (root, no bubblewrap, no pids cgroup) is still safe.

The cheats that target a grader without bubblewrap (read the reference from disk, forge the reports,
a daemon started at import that keeps rewriting results.json, import the grader, exit with status 0)
are graded through the generated run_autograder as Gradescope runs it: as root, in a mount namespace
where `bwrap` fails as it does under Docker's seccomp profile and the pids cgroup is read-only. The
worker then runs as an unprivileged user of its own. Nothing may score, nothing of that user may be
left running, and results.json must be the grader's. A spy in the same stubs as the daemon tries the user-mode
attacks (files left in world-writable folders, the network, the grader's hidden suites): none may succeed. A
one-mistake submission graded the same way, by the command docs/term.md gives for trying it, gets feedback.md
under 150 lines. Without any isolation the CLI refuses.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import socket
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from autograder.cohort import sample as cohort
from autograder.package import gradescope
from autograder.report.terminal import print_report
from autograder.model.results import GradeReport
from autograder.sandbox import cgroups, policy, user
from autograder.sandbox.process import LAUNCHER

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"
CHEATS = ("cheat-read-reference", "cheat-forge-reports", "cheat-import-grader", "cheat-exit-zero")
RUN_LIMIT = 600

# Appended to the stubs' memory.py: at import (in the worker), a daemon in a session of its own that
# keeps rewriting results.json and a marker file, and notes its pid where the test can read it.
DAEMON = """

def _daemon(results, notes):
    import json, os, time
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    with open(os.path.join(notes, "daemon"), "a") as note:
        note.write("%d\\n" % os.getpid())
    while True:
        for name in ("results.json", "forged"):
            try:
                with open(os.path.join(results, name), "w") as handle:
                    json.dump({"score": 1000000.0, "tests": []}, handle)
            except OSError:
                pass
        time.sleep(0.05)


_daemon(RESULTS, NOTES)
"""

# Appended to the stubs' memory.py after the daemon: at import (in the worker, as its own user), what the
# third and fourth outside batteries tried in user mode. It leaves files in every world-writable folder (/run/lock
# among them) and a System V shared memory segment, connects to a port the test listens on and reads the hidden
# suites of the grader's package, and notes what it managed in NOTES/spy.json, where the test reads it.
SPY = """

def _spy(notes, port, marker, source, key):
    import ctypes, glob, json, os, socket
    found = {"left": [], "connected": [], "network": [], "hidden": [], "shm": -1}
    for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        for path in (os.path.join(folder, marker), os.path.join(folder, marker + "-dir", "inside")):
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as handle:
                    handle.write("left behind")
                found["left"].append(path)
            except OSError:
                pass
    found["shm"] = ctypes.CDLL(None).shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT: a segment that outlives it
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(3)
                sock.connect((host, port))
                sock.sendall(b"spy")
                found["connected"].append(host)
        except OSError as exc:
            found["network"].append(f"{host}: {exc}")
    for path in glob.glob(os.path.join(source, "**", "test_hidden*.py"), recursive=True):
        try:
            with open(path) as handle:
                found["hidden"].append((path, len(handle.read())))
        except OSError:
            pass
    with open(os.path.join(notes, "spy.json"), "w") as handle:
        json.dump(found, handle)


_spy(NOTES, PORT, MARKER, SOURCE, KEY)
"""


def documented_command() -> str:
    """The command docs/term.md gives for trying run_autograder locally, exactly as written there."""
    lines = [line for line in (ROOT / "docs" / "term.md").read_text().splitlines() if "AUTOGRADER_ROOT=" in line]
    assert len(lines) == 1, "docs/term.md should give one run_autograder command"
    return lines[0].split("`")[-2]


def namespace_setup(work: Path) -> str:
    """Shell lines, run as root in a private mount namespace, that make this machine look like a
    hosted autograder: bwrap fails to create namespaces, the cgroups are read-only (no pids cap, no CPU
    account: calls are charged their wall clock). Where this
    machine's Python lives in a folder closed to other users (root's home), its folder is mounted
    into an open one at the same path, as a hosted image installs Python system-wide."""
    fake = work / "bwrap-fails"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    lines = ["set -e"]
    real = shutil.which("bwrap")
    if real:
        lines.append(f"mount --bind {fake} {os.path.realpath(real)}")
    places = (cgroups._pids_place(), cgroups._cpu_place(), cgroups._v2_place())
    for place in {p.parent for p in places if p is not None}:
        lines.append(f'mount -o remount,bind,ro "$(findmnt -n -o TARGET -T {place})"')
    for index, (closed, child) in enumerate(closed_ancestors()):
        hold = work / f"hold-{index}"
        hold.mkdir()
        lines += [f"mount --bind {closed / child} {hold}", f"mount -t tmpfs -o mode=0755 tmpfs {closed}",
                  f"mkdir -p {closed / child}", f"mount --bind {hold} {closed / child}"]
    return "\n".join(lines) + "\n"


def closed_ancestors() -> list[tuple[Path, str]]:
    """(folder, child on the way) for each folder on the way to this Python that others cannot enter."""
    found = []
    for target in {os.path.realpath(sys.executable), os.path.realpath(sys.prefix)}:
        path = Path(target)
        for folder in reversed(path.parents):
            if folder != Path("/") and not folder.stat().st_mode & stat.S_IXOTH:
                entry = (folder, path.relative_to(folder).parts[0])
                if entry not in found:
                    found.append(entry)
    return found


def start(command: str, cwd: Path, setup: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    script = setup + command + "\n"
    with open(log, "wb") as out:
        return subprocess.Popen(["unshare", "-m", "--propagation", "private", "bash", "-c", script], cwd=cwd,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """Every member graded through run_autograder at once; {name: (exit code, output, results folder)},
    plus "_notes" (the daemon's pid notes)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("findmnt") is None:
        pytest.skip("simulating a hosted autograder needs root, unshare and findmnt")
    work = Path(tempfile.mkdtemp(prefix="llmsys-hosted-"))  # open to the worker's user, unlike tmp_path
    work.chmod(0o755)
    source = work / "source"
    gradescope.stage(ASSIGNMENT, source)
    # The cheats' notes: files anyone may write in a folder that is not world-writable, so that a worker in
    # private namespaces (every world-writable folder an empty tmpfs of its own) still reaches them.
    notes = Path(tempfile.mkdtemp(prefix="llmsys-hosted-notes-", dir="/run" if os.path.isdir("/run") else None))
    notes.chmod(0o755)
    for name in ("daemon", "spy.json"):
        (notes / name).touch()
        (notes / name).chmod(0o666)
    listener = socket.create_server(("127.0.0.1", 0))  # the spy's target: nothing may reach it
    listener.setblocking(False)
    marker = f"llmsys-spy-{uuid.uuid4().hex}"
    key = 0x4C4C0000 | uuid.uuid4().int % 0xFFFF  # the spy's System V segment
    members = [m for m in cohort.CHEATS if m.name in CHEATS]
    members += [m for m in cohort.MEMBERS if m.name in ("stubs", "mistake-matmul-flops")]
    built = {p.name: p for p in cohort.build(work / "cohort", [ASSIGNMENT], members)}
    runs = {}
    try:
        setup = namespace_setup(work)
        for name in CHEATS + ("stubs",):
            root = work / name
            (root / "results").mkdir(parents=True)
            (root / "source").symlink_to(source)
            shutil.copytree(built[name], root / "submission")
            if name == "stubs":  # the stubs plus the daemon and the spy: honest stubs score 0, so must this
                spy = SPY.replace("NOTES", repr(str(notes))).replace("PORT", str(listener.getsockname()[1]))
                spy = spy.replace("KEY", str(key))
                with open(root / "submission" / ASSIGNMENT / "memory.py", "a") as handle:
                    daemon = DAEMON.replace("RESULTS", repr(str(root / "results")))
                    handle.write(daemon.replace("NOTES", repr(str(notes))))
                    handle.write(spy.replace("MARKER", repr(marker)).replace("SOURCE", repr(str(root / "source"))))
            env = os.environ | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
            runs[name] = (start(f"exec bash {root / 'source' / 'run_autograder'}", work, setup, env,
                                work / f"{name}.log"), root / "results")
        # docs/term.md's command, verbatim, from a folder that holds .venv and ag/ as the page has them.
        documented = work / "documented"
        (documented / "ag" / "results").mkdir(parents=True)
        (documented / "ag" / "source").symlink_to(source)
        (documented / ".venv").symlink_to(sys.prefix)
        shutil.copytree(built["mistake-matmul-flops"], documented / "ag" / "submission")
        # As an instructor's shell has it: without the suite's PYTHONPYCACHEPREFIX, under which this .venv's path
        # (not the environment's own) would find no bytecode, and torch and all would be compiled for this run.
        shell = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        runs["documented"] = (start(documented_command(), documented, setup, shell, work / "documented.log"),
                              documented / "ag" / "results")
        outcome = {}
        for name, (process, results) in runs.items():
            try:
                code = process.wait(timeout=RUN_LIMIT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                code = process.wait()
            outcome[name] = (code, (work / f"{name}.log").read_text(errors="replace"), results)
        outcome["_notes"] = notes
        outcome["_spy"] = (marker, source, key)
        try:
            listener.accept()
            outcome["_reached"] = True
        except BlockingIOError:
            outcome["_reached"] = False
        yield outcome
    finally:
        for process, _ in runs.values():
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
        listener.close()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(notes, ignore_errors=True)


def results_of(hosted, name: str) -> dict:
    code, output, results = hosted[name]
    assert code == 0, output[-3000:]
    return json.loads((results / "results.json").read_text())


@pytest.mark.parametrize("name", CHEATS + ("stubs",))
def test_no_cheat_gains_a_point_without_bubblewrap(hosted, name):
    data = results_of(hosted, name)
    assert data["score"] == 0 and len(data["tests"]) > 100
    assert "bubblewrap: NOT active" in data["output"] and "user: active" in data["output"]
    assert "RLIMIT_NPROC of the worker's own user" in data["output"]  # the pids cgroup was read-only
    assert "of wall clock per call (no cgroup could be made here" in data["output"]  # nor any CPU account


def test_the_daemon_ran_and_results_json_is_the_graders_alone(hosted):
    data = results_of(hosted, "stubs")
    assert (hosted["_notes"] / "daemon").read_text().split(), \
        "the daemon never started: the attack was not tried\n" + data["output"][-3000:]
    assert data["tests"] and data["score"] == 0
    assert sorted(p.name for p in hosted["stubs"][2].iterdir()) == ["feedback.md", "junit.xml", "report.json",
                                                                   "results.json"]


def processes_of_free_users() -> dict[int, list[int]]:
    """{uid: its processes} of each sandbox user that no grader holds now (its lock is free, and held here while
    its processes are read). A user that another grading holds (the suite grades beside this test) is left out."""
    found = {}
    for uid in range(user.FIRST_UID, user.FIRST_UID + user.ACCOUNTS):
        fd = os.open(user._lock_dir() / f"{uid}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            running = user.processes_of(uid)
            if running:
                found[uid] = running
        finally:
            os.close(fd)
    return found


def test_nothing_of_the_worker_users_is_left_running(hosted):
    pids = [int(pid) for pid in (hosted["_notes"] / "daemon").read_text().split()]
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert processes_of_free_users() == {}


def test_the_user_mode_worker_leaves_nothing_reaches_no_network_and_reads_no_hidden_test(hosted):
    """The stubs with the spy (the user-mode attacks, at import in the worker, after the daemon started) score
    0; what it wrote in /tmp, /var/tmp, /dev/shm and /run/lock and its System V segment are gone after grading;
    it reached no port of this machine (the seccomp filter refuses every socket family but AF_UNIX); and the
    grader's package, hidden suites included, was closed to it."""
    data = results_of(hosted, "stubs")
    assert data["score"] == 0 and len(data["tests"]) > 100
    spy = json.loads((hosted["_notes"] / "spy.json").read_text())  # it ran: the attack was tried
    marker, source, key = hosted["_spy"]
    assert spy["left"] and spy["shm"] >= 0, "the spy could leave nothing: the leftovers were not tried"
    assert not [str(p) for folder in user.world_writable() for p in Path(folder).glob(marker + "*")]
    segments = [line.split() for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert not [row for row in segments if int(row[0]) == key], "its System V segment outlived the grading"
    assert spy["connected"] == [] and not hosted["_reached"] and len(spy["network"]) == 2, spy["network"]
    assert spy["hidden"] == [], spy["hidden"]
    assert list(Path(source).rglob("test_hidden*.py")), "the package has hidden suites to protect"


def test_the_documented_command_grades_and_a_one_mistake_feedback_reads_in_order(hosted):
    data = results_of(hosted, "documented")
    assert 0 < data["score"] < sum(t["max_score"] for t in data["tests"])
    feedback = (hosted["documented"][2] / "feedback.md").read_text()
    lines = feedback.splitlines()
    assert len(lines) < 175, len(lines)  # one screen's worth of sections, the written answers' included
    headings = [line for line in lines if line.startswith("## ")]
    assert lines[2].startswith("Score: **") and headings[0].startswith("## To fix:")
    assert headings[-2].startswith("## Passed:") and headings[-1] == "## Grading notes"
    assert "test_matmul_flops_is_2mnp" in feedback and "Checks:" in feedback
    report = GradeReport.from_json((hosted["documented"][2] / "report.json").read_text())
    console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    print_report(report, console)
    terminal = console.export_text()
    assert len(terminal.splitlines()) < 150 and "test_matmul_flops_is_2mnp" in terminal
    assert "test_memory_usage_is_numel_times_element_size" not in terminal  # passed: counted, not listed


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_the_launcher_leaves_the_worker_no_root_no_capabilities_and_no_new_privileges(tmp_path):
    account = user.Account.acquire()
    try:
        limits = json.dumps({"nproc": 64, "user": [account.uid, account.gid]})
        # cat of its own status (this machine's Python may sit where other users cannot reach it)
        done = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), limits, "--", shutil.which("cat"), "/proc/self/status"],
                              capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        account.release()
    assert done.returncode == 0, done.stderr
    status = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert status["Uid"].split() == [str(account.uid)] * 4 and status["Gid"].split() == [str(account.gid)] * 4
    assert status["Groups"].strip() == "" and int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"


def test_the_grader_files_are_closed_to_others_and_the_submission_copy_is_readable(tmp_path):
    (tmp_path / "solutions").mkdir(mode=0o755)
    (tmp_path / "README.md").write_text("x")
    (tmp_path / "README.md").chmod(0o644)
    (tmp_path / "venv").symlink_to(sys.prefix)
    left = user.guard_grader(tmp_path)
    assert left == ["venv"]
    assert (tmp_path / "solutions").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "README.md").stat().st_mode & 0o777 == 0o600
    submission = tmp_path / "submission"
    (submission / "pkg").mkdir(parents=True)
    (submission / "pkg" / "a.py").write_text("x = 1\n")
    (submission / "pkg" / "a.py").chmod(0o600)
    user.share_read_only(submission)
    assert (submission / "pkg" / "a.py").stat().st_mode & 0o777 == 0o644
    assert (submission / "pkg").stat().st_mode & 0o777 == 0o755


def test_grading_without_any_isolation_is_refused_unless_explicitly_allowed(tmp_path):
    """`--sandbox none` and no opt-out: the runner refuses with the reason and what to do."""
    env = {k: v for k, v in os.environ.items() if k != policy.ALLOW_UNSANDBOXED}
    command = [sys.executable, "-m", "autograder.grading.runner", str(tmp_path), "--report", str(tmp_path / "r.json"),
               "--sandbox", "none"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3 and "refusing to grade" in done.stderr and policy.ALLOW_UNSANDBOXED in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_an_explicit_opt_out_is_stated_in_the_log():
    os.environ[policy.ALLOW_UNSANDBOXED] = "1"
    try:
        lines = policy.detect("none").lines()
    finally:
        del os.environ[policy.ALLOW_UNSANDBOXED]
    assert any(line.startswith(policy.NO_ISOLATION) for line in lines)


def any_process_of(uid: int) -> bool:
    """Whether any process of `uid` exists, zombies included."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                return True
        except OSError:
            pass
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_a_fork_bomb_of_the_worker_user_is_capped_and_killed_to_the_last_process():
    account = user.Account.acquire()
    # Zombies count towards RLIMIT_NPROC too: let init reap those of an earlier grading first.
    deadline = time.monotonic() + 60
    while any_process_of(account.uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    limits = json.dumps({"nproc": 64, "user": [account.uid, account.gid]})
    bomb = "b() { b & b & wait; }; b"
    launched = subprocess.Popen([sys.executable, "-I", "-S", str(LAUNCHER), limits, "--", shutil.which("bash"), "-c",
                                 bomb], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, seen = time.monotonic() + 60, [0]
        while max(seen) < 16 and time.monotonic() < deadline:
            seen.append(len(account.pids()))
        assert 16 <= max(seen) <= 64  # it forked, and RLIMIT_NPROC binds the worker's user
    finally:
        account.release()
        launched.wait()
    assert user.processes_of(account.uid) == []
