"""Length-prefixed frames over pipes: 8 bytes big-endian length, then the payload (a wire frame)."""

from __future__ import annotations

import os
import select
import struct
import time

LENGTH = struct.Struct(">Q")


class FrameError(Exception):
    """The peer closed the pipe, sent too much, or took too long."""


def write_frame(fd: int, payload: bytes) -> None:
    data = memoryview(LENGTH.pack(len(payload)) + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_frame(fd: int, limit: int, deadline: float | None = None) -> bytes:
    """One frame from `fd`; FrameError on EOF, on a frame over `limit` bytes or past `deadline`."""
    (length,) = LENGTH.unpack(_read_exact(fd, LENGTH.size, deadline))
    if length > limit:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {limit}")
    return _read_exact(fd, length, deadline)


def _read_exact(fd: int, count: int, deadline: float | None) -> bytes:
    chunks, remaining = [], count
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise FrameError("timeout")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise FrameError("end of stream")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
