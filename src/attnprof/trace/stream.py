"""Streaming: the usual way a trace is read, in blocks, never whole (load.py says when not).

The file is read in blocks of BLOCK bytes, 512 KB (gunzipped in a second thread, gzip detected
by its magic bytes, not its name), each block is cut between two events, and the events before
the cut are decoded and turned into columns before the next block is read. A range of the
events is a Part; forked.py decodes plain JSON of PARALLEL_MIN bytes or more as two Parts, the
second in a forked process, and this module's stream_one reads any other file as one.
"""

from __future__ import annotations

import os
import re
import zlib
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import msgspec

from attnprof.trace.columns import Builder
from attnprof.trace.decode import BOM, DOC, EVENTS, Event, decode_lenient, first_byte
from attnprof.trace.limits import MAX_NAME
from attnprof.trace.model import KEEP_ALL, Keep, Trace

__all__ = [
    "BLOCK",
    "PARALLEL_MIN",
    "PROGRESS",
    "STREAM_ERRORS",
    "Once",
    "Part",
    "TooLarge",
    "can_fork",
    "file_blocks",
    "is_gzip",
    "stream_one",
]


# Progress of the load in this context, for a caller that shows it (cli/analyze.py): called with
# (bytes read, events decoded, done) after each block of the streaming path and once at the end
# (done=True, with the trace's raw size and event count). A ContextVar, not an argument, so that
# the analysis API between the CLI and the loader needs no parameter for it.
PROGRESS: ContextVar[Callable[[int, int, bool], None] | None] = ContextVar(
    "attnprof_load_progress", default=None
)


class Once:
    """A caller's function, called at most once (load_trace's meanwhile), with whether a forked
    process is decoding meanwhile."""

    def __init__(self, fn: Callable[[bool], object] | None) -> None:
        self.fn = fn

    def __call__(self, forked: bool = False) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn(forked)


# -- streaming: the usual case ---------------------------------------------------------------
#
# A trace is one object whose traceEvents array holds nearly all of its bytes. streamed reads the
# file (gunzipping it in a second thread, which overlaps with decoding: zlib releases the GIL)
# in blocks of about BLOCK bytes, cuts each at the last "}, {" between two events, decodes the
# events before the cut into structs and turns them into columns before the next block is read.
# Neither the whole file nor its decoded form is ever held, and no byte is copied twice.
#
# Why a cut is safe: each piece is decoded as a JSON array on its own; one cut anywhere but
# between two events of the array (inside a string, inside an event's args) leaves a piece that
# is not valid JSON, and by induction from the validated start of the array every accepted cut
# is between events. The header and the tail (the document with traceEvents emptied) must decode
# to a document whose traceEvents is exactly that empty array. Anything unusual (a bare array,
# invalid JSON that needs repair, damaged gzip, deep nesting) returns None and the caller takes
# the whole-file path (parse_trace), which repairs what can be repaired and names the problem.

# 512 KB: each block costs the builder about 190 us whatever its size (a few dozen numpy calls),
# and its decoded events (about 3,000 on a modern trace) are held while their columns are built.
# On the 48 MB benchmark trace, one process's load: 256 KB 0.485 s, 512 KB 0.465, 1 MB 0.452
# (best of 8, alternating); the peak of both processes together +32 MB, +34 and +48 (0.68x,
# 0.72x and 1.00x the raw JSON): the middle keeps most of the time and little of the memory
# (docs/benchmarks.md)
BLOCK = 1 << 19
_HEADER_MAX = 4 << 20  # Kineto writes traceEvents after a few KB of metadata
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_GZIP_IN = 1 << 18
_CUT_TRIES = 8
_CLOSE_TRIES = 16  # a real tail holds one or two "}]" (deviceProperties, distributedInfo)
# whitespace kept of one run (see Part._squeezed): more than MAX_NAME, the most of a string kept
_WS_KEEP = MAX_NAME + BLOCK
# the last cuts of a block are looked for in its last _CUT_WINDOW bytes first (a few hundred
# events), not in the whole block: scanning every block in full for cuts cost about a tenth of
# the load (0.07-0.11 s CPU on the 48 MB benchmark trace)
_CUT_WINDOW = 32 << 10


class TooLarge(Exception):
    """More decompressed bytes than the memory limit allows (raised in the reader thread)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class _Reader:
    """Blocks of the file's (decompressed) bytes, produced by a second thread."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        import queue
        import threading

        self.path, self.limit, self.produced = path, limit, 0
        self.q: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=4)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True)
        self.thread.start()

    def _put(self, item: bytes | BaseException | None) -> bool:
        import queue

        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            with open(self.path, "rb") as f:
                if f.read(2) == b"\x1f\x8b":
                    f.seek(0)
                    self._gunzip(f)
                else:
                    f.seek(0)
                    while block := f.read(BLOCK):
                        if not self._put(block):
                            return
            self._put(None)
        except BaseException as exc:  # handed to the consumer, which falls back
            self._put(exc)

    def _gunzip(self, f: Any) -> None:
        d = zlib.decompressobj(31)
        while comp := f.read(_GZIP_IN):
            while comp:
                out = d.decompress(comp, BLOCK)
                self.produced += len(out)
                if self.limit is not None and self.produced > self.limit:
                    raise TooLarge(self.limit)
                if out and not self._put(out):
                    return
                comp = d.unconsumed_tail
                if d.eof:
                    rest = d.unused_data
                    if rest.strip(b"\x00"):  # another gzip member follows
                        d = zlib.decompressobj(31)
                        comp = rest + comp
                    else:
                        comp = b""
        if not d.eof:
            raise EOFError("the gzip stream ends early")

    def __iter__(self) -> Any:
        while True:
            item = self.q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


STREAM_ERRORS = (msgspec.DecodeError, RecursionError, EOFError, zlib.error, UnicodeError, ValueError)
# plain JSON at least this large is decoded by two processes (forked.py), each taking a part
PARALLEL_MIN = 16 << 20


def stream_one(path: Path, *, limit: int | None = None, keep: Keep = KEEP_ALL) -> Trace | None:
    """The trace streamed by this process alone, or None when this file needs the whole-file
    path (see above). forked.py `streamed` decides when a second process takes a part."""
    reader = _Reader(path, limit)
    try:
        part = Part(first=True, last=True, keep=keep)
        part.consume(iter(reader))
        return part.trace(path.name)
    except STREAM_ERRORS:
        return None
    finally:
        reader.close()


def can_fork() -> bool:
    """Whether a second decoding process may be forked here: fork exists, this process may run
    on two CPUs or more, and the machine is not busy (_cpu_to_spare)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus >= 2 and hasattr(os, "fork") and _cpu_to_spare(cpus)


def _cpu_to_spare(cpus: int) -> bool:
    """Whether a forked decoder would find a CPU to run on: the 1-minute load average is below
    the CPU count (as `make --load-average` decides). On a busy machine it would not: measured
    on 2 CPUs at a load of 2.4 it saved no time, at 3.5 it cost 26% more time and 28% more CPU
    than decoding in one process (docs/benchmarks.md)."""
    try:
        return os.getloadavg()[0] < cpus
    except (AttributeError, OSError):  # no load average here (Windows, some containers)
        return True


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def file_blocks(path: Path, start: int, end: int | None) -> Any:
    with open(path, "rb") as f:
        f.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            block = f.read(BLOCK if left is None else min(BLOCK, left))
            if not block:
                return
            if left is not None:
                left -= len(block)
            yield block


def _last_cuts(buf: bytes | bytearray, start: int) -> deque[re.Match[bytes]]:
    """The last _CUT_TRIES cuts in buf at or after start (fewer when there are fewer).

    Searched in a window at the end of buf, widened until it holds _CUT_TRIES cuts or reaches
    start: the same cuts a search from start finds last, since a cut's only '}' is its first
    byte (a search from inside one cut finds all the later ones).
    """
    window = _CUT_WINDOW
    while True:
        lo = max(start, len(buf) - window)
        cuts = deque(_CUT.finditer(buf, lo), maxlen=_CUT_TRIES)
        if len(cuts) == _CUT_TRIES or lo == start:
            return cuts
        window *= 8


class Part:
    """The events of one contiguous range of the traceEvents array, turned into columns.

    first: the range starts at the document's start (the header comes first); else at an
    event. last: it ends at the document's end (the array's close and the tail follow the last
    event); else right after an event.
    """

    def __init__(self, *, first: bool, last: bool, keep: Keep = KEEP_ALL) -> None:
        self.first, self.last = first, last
        self.builder = Builder(keep)
        self.n_items = 0
        self.total = 0
        self.header = b""
        self.tail = b""
        self.squeezed = 0  # bytes of long whitespace runs left out (_squeezed)

    def _add(self, events: list[Event]) -> None:
        self.n_items += len(events)
        self.builder.add(events)

    def _decode(self, buf: bytes) -> None:
        try:
            self._add(EVENTS.decode(buf))
        except msgspec.ValidationError:
            # valid JSON, unexpected field types: field by field, as in the whole-file path
            n, events = decode_lenient(buf)
            self.n_items += n
            self.builder.add(events)
            self.builder.lenient = True

    def _squeezed(self, blocks: Any) -> Any:
        """The blocks, with any run of whitespace longer than _WS_KEEP shortened to about
        _WS_KEEP bytes (whole blocks of it dropped): between tokens whitespace means nothing, and
        inside a string it is kept up to MAX_NAME characters, all a name keeps (limits.py).
        Without it a gzip of gigabytes of spaces (a few MB on disk) was held whole in memory."""
        kept = 0  # whitespace bytes of whole blocks kept since the last other byte
        hook = PROGRESS.get()
        for block in blocks:
            self.total += len(block)
            if hook is not None:
                hook(self.total, self.n_items, False)
            if block.isspace():
                if kept >= _WS_KEEP:
                    self.squeezed += len(block)
                    continue
                kept += len(block)
            else:
                kept = 0
            yield block

    def consume(self, blocks: Any) -> None:
        # a bytearray, not bytes: appending a block to bytes copies all that is pending, which
        # made an event (or a run of whitespace) of N blocks cost N**2 / 2 block copies
        pending = bytearray()
        blocks = self._squeezed(blocks)
        if self.first:
            m = None
            for block in blocks:
                pending += block
                if pending[:3] == BOM:  # a UTF-8 byte order mark (Windows editors write one)
                    del pending[:3]
                m = _EVENTS_KEY.search(pending)
                if m or len(pending) > _HEADER_MAX:
                    break
            if m is None or first_byte(pending) != ord("{"):
                raise ValueError("not an object with a traceEvents array near its start")
            self.header = bytes(pending[: m.end() - 1])
            del pending[: m.end()]

        def piece(end: int) -> bytes:
            return b"".join((b"[", memoryview(pending)[:end], b"]"))  # one copy

        scan_from = 0  # pending before this offset holds no cut
        retry_at = BLOCK  # no cut is tried before pending holds this much
        for block in blocks:
            pending += block
            if len(pending) < retry_at:
                continue
            cuts = _last_cuts(pending, scan_from)
            done = None
            # the last cut first; one inside a string or an event's nested list leaves a piece
            # that is not valid JSON, and the one before it is tried
            for cut in reversed(cuts):
                try:
                    self._decode(piece(cut.start() + 1))
                except msgspec.DecodeError:  # not valid JSON (_decode handles wrong types)
                    continue
                done = cut
                break
            if done is None:
                if len(cuts) == _CUT_TRIES:
                    raise ValueError("no cut between events in this block")
                if cuts:
                    # each failed try decoded all that is pending: the next waits until pending
                    # has doubled, so that an event of N blocks whose strings look like cuts
                    # costs a few times N, not N**2 / 2
                    retry_at = 2 * len(pending)
                else:
                    scan_from = max(0, len(pending) - 64)
                continue  # one event larger than a block: read on
            del pending[: done.end() - 1]
            scan_from, retry_at = 0, BLOCK
        if not self.last:  # the range ends right after an event
            if pending.strip():
                self._decode(piece(len(pending)))
            return
        # the rest: the last events, the array's "]" and the document's tail
        if pending.lstrip().startswith(b"]"):
            if self.n_items or not self.first:
                raise ValueError("an empty piece after events")
            self.tail = bytes(pending.lstrip()[1:])
            return
        # the array's end is looked for from the document's end: only the tail (a few keys after
        # the events) lies between, and a "}]" in a string or an event's nested list before it
        # costs no try. A piece that runs past the array's end is never valid JSON, so the first
        # piece that decodes ends there; after _CLOSE_TRIES failures the whole-file path decodes
        # the document once
        for close in reversed(deque(_CLOSE.finditer(pending), maxlen=_CLOSE_TRIES)):
            try:
                events = EVENTS.decode(piece(close.start() + 1))
            except msgspec.ValidationError:
                self._decode(piece(close.start() + 1))
            except msgspec.DecodeError:
                continue
            else:
                self._add(events)
            self.tail = bytes(pending[close.end() :])
            return
        raise ValueError("no end of the traceEvents array")

    def join(self, other: Part) -> None:
        """Append the part that follows this one."""
        self.builder.extend(other.builder)
        self.n_items += other.n_items
        self.total += other.total
        self.tail, self.last = other.tail, other.last

    def trace(self, source: str) -> Trace | None:
        doc = DOC.decode(self.header + b"[]" + self.tail)
        if doc.traceEvents != [] or (self.n_items and self.builder.n_seen == 0):
            return None  # not the top-level array, or events that are not objects
        trace = self.builder.finish(doc, source)
        trace.raw_bytes = self.total
        return trace
