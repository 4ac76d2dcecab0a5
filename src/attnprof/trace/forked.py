"""The streaming load's entry (`streamed`): a large plain-JSON trace is decoded by two processes,
this one taking the events before a cut near the middle and a forked one those after it, whose
columns come back to be appended; any other file is streamed by this process alone (stream.py
`stream_one`). Two processes where the file is plain JSON of PARALLEL_MIN bytes or more and a
CPU is to spare (stream.py `can_fork`). The result is the same as one process's: the second
part's strings are re-interned in order (Builder.extend).

The forked process is started as the load starts, or earlier, by the command line (`start_early`,
called by attnprof.__main__ before it imports the command line): `attnprof analyze FILE` forks
it as soon as the decoder's own modules are imported, and this process imports typer and the
command line's modules (about 35 ms here) while it decodes, taking the smaller part
(EARLY_SHARE). The load adopts that process when it reads the same file (device, inode, size and
modification time unchanged) keeping everything, in the process that started it; any other load
stops it first, and a process that never loads the file stops it at exit. A file the load would
refuse before reading it (limits.py check_input: too large for the memory) is not read ahead.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import stat
from itertools import islice
from pathlib import Path

import msgspec

from attnprof.errors import UserError
from attnprof.trace.decode import EVENTS
from attnprof.trace.limits import check_input
from attnprof.trace.model import KEEP_ALL, Keep, Trace
from attnprof.trace.stream import (
    _CUT,
    PARALLEL_MIN,
    PROGRESS,
    STREAM_ERRORS,
    Once,
    Part,
    can_fork,
    file_blocks,
    is_gzip,
    stream_one,
)

__all__ = ["EARLY_SHARE", "FORK_SHARE", "Forked", "start_early", "streamed"]

# the forked process's share of the bytes when the caller has work to do meanwhile (load_trace):
# analyze imports its analysis modules then, about 5% of the decoding's time on the 48 MB
# benchmark trace (docs/benchmarks.md)
FORK_SHARE = 0.52
# its share when started by the command line: this process has the command line's imports to do
# as well before it decodes (docs/benchmarks.md)
EARLY_SHARE = 0.57


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


class Forked:
    """A forked process decoding the events after split[1] to the end of path.

    Its part comes back in an anonymous in-memory file where there is one (Linux): it writes the
    part whole and exits, where through a pipe it waited on this process 64 KB at a time (6 MB on
    the 48 MB benchmark trace: 40-60 ms at a load of 5)."""

    def __init__(self, path: Path, split: tuple[int, int], keep: Keep) -> None:
        self.split, self.keep = split, keep
        self.ident = _identity(path)
        self.owner = os.getpid()
        memfd = _memfd()
        r, w = (memfd, os.dup(memfd)) if memfd is not None else os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the second part, from the event after the cut to the end
            PROGRESS.set(None)  # the parent reports; the child's blocks are not its to show
            try:
                os.close(r)
                try:
                    part: Part | None = Part(first=False, last=True, keep=keep)
                    assert part is not None
                    part.consume(file_blocks(path, split[1], None))
                    part.builder.compact()
                except STREAM_ERRORS:
                    part = None
                with os.fdopen(w, "wb") as out:
                    pickle.dump(part, out, protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                os._exit(0)
        os.close(w)
        self.pid, self.fd, self.in_memory = pid, r, memfd is not None
        self.ended: str | None = None  # "collected" (its part read) or "stopped"

    def stop(self) -> None:
        """Kill it (its part is not wanted) and reap it."""
        if self.ended is not None:
            return
        self.ended = "stopped"
        with contextlib.suppress(ProcessLookupError):  # it died already
            os.kill(self.pid, signal.SIGKILL)
        self._reap()
        os.close(self.fd)

    def _reap(self) -> None:
        with contextlib.suppress(ChildProcessError):  # reaped already
            os.waitpid(self.pid, 0)

    def collect(self) -> Part | None:
        """Its part once it has answered (None: it failed or died first)."""
        self.ended = "collected"
        with os.fdopen(self.fd, "rb") as inp:
            try:
                if self.in_memory:  # the file holds the whole part once the child has exited
                    self._reap()
                    inp.seek(0)
                try:
                    part: Part | None = pickle.load(inp)
                except (EOFError, pickle.UnpicklingError):  # the child died before it answered
                    part = None
            finally:
                if not self.in_memory:
                    self._reap()
        return part


def streamed(
    path: Path,
    *,
    parallel: bool | None = None,
    limit: int | None = None,
    meanwhile: Once | None = None,
    keep: Keep = KEEP_ALL,
) -> Trace | None:
    """The trace, or None when this file needs the whole-file path (stream.py says when).

    parallel: split the events between this process and a forked one (None: when the command
    line forked one for this file, or the file is plain JSON of PARALLEL_MIN bytes or more and
    stream.py `can_fork`). limit: the most bytes a gzip file may decompress to."""
    size = path.stat().st_size
    early = adopt(path, keep)  # one the command line started for this file
    if parallel is None:
        parallel = early is not None or (size >= PARALLEL_MIN and can_fork())
    if parallel and not is_gzip(path):
        trace = _two(path, size, meanwhile, keep, early)
        if trace is not None:
            return trace
    elif early is not None:
        early.stop()  # asked for one process: its part is not wanted
    return stream_one(path, limit=limit, keep=keep)


def _two(path: Path, size: int, meanwhile: Once | None, keep: Keep, early: Forked | None) -> Trace | None:
    """The trace decoded by this process and a forked one (`early`: one started already for this
    file), or None when the file is to be streamed in one process instead."""
    if early is not None:
        forked = early
    else:
        share = FORK_SHARE if meanwhile is not None and meanwhile.fn is not None else 0.5
        split = _split_point(path, size, share)
        if split is None:
            return None
        forked = Forked(path, split, keep)
    try:
        if meanwhile is not None:
            meanwhile(True)
        first = Part(first=True, last=False, keep=keep)
        try:
            first.consume(file_blocks(path, 0, forked.split[0]))
        except STREAM_ERRORS:
            forked.stop()  # the file is streamed again in one process
            return None
    except BaseException:
        forked.stop()  # its part is not wanted any more
        raise
    second = forked.collect()
    if second is None:
        return None
    first.join(second)
    del second  # its columns are first's now; what extend replaced goes before they are joined
    try:
        trace = first.trace(path.name)
    except STREAM_ERRORS:
        return None
    if trace is not None:
        trace.raw_bytes = size  # with the separator between the halves
    return trace


_early: Forked | None = None
# bytes read at the cut's place to find it: 68 events of a large trace's 2-3 KB at most (a fixed
# size: four of the 512 KB blocks read twice what was needed)
_SPLIT_WINDOW = 1 << 20


def start_early(args: list[str]) -> None:
    """For a short command's command line (its arguments, sys.argv[1:]: attnprof.launch) naming
    exactly one large plain-JSON file among its words: fork the process that decodes that file's
    second part now, where the decoder would fork one anyway. A wrong guess (the file is an
    option's value, or is not loaded) costs the forked process's work until it is stopped."""
    global _early
    words = [a for a in args if not a.startswith("-")]
    if _early is not None or not words:
        return
    files = []
    for word in words[1:]:
        ident = _identity(Path(word))
        if ident is not None and ident[2] >= PARALLEL_MIN:
            files.append(Path(word))
    if len(files) != 1 or not can_fork():
        return
    path = files[0]
    try:
        # what the load refuses before reading a byte (more than the memory allows at the
        # default --max-memory) is not read ahead either
        check_input(path)
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":  # gzip: decoded in one process, gunzipped in a thread
                return
        split = _split_point(path, path.stat().st_size, EARLY_SHARE)
    except (OSError, UserError):
        return  # the load says what is wrong with it
    if split is None:
        return
    _early = Forked(path, split, KEEP_ALL)
    atexit.register(_stop_early)


def adopt(path: Path, keep: Keep) -> Forked | None:
    """The process start_early forked, where it decodes this file as this load asks; else None,
    and one it forked for another file (or before this file changed) is stopped."""
    global _early
    early, _early = _early, None
    if early is None or early.owner != os.getpid():  # a forked worker's copy is not its own
        return None
    if keep == early.keep and early.ident is not None and _identity(path) == early.ident:
        return early
    early.stop()
    return None


def _stop_early() -> None:
    global _early
    if _early is not None and _early.owner == os.getpid():
        _early.stop()
    _early = None


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
        window = f.read(_SPLIT_WINDOW)
    # only the cuts tried (64) and the 4 after the last, which end what follows it: finding
    # every cut of the window cost a search of all of it
    cuts = list(islice(_CUT.finditer(window), 68))
    for i, m in enumerate(cuts[:64]):
        for nxt in cuts[i + 1 : i + 5]:
            try:
                EVENTS.decode(b"".join((b"[", window[m.end() - 1 : nxt.start() + 1], b"]")))
            except msgspec.ValidationError:
                pass  # valid JSON, unexpected types: still objects between events
            except msgspec.DecodeError:
                continue
            return at + m.start() + 1, at + m.end() - 1
    return None


def _memfd() -> int | None:
    """An anonymous in-memory file, or None where there is none (not Linux, or refused)."""
    try:
        return os.memfd_create("attnprof-part") if hasattr(os, "memfd_create") else None
    except OSError:
        return None
