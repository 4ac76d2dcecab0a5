"""Why the device idles: one finding per dominant cause of idle time (attnprof.analysis.timeline.idle).

A cause is named when it holds at least _CAUSE_OF_IDLE of the region's idle time and
_CAUSE_OF_WINDOW of its window, on a region that idles at least _IDLE_PCT of the time and
_IDLE_MIN_US per instance. Each finding names the host events that held the most of that idle
time (their time inside the idle time, not their whole duration) and gives the advice that fits
the cause; the table CAUSE_FINDINGS says which code each cause gets (its severity is the
catalogue's: analysis/findings/codes.py; its words the catalogs', `finding.<CODE>`).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from attnprof.analysis.findings.codes import finding
from attnprof.analysis.findings.context import Context
from attnprof.analysis.records.result import Finding
from attnprof.analysis.timeline.idle import SLOW_LAUNCH_US, UNRECORDED_WAIT_US
from attnprof.analysis.timeline.intervals import Intervals, intersect, measure, subtract, union
from attnprof.analysis.timeline.nesting import innermost
from attnprof.trace.model import top_sums

__all__ = ["CAUSE_FINDINGS", "IDLE_CODES", "gpu_idle"]

# a cause must hold this share of the idle time, and of the window, for its finding
_CAUSE_OF_IDLE = 0.3
_CAUSE_OF_WINDOW = 0.1
_IDLE_PCT = 20.0  # idle share of the window below which idle is not reported
_IDLE_MIN_US = 50.0  # per instance

# cause -> (code, evidence key for the host events named). Each code's sentence is the
# catalogs' (report/i18n/*.po `finding.<CODE>`: what the host did and what to do), filled from
# the evidence: the lead (`idle_lead`), the cause's share, the host events (`names_clause`) and
# the clauses a cause says where they apply (`pre_clause`, `pageable_clause`, ...)
CAUSE_FINDINGS: dict[str, tuple[str, str]] = {
    "sync": ("GPU_IDLE_SYNC", "sync_calls_us"),
    "blocking_copy": ("GPU_IDLE_BLOCKING_COPY", "copy_calls_us"),
    "allocator": ("GPU_IDLE_ALLOCATOR", "allocator_calls_us"),
    "init": ("GPU_IDLE_INIT", "init_calls_us"),
    "slow_launch": ("GPU_IDLE_SLOW_LAUNCH", "slow_launch_calls_us"),
    "stream_wait": ("GPU_IDLE_STREAM_WAIT", "stream_wait_calls_us"),
    "unrecorded_wait": ("GPU_WAIT_UNRECORDED_WORK", "wait_calls_us"),
    "stream_wait_unrecorded": ("GPU_STREAM_WAIT_UNRECORDED", "waited_on_streams_us"),
    "launching": ("LAUNCH_BOUND", "launching_us"),
    "host_compute": ("GPU_IDLE_HOST_COMPUTE", "cpu_ops_us"),
    "data_loading": ("GPU_IDLE_DATA_LOADING", "data_loading_us"),
    "python": ("GPU_IDLE_PYTHON", "python_frames_us"),
}
IDLE_CODES = (*(code for code, *_ in CAUSE_FINDINGS.values()), "GPU_IDLE_UNRECORDED")


def _r(x: float) -> float:
    return round(float(x), 3)


def _idle_windows(ctx: Context, windows: list[tuple[float, float]]) -> Intervals:
    """The device's idle time inside the windows (the first 200 instances)."""
    w = union(np.array([a for a, _ in windows[:200]]), np.array([b for _, b in windows[:200]]))
    if not w[0].size:
        return w
    return subtract(w, ctx.host.busy, float(w[0][0]), float(w[1][-1]))


def _top_names(ctx: Context, cause: str, idle: Intervals, k: int = 5) -> dict[str, float]:
    """Idle time per host-event name among those that hold the cause, most first."""
    s, e, rows = ctx.host.named.get(cause, (np.zeros(0), np.zeros(0), np.zeros(0, np.int64)))
    if rows.size == 0 or not idle[0].size:
        return {}
    lo, hi = idle
    if cause == "python":
        # a frame is named by the parts no inner frame covers; only frames that overlap the idle
        # time matter (their enclosing frames overlap it too, so nesting is kept)
        i = np.searchsorted(lo, e, "left") - 1  # the last idle interval starting before e
        near = (i >= 0) & (hi[np.maximum(i, 0)] > s)
        s, e, rows = innermost(ctx.trace, rows[near])
    # idle time before t: cum[i] before interval i, plus the part of interval i before t
    cum = np.concatenate([[0.0], np.cumsum(hi - lo)])

    def before(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(lo, x, "right") - 1
        j = np.maximum(i, 0)
        return np.where(i >= 0, cum[j] + np.clip(x - lo[j], 0.0, hi[j] - lo[j]), 0.0)

    held = before(e) - before(s)
    t = ctx.trace
    m = np.flatnonzero(held > 0)
    if cause == "stream_wait_unrecorded":  # a cuda_sync record: named by the stream waited on
        recs = np.fromiter(t.sync_waits, np.int64, len(t.sync_waits))
        waited = np.array(list(t.sync_waits.values()), np.int64).reshape(-1, 2)[:, 0]
        by_row = np.argsort(recs, kind="stable")
        recs, waited = recs[by_row], waited[by_row]
        at = np.searchsorted(recs, rows[m]) if recs.size else np.zeros(m.size, np.int64)
        at = np.minimum(at, max(recs.size - 1, 0))
        found = recs[at] == rows[m] if recs.size else np.zeros(m.size, bool)
        keys = np.where(found, waited[at] if recs.size else -1, -1)
    else:
        keys = t.name[rows[m]].astype(np.int64)

    def label(i: int) -> str:
        return f"stream {i}" if cause == "stream_wait_unrecorded" else t.names[i]

    return {label(key): _r(total) for key, total in top_sums(keys, held[m], k)}


def gpu_idle(ctx: Context) -> list[Finding]:
    """Why the device idles inside the region: one finding per dominant cause (CAUSES,
    attnprof.analysis.timeline.idle), built from CAUSE_FINDINGS."""
    if ctx.links.gpu_rows.size == 0 or not ctx.region.instances:
        return []
    idle = ctx.region_stat.idle
    window = idle.window_us_per_instance
    idle_us = idle.idle_us_per_instance
    if window <= 0 or idle.idle_pct < _IDLE_PCT or idle_us < _IDLE_MIN_US:
        return []
    name = ctx.region_stat.name
    windows = [
        (inst.start, inst.start + d.window_us) for inst, d in zip(ctx.region.instances, ctx.idle, strict=True)
    ]
    if ctx.region.instances[0].row < 0 and ctx.host.busy[0].size:
        windows = [(float(ctx.host.busy[0][0]), float(ctx.host.busy[1][-1]))]
    idle_iv = _idle_windows(ctx, windows)
    before = idle.before_first_launch_us_per_instance
    base = {
        "region": name,
        **msgspec.structs.asdict(idle),
        # the part of the idle time before the instance's first launch (a step's data loading
        # and set-up), said where the cause is host work or nothing recorded
        "pre_clause": "clause.idle.before_first_launch" if before and before >= 0.1 * idle_us else "",
        "slow_launch_ms": SLOW_LAUNCH_US / 1000,
        "unrecorded_wait_us": UNRECORDED_WAIT_US,
    }
    out = []
    for cause, us in sorted(idle.host_during_idle_us_per_instance.items(), key=lambda kv: -kv[1]):
        if us < _CAUSE_OF_IDLE * idle_us or us < _CAUSE_OF_WINDOW * window:
            continue
        code, facts = _idle_cause(ctx, cause, idle_iv)
        lead = "clause.idle.lead"
        if cause in ("unrecorded_wait", "stream_wait_unrecorded"):  # not idling behind work the trace shows
            lead = "clause.idle.lead_unrecorded"
        ev = {**base, "cause": cause, "cause_us_per_instance": us, "cause_pct": 100 * us / idle_us}
        out.append(finding(code, {**ev, "idle_lead": lead, **facts}))
    return out


def _idle_cause(ctx: Context, cause: str, idle_iv: Intervals) -> tuple[str, dict[str, Any]]:
    """For one cause of idle time: the finding's code and the evidence that names it (with the
    clauses its sentence says)."""
    if cause not in CAUSE_FINDINGS:  # nothing recorded
        return (
            "GPU_IDLE_UNRECORDED",
            {
                "python_frames_recorded": ctx.host.has_python,
                # with Python frames recorded, the time is outside them
                "unrecorded_clause": "clause.idle.unrecorded_with_stack"
                if ctx.host.has_python
                else "clause.idle.unrecorded",
            },
        )
    code, key = CAUSE_FINDINGS[cause]
    names = _top_names(ctx, cause, idle_iv)
    facts: dict[str, Any] = {
        key: names,
        "host_names": list(names),
        "names_clause": "clause.idle.names" if names else "clause.idle.none_named",
    }
    if cause == "blocking_copy":
        # how the async ones were known to block: a copy named pageable, or the call's own timing
        facts["copies_by_timing"] = ctx.host.copies_by_timing
        facts["pageable_clause"] = ""
        if any("Async" in n or "WithStream" in n for n in names):
            facts["pageable_clause"] = (
                "clause.idle.waited_for_copy" if ctx.host.copies_by_timing else "clause.idle.pageable"
            )
    if cause == "data_loading":
        facts["known_by"], facts["data_loading_by"], facts["data_loading_by_us"] = _loading_rule(ctx, idle_iv)
    if cause in ("unrecorded_wait", "sync"):
        # whether the stream or event each call waited on was known (cuda_sync records), or the
        # whole device's recorded work was the reference
        facts["sync_records"] = ctx.host.sync_records
        facts["waited_on"] = (
            "clause.idle.waited_on_records" if ctx.host.sync_records else "clause.idle.waited_on_last"
        )
    if cause == "launching":
        r = ctx.region_stat
        facts |= {
            "runtime_calls": ctx.host.launch_calls,
            "cpu_time_us_per_instance": r.cpu_time_us_per_instance,
            "gpu_ops_per_instance": r.gpu_ops_per_instance,
        }
    return code, facts


def _loading_rule(ctx: Context, idle_iv: Intervals) -> tuple[str, str, dict[str, float]]:
    """Which rule found the data loading that holds the idle time: Python frames of
    torch/utils/data (provenance) first, range names where no such frame covers the time. Its
    clause, its name, and the idle time each rule covers (over the windows analysed)."""
    frames, by_name = ctx.host.loading_frames, ctx.host.loading_names
    if not idle_iv[0].size:
        return "clause.idle.known_by_names", "range_names", {}
    lo, hi = float(idle_iv[0][0]), float(idle_iv[1][-1])
    in_frames = intersect(idle_iv, frames)
    rest = subtract(idle_iv, in_frames, lo, hi)
    us = {
        "python_frames": round(measure(in_frames), 3),
        "range_names": round(measure(intersect(rest, by_name)), 3),
    }
    if us["python_frames"] >= us["range_names"]:
        return "clause.idle.known_by_frames", "python_frames", us
    return "clause.idle.known_by_names_only", "range_names", us
