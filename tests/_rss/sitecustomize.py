"""Loaded by every Python subprocess of the test session (tests/conftest.py puts this folder on
PYTHONPATH): at exit, the process writes its own peak RSS (VmHWM of /proc/self/status, the high
water mark of its address space since exec) to ATTNPROF_RSS_DIR/<pid>. ru_maxrss cannot say it:
a child forked from a large pytest starts with pytest's RSS as its maximum (the kernel carries
the pre-exec peak over), so "largest subprocess" read from RUSAGE_CHILDREN was pytest's own."""

from __future__ import annotations

import atexit
import os


def _write_peak() -> None:
    folder = os.environ.get("ATTNPROF_RSS_DIR")
    if not folder:
        return
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            kib = next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), None)
        if kib is not None:
            with open(os.path.join(folder, str(os.getpid())), "w", encoding="ascii") as out:
                out.write(f"{kib}\n")
    except (OSError, ValueError):
        pass  # not Linux, or the folder is gone: nothing measured, nothing claimed


atexit.register(_write_peak)
