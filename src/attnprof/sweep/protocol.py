"""Length-prefixed JSON frames over pipes, between the pool and its workers.

A frame is a 4-byte big-endian length and a JSON body. Reads loop until the frame is whole, so
frames larger than the pipe buffer (a job's raw timing samples) arrive intact; a read that hits
end-of-file mid-frame means the other side died, and returns None like a clean EOF.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgspec

__all__ = ["read_frame", "write_frame"]

_HEADER = struct.Struct(">I")
_encoder = msgspec.json.Encoder()


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        try:
            chunk = os.read(fd, n)
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
            continue
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any | None:
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0])
    if body is None:
        return None
    return msgspec.json.decode(body)


def write_frame(fd: int, obj: Any) -> None:
    body = _encoder.encode(obj)
    data = memoryview(_HEADER.pack(len(body)) + body)
    while data:
        written = os.write(fd, data)
        data = data[written:]
