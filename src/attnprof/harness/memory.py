"""Memory: what is free before a variant runs, and the peak one call reaches.

CPU peaks come from the profiler's [memory] events (profile_memory=True: the CPU allocator's
running 'Total Allocated'); GPU peaks from torch.cuda.max_memory_allocated. Both are reported
above what was allocated just before the call, so inputs do not count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attnprof.units import fmt_bytes as format_bytes

__all__ = ["available_bytes", "cuda_peak_bytes", "format_bytes", "peak_from_trace_events"]


def available_bytes(device: str) -> int:
    if device.startswith("cuda"):
        import torch

        idx = torch.device(device).index or 0
        free, _total = torch.cuda.mem_get_info(idx)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def cuda_peak_bytes(call: Callable[[], Any], device: str) -> int:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    call()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - base)


def peak_from_trace_events(events: list[dict[str, Any]], ranges: list[tuple[float, float]]) -> int | None:
    """Largest rise of 'Total Allocated' inside any of `ranges` (ts, ts+dur), over the value
    just before the range. None when the trace holds no CPU memory events."""
    mem = sorted(
        (e["ts"], e["args"].get("Total Allocated", 0))
        for e in events
        if e.get("name") == "[memory]"
        and isinstance(e.get("args"), dict)
        and e["args"].get("Device Type", 0) == 0
    )
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
