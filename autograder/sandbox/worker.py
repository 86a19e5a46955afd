"""The worker: the process where student code runs, inside the sandbox.

It reads requests and answers on the two pipe fds named by $LLMSYS_WORKER_FDS, a frame each way:
  {"op": "call", "target": "pkg.module:function", "args": [...], "kwargs": {...}}
  {"op": "scenario", "name": "pkg.scenarios:function", "kwargs": {...}}
and answers {"ok": value} or {"error": {...}}. Its stdout and stderr go to a capped log file.

Nothing here is trusted by the grader: student code can rewrite any of it at run time. The grader
only ever decodes plain data from this process and checks it against values it computed itself.
"""

from __future__ import annotations

import builtins
import os
import sys
import traceback

MAX_REQUEST = 1 << 30
MAX_TEXT = 8000


def main() -> None:
    prepare()
    requests, responses = (int(fd) for fd in os.environ.pop("LLMSYS_WORKER_FDS").split(","))
    serve(requests, responses)


def prepare() -> None:
    """Import and set up what every worker needs, before any of the submission exists: in each worker, or
    once in the zygote its workers are forked from (autograder.sandbox.zygote)."""
    import kernels  # noqa: F401  (selects Triton's mode before anything imports Triton)
    import torch

    from autograder.model import wire  # noqa: F401
    from autograder.harness import student  # noqa: F401
    from autograder.sandbox import framing  # noqa: F401
    from kernels import first_config, gpu_stand_in
    from kernels.device import dispatch_modes_without_dynamo

    dispatch_modes_without_dynamo()  # before any mode's class exists: none of them imports torch._dynamo
    gpu_stand_in.start()  # only where the grader rehearses a GPU grader (kernels/gpu_stand_in.py)
    if first_config.requested():  # a GPU worker: autotuned kernels launch at their first config
        first_config.launch_first_config()
    torch.set_num_threads(int(os.environ.get("LLMSYS_THREADS", "1")))


def serve(requests: int, responses: int) -> None:
    """Say ready, then answer one request per frame until the grader closes the pipe."""
    from autograder.model import wire
    from autograder.harness.student import resolve, scenario_name
    from autograder.sandbox.framing import FrameError, read_frame, write_frame

    write_frame(responses, wire.encode({"ready": True}))
    while True:
        try:
            request = wire.decode(read_frame(requests, MAX_REQUEST))
        except FrameError:
            return  # the grader closed the pipe: done
        response = _handle(request, resolve, scenario_name)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            payload = wire.encode(response)
        except wire.WireError as exc:
            payload = wire.encode({"error": _not_plain(exc)})
        write_frame(responses, payload)


def _handle(request: dict, resolve, scenario_name) -> dict:
    try:
        if request["op"] == "call":
            fn = resolve(request["target"])
            return {"ok": fn(*request["args"], **request["kwargs"])}
        if request["op"] == "scenario":
            from kernels.gpu_stand_in import counting

            fn = resolve(scenario_name(request["name"]))
            with counting(fn):
                return {"ok": fn(**request["kwargs"])}
        raise ValueError(f"unknown op {request['op']!r}")
    except BaseException as exc:  # noqa: BLE001  (student code may raise anything, SystemExit too)
        return {"error": _describe(exc)}


def _describe(exc: BaseException) -> dict:
    """Plain data about an exception, without trusting its __str__ or its class."""
    from autograder.harness.student import unwrap_stub

    exc = unwrap_stub(exc)
    builtin = next((k.__name__ for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k), "BaseException")
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001
        message = "(the exception's message could not be read)"
    try:
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: BLE001
        trace = ""
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}"[:200],
        "builtin": builtin,
        "message": message[:MAX_TEXT],
        "traceback": trace[-MAX_TEXT:],
    }


def _not_plain(exc: Exception) -> dict:
    return {"type": "NotPlainData", "builtin": "", "message": f"the result is not plain data: {exc}"[:MAX_TEXT],
            "traceback": ""}


if __name__ == "__main__":
    main()
