"""kernels.crosscompile.server: a warm compiler whose forked children answer run_request as its new process would.

This process imports Triton interpreted (the root conftest sets the mode), so run_request answers in a new process,
or in a child of the server named by LLMSYS_COMPILE_SERVER. A planted module notes, when imported,
its parent's pid and its working folder, and launches with warps from an environment variable: the child of the
server must have the asker's folder, environment and import path, and give the new process's answer.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import triton  # noqa: F401  (imported interpreted, as in a pytest run of the hidden tests: run_request cannot fork)

from kernels.crosscompile import request as module, run_request
from kernels.crosscompile.request import SERVER_VARIABLE as VARIABLE

ROOT = Path(__file__).resolve().parents[2]
PLANTED = """
import os
from pathlib import Path

from tests.tooling.crosscompile_kernels import scale_where_a_gpu_is

Path(os.environ["PLANTED_NOTES"]).write_text(f"{os.getppid()} {os.getcwd()}")


def scaled(x):
    return scale_where_a_gpu_is(x, num_warps=int(os.environ["PLANTED_WARPS"]))
"""
REQUEST = dict(calls=[dict(module="planted_scale", function="scaled", args=[[4096]], kwargs={})], dtype="bf16",
               target="sm_90")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server for this module's tests, once it listens: (its process, its socket's path)."""
    path = str(tmp_path_factory.mktemp("server") / "compiler")
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    process = subprocess.Popen([sys.executable, "-m", "kernels.crosscompile.server", path, str(os.getpid())],
                               cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not os.path.exists(path):
        assert process.poll() is None, f"the server ended: {process.stderr.read()}"
        assert time.monotonic() < deadline, "the server did not listen within 240 s"
        time.sleep(0.1)
    yield process, path
    process.kill()
    process.wait()


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The planted module, importable only through this process's import path, and its notes' file; this test
    runs in a folder of its own."""
    package = tmp_path / "importable"
    package.mkdir()
    (package / "planted_scale.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANTED_WARPS", "2")
    notes = tmp_path / "notes"
    monkeypatch.setenv("PLANTED_NOTES", str(notes))
    return notes


def without_seconds(answer: dict) -> dict:
    return {**answer, "builds": [{k: v for k, v in b.items() if k != "seconds"} for b in answer["builds"]]}


def test_a_served_answer_is_the_new_processs_with_the_askers_folder_environment_and_path(server, planted,
                                                                                         monkeypatch, tmp_path):
    process, path = server
    monkeypatch.setenv(VARIABLE, path)
    served = run_request(REQUEST)
    assert planted.read_text() == f"{process.pid} {tmp_path}"  # a child of the server, in the asker's folder
    assert [b["kernel"] for b in served["builds"]] == ["_scale_kernel"] and served["builds"][0]["ok"], served
    # The warps come from the asker's environment.
    assert [launch["options"]["num_warps"] for launch in served["launches"]] == [2], served["launches"]
    # No server answers at the path named: a new process answers, as where none is named.
    monkeypatch.setenv(VARIABLE, str(tmp_path / "nothing-listens-here"))
    alone = run_request(REQUEST)
    assert planted.read_text() == f"{os.getpid()} {tmp_path}"
    assert without_seconds(served) == without_seconds(alone)


def test_a_child_that_dies_or_overruns_costs_only_its_own_answer(server, planted, monkeypatch, tmp_path):
    process, path = server
    monkeypatch.setenv(VARIABLE, path)
    package = tmp_path / "importable"
    (package / "dies_on_import.py").write_text("import os\nos._exit(3)\n")
    (package / "sleeps_on_import.py").write_text("import time\ntime.sleep(60)\n")
    calls = lambda name: dict(REQUEST, calls=[dict(module=name, function="f", args=[[8]], kwargs={})])  # noqa: E731
    died = run_request(calls("dies_on_import"))
    assert "error" in died and "exit 3" in died["error"], died
    started = time.monotonic()
    overran = run_request(calls("sleeps_on_import"), timeout=2)
    assert overran == {"error": "compiling took more than 2 s"} and time.monotonic() - started < 30
    assert run_request(REQUEST)["builds"][0]["ok"]  # the server answers the next request
    assert planted.read_text() == f"{process.pid} {tmp_path}"


def test_where_a_gpu_is_in_reach_the_server_is_never_asked(planted, monkeypatch, tmp_path):
    """A GPU worker's compile starts a new process (CUDA cannot be used in a fork of a process that started it):
    a server named then gets no connection."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "spy"))
    listener.listen(1)
    asked: list = []
    listener.settimeout(0.2)

    def spy() -> None:
        while listener.fileno() >= 0:
            try:
                asked.append(listener.accept())
            except OSError:
                return

    watcher = threading.Thread(target=spy, daemon=True)
    watcher.start()
    monkeypatch.setenv(VARIABLE, str(tmp_path / "spy"))
    monkeypatch.setattr(module, "_gpu_in_reach", lambda: True)
    answer = run_request(REQUEST, timeout=20)  # a spy that answers nothing, if asked, holds it up to 50 s
    listener.close()
    watcher.join(timeout=5)
    assert asked == [] and planted.read_text() == f"{os.getpid()} {tmp_path}"
    assert answer["builds"][0]["ok"], answer


def test_the_server_ends_when_the_process_that_started_it_ends(tmp_path):
    path = tmp_path / "compiler"
    starter = subprocess.run(
        [sys.executable, "-c", "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-m', "
         f"'kernels.crosscompile.server', {str(path)!r}, str(os.getpid())]); print(p.pid)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                                    if k != VARIABLE})
    pid = int(starter.stdout)
    deadline = time.monotonic() + 120
    while Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text(errors="replace"):
        assert time.monotonic() < deadline, "the server outlived its parent by 120 s"
        time.sleep(0.2)
    assert not path.exists()  # it removed its socket


def test_a_malformed_request_is_answered_with_what_it_lacks_and_the_server_goes_on(server, planted, monkeypatch,
                                                                                   tmp_path):
    process, path = server
    replies = []
    for line in (b'{"timeout": 5}\n', b"not json\n", b'{"timeout": "soon"}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(60)
            connection.connect(path)
            connection.sendall(line)
            replies.append(connection.makefile("rb").readline().decode())
    assert all("a malformed request to the compile server" in reply for reply in replies), replies
    assert "inbox, outbox, printed, cwd, env, path" in replies[0], replies[0]
    monkeypatch.setenv(VARIABLE, path)
    assert run_request(REQUEST)["builds"][0]["ok"] and process.poll() is None
    assert planted.read_text() == f"{process.pid} {tmp_path}"
