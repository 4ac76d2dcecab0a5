"""Findings about the trace file itself: what it holds that no analysis reads, and the format it
was written in (issue 28, "traces that are not what they seem").

DEVICE_EVENTS_NOT_ANALYSED: device-side events (complete events on a device pid, or with a
"device" arg) of categories the loader does not read (trace/unread.py), named with their counts.
A CUPTI range-profiler trace holds only such events on the device (cuda_profiler_range); read as
if nothing ran there, it was called a CPU-only trace.
"""

from __future__ import annotations

from attnprof.analysis.attribution.devices import not_read
from attnprof.analysis.findings.codes import finding
from attnprof.analysis.findings.context import Context
from attnprof.analysis.records.result import Finding

__all__ = ["TRACE_RULES", "device_events_not_analysed"]

_RANGES = "cuda_profiler_range"


def device_events_not_analysed(ctx: Context) -> list[Finding]:
    unread = not_read(ctx.trace)
    if not unread:
        return []
    ev = {
        "events": sum(unread.values()),
        "categories": unread,
        # what a range profiler's events are, and how to get kernels: only where it wrote them
        "range_clause": "clause.profiler_range" if any(c.lower() == _RANGES for c in unread) else "",
    }
    # "only": no device op is read at all, so the device time is unknown, not zero
    return [finding("DEVICE_EVENTS_NOT_ANALYSED", ev, variant="" if ctx.links.gpu_rows.size else "only")]


TRACE_RULES = (device_events_not_analysed,)
