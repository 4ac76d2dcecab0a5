"""Memory: what is free before a variant runs, and the peak one call reaches.

CPU peaks come from the profiler's allocation events (profile_memory=True: the CPU allocator's
running 'Total Allocated', which the exported trace shows as [memory] events); GPU peaks from torch.cuda.max_memory_allocated. Both are reported
above what was allocated just before the call, so inputs do not count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attnprof.units import fmt_bytes as format_bytes

__all__ = ["available_bytes", "cached_free_bytes", "cuda_peak_bytes", "format_bytes", "peak_rise"]


def available_bytes(device: str) -> int:
    """What a variant may allocate on `device`. On CUDA: what the driver reports free plus what
    PyTorch's caching allocator holds but does not use (memory_reserved - memory_allocated): the
    allocator reuses those blocks before it asks the driver for more, and mem_get_info counts
    them as taken, so after one large variant every later one would be refused."""
    if device.startswith("cuda"):
        import torch

        idx = torch.device(device).index or 0
        free, _total = torch.cuda.mem_get_info(idx)
        return int(free) + cached_free_bytes(device)
    import psutil

    return int(psutil.virtual_memory().available)


def cached_free_bytes(device: str) -> int:
    """Bytes PyTorch's CUDA caching allocator has reserved on `device` but not handed out; 0 on
    the CPU and before CUDA is initialised (nothing is cached then)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    if not torch.cuda.is_initialized():
        return 0
    return max(0, int(torch.cuda.memory_reserved(device)) - int(torch.cuda.memory_allocated(device)))


def cuda_peak_bytes(call: Callable[[], Any], device: str) -> int:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    call()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - base)


def peak_rise(totals: list[tuple[int, int]], ranges: list[tuple[int, int]]) -> int | None:
    """Largest rise of the allocator's running total inside any of `ranges` (start, end), over
    the total just before the range. `totals` holds (time, Total Allocated) samples, one per
    allocation or free, on the clock of `ranges`. None when there is no sample at all."""
    mem = sorted(totals)
    if not mem:
        return None
    peak = 0
    for start, end in ranges:
        before = 0
        top = None
        for ts, total in mem:
            if ts < start:
                before = total
            elif ts <= end:
                top = total if top is None else max(top, total)
            else:
                break
        if top is not None:
            peak = max(peak, top - before)
    return peak
