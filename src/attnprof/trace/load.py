"""Load a PyTorch profiler (Kineto / Chrome) trace into the columnar model, fast.

How (the usual case, streamed): the file is read in blocks of 512 KB (stream.py BLOCK; gunzipped in a second
thread, gzip detected by its magic bytes, not its name), each block is cut between two events,
and the events before the cut are decoded by msgspec into small typed structs that declare only
the fields the analysis reads (msgspec skips the rest without building them) and turned into numpy
columns before the next block is read: neither the whole file nor its decoded form is ever held
(peak memory below the raw JSON size on the benchmark traces, docs/benchmarks.md). Plain JSON of
16 MB or more is split at an event near its middle and the second half decoded by a forked
process at the same time; its columns are appended with their strings re-interned, so the trace
is identical to a one-process load (tested). What the streaming path cannot cut safely (a bare
array, invalid JSON to repair, damaged gzip) takes the whole-file path (parse_trace): msgspec
scans the document keeping each event as a raw slice (msgspec.Raw, no copy), then decodes them
CHUNK at a time.

What real traces do, and what happens then:
- top level is an object with traceEvents, or a bare array of events: both load;
- raw control characters, the bare word N/A (also NaN / Infinity) or invalid UTF-8 make the JSON
  invalid: they are repaired (control characters become spaces, the bare words null, bad bytes
  U+FFFD) and each repair is reported in Trace.repairs;
- a field of an unexpected type (a string where a number belongs, an event that is not an object):
  that chunk is decoded again without types and each event is cleaned field by field; what could
  not be used is dropped and Trace.warnings says so;
- empty, truncated, non-JSON or non-trace input raises UserError naming the file and the problem;
  an event-less trace loads with a warning; a UTF-8 byte order mark is skipped, UTF-16/32 decoded
  (as_utf8);
- the work is linear in the input whatever it holds (issue 24): long whitespace runs are dropped
  as they are read (stream.py Part._squeezed), false cuts inside huge strings are retried only as pending
  doubles, and names longer than MAX_NAME are cut (limits.py says why);
- hostile input fails at once, before anything is read: a device, FIFO or socket (`/dev/zero`
  would otherwise be read until memory runs out), or a file whose analysis would need more memory
  than the limit (MAX_MEMORY of the memory available; `max_memory` overrides, 0 turns it off);
  JSON nested deeper than the decoder's recursion limit is a UserError, not a RecursionError;
- a negative, infinite or longer-than-a-day duration is set to 0 us and Trace.warnings says how
  many there were (durations feed every sum and percentage: one bad one would swamp them).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnprof.errors import UserError
from attnprof.trace.columns import Builder
from attnprof.trace.decode import as_utf8, decode_chunk, scan
from attnprof.trace.forked import streamed
from attnprof.trace.limits import MAX_MEMORY, WHOLE_FACTOR, check_input, raw_limit, too_large
from attnprof.trace.model import KEEP_ALL, Keep, Trace
from attnprof.trace.stream import PROGRESS, Once, TooLarge, is_gzip

__all__ = ["MAX_MEMORY", "PROGRESS", "load_trace", "parse_trace"]

# events decoded into structs at a time: bounds peak memory to the raw JSON plus one chunk. Small
# chunks are also faster (measured on the 757k-event benchmark trace: 64k events 3.4 s, 16k
# 2.3 s, 4k 1.8 s), as one chunk's structs stay in cache while its columns are built
CHUNK = 4096


def load_trace(
    path: str | os.PathLike[str],
    *,
    max_memory: float = MAX_MEMORY,
    parallel: bool | None = None,
    meanwhile: Callable[[bool], object] | None = None,
    keep: Keep = KEEP_ALL,
) -> Trace:
    """Read and decode one trace file (.json or .json.gz). Raises UserError on bad input.

    max_memory: refuse the file when its analysis would need more than this fraction of the
    memory available (0: no limit). parallel: decode a large plain-JSON file in two processes
    (None: when it is 16 MB or more, two CPUs are there and the load average leaves one free;
    False where the caller already runs one process per CPU). meanwhile: called once, in this
    process, with True while the forked process decodes its part (work the caller needs next,
    its imports say, then overlaps the decoding; the forked process takes a larger part for it,
    FORK_SHARE); where nothing is forked, with False after the load (work that pays only when it
    overlaps the decoding can be left out then). An exception it raises stops the forked process
    and propagates. keep: what is kept beyond the events every analysis reads (Python frames,
    recorded inputs; model.Keep).
    """
    p = Path(path)
    check_input(p, max_memory=max_memory)
    limit = raw_limit(max_memory)
    once = Once(meanwhile)
    try:
        try:
            trace = streamed(p, limit=limit, parallel=parallel, meanwhile=once, keep=keep)
        except TooLarge as exc:
            raise too_large(p, exc.limit, max_memory) from None
        if trace is None:
            # the whole-file path holds more at once than streaming: refused where it would not fit
            check_input(p, max_memory=max_memory, factor=WHOLE_FACTOR)
            limit = raw_limit(max_memory, WHOLE_FACTOR)
            if limit is not None and is_gzip(p):
                trace = parse_trace(
                    _gunzip_bounded(p, limit, max_memory), source=p.name, label=str(p), keep=keep
                )
            else:
                # no local name for the bytes: parse_trace must hold the only reference, so that
                # it can free the raw JSON before the columns are put together
                trace = parse_trace(p.read_bytes(), source=p.name, label=str(p), keep=keep)
    except FileNotFoundError:
        raise UserError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{p}: is a directory, not a trace file") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    once()
    hook = PROGRESS.get()
    if hook is not None:
        hook(trace.raw_bytes, int(trace.metadata.get("events_total", trace.n_events)), True)
    return trace


def parse_trace(
    data: bytes, *, source: str = "<bytes>", label: str | None = None, keep: Keep = KEEP_ALL
) -> Trace:
    """Decode trace bytes (gzip or plain JSON) into a Trace. label names the input in errors."""
    label = label or source
    box = [data]
    del data  # _parse holds the only reference, so that it can free the raw JSON early
    try:
        return _parse(box, source, label, keep)
    except RecursionError:
        raise UserError(
            f"{label}: the JSON is nested deeper than the decoder allows: not a profiler trace, "
            "whose events are only a few levels deep"
        ) from None


def _parse(box: list[bytes], source: str, label: str, keep: Keep = KEEP_ALL) -> Trace:
    """The document is scanned once with the events kept as raw JSON slices (msgspec.Raw, no copy),
    then the events are decoded into structs CHUNK at a time and turned into columns, so the
    structs for all events never exist at once.
    """
    data = box.pop()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise UserError(f"{label}: the gzip stream is damaged or truncated ({exc})") from None
    data, encoding = as_utf8(data, label)
    if not data.strip():
        raise UserError(f"{label}: the file is empty, not a profiler trace")
    doc, repairs = scan(data, label)
    if encoding:
        repairs.insert(0, encoding)
    raw_bytes = len(data)
    del data  # from here on only the raw event slices hold the buffer
    raws: list[Any] | None = doc.traceEvents
    doc.traceEvents = None
    if raws is None:
        raise UserError(f"{label}: no traceEvents list, so not a PyTorch profiler trace")
    builder = Builder(keep)
    for i in range(0, len(raws), CHUNK):
        chunk = raws[i : i + CHUNK]
        # drop the slices as they are used: their memory goes to the columns being built
        raws[i : i + CHUNK] = [None] * len(chunk)
        events, was_lenient, repair = decode_chunk(chunk, label)
        del chunk
        builder.lenient |= was_lenient
        if repair and repair not in repairs:
            repairs.append(repair)
        builder.add(events)
    if raws and builder.n_seen == 0:
        raise UserError(f"{label}: its events are not JSON objects, so not a PyTorch profiler trace")
    del raws  # frees the raw JSON before the columns are concatenated
    trace = builder.finish(doc, source)
    trace.repairs.extend(repairs)
    trace.raw_bytes = raw_bytes
    return trace


def _gunzip_bounded(path: Path, limit: int, max_memory: float) -> bytes:
    """The whole file gunzipped, refusing more than limit bytes (gzip.decompress has no bound)."""
    data, out = path.read_bytes(), []
    total = 0
    try:
        while data:
            d = zlib.decompressobj(31)
            out.append(d.decompress(data, limit + 1 - total))
            total += len(out[-1])
            if total > limit or d.unconsumed_tail:
                raise too_large(path, limit, max_memory)
            if not d.eof:
                raise EOFError("the gzip stream ends early")
            data = d.unused_data if d.unused_data.strip(b"\x00") else b""
    except (EOFError, zlib.error) as exc:
        raise UserError(f"{path}: the gzip stream is damaged or truncated ({exc})") from None
    return b"".join(out)
