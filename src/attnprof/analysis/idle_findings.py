"""Why the device idles: one finding per dominant cause of idle time (attnprof.analysis.idle).

A cause is named when it holds at least _CAUSE_OF_IDLE of the region's idle time and
_CAUSE_OF_WINDOW of its window, on a region that idles at least _IDLE_PCT of the time and
_IDLE_MIN_US per instance. Each finding names the host events that held the most of that idle
time (their time inside the idle time, not their whole duration) and gives the advice that fits
the cause; the table CAUSE_FINDINGS says which code and words each cause gets (its severity is the
catalogue's: analysis/codes.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import numpy as np

from attnprof.analysis.codes import finding
from attnprof.analysis.context import Context
from attnprof.analysis.idle import SLOW_LAUNCH_US, UNRECORDED_WAIT_US, innermost
from attnprof.analysis.intervals import Intervals, intersect, measure, subtract, union
from attnprof.analysis.result import Finding
from attnprof.units import fmt_us

__all__ = ["CAUSE_FINDINGS", "IDLE_CODES", "gpu_idle"]

# a cause must hold this share of the idle time, and of the window, for its finding
_CAUSE_OF_IDLE = 0.3
_CAUSE_OF_WINDOW = 0.1
_IDLE_PCT = 20.0  # idle share of the window below which idle is not reported
_IDLE_MIN_US = 50.0  # per instance

# cause -> (code, what the host did and what to do, evidence key for the host events
# named). {names}: the host events, most idle time first; {pre}: the part of the idle time
# before the instance's first launch, where it matters
CAUSE_FINDINGS: dict[str, tuple[str, str, str]] = {
    "sync": (
        "GPU_IDLE_SYNC",
        "the host waits in synchronizing calls ({names}), so no new work is queued. Remove the "
        "synchronisation from the loop: .item(), .cpu(), .tolist(), printing or logging tensor "
        "values, torch.cuda.synchronize(), polling events",
        "sync_calls_us",
    ),
    "blocking_copy": (
        "GPU_IDLE_BLOCKING_COPY",
        "the host is inside blocking copies ({names}){pageable}: such a copy returns only once the "
        "work queued before it and the copy itself are done, so nothing new is queued meanwhile. "
        "Copy into pinned memory with non_blocking=True (a pin_memory() buffer) and read the "
        "values later, or keep them on the device",
        "copy_calls_us",
    ),
    "allocator": (
        "GPU_IDLE_ALLOCATOR",
        "the host is inside allocator calls ({names}): the caching allocator is growing or "
        "releasing device or pinned memory, and cudaFree waits for the device. Warm up before "
        "profiling so the cache holds what a step needs, keep shapes stable, avoid "
        "torch.cuda.empty_cache() in the loop, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "allocator_calls_us",
    ),
    "init": (
        "GPU_IDLE_INIT",
        "the host is inside one-time set-up calls ({names}: stream, event or context creation, "
        "module loading, attribute queries). Profile after a warm-up "
        "(torch.profiler.schedule(wait=1, warmup=1, active=...)); in a steady loop they do not recur",
        "init_calls_us",
    ),
    "slow_launch": (
        "GPU_IDLE_SLOW_LAUNCH",
        f"the host is inside launch calls of {SLOW_LAUNCH_US / 1000:g} ms or more ({{names}}). A "
        "launch that slow is not launch overhead: it is the first launch of a kernel loading its "
        "module (lazy module loading), JIT compilation or a launch blocked on a full queue. Warm "
        "up before profiling; fewer kernels would not help",
        "slow_launch_calls_us",
    ),
    "stream_wait": (
        "GPU_IDLE_STREAM_WAIT",
        "the host is inside calls that make one stream wait on another stream's event ({names}): "
        "the host is not blocked by them; a long one means the driver's queue is full",
        "stream_wait_calls_us",
    ),
    "unrecorded_wait": (
        "GPU_WAIT_UNRECORDED_WORK",
        f"the host waits in synchronizing calls ({{names}}) that returned {UNRECORDED_WAIT_US:g} µs "
        "or more after {ref} had ended: they waited on work the trace does "
        "not contain (another process, a stream or device the profiler did not capture, work "
        "queued before profiling began), so this is not idle time the trace explains. Profile "
        "every stream and device the program uses to see what it waited on",
        "wait_calls_us",
    ),
    "stream_wait_unrecorded": (
        "GPU_STREAM_WAIT_UNRECORDED",
        "a stream is held by a wait on another stream's event (cudaStreamWaitEvent, by the trace's "
        "cuda_sync records; waited-on streams: {names}) although its next op was queued and every "
        f"recorded op it depends on had ended {UNRECORDED_WAIT_US:g} µs or more before: it waited "
        "on work the trace does not contain (work queued before profiling began, or on a stream "
        "or device the profiler did not capture), so this is not idle time the trace explains. "
        "Profile every stream and device the program uses, from before that work is queued",
        "waited_on_streams_us",
    ),
    "launching": (
        "LAUNCH_BOUND",
        "the host is issuing work (CPU ops that launch kernels and the launch calls themselves: "
        "{names}) while the device has nothing queued: the device runs the {ops:g} device ops per "
        "instance faster than the host launches them. Fewer, larger kernels help: torch.compile, "
        "CUDA graphs (torch.compile(mode='reduce-overhead')), fused ops, larger batches",
        "launching_us",
    ),
    "host_compute": (
        "GPU_IDLE_HOST_COMPUTE",
        "the host runs CPU ops (or runtime calls) that launch nothing ({names}){pre}. The device "
        "waits for host computation, not for launches: create tensors on the device "
        "(torch.randn(..., device='cuda')), move preprocessing to the device or to DataLoader "
        "workers, and overlap it with device work (prefetch, pin_memory)",
        "cpu_ops_us",
    ),
    "data_loading": (
        "GPU_IDLE_DATA_LOADING",
        "the host is loading data ({names}; known by {known}){pre}. Load in DataLoader "
        "worker processes (num_workers > 0, pin_memory=True, persistent_workers=True) and prefetch, "
        "so that the next batch is ready when a step ends",
        "data_loading_us",
    ),
    "python": (
        "GPU_IDLE_PYTHON",
        "the host runs Python code that makes no CPU op or runtime call (innermost frames: "
        "{names}){pre}: the device waits for that code (preprocessing, tokenisation, logging, "
        "control flow). Move it off the step's critical path (DataLoader workers, a background "
        "thread, the device) or take Python out of the step (torch.compile, CUDA graphs)",
        "python_frames_us",
    ),
}
_UNRECORDED_WITH_STACK = (
    "no host event covers it: no runtime call, CPU op or Python frame{pre}. The trace has Python "
    "frames (with_stack=True), so this is time outside them: the interpreter between frames, "
    "another process or thread the profiler did not record, or the time before the first launch"
)
_UNRECORDED = (
    "nothing is recorded on the host (Python code, data loading or waits the profiler does not "
    "trace, or the time before the first launch){pre}. with_stack=True or a Python sampling "
    "profiler shows what runs there"
)
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
    tot: Counter[str] = Counter()
    m = np.flatnonzero(held > 0)
    for r, v in zip(rows[m].tolist(), held[m].tolist(), strict=True):
        if cause == "stream_wait_unrecorded":  # a cuda_sync record: named by the stream waited on
            tot[f"stream {t.sync_waits.get(r, (-1, -1))[0]}"] += v
        else:
            tot[t.names[int(t.name[r])]] += v
    return {n: _r(v) for n, v in tot.most_common(k)}


def gpu_idle(ctx: Context) -> list[Finding]:
    """Why the device idles inside the region: one finding per dominant cause (CAUSES,
    attnprof.analysis.idle), built from CAUSE_FINDINGS."""
    if ctx.links.gpu_rows.size == 0 or not ctx.region.instances:
        return []
    idle = ctx.region_stat.idle
    window = idle.window_us_per_instance
    idle_us = idle.idle_us_per_instance
    if window <= 0 or idle.idle_pct < _IDLE_PCT or idle_us < _IDLE_MIN_US:
        return []
    name = ctx.region_stat.name
    head = (
        f"{name}: the device idles {idle.idle_pct:.0f}% of the time ({fmt_us(idle_us)} of {fmt_us(window)} per "
        f"instance, busy = union of device ops)"
    )
    windows = [
        (inst.start, inst.start + d.window_us) for inst, d in zip(ctx.region.instances, ctx.idle, strict=True)
    ]
    if ctx.region.instances[0].row < 0 and ctx.host.busy[0].size:
        windows = [(float(ctx.host.busy[0][0]), float(ctx.host.busy[1][-1]))]
    idle_iv = _idle_windows(ctx, windows)
    base = {"region": name, **msgspec.structs.asdict(idle)}
    before = idle.before_first_launch_us_per_instance
    # the part of the idle time before the instance's first launch (a step's data loading and
    # set-up), said where the cause is host work or nothing recorded
    pre = (
        f" ({fmt_us(before)} per instance of the idle time is before the first launch)"
        if before and before >= 0.1 * idle_us
        else ""
    )
    out = []
    for cause, us in sorted(idle.host_during_idle_us_per_instance.items(), key=lambda kv: -kv[1]):
        if us < _CAUSE_OF_IDLE * idle_us or us < _CAUSE_OF_WINDOW * window:
            continue
        share = f"{100 * us / idle_us:.0f}% of the idle time ({fmt_us(us)} per instance)"
        code, what, facts = _idle_cause(ctx, cause, idle_iv, pre)
        lead = head
        if cause in ("unrecorded_wait", "stream_wait_unrecorded"):  # not idling behind work the trace shows
            lead = (
                f"{name}: of the device's idle time ({idle.idle_pct:.0f}% of {fmt_us(window)} per instance)"
            )
        out.append(
            finding(
                code,
                f"{lead}; {share} {what}",
                {**base, "cause": cause, "cause_us_per_instance": us, **facts},
            )
        )
    return out


def _idle_cause(ctx: Context, cause: str, idle_iv: Intervals, pre: str) -> tuple[str, str, dict[str, Any]]:
    """For one cause of idle time: the finding's code, what the host did and what to
    do about it, and the evidence that names it."""
    if cause not in CAUSE_FINDINGS:  # nothing recorded
        text = _UNRECORDED_WITH_STACK if ctx.host.has_python else _UNRECORDED
        return (
            "GPU_IDLE_UNRECORDED",
            text.format(pre=pre),
            {"python_frames_recorded": ctx.host.has_python},
        )
    code, what, key = CAUSE_FINDINGS[cause]
    names = _top_names(ctx, cause, idle_iv)
    facts: dict[str, Any] = {key: names}
    pageable = ""
    if cause == "blocking_copy" and any("Async" in n or "WithStream" in n for n in names):
        pageable = "; an async copy to or from pageable host memory blocks like a synchronous one"
    known = ""
    if cause == "data_loading":
        known, facts["data_loading_by"], facts["data_loading_by_us"] = _loading_rule(ctx, idle_iv)
    if cause in ("unrecorded_wait", "sync"):
        # whether the stream or event each call waited on was known (cuda_sync records), or the
        # whole device's recorded work was the reference
        facts["sync_records"] = ctx.host.sync_records
    if cause == "launching":
        r = ctx.region_stat
        facts |= {
            "runtime_calls": int(ctx.host.launch_rows.size),
            "cpu_time_us_per_instance": r.cpu_time_us_per_instance,
        }
    ref = "the last recorded device op"
    if ctx.host.sync_records:
        ref = (
            "the recorded work they waited on (of the stream or event the trace's cuda_sync record "
            "names for each call, else of any stream)"
        )
    text = what.format(
        known=known,
        ref=ref,
        names=", ".join(names) or "none named",
        pre=pre,
        pageable=pageable,
        ops=ctx.region_stat.gpu_ops_per_instance,
    )
    return code, text, facts


def _loading_rule(ctx: Context, idle_iv: Intervals) -> tuple[str, str, dict[str, float]]:
    """Which rule found the data loading that holds the idle time: Python frames of
    torch/utils/data (provenance) first, range names where no such frame covers the time. Its
    words, its name, and the idle time each rule covers (over the windows analysed)."""
    frames, by_name = ctx.host.loading_frames, ctx.host.loading_names
    if not idle_iv[0].size:
        return "their range names", "range_names", {}
    lo, hi = float(idle_iv[0][0]), float(idle_iv[1][-1])
    in_frames = intersect(idle_iv, frames)
    rest = subtract(idle_iv, in_frames, lo, hi)
    us = {
        "python_frames": round(measure(in_frames), 3),
        "range_names": round(measure(intersect(rest, by_name)), 3),
    }
    if us["python_frames"] >= us["range_names"]:
        return "their Python frames in torch/utils/data", "python_frames", us
    return (
        "their range names only (no Python frame of torch/utils/data covers that time)",
        "range_names",
        us,
    )
