"""Per-trace summaries of a folder analysis, kept between runs (`attnprof analyze DIR`).

A second look at a folder of hundreds of ranks should not decode hundreds of traces again. Each
trace's result (its TraceAnalysis and its RankStats, the two records analyze_folder builds from
it) is written as one msgpack file, and read back instead of the trace when nothing it depends
on changed. The key holds:

- the file: its absolute path, size, modification time (ns) and a SHA-256 of its first 64 KiB
  (a copy that keeps the time, or a file rewritten within the clock's resolution, still differs
  in its head: Kineto writes the device properties and the first events there);
- the options that change the result: --region, --top and the workload (its repr);
- the code: size and modification time of every module of attnprof.analysis and
  attnprof.trace, so that another attnprof (or an edited checkout) never reads a summary that
  an older analysis wrote.

What a summary holds is exactly what the folder view and its JSON use: the trace's whole
TraceAnalysis (kernels, categories, regions, findings, ...), its RankStats (steps, step time,
window, busy and idle time, communication and attention shares, per-family times) and its
RankCollectives (each communication kernel's name, start and duration, in launch order), about
20-60 KB per trace plus 20 bytes per collective, never the trace's other events. A changed --region, --top or workload misses the cache
and re-reads the trace.

Summaries are read and written by the driving process (analysis/ranks/folder.py analyze_folder): a
worker, local or a Ray task on another machine, sends its summary back as these very bytes.

Where: $ATTNPROF_CACHE if set (`off` or `0`: no cache), else $XDG_CACHE_HOME/attnprof/ranks,
else ~/.cache/attnprof/ranks. A summary that cannot be read (damaged, from another version of
the records) is ignored and rewritten; one that cannot be written (read-only or full disk) is
skipped: the analysis is the same either way, only slower the next time.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["HEAD_BYTES", "cache_dir", "load", "store", "store_bytes", "summary_key"]

HEAD_BYTES = 64 << 10
_CODE_STAMP: str | None = None


def cache_dir() -> Path | None:
    """The directory summaries go to; None when caching is turned off ($ATTNPROF_CACHE=off)."""
    env = os.environ.get("ATTNPROF_CACHE")
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "no", "false") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attnprof" / "ranks"


def _code_stamp() -> str:
    global _CODE_STAMP
    if _CODE_STAMP is None:
        h = hashlib.sha256()
        root = Path(__file__).resolve().parents[1]
        for pkg in ("analysis", "trace"):
            for f in sorted((root / pkg).glob("*.py")):
                st = f.stat()
                h.update(f"{pkg}/{f.name}:{st.st_size}:{st.st_mtime_ns};".encode())
        _CODE_STAMP = h.hexdigest()
    return _CODE_STAMP


def summary_key(path: Path, *, region: str | None, top: int, workload: object) -> str | None:
    """The key of path's summary under these options; None when there can be none (the file
    cannot be read, or the workload has no stable text)."""
    wl = repr(workload)
    if " object at 0x" in wl:  # an address: the same workload would never meet its summary
        return None
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    h = hashlib.sha256()
    for part in (
        str(Path(path).resolve()),
        str(st.st_size),
        str(st.st_mtime_ns),
        hashlib.sha256(head).hexdigest(),
        repr(region),
        str(top),
        wl,
        _code_stamp(),
    ):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def load(key: str, kind: Any) -> Any:
    """The summary stored under key, decoded as kind (ranks.py passes its record types: this
    module does not import ranks, which imports it), or None (none, turned off, unreadable)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        data = (d / f"{key}.msgpack").read_bytes()
        return msgspec.msgpack.decode(data, type=kind)
    except (OSError, msgspec.DecodeError):
        return None


def store(key: str, *records: msgspec.Struct) -> None:
    """Write the summary atomically (a temporary file renamed), or skip it when it cannot be."""
    store_bytes(key, msgspec.msgpack.encode(records))


def store_bytes(key: str, data: bytes) -> None:
    """Write a summary already encoded (as a worker sends it back), as store does."""
    d = cache_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".part-", suffix=".msgpack")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / f"{key}.msgpack")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only or full cache: the next run analyses the trace again
