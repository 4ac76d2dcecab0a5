"""Findings about the trace file itself: what it holds that no analysis reads, and the format it
was written in (issue 28, "traces that are not what they seem").

DEVICE_EVENTS_NOT_ANALYSED: device-side events (complete events on a device pid, or with a
"device" arg) of categories the loader does not read (trace/unread.py), named with their counts.
A CUPTI range-profiler trace holds only such events on the device (cuda_profiler_range); read as
if nothing ran there, it was called a CPU-only trace.

LEGACY_TRACE_FORMAT: complete events without a category, read as CPU ops (trace/columns.py), as
PyTorch 1.x's autograd-profiler export writes its ops: that format has no launches, kernels,
correlation ids or shapes, so what the analysis of it can say is said to be CPU ops only. Its
"CUDA functions" ranges (an op's CUDA-event timing, not a kernel) are counted, not read.
"""

from __future__ import annotations

from attnprof.analysis.attribution.devices import not_read
from attnprof.analysis.findings.codes import finding
from attnprof.analysis.findings.context import Context
from attnprof.analysis.records.result import Finding

__all__ = ["TRACE_RULES", "device_events_not_analysed", "legacy_trace_format"]

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


def legacy_trace_format(ctx: Context) -> list[Finding]:
    ops = int(ctx.trace.metadata.get("uncategorised_ops", 0))
    if not ops:
        return []
    ranges = sum(u.device_side for u in ctx.trace.unread if u.category == "")
    ev = {"cpu_ops": ops, "device_ranges": ranges}
    return [finding("LEGACY_TRACE_FORMAT", ev, variant="ranges" if ranges else "")]


TRACE_RULES = (device_events_not_analysed, legacy_trace_format)
