"""The allocator state clean timing runs in: chosen, documented and recorded, never an accident.

glibc malloc serves a request above its mmap threshold (128 KiB at start) with a fresh mmap and
returns it with munmap on free, so every call of a variant that allocates an 8 MB score matrix
page-faults that matrix in again (~2,000 minor faults). glibc raises the threshold dynamically when
a large mmapped block is freed, so whichever earlier allocation happened to be freed (attnprof's
fp64 reference, a previous variant) decided whether a variant was timed with or without those
faults: 6 ms or 12 ms for the same callable (issue 9).

attnprof times in one deliberate state, **warm**: before timing, M_MMAP_THRESHOLD is set to glibc's
largest (32 MiB on 64-bit) and M_TRIM_THRESHOLD to twice that, so per-call allocations up to 32 MiB
are reused from the heap, as in a long-running process that has seen its largest call. Setting
them also turns off glibc's dynamic adjustment, so the state no longer depends on history. The
state is recorded with each timing, and minor page faults per call are counted (getrusage) so a
variant that still faults (allocations above 32 MiB) shows it. Elsewhere (macOS, musl) nothing is
changed and the state says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache

__all__ = ["MMAP_THRESHOLD", "warm_allocator"]

# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the largest value mallopt accepts
MMAP_THRESHOLD = 32 * 1024 * 1024
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@cache
def warm_allocator() -> str:
    """Put glibc malloc in the warm state (once per process); return the state in words."""
    if not sys.platform.startswith("linux"):
        return f"default ({sys.platform} allocator, not changed)"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "default (no glibc mallopt, not changed)"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = (
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        and mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD) == 1
    )
    if not ok:
        return "default (mallopt refused, not changed)"
    return (
        "warm: glibc M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 64 MiB (per-call buffers reused from the heap)"
    )
