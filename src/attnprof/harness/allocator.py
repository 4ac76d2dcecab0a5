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

The **cold** state is the other end, measured too (harness/timing.py): M_MMAP_THRESHOLD fixed at
glibc's starting 128 KiB, so every larger per-call buffer is mapped and page-faulted on every call,
as in a fresh process before any large free has raised the threshold. Fixing it (rather than
restoring the dynamic default) keeps that state from drifting while it is timed. The threshold
alone is not enough: a free chunk already in the heap serves a large request whatever the
threshold, with its pages resident. So the trim threshold is 128 KiB too (a freed block at the
top of the heap goes back to the kernel), and the timing calls `release_free_memory()`
(malloc_trim(0): the pages of every free chunk go back) before each cold sample, outside the
clock, so each sample's first call finds no resident free memory, as a fresh process would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from functools import cache
from typing import cast

__all__ = [
    "COLD_MMAP_THRESHOLD",
    "MMAP_THRESHOLD",
    "WARM_PREFIX",
    "cold_allocator",
    "release_free_memory",
    "warm_allocator",
]

# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the largest value mallopt accepts
MMAP_THRESHOLD = 32 * 1024 * 1024
# glibc's DEFAULT_MMAP_THRESHOLD_MIN: the threshold a fresh process starts with
COLD_MMAP_THRESHOLD = 128 * 1024
WARM_PREFIX = "warm: "
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@cache
def _libc() -> ctypes.CDLL | str:
    """glibc with mallopt and malloc_trim, or why it cannot be used here."""
    if not sys.platform.startswith("linux"):
        return f"{sys.platform} allocator"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return "no glibc mallopt"
    return libc


def _mallopt() -> Callable[[int, int], int] | str:
    libc = _libc()
    return libc if isinstance(libc, str) else cast("Callable[[int, int], int]", libc.mallopt)


def release_free_memory() -> None:
    """Give the pages of every free heap chunk back to the kernel (glibc malloc_trim(0))."""
    libc = _libc()
    if not isinstance(libc, str):
        libc.malloc_trim(0)


def _set(mmap_threshold: int, trim_threshold: int) -> str | None:
    """Fix both thresholds; None when done, else why nothing was changed."""
    mallopt = _mallopt()
    if isinstance(mallopt, str):
        return mallopt
    if mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1 and mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1:
        return None
    return "mallopt refused"


def warm_allocator() -> str:
    """Put glibc malloc in the warm state; return the state in words (WARM_PREFIX when set)."""
    why = _set(MMAP_THRESHOLD, 2 * MMAP_THRESHOLD)
    if why is not None:
        return f"default ({why}, not changed)"
    return f"{WARM_PREFIX}glibc M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 64 MiB (per-call buffers reused from the heap)"


def cold_allocator() -> str | None:
    """Put glibc malloc in the cold state; the state in words, or None where it cannot be set.
    The caller puts it back with warm_allocator()."""
    if _set(COLD_MMAP_THRESHOLD, COLD_MMAP_THRESHOLD) is not None:
        return None
    return "cold: glibc M_MMAP_THRESHOLD 128 KiB, fixed (larger per-call buffers mapped afresh on every call)"
