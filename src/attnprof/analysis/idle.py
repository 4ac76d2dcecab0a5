"""Device idle time, and what the host was doing while the device idled.

For a window (a region instance from its start to the later of its end and its last owned device
op's end; or, for the whole trace, the first to the last device op):

- busy: the union of every device op's interval in the window (all streams, all ops, not only the
  region's: the device is busy when anything runs on it), so that overlapping streams count once;
  device-side waits (MTIA event_wait, category "sync") are not busy;
- idle: window - busy;
- the host during idle, each idle microsecond given to the first of these that holds it, on any
  host thread of the process:
  1. sync: inside a synchronizing runtime call (cudaDeviceSynchronize, cudaStreamSynchronize,
     cudaEventSynchronize, cudaMemcpy without Async: a blocking copy, hip* and MTIA equivalents);
  2. host compute: inside a CPU op of 20 us or more that launches nothing and waits on nothing
     (other runtime calls such as cudaMalloc are host work) and is not inside one that does:
     preprocessing, aten ops on CPU tensors such as aten::randn;
  3. launching: inside a launch call, a CPU op that makes 1 to 4 launch or sync calls (an aten
     op and its launches; an op making more is a container: a module, an optimizer step, a legacy
     ProfilerStep Operator, whose own time between children is not launching), or a short CPU op
     that calls nothing (views, empty: the dispatch cost of issuing work);
  4. nothing recorded: none of the above (Python or data loading the profiler did not record,
     or the time before the first launch).

Interval sets are sorted, disjoint (start, end) arrays; every operation is a sort and a cumsum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from attnprof.analysis.devices import is_launch
from attnprof.analysis.intervals import Intervals, union
from attnprof.analysis.intervals import clip as _clip
from attnprof.analysis.intervals import intersect as _intersect
from attnprof.analysis.intervals import measure as _measure
from attnprof.analysis.intervals import subtract as _subtract
from attnprof.analysis.links import Links
from attnprof.analysis.result import InstanceIdle
from attnprof.trace.model import Kind, Trace, unique

__all__ = [
    "CAUSES",
    "HOST_COMPUTE_MIN_US",
    "HostActivity",
    "IdleBreakdown",
    "host_activity",
    "idle_breakdown",
    "union",
]

CAUSES = ("sync", "host_compute", "launching", "nothing_recorded")
HOST_COMPUTE_MIN_US = 20.0
MAX_CALLS_PER_LAUNCHING_OP = 4
_SYNC = re.compile(
    r"(?i)synchronize|^cudaMemcpy$|^cudaMemcpy2D$|^cuMemcpy(DtoH|HtoD)?(_v2)?$|^hipMemcpy$|"
    r"^cudaStreamWaitEvent_blocking|^hipMemcpyWithStream$"
)


@dataclass
class HostActivity:
    """Interval sets of the host's activity, over every host thread."""

    sync: Intervals
    compute: Intervals  # CPU ops that launch nothing and wait on nothing
    launching: Intervals  # runtime calls and CPU ops that launch device work
    busy: Intervals  # the device's busy time
    sync_rows: npt.NDArray[np.int64]  # the synchronizing runtime calls
    compute_rows: npt.NDArray[np.int64]  # the CPU ops counted as host compute
    launch_rows: npt.NDArray[np.int64]  # runtime calls that are not synchronizing


@dataclass
class IdleBreakdown:
    window_us: float
    busy_us: float
    idle_us: float
    causes: dict[str, float]  # CAUSES -> us of idle time
    # idle time from the window's start to the first launch of the instance's own device work
    # (a step's data loading and set-up); None when the instance launched nothing
    before_first_launch_us: float | None = None

    def record(self) -> InstanceIdle:
        """As the analysis reports it (rounded)."""
        return InstanceIdle(
            window_us=round(self.window_us, 3),
            busy_us=round(self.busy_us, 3),
            idle_us=round(self.idle_us, 3),
            idle_pct=round(100.0 * self.idle_us / self.window_us, 2) if self.window_us > 0 else 0.0,
            host_during_idle_us={k: round(v, 3) for k, v in self.causes.items()},
            before_first_launch_us=(
                round(self.before_first_launch_us, 3) if self.before_first_launch_us is not None else None
            ),
        )


def host_activity(
    trace: Trace, links: Links, busy_mask: np.ndarray, busy_end: np.ndarray | None = None
) -> HostActivity:
    """busy_mask: per GPU op (Links.gpu_rows), whether it counts as device busy time; busy_end:
    per GPU op, the end busy time uses (attnprof.analysis.sanitize clips overruns), else the
    recorded end."""
    g = links.gpu_rows[busy_mask]
    ends = busy_end[busy_mask] if busy_end is not None else trace.ts[g] + trace.dur[g]
    busy = union(trace.ts[g], ends)
    rt = trace.rows(Kind.RUNTIME, Kind.DRIVER)
    names = trace.names
    rt_name = trace.name[rt]
    uniq = unique(rt_name)
    sync_ids = [int(i) for i in uniq.tolist() if _SYNC.search(names[int(i)])]
    is_sync = np.isin(rt_name, sync_ids)
    sync_rows = rt[is_sync]
    sync = union(trace.ts[sync_rows], trace.ts[sync_rows] + trace.dur[sync_rows])
    # launches: the calls that put work on the device (kernels, graphs, async copies and sets);
    # other runtime calls (cudaMalloc, cudaEventQuery, attribute queries) are host work
    launch_ids = [int(i) for i in uniq.tolist() if is_launch(names[int(i)])]
    launch_rows = rt[np.isin(rt_name, launch_ids) & ~is_sync]
    # CPU ops: how many launches or syncs each makes on its thread
    ops = trace.own(trace.rows(Kind.CPU_OP))
    calls = np.zeros(ops.size, np.int64)
    callers_rt = np.concatenate([launch_rows, sync_rows])
    o_lane, r_lane = trace.lane[ops], trace.lane[callers_rt]
    for lane in sorted(set(unique(o_lane).tolist()) & set(unique(r_lane).tolist())):
        sel = np.flatnonzero(o_lane == lane)
        t = np.sort(trace.ts[callers_rt[r_lane == lane]])
        a = np.searchsorted(t, trace.ts[ops[sel]], "left")
        b = np.searchsorted(t, trace.ts[ops[sel]] + trace.dur[ops[sel]], "right")
        calls[sel] = b - a
    contains_call = calls > 0
    # a short op that calls nothing (a view, an empty) is the dispatch cost of issuing work, not
    # host computation: only ops of HOST_COMPUTE_MIN_US or more count as host compute
    big = ~contains_call & (trace.dur[ops] >= HOST_COMPUTE_MIN_US)
    # an op that makes many runtime calls is a container (a module, a legacy ProfilerStep
    # Operator, an optimizer step): its own time between children is not launching
    container = calls > MAX_CALLS_PER_LAUNCHING_OP
    quiet, loud = ops[big], ops[~big & ~container]
    callers = ops[contains_call & ~container]
    loud_iv = union(trace.ts[callers], trace.ts[callers] + trace.dur[callers])
    compute = union(trace.ts[quiet], trace.ts[quiet] + trace.dur[quiet])
    if compute[0].size and loud_iv[0].size:  # a quiet op inside a launching op is part of it
        lo, hi = float(min(compute[0][0], loud_iv[0][0])), float(max(compute[1][-1], loud_iv[1][-1]))
        compute = _subtract(compute, loud_iv, lo, hi)
    launching = union(
        np.concatenate([trace.ts[launch_rows], trace.ts[loud]]),
        np.concatenate([trace.ts[launch_rows] + trace.dur[launch_rows], trace.ts[loud] + trace.dur[loud]]),
    )
    return HostActivity(sync, compute, launching, busy, sync_rows, quiet, launch_rows)


def idle_breakdown(
    host: HostActivity, lo: float, hi: float, first_launch: float | None = None
) -> IdleBreakdown:
    window = max(hi - lo, 0.0)
    busy = _clip(host.busy, lo, hi)
    idle = _subtract((np.array([lo]), np.array([hi])), busy, lo, hi) if window > 0 else busy
    causes: dict[str, float] = {}
    rest = idle
    for key, iv in (("sync", host.sync), ("host_compute", host.compute), ("launching", host.launching)):
        part = _intersect(rest, _clip(iv, lo, hi))
        causes[key] = _measure(part)
        rest = _subtract(rest, part, lo, hi)
    causes["nothing_recorded"] = _measure(rest)
    before = None
    if first_launch is not None:
        before = _measure(_clip(idle, lo, min(max(first_launch, lo), hi)))
    return IdleBreakdown(window, _measure(busy), _measure(idle), causes, before)
