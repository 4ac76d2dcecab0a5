"""Links from each GPU op (kernel, memcpy, memset) back to the CPU side.

- Launch: the runtime or driver event with the same correlation id (cudaLaunchKernel,
  cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, cudaMemcpyAsync, ...).
  A GPU op without a correlation id takes the id of the launch flow (ac2g, legacy async) that
  ends at the same lane and timestamp. One cudaGraphLaunch correlation covers every kernel of
  the graph, so graph kernels are attributed to the graph launch.
- CPU op: the cpu_op whose External id the GPU op (or, failing that, its launch) carries; failing
  both, the innermost cpu_op on the launching thread whose time range contains the launch.
- A GPU op whose correlation id matches no launch (the id is missing, or the runtime event
  lost it) is paired with a launch that put no device op on the device and carries the same
  External id, in time order within that id (an op that launched three kernels has three
  launches with its id): Links.by_external counts them. Without this, one launch and one kernel
  got two contradictory warnings (a launch without its kernel, a kernel without its launch).
- Kernels with no launch event at all keep launch -1 and api "none"; regions place them by time
  inside gpu_user_annotation ranges, else inside an instance's window (attnprof.analysis.attribution.regions).
- A CPU op known by other means comes first: ``Trace.op_link`` (a column any module may fill
  before the analysis runs) names the launching CPU op of a device op directly. The graph-replay
  attribution (attnprof.analysis.replay.replay) fills it with the op that launched each replayed kernel
  while its graph was captured (imported from the capture trace); ``Links.captured`` marks
  those. Whatever reads ``Links.cpu_op`` (provenance, per-op shapes) then treats a replayed
  kernel as an eager one. The launch stays the graph launch: regions and idle time place the
  kernel where it ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from attnprof.trace.groups import held
from attnprof.trace.model import Kind, Trace, unique

__all__ = [
    "GRAPH_LAUNCHES",
    "LAUNCH_CALL",
    "Links",
    "PointIndex",
    "innermost",
    "launch_ops",
    "launched_in",
    "link",
]

# calls that put work on the device: kernel launches, graph launches, async copies and sets
LAUNCH_CALL = re.compile(
    r"Launch|EnqueueKernel|MemcpyAsync|MemsetAsync|memcpyHtoDAsync|memcpyDtoHAsync|runFunction|"
    r"^cuMemcpy\w*Async|^hipMemcpyWithStream"
)
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuGraphLaunch", "hipGraphLaunch"})


@dataclass
class Links:
    # event rows of kernels, memcpys, memsets and other accelerators' device events, in file order
    gpu_rows: npt.NDArray[np.int64]
    launch: npt.NDArray[np.int64]  # launch event row per GPU op, -1 when none
    cpu_op: npt.NDArray[np.int64]  # launching cpu_op row per GPU op, -1 when none
    api: npt.NDArray[np.int32]  # launch API per GPU op: index into api_names (0 = "none")
    api_names: list[str]
    graph: npt.NDArray[np.bool_]  # launched by a CUDA-graph launch
    # cpu_op came from Trace.op_link (a graph replay's kernel -> the op that launched it at capture)
    captured: npt.NDArray[np.bool_]
    by_external: int = 0  # GPU ops paired with their launch through the External id


def _lookup(keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """rows[k] for each wanted key (first occurrence of equal keys), -1 where absent or wanted < 0."""
    out = np.full(wanted.shape[0], -1, np.int64)
    if keys.size == 0 or wanted.size == 0:
        return out
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    pos = np.searchsorted(k, wanted, side="left")
    # clipped in place: a key past every key is not at the last one either (all are below it)
    np.minimum(pos, k.size - 1, out=pos)
    hit = k[pos] == wanted
    hit &= wanted >= 0
    del k
    out[hit] = rows[order[pos[hit]]]  # not rows[order]: a copy of every row to read a few
    return out


def link(trace: Trace) -> Links:
    gpu_rows = trace.rows(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.DEVICE)
    launch_rows = trace.rows(Kind.RUNTIME, Kind.DRIVER)
    corr = trace.corr[gpu_rows]  # a copy already (a fancy index): written below
    missing = corr < 0
    if missing.any() and trace.flow_id.size:
        corr[missing] = _flow_correlation(trace, gpu_rows[missing])
    launch = _lookup(trace.corr[launch_rows], launch_rows, corr)

    # launches without a correlation id but with a flow start at their lane and time
    lmiss = trace.corr[launch_rows] < 0
    if lmiss.any() and trace.flow_id.size and (launch < 0).any():
        lcorr = trace.corr[launch_rows]
        lcorr[lmiss] = _flow_correlation(trace, launch_rows[lmiss], start=True)
        launch = _lookup(lcorr, launch_rows, corr)
        del lcorr
    del corr, missing, lmiss  # freed before the passes below make arrays of the same size

    # no launch by correlation: the unused launch with the same External id, in time order
    by_external = 0
    if (launch < 0).any() and launch_rows.size:
        launch, by_external = _pair_by_external(trace, gpu_rows, launch_rows, launch)

    # cpu op: one known by other means (op_link), else External id on the GPU op, else on its
    # launch, else containment in time
    op_rows = trace.own(trace.rows(Kind.CPU_OP))
    ext = trace.ext[gpu_rows]
    has_launch = launch >= 0
    no_ext = ext < 0
    use_launch = no_ext & has_launch
    ext[use_launch] = trace.ext[launch[use_launch]]
    cpu_op = _lookup(trace.ext[op_rows], op_rows, ext)
    del ext, no_ext, use_launch
    unresolved = np.flatnonzero((cpu_op < 0) & has_launch)
    if unresolved.size and op_rows.size:
        cpu_op[unresolved] = _containing(trace, op_rows, launch[unresolved])
    captured = np.zeros(gpu_rows.size, bool)
    if trace.op_link.size:
        known = trace.op_link[gpu_rows]
        captured = known >= 0
        cpu_op = np.where(captured, known, cpu_op)

    name_ids = np.where(has_launch, trace.name[np.maximum(launch, 0)], -1)
    uniq, api = np.unique(name_ids, return_inverse=True)
    api_names = [trace.names[int(i)] if i >= 0 else "none" for i in uniq.tolist()]
    if not uniq.size or uniq[0] >= 0:  # keep index 0 for "none"
        api_names.insert(0, "none")
        api = api + 1
    graph_codes = [i for i, n in enumerate(api_names) if n in GRAPH_LAUNCHES]
    graph = np.isin(api, graph_codes) if graph_codes else np.zeros(gpu_rows.size, bool)
    return Links(
        gpu_rows=gpu_rows,
        launch=launch,
        cpu_op=cpu_op,
        api=api.astype(np.int32).reshape(-1),
        api_names=api_names,
        graph=graph,
        captured=captured,
        by_external=by_external,
    )


def _pair_by_external(
    trace: Trace, gpu_rows: np.ndarray, launch_rows: np.ndarray, launch: np.ndarray
) -> tuple[np.ndarray, int]:
    """Pair GPU ops without a launch with unused launches of the same External id, the k-th
    op (by start) with the k-th launch (by time) of that id."""
    g_ext = trace.ext[gpu_rows]
    want = np.flatnonzero((launch < 0) & (g_ext >= 0))
    if want.size == 0:
        return launch, 0
    puts = np.fromiter((bool(LAUNCH_CALL.search(n)) for n in trace.names), bool, len(trace.names))
    used = np.zeros(trace.n_events, bool)
    used[launch[launch >= 0]] = True
    free = launch_rows[puts[trace.name[launch_rows]] & ~used[launch_rows] & (trace.ext[launch_rows] >= 0)]
    if free.size == 0:
        return launch, 0
    # as arrays, not a queue per id: the free launches by (id, time), the ops by (id, start),
    # and the k-th op of an id gets its k-th launch where the id has that many
    free = free[np.lexsort((trace.ts[free], trace.ext[free]))]
    f_ext = trace.ext[free]
    w = want[np.argsort(trace.ts[gpu_rows[want]], kind="stable")]
    w = w[np.argsort(g_ext[w], kind="stable")]
    w_ext = g_ext[w]
    rank = np.arange(w.size) - np.searchsorted(w_ext, w_ext, "left")
    lo = np.searchsorted(f_ext, w_ext, "left")
    ok = rank < np.searchsorted(f_ext, w_ext, "right") - lo
    out = launch.copy()
    out[w[ok]] = free[(lo + rank)[ok]]
    return out, int(ok.sum())


def launch_ops(trace: Trace, launch_rows: np.ndarray) -> np.ndarray:
    """The CPU op of each launch call (runtime or driver row), as link() finds a device op's: its
    External id, else the innermost op containing it on its thread; -1 where none."""
    op_rows = trace.own(trace.rows(Kind.CPU_OP))
    out = _lookup(trace.ext[op_rows], op_rows, trace.ext[launch_rows])
    miss = np.flatnonzero(out < 0)
    if miss.size and op_rows.size:
        out[miss] = _containing(trace, op_rows, launch_rows[miss])
    return out


def _flow_correlation(trace: Trace, rows: np.ndarray, *, start: bool = False) -> np.ndarray:
    """Correlation ids from flow events at the same lane and timestamp as each row."""
    sel = (trace.flow_start == start) & ~trace.flow_fwdbwd
    f_lane, f_ts, f_id = trace.flow_lane[sel], trace.flow_ts[sel], trace.flow_id[sel]
    q_lane, q_ts = trace.lane[rows], trace.ts[rows]
    # (lane, time) pairs of flows and rows as one code each: the time's rank among all their
    # times, then the lane. Where flows share a pair, the last in the file is the one taken
    ts_rank = np.unique(np.concatenate([f_ts, q_ts]), return_inverse=True)[1].reshape(-1)
    n_ts = int(ts_rank.max()) + 1 if ts_rank.size else 1
    f_code = f_lane.astype(np.int64) * n_ts + ts_rank[: f_ts.size]
    q_code = q_lane.astype(np.int64) * n_ts + ts_rank[f_ts.size :]
    order = np.argsort(f_code, kind="stable")
    codes = f_code[order]
    last = np.append(codes[1:] != codes[:-1], True) if codes.size else np.zeros(0, bool)
    codes, ids = codes[last], f_id[order][last]
    at = np.minimum(np.searchsorted(codes, q_code), max(codes.size - 1, 0))
    hit = (codes[at] == q_code) & ~np.isnan(q_ts) if codes.size else np.zeros(rows.size, bool)
    return np.where(hit, ids[at] if codes.size else -1, -1).astype(np.int64)


class PointIndex:
    """Points (timestamps in groups: lanes, processes) sorted once, so that the points inside
    each of many ranges are a slice: assigning ranges costs their sizes, not ranges x points."""

    def __init__(self, group: np.ndarray, ts: np.ndarray) -> None:
        self.order = np.lexsort((ts, group))
        self.group, self.ts = group[self.order], ts[self.order]

    def inside(self, group: int, lo: float, hi: float) -> np.ndarray:
        """Indices (into the points as given) of the points of group with lo <= ts <= hi."""
        a = int(np.searchsorted(self.group, group, "left"))
        b = int(np.searchsorted(self.group, group, "right"))
        i = a + int(np.searchsorted(self.ts[a:b], lo, "left"))
        j = a + int(np.searchsorted(self.ts[a:b], hi, "right"))
        return self.order[i:j]


def innermost(trace: Trace, rows: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per point row, the innermost of the given rows on the point's lane whose time range holds
    the point's start; -1 where none (rows: ops, ranges or Python frames)."""
    return _containing(trace, rows, points)


def _containing(trace: Trace, op_rows: np.ndarray, launch_rows: np.ndarray) -> np.ndarray:
    """Innermost cpu_op on the launch's lane whose [ts, ts + dur] contains the launch's ts."""
    out = np.full(launch_rows.size, -1, np.int64)
    op_lane = trace.lane[op_rows]
    launch_lane = trace.lane[launch_rows]
    for lane in unique(launch_lane):  # a loop per thread, never per launch
        ops = op_rows[op_lane == lane]
        if ops.size == 0:
            continue
        ops = ops[np.argsort(trace.ts[ops], kind="stable")]
        starts = trace.ts[ops]
        ends = starts + trace.dur[ops]
        which = np.flatnonzero(launch_lane == lane)
        t = trace.ts[launch_rows[which]]
        i = np.searchsorted(starts, t, side="right") - 1
        # walk back, all launches at once, from the last op started before t to the nearest one
        # that still contains it (the innermost); 64 steps at most, as deep as a stack goes
        walking = np.flatnonzero(i >= 0)
        for _ in range(64):
            walking = walking[ends[i[walking]] < t[walking]]
            if walking.size == 0:
                break
            i[walking] -= 1
            walking = walking[i[walking] >= 0]
        ok = i >= 0
        ok[ok] = (starts[i[ok]] <= t[ok]) & (t[ok] <= ends[i[ok]])
        out[which[ok]] = ops[i[ok]]
    return out


def launched_in(trace: Trace, links: Links, ops: np.ndarray) -> np.ndarray:
    """GPU ops (indices into Links.gpu_rows) launched by the given cpu ops or ops inside them."""
    if ops.size == 0 or links.gpu_rows.size == 0:
        return np.zeros(0, np.int64)
    has = links.launch >= 0
    idx = np.flatnonzero(has)
    l_rows = links.launch[has]
    o_ts = trace.ts[ops]
    keep = held(trace.lane[ops], o_ts, o_ts + trace.dur[ops], trace.lane[l_rows], trace.ts[l_rows])
    return idx[keep].astype(np.int64)
