"""Hard limits on trace input, checked before a byte is read. No numpy here: the CLI imports it.

A device or a FIFO has no end to read to (`attnprof analyze /dev/zero` used to read until the
kernel killed it; opening a FIFO blocks). A file whose analysis would need more memory than is
available is refused with the figures and the flag that overrides.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attnprof.errors import UserError

__all__ = [
    "MAX_DUR_US",
    "MAX_MEMORY",
    "MAX_NAME",
    "PEAK_FACTOR",
    "WHOLE_FACTOR",
    "available_memory",
    "check_input",
    "raw_limit",
    "too_large",
]

# refuse a trace whose analysis would need more than this fraction of the available memory
MAX_MEMORY = 0.8
# peak memory growth of a streamed load and its analysis, per raw (decompressed) JSON byte, both
# processes together where a forked decoder runs: at most 0.72x measured on traces of 48 MB to
# 2.4 GB (a 55 MB MI300 trace with Python frames; 0.66x the modern 48 MB one, 0.55x at 192 MB,
# 0.24x the ResNet trace at 1.2 and 2.4 GB; docs/benchmarks.md "issue 22"), with a third more
PEAK_FACTOR = 1.0
# the same for the whole-file path (a bare array, JSON to repair, damaged gzip: parse_trace
# holds the raw JSON and its events' slices at once): measured 1.3-1.95x. load_trace checks it
# again before it takes that path
WHOLE_FACTOR = 2.0
# the most characters of an event name kept: longer ones are cut to this and a warning says how
# many were. The longest name in the shared traces is 5,123 characters (a templated CUTLASS
# kernel); the analysis matches names against dozens of patterns, at about 3 s per MB of name,
# so one 300 MB name took over 300 s (issue 24)
MAX_NAME = 1 << 16
# a single event longer than a day is a broken clock or an unfinished event, not a measurement
MAX_DUR_US = 86_400e6


_KINDS = (
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
)


def check_input(path: Path, *, max_memory: float = MAX_MEMORY, factor: float = PEAK_FACTOR) -> int:
    """Refuse, before reading a byte, what cannot be a trace or cannot fit; return its raw size.

    factor: the memory a load and its analysis need per raw JSON byte (PEAK_FACTOR streamed,
    WHOLE_FACTOR for the whole-file path).

    A device or a FIFO has no end to read to (and opening a FIFO blocks). The raw JSON size of a
    .json.gz is read from its gzip trailer (the size modulo 4 GiB), never less than the file.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        what = next((name for test, name in _KINDS if test(st.st_mode)), "special file")
        raise UserError(f"{path}: is a {what}, not a regular file: give a trace file (.json or .json.gz)")
    raw = st.st_size
    if max_memory > 0 and raw > 0:
        raw = max(raw, _gzip_size(path))
        need = raw * factor
        avail = available_memory()
        if avail is not None and need > max_memory * avail:
            raise UserError(
                f"{path}: {_gb(raw)} of JSON needs about {_gb(need)} of memory to analyse, more than "
                f"{max_memory:g}x the {_gb(avail)} available: free memory, or pass --max-memory 0 "
                "(no limit) or a larger fraction to try anyway"
            )
    return raw


def raw_limit(max_memory: float, factor: float = PEAK_FACTOR) -> int | None:
    """The most raw JSON a load may produce under max_memory (None: no limit, or unknown). A
    gzip trailer records the size modulo 4 GiB only, so decompression is bounded by this too."""
    avail = available_memory() if max_memory > 0 else None
    return None if avail is None else int(max_memory * avail / factor)


def too_large(path: Path, limit: int, max_memory: float) -> UserError:
    return UserError(
        f"{path}: decompresses to more than {_gb(limit)} of JSON, more than --max-memory {max_memory:g} "
        "of the memory available allows (a gzip bomb, or a trace too large for this machine): free "
        "memory, or pass --max-memory 0 (no limit) to try anyway"
    )


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _gzip_size(path: Path) -> int:
    """The uncompressed size a gzip file's trailer records (mod 4 GiB); 0 when not gzip."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return 0
            f.seek(-4, os.SEEK_END)
            return int.from_bytes(f.read(4), "little")
    except OSError:
        return 0


def available_memory() -> int | None:
    """Bytes this process can still use: MemAvailable, capped by a cgroup v2 limit; None if unknown."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if limit.isdigit() and used.isdigit() and avail is not None:
            avail = min(avail, max(int(limit) - int(used), 0))
    except OSError:
        pass
    return avail
