"""Length-prefixed frames over pipes: 8 bytes big-endian length, then the payload (a wire frame)."""

from __future__ import annotations

import os
import select
import struct
import time

LENGTH = struct.Struct(">Q")
CHECK_EVERY = 0.2  # seconds between two calls of a waiting frame's `check`


class FrameError(Exception):
    """The peer closed the pipe, sent too much, or took too long."""


def write_frame(fd: int, payload: bytes, deadline: float | None = None, check=None) -> None:
    """Write one frame; with `deadline`, FrameError("timeout") when the reader has not taken it all by
    then (the fd is made non-blocking for the write, so a reader that stops reading cannot hold us), or
    as soon as `check()`, asked every CHECK_EVERY seconds of waiting, says to stop."""
    data = memoryview(LENGTH.pack(len(payload)) + payload)
    if deadline is None:
        while data:
            data = data[os.write(fd, data):]
        return
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    try:
        while data:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise FrameError("timeout")
            if not poll.poll(min(wait, CHECK_EVERY) * 1000):
                if check is not None and check():
                    raise FrameError("timeout")
                continue
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
    finally:
        os.set_blocking(fd, blocking)


def read_frame(fd: int, limit: int, deadline: float | None = None, check=None) -> bytes:
    """One frame from `fd`; FrameError on EOF, on a frame over `limit` bytes, past `deadline`, or as soon
    as `check()`, asked every CHECK_EVERY seconds of waiting, says to stop."""
    (length,) = LENGTH.unpack(_read_exact(fd, LENGTH.size, deadline, check))
    if length > limit:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {limit}")
    return _read_exact(fd, length, deadline, check)


def _read_exact(fd: int, count: int, deadline: float | None, check=None) -> bytes:
    chunks, remaining = [], count
    while remaining:
        while deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise FrameError("timeout")
            if select.select([fd], [], [], min(wait, CHECK_EVERY))[0]:
                break
            if check is not None and check():
                raise FrameError("timeout")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise FrameError("end of stream")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
