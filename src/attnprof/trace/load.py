"""Load a PyTorch profiler (Kineto / Chrome) trace into the columnar model, fast.

How (the usual case, _stream): the file is read in blocks of 256 KB (gunzipped in a second
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
  (_as_utf8);
- the work is linear in the input whatever it holds (issue 24): long whitespace runs are dropped
  as they are read (_Part._squeezed), false cuts inside huge strings are retried only as pending
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
import re
import zlib
from collections import Counter, deque
from collections.abc import Callable
from contextvars import ContextVar
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from attnprof.errors import UserError
from attnprof.trace.limits import MAX_DUR_US, MAX_MEMORY, MAX_NAME, check_input, raw_limit, too_large
from attnprof.trace.model import Kind, RowMap, Trace

__all__ = ["PROGRESS", "load_trace", "parse_trace"]


class _Args(msgspec.Struct, gc=False, frozen=True):
    # ids every event may carry: -1 when missing (not None), so that a column is one C loop
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    external_id_legacy: int = msgspec.field(default=-1, name="external id")
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory: int | None = msgspec.field(default=None, name="shared memory")
    achieved: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    # lists of ints, but some Kineto versions write them as strings ("[1, 1, 1]")
    grid: Any = None
    block: Any = None
    device: int | None = None
    seq: int = msgspec.field(default=-1, name="Sequence number")
    # kept raw like Input Dims: decoded only for the few dtype conversions the analysis reads
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    # kept raw: decoded only for the few ops whose shapes the analysis reads (_SHAPED)
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")
    # the kernel a launch call names (ROCm's runtime events carry it): a graph capture records
    # launches but no kernels, so this is what its replays are matched against
    kernel: str | None = None


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    args: _Args = _NO_ARGS  # one shared instance for the many events without args


class _Doc(msgspec.Struct, gc=False):
    # events stay raw JSON slices of the input until decoded chunk by chunk (see parse_trace)
    traceEvents: list[msgspec.Raw] | None = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    trace_id: Any = None


_DOC = msgspec.json.Decoder(_Doc)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[_Event])
# events decoded into structs at a time: bounds peak memory to the raw JSON plus one chunk. Small
# chunks are also faster (measured on the 757k-event benchmark trace: 64k events 3.4 s, 16k
# 2.3 s, 4k 1.8 s), as one chunk's structs stay in cache while its columns are built
CHUNK = 4096

# (lower-cased category) -> kind, for complete ("X") events
_X_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    # other accelerators' host runtimes (Kineto's ActivityType names)
    "xpu_runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "driver": Kind.DRIVER,
    "xpu_driver": Kind.DRIVER,
    "privateuse1_driver": Kind.DRIVER,
    # device-side events of other accelerators (MTIA compute, DMA and sync events); kept with
    # their category so that no device work is silently dropped
    "mtia_ccp_events": Kind.DEVICE,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    # with_stack=True's Python frames: the idle analysis says which Python code held the host
    "python_function": Kind.PYTHON,
}
# launch flows (CPU launch -> GPU op), and fwdbwd flows (forward op -> its backward op), told
# apart by Trace.flow_fwdbwd
_FLOW_CATS = {"ac2g", "async", "async_cpu_to_gpu", "fwdbwd"}
# categories the analysis does not read; anything else is reported as unknown
_IGNORED_CATS = {
    "cpu_instant_event",
    "trace",
    "",
    "user_annotation",
    "gpu_user_annotation",
    "overhead",
    "cuda_sync",
    "cuda_profiler_range",
    "cpu_instant",
    "python",
}
_CONVERSIONS = {"aten::to", "aten::_to_copy"}
# ops whose input shapes are kept (Trace.shapes): the GEMMs and softmaxes of an attention chain
_SHAPED = {
    "aten::bmm",
    "aten::matmul",
    "aten::mm",
    "aten::baddbmm",
    "aten::softmax",
    "aten::_softmax",
    "aten::_safe_softmax",
}

_CONTROL = re.compile(rb"[\x00-\x1f]")
_BARE = re.compile(rb"(?<=[:\[,])(\s*)(N/A|NaN|-?Infinity|nan|-?inf)(?=\s*[,\]}])")


# Progress of the load in this context, for a caller that shows it (cli/analyze.py): called with
# (bytes read, events decoded, done) after each block of the streaming path and once at the end
# (done=True, with the trace's raw size and event count). A ContextVar, not an argument, so that
# the analysis API between the CLI and the loader needs no parameter for it.
PROGRESS: ContextVar[Callable[[int, int, bool], None] | None] = ContextVar(
    "attnprof_load_progress", default=None
)


def load_trace(
    path: str | os.PathLike[str],
    *,
    max_memory: float = MAX_MEMORY,
    parallel: bool | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Trace:
    """Read and decode one trace file (.json or .json.gz). Raises UserError on bad input.

    max_memory: refuse the file when its analysis would need more than this fraction of the
    memory available (0: no limit). parallel: decode a large plain-JSON file in two processes
    (None: when it is 16 MB or more, two CPUs are there and the load average leaves one free;
    False where the caller already runs one process per CPU). meanwhile: called once, in this process, while the forked process
    decodes its part (work the caller needs next, its imports say, then overlaps the decoding;
    the forked process takes a larger part for it, FORK_SHARE); where nothing is forked, after
    the load. An exception it raises stops the forked process and propagates.
    """
    p = Path(path)
    check_input(p, max_memory=max_memory)
    limit = raw_limit(max_memory)
    once = _Once(meanwhile)
    try:
        try:
            trace = _stream(p, limit=limit, parallel=parallel, meanwhile=once)
        except _TooLarge as exc:
            raise too_large(p, exc.limit, max_memory) from None
        if trace is None:
            if limit is not None and _is_gzip(p):
                trace = parse_trace(_gunzip_bounded(p, limit, max_memory), source=p.name, label=str(p))
            else:
                # no local name for the bytes: parse_trace must hold the only reference, so that
                # it can free the raw JSON before the columns are put together
                trace = parse_trace(p.read_bytes(), source=p.name, label=str(p))
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


class _Once:
    """A caller's function, called at most once (load_trace's meanwhile)."""

    def __init__(self, fn: Callable[[], object] | None) -> None:
        self.fn = fn

    def __call__(self) -> None:
        fn, self.fn = self.fn, None
        if fn is not None:
            fn()


def parse_trace(data: bytes, *, source: str = "<bytes>", label: str | None = None) -> Trace:
    """Decode trace bytes (gzip or plain JSON) into a Trace. label names the input in errors."""
    label = label or source
    box = [data]
    del data  # _parse holds the only reference, so that it can free the raw JSON early
    try:
        return _parse(box, source, label)
    except RecursionError:
        raise UserError(
            f"{label}: the JSON is nested deeper than the decoder allows: not a profiler trace, "
            "whose events are only a few levels deep"
        ) from None


def _parse(box: list[bytes], source: str, label: str) -> Trace:
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
    data, encoding = _as_utf8(data, label)
    if not data.strip():
        raise UserError(f"{label}: the file is empty, not a profiler trace")
    doc, repairs = _scan(data, label)
    if encoding:
        repairs.insert(0, encoding)
    raw_bytes = len(data)
    del data  # from here on only the raw event slices hold the buffer
    raws: list[Any] | None = doc.traceEvents
    doc.traceEvents = None
    if raws is None:
        raise UserError(f"{label}: no traceEvents list, so not a PyTorch profiler trace")
    builder = _Builder()
    lenient = False
    for i in range(0, len(raws), CHUNK):
        chunk = raws[i : i + CHUNK]
        # drop the slices as they are used: their memory goes to the columns being built
        raws[i : i + CHUNK] = [None] * len(chunk)
        events, was_lenient, repair = _decode_chunk(chunk, label)
        del chunk
        lenient |= was_lenient
        if repair and repair not in repairs:
            repairs.append(repair)
        builder.add(events)
    if raws and builder.n_seen == 0:
        raise UserError(f"{label}: its events are not JSON objects, so not a PyTorch profiler trace")
    del raws  # frees the raw JSON before the columns are concatenated
    trace = builder.finish(doc, source)
    trace.repairs.extend(repairs)
    trace.raw_bytes = raw_bytes
    if lenient:
        trace.warnings.append(_LENIENT)
    return trace


_LENIENT = (
    "some event fields had unexpected types: those events were decoded field by field and "
    "unusable fields were ignored"
)


# -- streaming: the usual case ---------------------------------------------------------------
#
# A trace is one object whose traceEvents array holds nearly all of its bytes. _stream reads the
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

# 256 KB: a block's decoded events (about 1,500 on a modern trace) stay in the CPU's cache while
# their columns are built, and a process's working set is a few MB. On the 48 MB benchmark
# trace, against 1 MB blocks: 4% fewer instructions (valgrind), the forked decoder's peak RSS
# growth 1 MB instead of 7-12 (docs/benchmarks.md)
BLOCK = 1 << 18
_HEADER_MAX = 4 << 20  # Kineto writes traceEvents after a few KB of metadata
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_GZIP_IN = 1 << 18
_CUT_TRIES = 8
# a column's parts are merged into one array once they hold this many bytes (_Builder._put):
# above glibc's mmap threshold (128 KB), so that a segment freed at the end leaves no hole
_SEGMENT = 1 << 20
_CLOSE_TRIES = 16  # a real tail holds one or two "}]" (deviceProperties, distributedInfo)
# whitespace kept of one run (see _Part._squeezed): more than MAX_NAME, the most of a string kept
_WS_KEEP = MAX_NAME + BLOCK
_BOM = b"\xef\xbb\xbf"
# the last cuts of a block are looked for in its last _CUT_WINDOW bytes first (a few hundred
# events), not in the whole block: scanning every block in full for cuts cost about a tenth of
# the load (0.07-0.11 s CPU on the 48 MB benchmark trace)
_CUT_WINDOW = 32 << 10


class _TooLarge(Exception):
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
                    raise _TooLarge(self.limit)
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


_STREAM_ERRORS = (msgspec.DecodeError, RecursionError, EOFError, zlib.error, UnicodeError, ValueError)
# plain JSON at least this large is decoded by two processes, each taking half the events
PARALLEL_MIN = 16 << 20
# the forked process's share of the bytes when the caller has work to do meanwhile (load_trace):
# analyze imports its analysis modules then, about 5% of the decoding's time on the 48 MB
# benchmark trace (docs/benchmarks.md)
FORK_SHARE = 0.52


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


def _stream(
    path: Path, *, parallel: bool | None = None, limit: int | None = None, meanwhile: _Once | None = None
) -> Trace | None:
    """The trace, or None when this file needs the whole-file path (see above).

    parallel: split the events between this process and a forked one (None: when the file is
    plain JSON of PARALLEL_MIN bytes or more, this process may use two CPUs and the machine is
    not busy: _cpu_to_spare). The result is
    the same as one process's: the second half's strings are re-interned in order (extend).
    """
    size = path.stat().st_size
    if parallel is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        parallel = size >= PARALLEL_MIN and cpus >= 2 and hasattr(os, "fork") and _cpu_to_spare(cpus)
    if parallel and not _is_gzip(path):
        share = FORK_SHARE if meanwhile is not None and meanwhile.fn is not None else 0.5
        split = _split_point(path, size, share)
        trace = _stream_parallel(path, split, meanwhile) if split is not None else None
        if trace is not None:
            return trace
    reader = _Reader(path, limit)
    try:
        part = _Part(first=True, last=True)
        part.consume(iter(reader))
        return part.trace(path.name)
    except _STREAM_ERRORS:
        return None
    finally:
        reader.close()


def _cpu_to_spare(cpus: int) -> bool:
    """Whether a forked decoder would find a CPU to run on: the 1-minute load average is below
    the CPU count (as `make --load-average` decides). On a busy machine it would not: measured
    on 2 CPUs at a load of 2.4 it saved no time, at 3.5 it cost 26% more time and 28% more CPU
    than decoding in one process (docs/benchmarks.md)."""
    try:
        return os.getloadavg()[0] < cpus
    except (AttributeError, OSError):  # no load average here (Windows, some containers)
        return True


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _split_point(path: Path, size: int, share: float = 0.5) -> tuple[int, int] | None:
    """(end of the first part, start of the second): a cut between two events near where the
    second part takes `share` of the bytes.

    A cut is taken when what follows it, up to one of the next few cuts, decodes as JSON objects:
    that skips cuts inside strings and most inside nested lists. A wrong one left is caught when
    the first half's last piece fails to decode, and the file is then streamed in one process.
    """
    at = int(size * (1.0 - share))
    with open(path, "rb") as f:
        f.seek(at)
        window = f.read(4 * BLOCK)
    cuts = list(_CUT.finditer(window))
    for i, m in enumerate(cuts[:64]):
        for nxt in cuts[i + 1 : i + 5]:
            try:
                _EVENTS.decode(b"".join((b"[", window[m.end() - 1 : nxt.start() + 1], b"]")))
            except msgspec.ValidationError:
                pass  # valid JSON, unexpected types: still objects between events
            except msgspec.DecodeError:
                continue
            return at + m.start() + 1, at + m.end() - 1
    return None


def _stream_parallel(path: Path, split: tuple[int, int], meanwhile: _Once | None = None) -> Trace | None:
    import pickle

    # the child's part comes back in an anonymous in-memory file where there is one (Linux): the
    # child writes it whole and exits, where through a pipe it waited on the parent 64 KB at a
    # time (6 MB on the 48 MB benchmark trace: 40-60 ms at a load of 5)
    memfd = _memfd()
    r, w = (memfd, os.dup(memfd)) if memfd is not None else os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the second part, from the event after the cut to the end
        PROGRESS.set(None)  # the parent reports; the child's blocks are not its to show
        try:
            os.close(r)
            try:
                part: _Part | None = _Part(first=False, last=True)
                assert part is not None
                part.consume(_file_blocks(path, split[1], None))
            except _STREAM_ERRORS:
                part = None
            with os.fdopen(w, "wb") as out:
                pickle.dump(part, out, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            os._exit(0)
    os.close(w)
    waited = False
    with os.fdopen(r, "rb") as inp:
        try:
            if meanwhile is not None:
                try:
                    meanwhile()
                except BaseException:
                    _stop(pid)  # its part is not wanted any more
                    raise
            first = _Part(first=True, last=False)
            try:
                first.consume(_file_blocks(path, 0, split[0]))
            except _STREAM_ERRORS:
                _stop(pid)  # the file is streamed again in one process
                return None
            if memfd is not None:  # the file holds the whole part once the child has exited
                os.waitpid(pid, 0)
                waited = True
                inp.seek(0)
            try:
                second = pickle.load(inp)
            except (EOFError, pickle.UnpicklingError):  # the child died before it answered
                second = None
        finally:
            if not waited:
                os.waitpid(pid, 0)
    if second is None:
        return None
    first.join(second)
    try:
        trace = first.trace(path.name)
    except _STREAM_ERRORS:
        return None
    if trace is not None:
        trace.raw_bytes = path.stat().st_size  # with the separator between the halves
    return trace


def _memfd() -> int | None:
    """An anonymous in-memory file, or None where there is none (not Linux, or refused)."""
    try:
        return os.memfd_create("attnprof-part") if hasattr(os, "memfd_create") else None
    except OSError:
        return None


def _stop(pid: int) -> None:
    import signal

    os.kill(pid, signal.SIGKILL)


def _file_blocks(path: Path, start: int, end: int | None) -> Any:
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


class _Part:
    """The events of one contiguous range of the traceEvents array, turned into columns.

    first: the range starts at the document's start (the header comes first); else at an
    event. last: it ends at the document's end (the array's close and the tail follow the last
    event); else right after an event.
    """

    def __init__(self, *, first: bool, last: bool) -> None:
        self.first, self.last = first, last
        self.builder = _Builder()
        self.lenient = False
        self.n_items = 0
        self.total = 0
        self.header = b""
        self.tail = b""
        self.squeezed = 0  # bytes of long whitespace runs left out (_squeezed)

    def _add(self, events: list[_Event]) -> None:
        self.n_items += len(events)
        self.builder.add(events)

    def _decode(self, buf: bytes) -> None:
        try:
            self._add(_EVENTS.decode(buf))
        except msgspec.ValidationError:
            # valid JSON, unexpected field types: field by field, as in the whole-file path
            n, events = _lenient(buf)
            self.n_items += n
            self.builder.add(events)
            self.lenient = True

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
                if pending[:3] == _BOM:  # a UTF-8 byte order mark (Windows editors write one)
                    del pending[:3]
                m = _EVENTS_KEY.search(pending)
                if m or len(pending) > _HEADER_MAX:
                    break
            if m is None or _first_byte(pending) != ord("{"):
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
                events = _EVENTS.decode(piece(close.start() + 1))
            except msgspec.ValidationError:
                self._decode(piece(close.start() + 1))
            except msgspec.DecodeError:
                continue
            else:
                self._add(events)
            self.tail = bytes(pending[close.end() :])
            return
        raise ValueError("no end of the traceEvents array")

    def join(self, other: _Part) -> None:
        """Append the part that follows this one."""
        self.builder.extend(other.builder)
        self.lenient |= other.lenient
        self.n_items += other.n_items
        self.total += other.total
        self.tail, self.last = other.tail, other.last

    def trace(self, source: str) -> Trace | None:
        doc = _DOC.decode(self.header + b"[]" + self.tail)
        if doc.traceEvents != [] or (self.n_items and self.builder.n_seen == 0):
            return None  # not the top-level array, or events that are not objects
        trace = self.builder.finish(doc, source)
        trace.raw_bytes = self.total
        if self.lenient:
            trace.warnings.append(_LENIENT)
        return trace


# -- decoding ---------------------------------------------------------------------------------


# byte order marks: (mark, codec); UTF-32 before UTF-16, whose little-endian mark begins UTF-32's
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def _as_utf8(data: bytes, label: str) -> tuple[bytes, str | None]:
    """data as UTF-8 without a byte order mark, and what was done (None: nothing).

    JSON is UTF-8 (RFC 8259), but Windows tools write a UTF-8 mark, and PowerShell's `>` writes
    UTF-16: both were "not JSON (invalid character byte 0)". Without a mark, UTF-16 and UTF-32
    show as NUL bytes around the first ASCII character, as RFC 4627 used to tell them apart.
    """
    if data[:3] == _BOM:
        return data[3:], None  # a UTF-8 mark: nothing to say, the bytes were UTF-8
    codec = next((c for mark, c in _BOMS if data.startswith(mark)), None)
    if codec is None and len(data) >= 4 and b"\x00" in data[:4]:
        head = data[:4]
        if head[:3] == b"\x00\x00\x00":
            codec = "utf-32-be"
        elif head[1:4] == b"\x00\x00\x00":
            codec = "utf-32-le"
        elif head[0] == 0 and head[2] == 0:
            codec = "utf-16-be"
        elif head[1] == 0 and head[3] == 0:
            codec = "utf-16-le"
    if codec is None:
        return data, None
    mark = next((len(m) for m, c in _BOMS if c == codec and data.startswith(m)), 0)
    try:
        text = data[mark:].decode(codec)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{label}: looks like {codec.upper()} text but is not valid {codec.upper()} at byte "
            f"{exc.start + mark:,}: save the trace as UTF-8 JSON"
        ) from None
    return text.encode("utf-8", errors="replace"), f"decoded from {codec.upper()} (JSON is UTF-8)"


def _first_byte(data: bytes | bytearray) -> int:
    m = re.search(rb"\S", data[:4096])
    return data[m.start()] if m else 0


def _scan(data: bytes, label: str) -> tuple[_Doc, list[str]]:
    """The top level, events left raw; on invalid JSON, repair once and say what was repaired."""
    try:
        return _top(data, label), []
    except msgspec.DecodeError as first:
        fixed, repairs = _repair(data)
        if not repairs:
            raise _syntax_error(label, first, data) from None
        try:
            return _top(fixed, label), repairs
        except msgspec.DecodeError as second:
            raise _syntax_error(label, second, fixed) from None


def _top(data: bytes, label: str) -> _Doc:
    try:
        if _first_byte(data) == ord("["):
            return _Doc(traceEvents=_RAWS.decode(data))
        return _DOC.decode(data)
    except msgspec.ValidationError as exc:
        # valid JSON of the wrong shape: a string, a number, traceEvents that is not a list
        raise UserError(f"{label}: not a PyTorch profiler trace ({exc})") from None


def _decode_chunk(raws: list[msgspec.Raw], label: str) -> tuple[list[_Event], bool, str | None]:
    """Events of one chunk; (events, decoded leniently, repair made)."""
    buf = b"[" + b",".join(raws) + b"]" if raws else b"[]"
    repair = None
    try:
        return _EVENTS.decode(buf), False, None
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        # the raw scan does not validate UTF-8 inside strings: the events can still be invalid
        fixed = buf.decode("utf-8", errors="replace").encode()
        if fixed == buf:
            raise _syntax_error(label, exc, buf) from None
        buf, repair = fixed, "replaced invalid UTF-8 bytes with U+FFFD"
        try:
            return _EVENTS.decode(buf), False, repair
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as again:
            raise _syntax_error(label, again, buf) from None
    return _lenient(buf)[1], True, repair


_ONE = msgspec.json.Decoder(_Event)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _lenient(buf: bytes) -> tuple[int, list[_Event]]:
    """(items, events) of a JSON array in which some event has a field of an unexpected type:
    each event decoded on its own, and only those that fail cleaned field by field. The others
    keep their raw fields as written (the recorded inputs are compared as bytes), so the events
    of a lenient chunk are the same whichever chunk or block they were cut into."""
    out: list[_Event] = []
    raws = _RAW_LIST.decode(buf)
    for raw in raws:
        try:
            out.append(_ONE.decode(raw))
        except msgspec.ValidationError:
            c = _clean_event(msgspec.json.decode(raw))
            if c is not None:
                out.append(msgspec.convert(c, _Event))
    return len(raws), out


def _repair(data: bytes) -> tuple[bytes, list[str]]:
    """Fix what real traces get wrong; say what was fixed. Control characters are valid nowhere
    raw in JSON strings, and a space is valid both inside and outside strings."""
    repairs: list[str] = []
    fixed, n_ctrl = _CONTROL.subn(b" ", data)
    # \t \n \r outside strings were whitespace already: count only the others
    n_bad = n_ctrl - data.count(b"\n") - data.count(b"\t") - data.count(b"\r")
    if n_bad > 0:
        repairs.append(f"replaced {n_bad} raw control character(s) with spaces")
    fixed, n_bare = _BARE.subn(rb"\1null", fixed)
    if n_bare:
        repairs.append(f"replaced {n_bare} bare N/A / NaN / Infinity value(s) with null")
    if not repairs and fixed != data:
        # only newlines or tabs changed: that makes a string with a raw newline valid
        repairs.append("replaced raw newlines or tabs inside strings with spaces")
    return (fixed if repairs else data), repairs


def _syntax_error(label: str, exc: Exception, data: bytes) -> UserError:
    msg = str(exc)
    if "truncated" in msg.lower():
        return UserError(
            f"{label}: the JSON ends early after {len(data):,} bytes: the trace is truncated "
            "(was the profiler stopped, or the copy cut, while it was being written?)"
        )
    if _first_byte(data) not in (ord("{"), ord("[")):
        return UserError(f"{label}: not JSON, so not a PyTorch profiler trace ({msg})")
    return UserError(f"{label}: invalid JSON that could not be repaired ({msg})")


_STR_FIELDS = ("ph", "cat", "name")
_NUM_FIELDS = ("ts", "dur")
_ARG_INT = {
    "correlation",
    "External id",
    "external id",
    "registers per thread",
    "shared memory",
    "device",
    "Sequence number",
}
_ARG_FLOAT = {"est. achieved occupancy %"}
_INT64 = (-(2**63), 2**63 - 1)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _clean_event(e: Any) -> dict[str, Any] | None:
    """Keep the fields of one untyped event that have a usable type; None for a non-object."""
    if not isinstance(e, dict):
        return None
    out: dict[str, Any] = {}
    for k in _STR_FIELDS:
        v = e.get(k)
        if isinstance(v, str):
            out[k] = v
    for k in _NUM_FIELDS:
        v = e.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e300:
            out[k] = float(v)
        elif isinstance(v, str):
            try:
                f = float(v)
            except ValueError:
                continue
            if f == f and abs(f) < 1e300:
                out[k] = f
    for k in ("pid", "tid"):
        v = e.get(k)
        if _is_int(v) or isinstance(v, str):
            out[k] = v
    v = e.get("id")
    if _is_int(v) or isinstance(v, str):
        out["id"] = v
    args = e.get("args")
    if isinstance(args, dict):
        a: dict[str, Any] = {}
        for k in _ARG_INT:
            if _is_int(args.get(k)):
                a[k] = args[k]
        for k in _ARG_FLOAT:
            if _is_num(args.get(k)):
                a[k] = float(args[k])
        for k in ("grid", "block"):
            if isinstance(args.get(k), list | str):
                a[k] = args[k]
        if isinstance(args.get("kernel"), str):
            a["kernel"] = args["kernel"]
        for k in ("Input type", "Concrete Inputs", "Input Dims"):  # kept raw (see _Args)
            if isinstance(args.get(k), list):
                a[k] = msgspec.Raw(msgspec.json.encode(args[k]))
        out["args"] = a
    return out


# -- building columns -------------------------------------------------------------------------

_TS = attrgetter("ts")
_CAT_PH = attrgetter("cat", "ph")
_LANE = attrgetter("pid", "tid")
_NAME = attrgetter("name")
_DUR = attrgetter("dur")
_ARGS_OF = attrgetter("args")
_CORR = attrgetter("correlation")
_EXT = attrgetter("external_id")
_EXT_LEGACY = attrgetter("external_id_legacy")
_SEQ = attrgetter("seq")


def _int_col(values: list[int]) -> np.ndarray:
    """Integer ids (-1 = missing) in one C loop; beyond +-2**62 -1, as _ids does."""
    try:
        arr = np.fromiter(values, np.int64, len(values))
    except OverflowError:
        return _ids([None if v == -1 else v for v in values])
    return np.where((arr < -(2**62)) | (arr > 2**62), -1, arr)


def _ids(values: list[int | None]) -> np.ndarray:
    """Integer ids with None -> -1, through float64 (exact below 2**53, which ids are)."""
    arr = np.array(values, dtype=np.float64) if values else np.zeros(0)
    bad = np.isnan(arr) | (arr < -(2.0**62)) | (arr > 2.0**62)
    return np.where(bad, -1, arr).astype(np.int64)


def _floats(values: list[float | None]) -> np.ndarray:
    return np.array(values, dtype=np.float64) if values else np.zeros(0)


def _prod(dims: Any) -> int:
    """Threads per block (or blocks per grid) from [x, y, z], also when written as a string."""
    if isinstance(dims, str):
        dims = [int(x) for x in re.findall(r"\d{1,9}", dims)[:3]]
    if not isinstance(dims, list) or not dims:
        return -1
    p = 1
    for d in dims[:3]:
        if not isinstance(d, int) or isinstance(d, bool) or not 0 < d < 2**31:
            return -1
        p *= d
    return p


def _prods(dims: list[Any]) -> np.ndarray:
    """_prod over many; vectorised when every entry is a plain [x, y, z] (the usual case)."""
    try:
        arr = np.array(dims, dtype=np.int64)
        if arr.ndim == 2 and arr.shape[1] == 3:
            bad = (arr <= 0).any(axis=1) | (arr >= 2**31).any(axis=1)
            return np.where(bad, -1, arr.prod(axis=1))
    except (ValueError, TypeError, OverflowError):
        pass
    return np.array([_prod(d) for d in dims], np.int64)


def _intern(table: dict[Any, int], keys: list[Any]) -> np.ndarray:
    """Ids of keys in table, adding new ones in order of first appearance (so that ids do not
    depend on how the events were cut into chunks); the per-event loops run in C."""
    if len(table) > 0:
        # after the first chunks nearly every key is known: one lookup pass, no dict of the
        # chunk's keys (a key not yet known falls through to the pass that adds them in order)
        try:
            return np.fromiter(map(table.__getitem__, keys), np.int64, len(keys))
        except KeyError:
            pass
    for k in [k for k in dict.fromkeys(keys) if k not in table]:
        table[k] = len(table)
    return np.fromiter(map(table.__getitem__, keys), np.int64, len(keys))


def _cap(text: str) -> str:
    """A category (or another string shown as it is) cut to MAX_NAME characters, as names are."""
    return text if len(text) <= MAX_NAME else text[:MAX_NAME]


def _capped(counts: Counter[str]) -> dict[str, int]:
    """counts by key cut with _cap (keys that become equal are summed), sorted by key."""
    out: Counter[str] = Counter()
    for k, v in counts.items():
        out[_cap(k)] += v
    return dict(sorted(out.items()))


def _hex(v: int | str | None) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return None


_ID = attrgetter("id")


def _pick(items: list[Any], idx: np.ndarray) -> list[Any]:
    """items[i] for i in idx, the loop in C (itemgetter) rather than a list comprehension."""
    if idx.size == len(items):
        return items
    if idx.size <= 1:
        return [items[int(i)] for i in idx]
    return list(itemgetter(*idx.tolist())(items))


def _compact_sig(raw: tuple[bytes, bytes, bytes]) -> tuple[bytes, bytes, bytes]:
    """A recorded inputs triple without insignificant whitespace; a part that is not a list
    (null, an object: Kineto writes lists) as absent, as the lenient per-event decode of a damaged
    event leaves it (kept as it was if not JSON)."""
    out = []
    for part in raw:
        try:
            value = msgspec.json.decode(part) if part else None
        except msgspec.DecodeError:
            out.append(part)
            continue
        out.append(msgspec.json.encode(value) if isinstance(value, list) else b"")
    return (out[0], out[1], out[2])


def _raw_list(raw: msgspec.Raw) -> list[Any] | None:
    """A list kept raw in the args, decoded; None when missing, not a list or not JSON."""
    if not raw:
        return None
    try:
        v = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


def _among(col: np.ndarray, ids: list[int], n: int) -> np.ndarray:
    """Which entries of col (ids below n) are one of ids: a table lookup, cheaper per chunk than
    np.isin (whose Python-level set-up was 5% of the load)."""
    table = np.zeros(n, bool)
    table[ids] = True
    return table[col]


def _flow_ids(fl: list[_Event]) -> np.ndarray:
    """Flow ids: plain integers in one C loop (the usual case), else one by one (hex strings)."""
    ids = list(map(_ID, fl))
    if not ids or set(map(type, ids)) == {int}:  # one C loop (bool is not int here)
        try:
            arr = np.array(ids, np.int64) if ids else np.zeros(0, np.int64)
            return np.where((arr < -(2**62)) | (arr > 2**62), -1, arr)  # as _ids does
        except OverflowError:
            pass
    return _ids([_hex(i) for i in ids])


class _Builder:
    """Columns accumulated chunk by chunk; strings interned across chunks."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.lanes: dict[tuple[int | str, int | str], int] = {}
        self.cats: dict[str, int] = {}
        # (cat, ph) -> pair id, in order of first appearance; per pair: its cat id, its kind
        # (-1 dropped, -2 flow) and whether it starts a flow. One lookup per event gives all
        # three (the pairs are few: a few dozen in a trace)
        self.pairs: dict[tuple[str, str], int] = {}
        self.pair_cat = np.zeros(0, np.int64)
        self.pair_kind = np.zeros(0, np.int64)
        self.pair_start = np.zeros(0, bool)
        self.dropped: Counter[str] = Counter()
        self.unknown: set[str] = set()
        self.cols: dict[str, list[np.ndarray]] = {}
        # per column: how many parts at the end of its list are not merged yet, and their bytes
        self.fresh: dict[str, tuple[int, int]] = {}
        self.conversions: dict[int, tuple[str | None, str | None]] = {}
        self.shapes: dict[int, list[Any]] = {}
        self.launch_kernels: dict[int, tuple[str, int, int]] = {}
        # rows with recorded inputs, and each one's signature id (into sigs, in order of first
        # appearance): columns, not a dict per row (RowMap)
        self.sigs: dict[tuple[bytes, bytes, bytes], int] = {}
        self._raw_sigs: dict[tuple[bytes, bytes, bytes], int] = {}  # as written -> id in sigs
        self.n_rows = 0
        self.n_seen = 0
        self.bad_durs = 0
        self.bad_dur_example = 0.0

    def _put(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            parts = self.cols.setdefault(k, [])
            parts.append(v)
            n, nbytes = self.fresh.get(k, (0, 0))
            n, nbytes = n + 1, nbytes + v.nbytes
            if nbytes >= _SEGMENT:
                # one block's parts are a few KB each: merged into a segment of about _SEGMENT
                # bytes (its own mapping, returned to the system when freed), their heap space is
                # reused by the next block's. Kept apart until the end, the parts of every block
                # filled the heap, which stayed resident beside the concatenated columns (about
                # 2x the columns in peak RSS, measured on the 1.2 GB benchmark trace)
                parts[-n:] = [np.concatenate(parts[-n:])]
                n, nbytes = 0, 0
            self.fresh[k] = (n, nbytes)

    def _kind_of(self, cat: str, ph: str) -> int:
        low = cat.lower()
        if ph == "X" and low in _X_KINDS:
            return int(_X_KINDS[low])
        if ph in ("s", "f", "t") and low in _FLOW_CATS:
            return -2
        if low not in _IGNORED_CATS and not (ph in ("M", "i", "I") and low == ""):
            self.unknown.add(cat)
        return -1

    def add(self, events: list[_Event]) -> None:
        n_all = len(events)
        self.n_seen += n_all
        if not n_all:
            return
        cats, pairs = self.cats, self.pairs
        known = len(pairs)
        pair_ids = _intern(pairs, list(map(_CAT_PH, events)))
        if len(pairs) > known:  # new pairs, in order of first appearance: so are their cats
            new = list(pairs)[known:]
            self.pair_cat = np.append(self.pair_cat, [cats.setdefault(c, len(cats)) for c, _ in new])
            self.pair_kind = np.append(self.pair_kind, [self._kind_of(c, ph) for c, ph in new])
            self.pair_start = np.append(self.pair_start, [ph == "s" for _, ph in new])
        cat_ids = self.pair_cat[pair_ids]
        ev_kind = self.pair_kind[pair_ids]
        keep = np.flatnonzero(ev_kind >= 0)
        flows = np.flatnonzero(ev_kind == -2)
        if keep.size + flows.size < n_all:
            counts = np.bincount(pair_ids, minlength=len(pairs))
            for (cat, ph), j in pairs.items():
                if self.pair_kind[j] == -1 and counts[j]:
                    self.dropped[f"{cat or '-'}/{ph or '-'}"] += int(counts[j])

        kept = _pick(events, keep)
        n = len(kept)
        names, lanes = self.names, self.lanes
        # lanes of kept and flow events interned together, in file order: ids must not depend
        # on where the chunks were cut (streamed, parallel and whole-file loads agree)
        used = np.flatnonzero(ev_kind != -1)
        used_ev = _pick(events, used)
        lane_ids = _intern(lanes, list(map(_LANE, used_ev)))
        is_flow = ev_kind[used] == -2
        del used_ev
        args = list(map(_ARGS_OF, kept))
        ext = _int_col(list(map(_EXT, args)))
        ext_legacy = _int_col(list(map(_EXT_LEGACY, args)))
        kind = ev_kind[keep].astype(np.int8)
        name_col = _intern(names, list(map(_NAME, kept))).astype(np.int32)
        dur = np.fromiter(map(_DUR, kept), np.float64, n)
        bad = ~((dur >= 0.0) & (dur <= MAX_DUR_US))
        if bad.any():
            if not self.bad_durs:
                self.bad_dur_example = float(dur[bad][0])
            self.bad_durs += int(bad.sum())
            dur = np.where(bad, 0.0, dur)
        self._put(
            kind=kind,
            name=name_col,
            lane=lane_ids[~is_flow].astype(np.int32),
            ts=np.fromiter(map(_TS, kept), np.float64, n),
            dur=dur,
            corr=_int_col(list(map(_CORR, args))),
            ext=np.where(ext >= 0, ext, ext_legacy),
            seq=_int_col(list(map(_SEQ, args))),
            cat=cat_ids[keep].astype(np.int32),
        )

        krows = np.flatnonzero(kind == Kind.KERNEL)
        kargs = _pick(args, krows)
        self._put(
            kernel_rows=krows.astype(np.int64) + self.n_rows,
            registers=_ids([a.registers for a in kargs]),
            shared_mem=_ids([a.shared_memory for a in kargs]),
            block_threads=_prods([a.block for a in kargs]),
            grid_blocks=_prods([a.grid for a in kargs]),
            achieved=_floats([a.achieved for a in kargs]),
            device=_ids([a.device for a in kargs]),
        )

        conv_ids = [names[c] for c in _CONVERSIONS if c in names]
        if conv_ids:
            for r in np.flatnonzero(_among(name_col, conv_ids, len(names)) & (kind == Kind.CPU_OP)).tolist():
                types, concrete = _raw_list(args[r].input_type), _raw_list(args[r].concrete)
                if types:
                    src = types[0] if isinstance(types[0], str) else None
                    tgt = None
                    if concrete and len(concrete) > 1 and isinstance(concrete[1], str):
                        tgt = concrete[1] or None
                    self.conversions[r + self.n_rows] = (src, tgt)

        shaped_ids = [names[c] for c in _SHAPED if c in names]
        if shaped_ids:
            for r in np.flatnonzero(
                _among(name_col, shaped_ids, len(names)) & (kind == Kind.CPU_OP)
            ).tolist():
                raw = args[r].input_dims
                if raw:
                    try:
                        dims = msgspec.json.decode(raw)
                    except msgspec.DecodeError:
                        continue
                    if isinstance(dims, list):
                        self.shapes[r + self.n_rows] = dims

        rt = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER)).tolist()
        for r in rt:
            a = args[r]
            if a.kernel is not None:  # kept as a string: interning it would make name ids depend on chunking
                self.launch_kernels[r + self.n_rows] = (a.kernel, _prod(a.grid), _prod(a.block))
        # every cpu op's recorded inputs (decoded by the per-op performance model, once per
        # distinct signature), as signature ids. Each signature re-encoded compactly, once
        # per distinct raw text, so the same inputs read the same whatever the file's spacing and
        # whichever decode path (whole file, streamed blocks, a repaired event) produced them
        ops_in = np.flatnonzero(kind == Kind.CPU_OP).tolist()
        sigs, raw_sigs = self.sigs, self._raw_sigs
        in_rows: list[int] = []
        in_sig: list[int] = []
        for r in ops_in:
            a = args[r]
            if a.input_dims:
                raw = (bytes(a.input_dims), bytes(a.input_type), bytes(a.concrete))
                sig = raw_sigs.get(raw)
                if sig is None:
                    sig = raw_sigs[raw] = sigs.setdefault(_compact_sig(raw), len(sigs))
                in_rows.append(r + self.n_rows)
                in_sig.append(sig)
        self._put(input_rows=np.array(in_rows, np.int64), input_sig=np.array(in_sig, np.int32))

        fl = _pick(events, flows)
        nf = len(fl)
        fwdbwd = [c for k, c in cats.items() if k.lower() == "fwdbwd"]
        self._put(
            flow_start=self.pair_start[pair_ids[flows]],
            flow_fwdbwd=_among(cat_ids[flows], fwdbwd, len(cats)) if fwdbwd else np.zeros(nf, bool),
            flow_id=_flow_ids(fl),
            flow_lane=lane_ids[is_flow].astype(np.int32),
            flow_ts=np.fromiter(map(_TS, fl), np.float64, nf),
        )
        self.n_rows += n

    def extend(self, other: _Builder) -> None:
        """Append the columns another builder made of the events that follow this one's, with
        its strings re-interned here (new ones in its order: the same ids a single pass gives)."""

        def remap(table: dict[Any, int], theirs: dict[Any, int]) -> np.ndarray:
            m = np.empty(len(theirs), np.int64)
            for k, i in theirs.items():
                m[i] = table.setdefault(k, len(table))
            return m

        maps = {
            "name": remap(self.names, other.names),
            "lane": remap(self.lanes, other.lanes),
            "cat": remap(self.cats, other.cats),
        }
        maps["flow_lane"] = maps["lane"]
        sigs = self.sigs  # the other's signatures re-interned, new ones in its order
        maps["input_sig"] = np.array([sigs.setdefault(k, len(sigs)) for k in other.sigs], np.int64)
        self.fresh.clear()  # parts appended from here on are the other's segments, none merged
        for key, parts in other.cols.items():
            for arr in parts:
                if key in maps:
                    arr = maps[key][arr].astype(arr.dtype)
                elif key in ("kernel_rows", "input_rows"):
                    arr = arr + self.n_rows
                self.cols.setdefault(key, []).append(arr)
        self.conversions.update({r + self.n_rows: v for r, v in other.conversions.items()})
        self.shapes.update({r + self.n_rows: v for r, v in other.shapes.items()})
        self.launch_kernels.update({r + self.n_rows: v for r, v in other.launch_kernels.items()})
        self.dropped.update(other.dropped)
        self.unknown |= other.unknown
        if other.bad_durs and not self.bad_durs:
            self.bad_dur_example = other.bad_dur_example
        self.bad_durs += other.bad_durs
        self.n_rows += other.n_rows
        self.n_seen += other.n_seen

    def _col(self, key: str, dtype: type) -> np.ndarray:
        # the chunks' parts are let go column by column: the trace's columns never exist twice
        # (about 0.25x the raw JSON less at the peak of a load)
        parts = self.cols.pop(key, None)
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

    def finish(self, doc: _Doc, source: str) -> Trace:
        props_in = doc.deviceProperties if isinstance(doc.deviceProperties, list) else []
        meta: dict[str, Any] = {}
        for key in ("schemaVersion", "distributedInfo", "cuda_runtime_version", "cupti_version", "trace_id"):
            v = getattr(doc, key)
            if v is not None:
                meta[key] = v
        meta["deviceProperties_present"] = doc.deviceProperties is not None
        meta["events_total"] = self.n_seen
        meta["bad_durations"] = self.bad_durs  # the sanitation record repeats the count
        warnings = []
        if self.n_seen == 0:
            warnings.append(
                "the trace holds no events (an empty traceEvents list, or an empty array): nothing to "
                "analyse; was the profiler stopped before its first step, or the trace written "
                "before the profiler finished?"
            )
        elif self.n_rows == 0:
            warnings.append(
                f"none of its {self.n_seen:,} event(s) is a CPU op, runtime call, kernel, memory "
                "copy or annotation: there is nothing to analyse (was only metadata, or only "
                "Python frames, recorded?)"
            )
        names = list(self.names)
        long_names = [i for i, n in enumerate(names) if len(n) > MAX_NAME]
        for i in long_names:
            names[i] = names[i][:MAX_NAME]
        if long_names:
            warnings.append(
                f"{len(long_names)} event name(s) longer than {MAX_NAME:,} characters (the longest: "
                f"{max(len(n) for n in self.names):,}) were cut to their first {MAX_NAME:,}"
            )
        if self.unknown:
            # a category is named in the warning by its first 80 characters
            listed = ", ".join(sorted(repr(c if len(c) <= 80 else c[:80] + "...") for c in self.unknown)[:8])
            warnings.append(f"events of unknown categories were ignored: {listed}")
        if self.bad_durs:
            warnings.append(
                f"{self.bad_durs} event(s) had a negative or impossible duration (the first: "
                f"{self.bad_dur_example:g} us; longer than a day counts as impossible): they are "
                "counted with 0 us"
            )
        return Trace(
            source=source,
            names=names,
            lanes=[(_cap(str(p)), _cap(str(t))) for p, t in self.lanes],
            kind=self._col("kind", np.int8),
            name=self._col("name", np.int32),
            ts=self._col("ts", np.float64),
            dur=self._col("dur", np.float64),
            lane=self._col("lane", np.int32),
            corr=self._col("corr", np.int64),
            ext=self._col("ext", np.int64),
            seq=self._col("seq", np.int64),
            cat=self._col("cat", np.int32),
            categories=[_cap(c) for c in self.cats],
            kernel_rows=self._col("kernel_rows", np.int64),
            registers=self._col("registers", np.int64),
            shared_mem=self._col("shared_mem", np.int64),
            block_threads=self._col("block_threads", np.int64),
            grid_blocks=self._col("grid_blocks", np.int64),
            achieved=self._col("achieved", np.float64),
            device=self._col("device", np.int64),
            flow_start=self._col("flow_start", np.bool_),
            flow_fwdbwd=self._col("flow_fwdbwd", np.bool_),
            flow_id=self._col("flow_id", np.int64),
            flow_lane=self._col("flow_lane", np.int32),
            flow_ts=self._col("flow_ts", np.float64),
            conversions=self.conversions,
            shapes=self.shapes,
            launch_kernels=self.launch_kernels,
            inputs=RowMap(
                self._col("input_rows", np.int64), self._col("input_sig", np.int32), list(self.sigs)
            ),
            device_properties=[p for p in props_in if isinstance(p, dict)],
            metadata=meta,
            dropped=_capped(self.dropped),
            warnings=warnings,
        )
