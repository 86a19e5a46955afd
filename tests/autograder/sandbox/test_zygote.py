"""Workers forked from a zygote: each as isolated as a worker started on its own, and nothing of one submission
reaches another, whether it is graded beside it or after it.

Submission A plants what it can (module globals of modules the zygote imported, torch's settings and generator,
environment variables, sys.modules, files in every folder it may write, an abstract Unix socket, a process left
behind); submission B, forked from the same zygote, looks for all of it. Then each isolation step of the zygote's
workers (autograder.sandbox.zygote.STEPS) is left out in turn, and B finds what that step hides: so each step is
needed, and these tests fail where a worker skips any of them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autograder.model import wire
from autograder.sandbox import policy
from autograder.sandbox.framing import write_frame
from autograder.sandbox.process import RemoteStudent
from tests.autograder.sandbox import fake

# The probe, in the worker library (so that it runs even where a step left out hides the submission): A's worker
# calls plant, B's look.
PLANT = '''
import os, socket, subprocess, sys, types
import torch
import kernels
from autograder.sandbox import worker as loop

HELD = []
FOLDERS = ("/tmp", "/dev/shm", os.environ["HOME"])


def plant():
    torch.set_num_threads(3)
    torch.manual_seed(1234)
    torch.rand(5)
    torch.set_default_dtype(torch.float64)
    os.environ["LLMSYS_PLANTED"] = "1"
    sys.modules["llmsys_planted"] = types.ModuleType("llmsys_planted")
    loop.PLANTED = kernels.PLANTED = torch.PLANTED = True
    for folder in FOLDERS:
        try:
            with open(os.path.join(folder, "llmsys-planted"), "w") as f:
                f.write("planted")
        except OSError:
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\\0llmsys-planted")
    listener.listen(1)
    HELD.append(listener)
    HELD.append(subprocess.Popen(["sleep", "600"]))
    return os.getpid()


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _listing(folder):
    try:
        return sorted(os.listdir(folder))
    except OSError as exc:
        return exc.strerror


def look():
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect("\\0llmsys-planted")
        reached = True
    except OSError:
        reached = False
    with open("/proc/self/status") as f:
        status = dict(line.split(":\\t", 1) for line in f.read().splitlines() if ":\\t" in line)
    with open("/proc/self/uid_map") as f:
        uid_map = f.read().split()
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    return {
        "threads": torch.get_num_threads(), "dtype": str(torch.get_default_dtype()), "seed": torch.initial_seed(),
        "environ": os.environ.get("LLMSYS_PLANTED"), "module": "llmsys_planted" in sys.modules,
        "globals": [hasattr(m, "PLANTED") for m in (loop, kernels, torch)],
        "files": [f for f in FOLDERS if os.path.exists(os.path.join(f, "llmsys-planted"))],
        "socket": reached,
        "stages": _listing("/sandbox/stages"),
        "processes": len(pids),
        "sleeping": any(_cmdline(p).startswith(b"sleep") for p in pids),
        "uid": os.getuid(), "capabilities": int(status["CapEff"], 16), "uid_map": uid_map,
        "submission": sorted(os.listdir("/sandbox/submission")),
        "imports": [_imports(name) for name in ("colorsys", "rich.text")],
    }


def _imports(name):
    """Whether a module the zygote never imported (the standard library's, the virtual environment's) imports."""
    import importlib
    try:
        importlib.import_module(name)
        return True
    except ImportError as exc:
        return str(exc)
'''


@pytest.fixture(scope="module")
def protections():
    return policy.detect("auto", policy.Limits(call_timeout=30, start_timeout=120))


def two_submissions(root: Path, protections, skip: tuple[str, ...] = ()):
    """(what B saw while A was alive, B's worker, the zygote): A plants, B looks."""
    zygote = fake.zygote(fake.zygote_root(root), protections, skip, {"probe": PLANT})
    a = fake.forked_worker(zygote, "stage-a", "planter", {"m": ""}, protections)
    b = fake.forked_worker(zygote, "stage-b", "looker", {"m": ""}, protections)
    try:
        RemoteStudent(a, timeout=30).call("probe:plant")
        seen = RemoteStudent(b, timeout=30).call("probe:look")
    except BaseException:
        a.stop()
        b.stop()
        zygote.stop()
        raise
    return seen, (a, b), zygote


def test_a_forked_worker_sees_nothing_of_another_submission_and_nothing_of_the_machine(tmp_path, protections):
    seen, (a, b), zygote = two_submissions(tmp_path / "zygote", protections)
    try:
        own = b.account.uid
        assert seen == {
            "threads": 1, "dtype": "torch.float32", "seed": seen["seed"], "environ": None, "module": False,
            "globals": [False, False, False], "files": [], "socket": False, "stages": [],
            "processes": 2, "sleeping": False, "uid": own, "capabilities": 0, "uid_map": [str(own), str(own), "1"],
            "submission": ["looker"], "imports": [True, True],
        }
        assert a.account.uid != own, "two submissions graded beside each other run as two users"
        # What the grader sees from outside: B's processes in B's own cgroups, none in the zygote's, and in a user
        # namespace that is not the zygote's.
        members = set(b.current.cgroup.members())
        assert b.current.pid in members and not members & set(zygote.cgroup.members())
        spaces = {os.readlink(f"/proc/{pid}/ns/user") for pid in members}
        assert len(spaces - {os.readlink(f"/proc/{zygote.pid}/ns/user")}) == 1
        a.stop()
        # After A is gone: a worker forked later sees none of it either (nothing passed through the zygote).
        c = fake.forked_worker(zygote, "stage-c", "later", {"m": ""}, protections)
        try:
            later = RemoteStudent(c, timeout=30).call("probe:look")
        finally:
            c.stop()
        differ = ("uid", "uid_map", "submission", "seed")
        assert {k: v for k, v in later.items() if k not in differ} == {k: v for k, v in seen.items() if k not in differ}
        assert later["submission"] == ["later"]
        # torch seeded afresh in each, as a fresh process is (not with the zygote's seed, the same in every worker)
        assert later["seed"] != seen["seed"]
    finally:
        a.stop()
        b.stop()
        zygote.stop()


# Each step left out, and what B then finds of A, of the zygote or of the machine.
WITHOUT = {
    # one network, PID and mount namespace for both: A's socket and A's process are within B's reach (the
    # mounts and the /proc of its own namespace need namespaces of its own, so they go with them)
    ("namespaces", "mounts", "proc"): lambda seen: seen["socket"] and seen["sleeping"],
    # no mounts of its own: the folder of every submission's stage not covered (then only its permissions, root's
    # and 0700, keep B out), and its own submission not where it is imported from
    ("mounts",): lambda seen: seen["stages"] != [] and seen["submission"] == [],
    # the zygote's /proc: every process of the zygote's namespace, A's included
    ("proc",): lambda seen: seen["sleeping"] and seen["processes"] > 2,
    # root, with the zygote's capabilities
    ("uid", "userns"): lambda seen: seen["uid"] == 0 and seen["capabilities"] != 0,
    # the namespace of every user: root and every other uid exist there
    ("userns",): lambda seen: seen["uid_map"] == ["0", "0", "4294967295"],
}


@pytest.mark.parametrize("skip", list(WITHOUT), ids=["+".join(s) for s in WITHOUT])
def test_without_each_isolation_step_the_other_submission_is_within_reach(tmp_path, protections, skip):
    seen, workers, zygote = two_submissions(tmp_path / "zygote", protections, skip)
    try:
        assert WITHOUT[skip](seen), f"without {', '.join(skip)}, B saw: {seen}"
    finally:
        for worker in workers:
            worker.stop()
        zygote.stop()


def test_without_its_cgroup_a_forked_worker_is_neither_counted_nor_capped(tmp_path, protections):
    seen, (a, b), zygote = two_submissions(tmp_path / "zygote", protections, ("cgroup",))
    try:
        assert not set(b.current.cgroup.members()), "the grader's count and kill of B reach none of its processes"
    finally:
        a.stop()
        b.stop()
        zygote.stop()


def test_a_forked_worker_ends_with_its_grader_even_in_an_endless_loop(tmp_path, protections):
    """A worker started on its own dies with its grader (bubblewrap's --die-with-parent); a forked one is the
    zygote's child, so it watches the pipe it answers on: once the grader is gone (killed outright, nothing
    stopped its workers), its namespace is killed, whatever the student's code is doing."""
    zygote = fake.zygote(fake.zygote_root(tmp_path / "zygote"), protections)
    worker = fake.forked_worker(zygote, "stage", "looping", {"m": "def spin():\n    while True:\n        pass\n"},
                                protections)
    try:
        proc = worker.ready()
        write_frame(proc.to_worker, wire.encode({"op": "call", "target": "looping.m:spin", "args": [], "kwargs": {}}))
        deadline = time.monotonic() + 60
        while (proc.cpu_seconds() or 0.0) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (proc.cpu_seconds() or 0.0) >= 0.3, "the worker spins"
        for fd in (proc.to_worker, proc.from_worker):  # the grader's ends of its pipes, gone with the grader
            os.close(fd)
        proc.to_worker = proc.from_worker = -1
        while proc.cgroup.members() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not proc.cgroup.members(), "every process of the worker ended with its grader"
    finally:
        worker.stop()
        zygote.stop()


def test_the_builds_worker_compiles_in_forks_of_itself_and_the_tests_worker_interprets(tmp_path, protections):
    """The submission's workers come from a zygote that imported Triton under its interpreter, and torch._dynamo;
    the compile checks' worker from the builds' zygote beside it, which imported Triton compiling
    (kernels.crosscompile.request.prepare_compiler). So a compile of the builds' worker is a fork of it, not a new
    interpreter that imports torch again (the submission's worker, which cannot compile, starts one)."""
    zygote = fake.zygote(fake.zygote_root(tmp_path / "zygote"), protections, lib_modules={"probe": PROBE}, builds=True)
    tests = fake.forked_worker(zygote, "stage-tests", "tests_side", {"m": ""}, protections)
    builds = fake.forked_worker(zygote.builds, "stage-builds", "builds_side", {"m": ""}, protections)
    try:
        assert RemoteStudent(tests, timeout=30).call("probe:imported") == [True, True, "1"]
        assert RemoteStudent(builds, timeout=30).call("probe:imported") == [True, True, "0"]
        assert RemoteStudent(tests, timeout=30).call("probe:compile") == "a new interpreter"
        assert RemoteStudent(builds, timeout=30).call("probe:compile") == {"answers": []}
    finally:
        tests.stop()
        builds.stop()
        zygote.stop()


PROBE = """
import os
import subprocess
import sys


def imported():
    return ["triton" in sys.modules, "torch._dynamo" in sys.modules, os.environ.get("TRITON_INTERPRET")]


def compile():
    from kernels.crosscompile import request

    def refused(*args, **kwargs):
        raise RuntimeError("a new interpreter")

    subprocess.run = refused
    try:
        return request.run_request({"requests": []}, timeout=60)
    except RuntimeError as exc:
        return str(exc)
"""
