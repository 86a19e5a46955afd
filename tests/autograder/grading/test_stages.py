"""What a killed grading leaves behind (autograder.grading.stages, the runner's lifetime): private stages named
after their owner, swept once it is gone and never while it runs; a runner and its worker that end with the
client, even one killed with SIGKILL; a batch ended by Ctrl-C or a closed pipe that says what it kept."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.grading import stages
from autograder.sandbox import user
from autograder.sandbox.process import LAUNCHER
from autograder.sandbox.staging import remove_tree

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = "resource_accounting"
DEADLINE = 240.0  # seconds to wait for something a grading does (the suite runs on two shared cores)

pytestmark = pytest.mark.skipif(stages.namespace() is None, reason="owners are told apart through /proc")


@pytest.fixture
def temp():
    """A temporary directory of the test's own (TMPDIR of the graders it starts): its sweep sees only what this
    test made. World-traversable, as the system's is, so that a user-mode worker reaches its stage."""
    folder = Path(tempfile.mkdtemp(prefix="stages-test-"))
    folder.chmod(0o755)
    yield folder
    remove_tree(folder)


def wait_for(condition, what: str, limit: float = DEADLINE):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"after {limit:g} s: {what}")


def dead_owner() -> tuple[int, int]:
    """(pid, start time) of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = wait_for(lambda: stages.start_time(process.pid), "the process started")
    process.kill()
    process.wait()
    return process.pid, started


def stage_of(folder: Path, pid: int, started: int, space: int | None = None, kind: str = "grade") -> Path:
    stage = folder / f"llmsys-{kind}-{pid}-{started}-{space or stages.namespace()}-abc"
    (stage / "scratch" / "deep").mkdir(parents=True)
    (stage / "submission.py").write_text("secret = 1\n")
    (stage / "scratch" / "deep").chmod(0)  # the student's scratch may hold folders it closed
    return stage


def test_a_stage_is_private_and_names_its_owner():
    stage = stages.make("grade")
    try:
        assert stage.stat().st_mode & 0o777 == 0o700
        found = stages.NAME.fullmatch(stage.name)
        assert found and tuple(map(int, found.groups())) == (os.getpid(), stages.start_time(os.getpid()),
                                                            stages.namespace())
    finally:
        stage.rmdir()
    with pytest.raises(ValueError, match="kind must be one of"):
        stages.prefix("other")


def test_the_sweep_removes_the_stages_of_owners_gone_and_nothing_else(temp):
    pid, started = dead_owner()
    zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # ended, never reaped
    zombie_started = wait_for(lambda: stages.start_time(zombie.pid), "the process started")
    zombie.kill()
    wait_for(lambda: stages.start_time(zombie.pid) is None, "the process ended")
    gone = [stage_of(temp, pid, started), stage_of(temp, pid, started, kind="reports"),
            stage_of(temp, os.getpid(), stages.start_time(os.getpid()) + 1),  # this pid, another process's
            stage_of(temp, zombie.pid, zombie_started)]
    live = Path(tempfile.mkdtemp(prefix=stages.prefix("grade"), dir=temp))
    elsewhere = stage_of(temp, pid, started, space=stages.namespace() + 1)  # another pid namespace's
    legacy = temp / "llmsys-grade-k3j2h1ab"  # an older grader's, owner unknown
    legacy.mkdir()
    target = temp / "target"
    target.mkdir()
    link = temp / f"llmsys-grade-{pid}-{started}-{stages.namespace()}-link"
    link.symlink_to(target)
    kept = [live, elsewhere, legacy, link, target]
    if os.geteuid() == 0:
        others = stage_of(temp, pid, started, kind="report")
        os.chown(others, 65534, 65534)  # another user's
        kept.append(others)
    assert sorted(stages.sweep(temp)) == sorted(gone)
    assert not any(p.exists() for p in gone)
    assert all(p.exists() or p.is_symlink() for p in kept)
    assert stages.sweep(temp) == []
    zombie.wait()


def as_user(account: user.Account, code: str) -> subprocess.CompletedProcess:
    """`code` run by the system's Python as the account's user, through the worker's launcher."""
    limits = json.dumps({"user": [account.uid, account.gid]})
    command = [sys.executable, "-I", "-S", str(LAUNCHER), limits, "--", "/usr/bin/python3", "-I", "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/")


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="running as the worker's user needs root and a Python that user can run")
def test_a_user_mode_worker_gets_into_its_private_stage_and_another_user_does_not(temp):
    """The stage is 0700; Account.open_stage lets the worker's group in, as the worker does before it starts."""
    stage = Path(tempfile.mkdtemp(prefix=stages.prefix("grade"), dir=temp))
    assert stage.stat().st_mode & 0o777 == 0o700
    module = stage / "submission" / ASSIGNMENT / "flops.py"
    module.parent.mkdir(parents=True)
    module.write_text("answer = 42\n")
    scratch = stage / "scratch"
    scratch.mkdir()
    worker, other = user.Account.acquire(), user.Account.acquire()
    try:
        worker.open_stage(stage, scratch)
        user.share_read_only(stage / "submission")
        done = as_user(worker, f"print(open({str(module)!r}).read()); open({str(scratch / 'made')!r}, 'w').write('x')")
        assert done.returncode == 0 and "answer = 42" in done.stdout, done.stderr
        refused = as_user(other, f"import os; os.listdir({str(stage)!r})")
        assert refused.returncode != 0 and "PermissionError" in refused.stderr
    finally:
        worker.release()
        other.release()


def descendants(pid: int) -> dict[int, int]:
    """{pid: start time} of every process below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        started = stages.start_time(child)
        if started is not None:
            found[child] = started
        todo += children.get(child, [])
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def grading(temp: Path, tmp_path: Path, verb: str = "grade",
            **output) -> tuple[subprocess.Popen, Path, dict[int, int]]:
    """A real `grade` (or `batch`) of the reference: (the client, its stage, every process below it), once the
    submission is in the stage and the worker runs."""
    submission = tmp_path / "cohort" / "alice"
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, submission / ASSIGNMENT,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # Ctrl-C's default action put back first: a test run started in the background (`make test &`) ignores
    # SIGINT, the client would inherit that, and Python leaves an ignored SIGINT ignored.
    command = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])",
               "-m", "autograder", verb, str(submission if verb == "grade" else submission.parent),
               "--out", str(tmp_path / "out")]
    output = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL} | output
    client = subprocess.Popen(command, cwd=ROOT, env=os.environ | {"TMPDIR": str(temp)}, start_new_session=True,
                              text=True, **output)

    def started():
        below = descendants(client.pid)
        # A grading server's stages lie in its zygote's folder, and its workers are the zygote's children
        # (autograder.sandbox.forked); a single grading's are its own.
        stage = [p for p in [*temp.glob("llmsys-grade-*"), *temp.glob("llmsys-grade-*/llmsys-grade-*")]
                 if (p / "submission" / ASSIGNMENT / "flops.py").is_file()]
        workers = [p for p in below if "autograder.sandbox.worker" in cmdline(p) or (
            "autograder.sandbox.zygote" in cmdline(p) and "autograder.sandbox.zygote" in cmdline(parent(p)))]
        return stage and workers and (stage[0], below)

    try:
        stage, below = wait_for(started, "the grading reached its tests")
    except BaseException:
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()
        raise
    return client, stage, below


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def all_ended(processes: dict[int, int]) -> bool:
    return all(stages.start_time(pid) != started for pid, started in processes.items())


@pytest.mark.parametrize("verb", ["grade", "batch"])
def test_a_grading_killed_by_sigkill_takes_its_runner_and_worker_along(temp, tmp_path, verb):
    """The client alone is killed (as a platform's timeout does): its runner sees the lifeline close, stops the
    worker and removes its stage; nothing of the grading runs on (a `--serve` runner's child, whose output goes
    to a file, would otherwise grade to the end)."""
    client, stage, below = grading(temp, tmp_path, verb)
    assert stage.stat().st_mode & 0o777 in (0o700, 0o750)  # 0750: open to a user-mode worker's group only
    owner = int(stages.NAME.fullmatch(stage.name).group(1))
    assert "autograder.grading.runner" in cmdline(owner)  # the runner, or its child that grades (--serve)
    client.kill()
    client.wait()
    wait_for(lambda: all_ended(below), f"the runner and the worker ended: {below}")
    wait_for(lambda: not stage.exists(), f"the runner removed its stage {stage}")
    (reports,) = temp.glob(f"llmsys-report*-{client.pid}-*")  # the client's, left for the next start to sweep
    assert list(reports.glob("*.json")) == []  # ended, not graded to the end: no report written


def test_the_stage_of_a_grading_killed_whole_is_removed_at_the_next_start(temp, tmp_path):
    """Client and runner killed at once (a whole process group): the worker goes with its runner, the stage
    and the client's report folder stay, and the next grading's start removes them, not its own."""
    client, stage, below = grading(temp, tmp_path)
    os.killpg(client.pid, signal.SIGKILL)
    client.wait()
    wait_for(lambda: all_ended(below), f"the runner and the worker ended: {below}")
    reports = list(temp.glob(f"llmsys-report-{client.pid}-*"))
    assert stage.is_dir() and len(reports) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(empty), "--out", str(tmp_path / "next")],
                          cwd=ROOT, env=os.environ | {"TMPDIR": str(temp)}, capture_output=True, text=True,
                          timeout=DEADLINE)
    assert "not gradable" in done.stdout, done.stdout + done.stderr
    assert not stage.exists() and not reports[0].exists()
    assert list(temp.glob("llmsys-*")) == []  # and the next grading removed its own


def test_a_batch_ended_by_ctrl_c_says_what_it_kept_and_leaves_nothing(temp, tmp_path):
    """Ctrl-C reaches the whole foreground process group: the client, its runner and the runner's child."""
    client, stage, below = grading(temp, tmp_path, "batch", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.killpg(client.pid, signal.SIGINT)
    out, err = client.communicate(timeout=DEADLINE)
    assert client.returncode == 130, out + err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    assert f"batch interrupted (by Ctrl-C): {tmp_path / 'out' / 'gradebook.sqlite'} keeps 0 graded" in err
    wait_for(lambda: all_ended(below), f"the runner and the worker ended: {below}")
    assert list(temp.glob("llmsys-*")) == []


def test_a_grading_ended_by_ctrl_c_ends_quietly_and_leaves_nothing(temp, tmp_path):
    """`grade` of one submission, Ctrl-C to its process group: exit 130 with one line, no traceback, and the runner,
    the worker and the stage gone."""
    client, stage, below = grading(temp, tmp_path, "grade", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.killpg(client.pid, signal.SIGINT)
    out, err = client.communicate(timeout=DEADLINE)
    assert client.returncode == 130, out + err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    assert "grading interrupted (by Ctrl-C)" in err
    wait_for(lambda: all_ended(below), f"the runner and the worker ended: {below}")
    assert list(temp.glob("llmsys-*")) == []


def test_a_batch_whose_output_pipe_closed_ends_quietly(temp, tmp_path):
    """`batch ... | head -1`: the next line it prints meets a closed pipe."""
    client, stage, below = grading(temp, tmp_path, "batch", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client.stdout.close()
    err = client.stderr.read()
    client.wait(timeout=DEADLINE)
    assert client.returncode == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert f"batch interrupted (its output pipe closed): {tmp_path / 'out' / 'gradebook.sqlite'} keeps 1 graded" in err
    wait_for(lambda: all_ended(below), f"the runner and the worker ended: {below}")
    assert list(temp.glob("llmsys-*")) == []
