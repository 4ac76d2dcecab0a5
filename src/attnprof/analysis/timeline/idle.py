"""Device idle time, and what the host was doing while the device idled.

For a window (a region instance from its start to the later of its end and its last owned device
op's end; or, for the whole trace, the first to the last device op):

- busy: the union of every device op's interval in the window (all streams, all ops, not only the
  region's: the device is busy when anything runs on it), so that overlapping streams count once;
  device-side waits (MTIA event_wait, category "sync") are not busy;
- idle: window - busy;
- the host during idle, each idle microsecond given to the first of these that holds it, on any
  host thread of the process (first of all, a stream held by a wait on work the trace does not
  contain, by the device's cuda_sync records: attnprof.analysis.timeline.stream_waits):
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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.devices import is_launch
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.records.result import InstanceIdle
from attnprof.analysis.timeline.intervals import F64, Intervals, measure_within, union, union_sorted
from attnprof.analysis.timeline.intervals import clip as _clip
from attnprof.analysis.timeline.intervals import intersect as _intersect
from attnprof.analysis.timeline.intervals import subtract as _subtract
from attnprof.analysis.timeline.runtime_calls import RUNTIME_KINDS, runtime_kind
from attnprof.analysis.timeline.stream_waits import stream_waits
from attnprof.trace.model import Kind, Trace, unique

__all__ = [
    "CAUSES",
    "HOST_COMPUTE_MIN_US",
    "SLOW_LAUNCH_US",
    "UNRECORDED_WAIT_US",
    "HostActivity",
    "IdleBreakdown",
    "host_activity",
    "idle_breakdowns",
    "union",
]

# the causes idle time is given to, in the order of the JSON keys (host_during_idle_us)
CAUSES = (
    "sync",
    "blocking_copy",
    "allocator",
    "init",
    "slow_launch",
    "stream_wait",
    "unrecorded_wait",
    "stream_wait_unrecorded",
    "launching",
    "host_compute",
    "data_loading",
    "python",
    "nothing_recorded",
)
HOST_COMPUTE_MIN_US = 20.0
MAX_CALLS_PER_LAUNCHING_OP = 4
SLOW_LAUNCH_US = 1000.0  # a launch call this long is not launch overhead (a first launch, JIT)
# a synchronizing call that returns this long after the last recorded device op ended waited
# on work the trace does not contain (a sync returns microseconds after its work is done)
UNRECORDED_WAIT_US = 100.0
# where data loading is recorded: first a Python frame in torch's data package (a DataLoader's
# __next__, its fetcher and collate: with_stack=True), then, where no such frame covers the time,
# a host range whose name says so (a DataLoader's __next__ range, a data_loader record_function)
_TORCH_DATA = re.compile(r"torch[/\\]utils[/\\]data[/\\]")
_DATA_LOADING = re.compile(r"(?i)dataloader|data_loader|_DataLoaderIter|data loading")
_PAGEABLE = re.compile(r"(?i)pageable")
_INT32_ROWS = 2**31 - 1  # the most events for which row indices are int32 (_row_type)
# the runtime-call kinds as small integer codes: an object array of their names cost 8 bytes a
# call and a string comparison per call in every mask over a trace's runtime calls
_RT_KINDS = ("other", *(k for k, _, _ in RUNTIME_KINDS), "slow_launch", "unrecorded_wait")
_RT = {k: i for i, k in enumerate(_RT_KINDS)}
# CPU ops are classified in chunks of this many: the per-op temporaries (times, binary
# searches) are this size, not the trace's
_CHUNK = 1 << 16
# row indices as _row_type gives them (int32, or int64 for a trace of 2**31 events or more)
Rows = npt.NDArray[np.signedinteger[Any]]
Named = tuple[F64, F64, Rows]


@dataclass
class HostActivity:
    """Interval sets of the host's activity, over every host thread, by cause.

    priority: (cause, intervals) in the order idle time is given out: the innermost host event
    first (runtime calls, then CPU ops, then Python frames), so a cause may come twice (host
    compute: runtime calls no rule names, then CPU ops). named: per cause, the host events that
    held it as (start, end, row) arrays, to name them (Python frames whole: the finding cuts them
    into the parts no inner frame covers with innermost(), only when it names them)."""

    priority: list[tuple[str, Intervals]]
    named: Mapping[str, Named]
    busy: Intervals  # the device's busy time
    launch_calls: int  # runtime calls that put work on the device
    has_python: bool  # the trace recorded Python frames (with_stack=True)
    # the trace has cuda_sync records (which stream or event each wait was on)
    sync_records: bool = False
    # per waited-on stream ("stream N"), the time a stream was held waiting on its unrecorded work
    held_by_stream: dict[str, float] = field(default_factory=dict)
    # data loading as each rule found it: Python frames in torch/utils/data, and ranges named so
    loading_frames: Intervals = field(default_factory=lambda: (np.zeros(0), np.zeros(0)))
    loading_names: Intervals = field(default_factory=lambda: (np.zeros(0), np.zeros(0)))
    # async copy calls found blocking by their own timing (returned once their copy had ended),
    # not by a copy name that says pageable memory
    copies_by_timing: int = 0


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


def _row_type(trace: Trace) -> type[np.signedinteger[Any]]:
    """int32 for row indices where every row fits (any trace under 2**31 events): the rows this
    stage keeps for the rest of the analysis (the host events by cause) take half the memory."""
    return np.int32 if trace.n_events <= _INT32_ROWS else np.int64


def _rows_of(trace: Trace, *kinds: Kind) -> Rows:
    """trace.rows(*kinds) in _row_type."""
    return trace.rows(*kinds).astype(_row_type(trace), copy=False)


def _rows_iv(trace: Trace, rows: np.ndarray) -> Intervals:
    """union() of the rows' intervals. The ends are read in start order rather than sorted after
    (one n-sized float array fewer at a time; this is the stage's peak on a large trace), and
    rows already in time order (runtime calls) skip the sort: a stable sort leaves them as they are."""
    if rows.size == 0:
        return np.zeros(0), np.zeros(0)
    s = trace.ts[rows]
    if not bool((s[1:] >= s[:-1]).all()):
        o = np.argsort(s, kind="stable")
        del s  # read again in order below: no sorted copy beside the unsorted one
        rows = rows[o]
        del o
        s = trace.ts[rows]
    e = trace.ts[rows]
    e += trace.dur[rows]  # the same sum as ts + dur, in place
    del rows
    return union_sorted(s, e)


def _named(trace: Trace, rows: Rows) -> Named:
    return trace.ts[rows].astype(np.float64), (trace.ts[rows] + trace.dur[rows]).astype(np.float64), rows


class _NamedRows(Mapping[str, Named]):
    """cause -> (start, end, row) of the host events that held it, the times read from the trace
    when a cause is read: the rows are kept, not a copy of every op's start and end for the rest
    of the analysis (24 bytes per op instead of 8; about 10% of the analysis's peak memory on the
    302 MB ResNet trace). Given tuples (times that are not the rows' own) are kept as they are."""

    def __init__(self, trace: Trace, given: dict[str, Named]) -> None:
        self.trace = trace
        self.held: dict[str, Named | np.ndarray] = dict(given)

    def __setitem__(self, cause: str, rows: np.ndarray) -> None:
        self.held[cause] = rows

    def __getitem__(self, cause: str) -> Named:
        v = self.held[cause]
        return v if isinstance(v, tuple) else _named(self.trace, v)

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)


def _unrecorded_waits(trace: Trace, rows: np.ndarray, busy: Intervals) -> np.ndarray:
    """Per synchronizing call, whether it returned UNRECORDED_WAIT_US or more after the device
    last had anything recorded running (since the call began): what it waited on is not in the
    trace (another process, a stream or device not captured, work queued before the profiler
    started)."""
    if rows.size == 0:
        return np.zeros(0, bool)
    start = trace.ts[rows]
    end = start + trace.dur[rows]
    if busy[0].size == 0:
        return trace.dur[rows] >= UNRECORDED_WAIT_US
    # the last busy interval that starts before the call returns, and where it ends
    i = np.searchsorted(busy[0], end, "left") - 1
    last_end = np.where(i >= 0, np.minimum(busy[1][np.maximum(i, 0)], end), -np.inf)
    return end - np.maximum(last_end, start) >= UNRECORDED_WAIT_US


def host_activity(
    trace: Trace, links: Links, busy_mask: np.ndarray, busy_end: np.ndarray | None = None
) -> HostActivity:
    """busy_mask: per GPU op (Links.gpu_rows), whether it counts as device busy time; busy_end:
    per GPU op, the end busy time uses (attnprof.analysis.timeline.sanitize clips overruns), else the
    recorded end."""
    ends_all = busy_end if busy_end is not None else trace.ts[links.gpu_rows] + trace.dur[links.gpu_rows]
    busy = union(trace.ts[links.gpu_rows[busy_mask]], ends_all[busy_mask])
    rt = _rows_of(trace, Kind.RUNTIME, Kind.DRIVER)
    names = trace.names
    rt_name = trace.name[rt]
    # one rule lookup per distinct name, spread to the calls through a table by name id
    code_of = np.zeros(len(names), np.int8)
    for i in np.flatnonzero(np.bincount(rt_name, minlength=len(names))).tolist():
        code_of[i] = _RT[runtime_kind(names[i])]
    rt_kind = code_of[rt_name]
    del code_of
    # a long launch call is a first launch (module loading, JIT), not launch overhead; a long
    # query on the launch path (occupancy, capture state) is first-call set-up
    slow = np.flatnonzero(rt_kind == _RT["launching"])
    slow = slow[trace.dur[rt[slow]] >= SLOW_LAUNCH_US]
    puts = np.array([is_launch(names[int(i)]) for i in rt_name[slow].tolist()], bool)
    del rt_name
    rt_kind[slow[puts]] = _RT["slow_launch"]
    rt_kind[slow[~puts]] = _RT["init"]
    # an async copy call that blocked the host like cudaMemcpy: by the name of the copy it
    # launched ("Memcpy DtoH (Device -> Pageable)": pageable memory), or by its own timing, where
    # the name does not say the memory kind: a call of UNRECORDED_WAIT_US or more that returned
    # only once the copy it launched had ended waited for that copy (an async call to pinned
    # memory returns before its copy runs)
    cpy = np.flatnonzero((trace.kind[links.gpu_rows] == Kind.MEMCPY) & (links.launch >= 0))
    copies_by_timing = 0
    if cpy.size:
        cpy_names = trace.name[links.gpu_rows[cpy]]
        pageable = [int(i) for i in unique(cpy_names).tolist() if _PAGEABLE.search(names[int(i)])]
        named_pageable = np.isin(cpy_names, pageable)
        call = links.launch[cpy]
        call_end = trace.ts[call] + trace.dur[call]
        returned_after = (trace.dur[call] >= UNRECORDED_WAIT_US) & (call_end >= ends_all[cpy])
        for rule, sel in (("name", named_pageable), ("timing", returned_after & ~named_pageable)):
            blocking = call[sel]
            # the launches' places among the runtime calls (rt ascends): no n-sized membership test
            at = np.minimum(np.searchsorted(rt, blocking), max(rt.size - 1, 0))
            at = at[rt[at] == blocking] if rt.size else at[:0]
            at = at[(rt_kind[at] == _RT["launching"]) | (rt_kind[at] == _RT["slow_launch"])]
            rt_kind[at] = _RT["blocking_copy"]
            if rule == "timing":
                copies_by_timing = int(at.size)
    sync_at = np.flatnonzero(rt_kind == _RT["sync"])
    sync_rows = rt[sync_at]
    waits = _unrecorded_waits(trace, sync_rows, busy)
    # where a cuda_sync record says which stream or event a call waited on, that stream's
    # recorded work decides, not the whole device's (another stream may have been busy)
    sw = stream_waits(trace, links, ends_all, UNRECORDED_WAIT_US)
    waited = sw.waited_end(sync_rows)
    known = ~np.isnan(waited)
    if known.any():
        s0 = trace.ts[sync_rows[known]]
        s1 = s0 + trace.dur[sync_rows[known]]
        waits[known] = s1 - np.maximum(np.minimum(waited[known], s1), s0) >= UNRECORDED_WAIT_US
    rt_kind[sync_at[waits]] = _RT["unrecorded_wait"]
    del sync_at, sync_rows, waits, waited, known
    # codes of the calls that put work on the device, and of those that also make an op a caller
    launching = np.isin(rt_kind, [_RT[k] for k in ("launching", "slow_launch", "blocking_copy")])
    launch_calls = int(np.count_nonzero(launching))
    launching |= (rt_kind == _RT["sync"]) | (rt_kind == _RT["unrecorded_wait"])
    callers_rt = rt[launching]
    del launching

    # CPU ops: how many launches or syncs each makes on its thread
    ops = trace.own(_rows_of(trace, Kind.CPU_OP))
    cls = _op_classes(trace, ops, callers_rt)
    del callers_rt
    quiet = ops[cls == _QUIET]
    loud_iv = _rows_iv(trace, ops[cls == _CALLER])
    compute = _rows_iv(trace, quiet)
    if compute[0].size and loud_iv[0].size:  # a quiet op inside a launching op is part of it
        lo, hi = float(min(compute[0][0], loud_iv[0][0])), float(max(compute[1][-1], loud_iv[1][-1]))
        compute = _subtract(compute, loud_iv, lo, hi)
    del loud_iv
    loud = ops[(cls == _CALLER) | (cls == _SHORT)]
    del cls
    # only the threads that do the work (CPU ops or runtime calls): a helper thread's frames
    # (tqdm's monitor blocked in threading.wait) run beside the work, not instead of it
    working = np.zeros(len(trace.lanes), bool)
    working[trace.lane[ops]] = True
    working[trace.lane[rt]] = True
    del ops

    # data loading, and what runs inside it: by provenance, the Python frames of torch's data
    # package (the file the frame's code is in); by name, the ranges whose names say so
    py = trace.own(_rows_of(trace, Kind.PYTHON))
    torch_data = _names_matching(names, _TORCH_DATA)
    by_frame = py[torch_data[trace.name[py]]] if torch_data.any() else py[:0]
    dl = _names_matching(names, _DATA_LOADING)
    by_name = py[:0]
    if dl.any():  # the ranges of those names (no n-sized test where no name says so: the usual case)
        by_name = trace.own(_rows_of(trace, Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON))
        by_name = by_name[dl[trace.name[by_name]]]
        by_name = by_name[~np.isin(by_name, by_frame)]
    loading = np.concatenate([by_frame, by_name])
    py = py[working[trace.lane[py]]]

    def calls_of(kind: str) -> Rows:
        return rt[rt_kind == _RT[kind]]

    # a stream held by a wait on work the trace does not contain: said before any host state
    # (the host may sit in a sync meanwhile, waiting on that very stream)
    h0, h1, h_rows, by_stream = sw.held_streams()
    priority: list[tuple[str, Intervals]] = [("stream_wait_unrecorded", union(h0, h1))]
    named = _NamedRows(trace, {"stream_wait_unrecorded": (h0, h1, h_rows)})
    # the runtime-call kinds, a wait on unrecorded work before a sync (it is one, explained)
    for kind in ("unrecorded_wait", *CAUSES[: CAUSES.index("unrecorded_wait")]):
        priority.append((kind, _rows_iv(trace, calls_of(kind))))
        named[kind] = calls_of(kind)
    launch_rt = calls_of("launching")
    other_rt = calls_of("other")
    priority += [
        ("launching", _rows_iv(trace, launch_rt)),
        ("host_compute", _rows_iv(trace, other_rt)),  # runtime calls no rule names: host work
        ("data_loading", _rows_iv(trace, loading)),
        ("host_compute", compute),
        ("launching", _rows_iv(trace, loud)),
        ("python", _rows_iv(trace, py)),
    ]
    named["launching"] = np.concatenate([launch_rt, loud])
    named["host_compute"] = np.concatenate([other_rt, quiet])
    named["data_loading"] = loading
    named["python"] = py  # cut into innermost pieces only when named (costly)
    # with_stack=True recorded frames, on whichever thread: never advise it again
    return HostActivity(
        priority,
        named,
        busy,
        launch_calls,
        bool((trace.kind == Kind.PYTHON).any()),
        sw.recorded,
        by_stream,
        _rows_iv(trace, by_frame),
        _rows_iv(trace, by_name),
        copies_by_timing,
    )


# what a CPU op is to the idle analysis (_op_classes)
_QUIET = 0  # calls nothing, HOST_COMPUTE_MIN_US or more: host compute
_SHORT = 1  # calls nothing, shorter: the dispatch cost of issuing work (launching)
_CALLER = 2  # makes 1 to MAX_CALLS_PER_LAUNCHING_OP launch or sync calls (launching)
_CONTAINER = 3  # makes more: a module, an optimizer step (neither)


def _op_classes(trace: Trace, ops: Rows, callers: Rows) -> npt.NDArray[np.int8]:
    """Per CPU op, its class (_QUIET ...), from the launch or sync calls on its thread inside
    its range; in chunks of ops, so that no per-op temporary is the size of the trace."""
    out = np.empty(ops.size, np.int8)
    o_lane, r_lane = trace.lane[ops], trace.lane[callers]
    for lane in np.flatnonzero(np.bincount(o_lane)).tolist() if ops.size else []:
        on = np.flatnonzero(o_lane == lane)
        t = np.sort(trace.ts[callers[r_lane == lane]])
        for c in range(0, on.size, _CHUNK):
            sel = on[c : c + _CHUNK]
            r = ops[sel]
            s, d = trace.ts[r], trace.dur[r]
            n = np.searchsorted(t, s, "left")
            s += d  # the op's end, in place: the same sum as ts + dur
            np.subtract(np.searchsorted(t, s, "right"), n, out=n)
            # a short op that calls nothing (a view, an empty) is the dispatch cost of issuing
            # work, not host computation; an op that makes many runtime calls is a container (a
            # module, a legacy ProfilerStep Operator): its own time between children is not launching
            out[sel] = np.where(
                n == 0,
                np.where(d >= HOST_COMPUTE_MIN_US, _QUIET, _SHORT),
                np.where(n > MAX_CALLS_PER_LAUNCHING_OP, _CONTAINER, _CALLER),
            )
    return out


def _names_matching(names: list[str], rx: re.Pattern[str]) -> npt.NDArray[np.bool_]:
    """Per name id, whether the name matches: a table the rows' name ids index."""
    return np.array([bool(rx.search(n)) for n in names], bool) if names else np.zeros(0, bool)


def idle_breakdowns(
    host: HostActivity, windows: Sequence[tuple[float, float, float | None]]
) -> list[IdleBreakdown]:
    """Per window (lo, hi, first launch or None), its idle time and what the host did meanwhile.

    Who holds an idle microsecond does not depend on the window it is seen from, so the idle time
    is cut into its causes once, over the span of all the windows, and each window measures each
    cause's set within its bounds with two binary searches (measure_within). Cut again per window
    (a clip, an intersect and a subtract per cause and window), the causes took a third of the
    analysis of a 48 MB training trace with 20 steps, and grew with steps x device ops."""
    if not windows:
        return []
    lo = np.array([w[0] for w in windows], np.float64)
    hi = np.array([w[1] for w in windows], np.float64)
    width = np.maximum(hi - lo, 0.0)
    span = width > 0
    g_lo = float(lo[span].min()) if span.any() else 0.0
    g_hi = float(hi[span].max()) if span.any() else 0.0
    busy = _clip(host.busy, g_lo, g_hi)
    rest = _subtract((np.array([g_lo]), np.array([g_hi])), busy, g_lo, g_hi)
    idle = rest
    causes = {k: np.zeros(lo.size) for k in CAUSES}
    for key, iv in host.priority:
        if not rest[0].size:
            break
        part = _intersect(rest, _clip(iv, g_lo, g_hi))
        causes[key] += measure_within(part, lo, hi)
        rest = _subtract(rest, part, g_lo, g_hi)
    causes["nothing_recorded"] = measure_within(rest, lo, hi)
    busy_us, idle_us = measure_within(busy, lo, hi), measure_within(idle, lo, hi)
    # up to the first launch (a window without one: read as empty, and not reported)
    first = np.array([w[0] if w[2] is None else w[2] for w in windows], np.float64)
    before = measure_within(idle, lo, np.minimum(np.maximum(first, lo), hi))
    return [
        IdleBreakdown(
            float(width[i]),
            float(busy_us[i]),
            float(idle_us[i]),
            {k: float(v[i]) for k, v in causes.items()},
            None if windows[i][2] is None else float(before[i]),
        )
        for i in range(lo.size)
    ]
