"""A warm compiler for trusted callers: `python -m kernels.crosscompile.server SOCKET [PARENT_PID]`.

Where a process imported Triton interpreted, run_request answers in a new `python -m kernels.crosscompile
--request` process: torch, the fake tensors' import of torch._dynamo and Triton's compiler, about 3 CPU s before
its first build. A caller that asks often (the repository's suite runs the hidden compile checks against planted
trees in pytest runs a dozen times, each asking one to three) can start this server once instead: it imports all
of that once (request.prepare_compiler) and answers each request in a child forked for it, which takes the
asker's working folder, environment and import path and writes what it prints to a file, as the new process
would. The answer is the same code's (request.answer_request); only the start is shared.

run_request asks the server named by LLMSYS_COMPILE_SERVER (the socket's path; request.ask_server) where it would
otherwise start a new process, and starts one where the server does not answer. A forked child has the server's
limits and namespaces, not the asker's: only a caller that would trust a process of its own uses it. The grader
never does: its workers' environments are built from nothing (autograder.sandbox.bwrap.worker_env), and a GPU in
reach, or its stand-in, always takes a new process.

The protocol: one JSON line {"inbox", "outbox", "printed", "cwd", "env", "path", "timeout"}; the answer is one
JSON line {"status": the child's wait status} or {"error": why no child answered}, once the child has ended.
Requests are answered one at a time. The server ends when the process that started it (PARENT_PID, by default
its parent) ends.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from kernels.crosscompile.request import (answer_request, fork_answer, into_own_files, overran, prepare_compiler,
                                          wait_for)


FIELDS = ("inbox", "outbox", "printed", "cwd", "env", "path", "timeout")


def _as_the_new_process(message: dict) -> dict:
    """In the forked child (request.fork_answer writes what this returns to the outbox): become the new process
    run_request would have started, with none of the server's files (its sockets), and answer."""
    into_own_files(Path(message["printed"]))
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["env"])
    os.environ["TRITON_INTERPRET"] = "0"
    # `python -m` puts the working folder first, then PYTHONPATH; the interpreter's own folders follow.
    first = [message["cwd"], *message["path"]]
    sys.path[:] = first + [p for p in sys.path if p not in first]
    return answer_request(json.loads(Path(message["inbox"]).read_text()))


def _answer(connection: socket.socket) -> None:
    with connection, connection.makefile("rwb") as stream:
        try:
            message = json.loads(stream.readline())
            timeout = float(message["timeout"])
            missing = [key for key in FIELDS if key not in message]
            if missing:
                raise KeyError(", ".join(missing))
        except (ValueError, KeyError, TypeError) as exc:
            stream.write(json.dumps({"error": f"a malformed request to the compile server: {exc!r}"}).encode() + b"\n")
            return
        status = wait_for(fork_answer(lambda: _as_the_new_process(message), Path(message["outbox"])), timeout)
        reply = overran(timeout) if status is None else {"status": status}
        try:
            stream.write(json.dumps(reply).encode() + b"\n")
            stream.flush()
        except OSError:  # the asker is gone
            pass


def serve(path: str, parent: int) -> None:
    """Import the compiler, then answer each connection to the socket at `path` while the process `parent` (the
    one that started this server) is this process's parent."""
    if not prepare_compiler():
        raise SystemExit("kernels.crosscompile.server: Triton was imported before the server could import it "
                         "compiling")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    listener.settimeout(1.0)
    try:
        while os.getppid() == parent:
            try:
                connection, _ = listener.accept()
            except socket.timeout:
                continue
            connection.settimeout(None)
            try:
                _answer(connection)
            except Exception:  # noqa: BLE001  (one asker's trouble, a socket error say, ends no other's service)
                import traceback

                traceback.print_exc()
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if len(arguments) not in (1, 2) or not all(a.isdigit() for a in arguments[1:]):
        raise SystemExit("usage: python -m kernels.crosscompile.server SOCKET [PARENT_PID]  (the server ends when "
                         "PARENT_PID, its parent by default, is no longer its parent)")
    serve(arguments[0], int(arguments[1]) if len(arguments) == 2 else os.getppid())
