"""Regions: the instances of one annotation, and what happens inside each.

Which annotation: --region NAME (exact record_function name), else --region as a regular
expression (re.search) over annotation names; by default ``attn_fwd`` when the trace has it, else
the ProfilerStep#N steps, else the whole trace as one instance.

Per instance:
- CPU ops: cpu_op events on the annotation's thread that start inside its [ts, ts + dur], at every
  nesting depth (aten::matmul and the aten::bmm inside it are two ops), as the blog counts them;
- device ops (kernels, memcpys, memsets, other accelerators' device events) it owns, each by the
  first of these rules that applies (RULE_NAMES; a CUDA-graph launch brings all its kernels):
  1. "thread": launched inside the annotation, on its thread;
  2. "autograd thread": launched while it is open, on another thread of the same process, from
     inside a backward op (autograd::engine::evaluate_function, *Backward*): the autograd engine
     runs a backward() on its own threads for the thread that called it;
  3. "other thread": launched while it is open on any other thread of the same process, when
     --threads all is given or the region is ProfilerStep#N (a step owns everything in it:
     data loading, communication threads);
  4. "gpu_user_annotation": device ops with no launch event, placed by time inside the
     gpu_user_annotation range of the same name;
  5. "window": device ops with no launch event (graph replays whose launch was not recorded,
     launches lost to a full buffer) that no gpu_user_annotation range places, owned by the
     first instance whose [ts, ts + dur] holds their start: a ProfilerStep owns the device work
     that ran in it even when nothing links that work to a thread;
  (the whole trace, as a region, owns every device op: rule "whole trace");
  6. "capture": a graph replay's device op matched to its captured CPU op (Trace.op_link,
     attnprof.analysis.replay.replay) belongs to the capture trace's instance of the annotation that
     holds that op's start on its thread, once per graph launch: the instance (captured range,
     replay) is the layer as the same step run eagerly would have it. It has no CPU ops or CPU
     time of its own (the one graph launch issued them all) and starts at its first device op.
     Rules 1-3 come first: an instance of this trace that holds the graph launch holds the
     whole replay. A replayed op whose captured op no captured instance holds, and an unmatched
     replay, keep their graph launch and rules 1-3 (a layer range of the capture never holds them);
- linked backward: the device ops launched by the backward ops of the instance's forward ops,
  found through fwdbwd flows, else through autograd sequence numbers (a forward op and its
  evaluate_function share one), and not already owned by a rule above. They are kept apart
  (Instance.bwd): an attn_fwd region stays the forward, and its backward is reported beside it;
- CPU time: the annotation's duration; GPU time: the sum of device-op durations, their union
  (overlapping streams counted once) and the span from the first device-op start to the last end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.links import Links
from attnprof.errors import UserError
from attnprof.trace.groups import held, ranges
from attnprof.trace.model import Kind, Trace, nesting_order, unique

__all__ = [
    "DEFAULT_REGION",
    "RULE_NAMES",
    "Instance",
    "Region",
    "backward_ops",
    "backward_pairs",
    "cpu_nesting",
    "find_region",
    "inside",
]

DEFAULT_REGION = "attn_fwd"
_STEP = re.compile(r"ProfilerStep#\d+")
RULE_NAMES = (
    "thread",
    "autograd thread",
    "other thread",
    "gpu_user_annotation",
    "whole trace",
    "window",
    "capture",
)
_CAPTURE_RULE = RULE_NAMES.index("capture")
_EVAL = "autograd::engine::evaluate_function"
_BACKWARD = re.compile(r"Backward\d*$|^autograd::engine::evaluate_function")

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass
class Instance:
    row: int  # the annotation's event row, -1 for the whole trace
    start: float
    end: float
    cpu_ops: I64  # cpu_op rows inside, by start time
    gpu: I64  # indices into Links.gpu_rows, by GPU start time
    rule: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, np.int8))  # per gpu: RULE_NAMES
    bwd: I64 = field(default_factory=lambda: np.zeros(0, np.int64))  # linked backward device ops

    @property
    def cpu_time_us(self) -> float:
        return self.end - self.start


@dataclass
class Region:
    name: str
    selector: str  # how it was chosen: "default", "exact", "regex", "ProfilerStep", "whole trace"
    instances: list[Instance] = field(default_factory=list)
    unplaced_gpu_ops: int = 0  # GPU ops with no launch that no gpu_user_annotation range holds
    threads: str = "own"  # "own": rules 1, 2 and 4; "all": rule 3 too (always for ProfilerStep)
    backward_link: str | None = None  # "fwdbwd flows", "sequence numbers" or None


def _candidates(trace: Trace) -> I64:
    # annotations; legacy traces record record_function ranges as Operator events. A capture
    # trace's imported ranges (Trace.imported_from on) are candidates for rule "capture", except
    # its ProfilerStep ranges: the capture's steps are not steps of this trace
    rows = trace.rows(Kind.ANNOTATION, Kind.CPU_OP)
    if trace.imported_from < 0:
        return rows
    ids = [i for i, n in enumerate(trace.names) if _STEP.fullmatch(n)]
    return rows[(rows < trace.imported_from) | ~np.isin(trace.name[rows], ids)]


_MODULE = "nn.Module: "


def _module_frames(trace: Trace) -> I64:
    """nn.Module frames (python_function "nn.Module: Name_N", recorded with with_modules=True):
    region candidates for --region after the annotations and ops, so that a name both match
    keeps meaning the annotation."""
    py = trace.own(trace.rows(Kind.PYTHON))
    ids = [i for i, n in enumerate(trace.names) if n.startswith(_MODULE)]
    return py[np.isin(trace.name[py], ids)] if ids else py[:0]


def _select(trace: Trace, region: str | None) -> tuple[str, str, I64]:
    rows = _candidates(trace)
    names = trace.names
    if region is None:
        for wanted in (DEFAULT_REGION,):
            ids = [i for i, n in enumerate(names) if n == wanted]
            hit = rows[np.isin(trace.name[rows], ids)] if ids else rows[:0]
            if hit.size:
                return wanted, "default", hit
        ids = [i for i, n in enumerate(names) if _STEP.fullmatch(n)]
        rows = trace.own(rows)
        ann = rows[np.isin(trace.name[rows], ids)] if ids else rows[:0]
        if ann.size:
            return "ProfilerStep#*", "ProfilerStep", ann
        return "whole trace", "whole trace", rows[:0]
    ids = [i for i, n in enumerate(names) if n == region]
    modules = _module_frames(trace)
    for among in (rows, modules):
        hit = among[np.isin(trace.name[among], ids)] if ids else among[:0]
        if hit.size:
            return region, "exact", hit
    try:
        pattern = re.compile(region)
    except re.error as exc:
        raise UserError(
            f"--region {region!r} is neither an annotation in the trace nor a valid regex ({exc})"
        ) from None
    ids = [i for i, n in enumerate(names) if pattern.search(n)]
    for among in (rows, modules):
        hit = among[np.isin(trace.name[among], ids)] if ids else among[:0]
        if hit.size:
            return region, "regex", hit
    ann = trace.own(trace.rows(Kind.ANNOTATION))
    known = sorted({names[int(i)] for i in unique(trace.name[ann])})[:12]
    hint = f"; annotations here: {', '.join(known)}" if known else "; the trace has no user annotations"
    if modules.size:
        hint += f"; nn.Module frames too ({names[int(trace.name[modules[0]])]}, ...)"
    raise UserError(f"--region {region!r} matches no annotation, op or nn.Module in {trace.source}{hint}")


def _backward_ids(trace: Trace) -> list[int]:
    key = ("backward_ids", len(trace.names))
    ids: list[int] | None = trace.memo.get(key)
    if ids is None:  # once per trace: backward_ops is asked per region instance
        names = trace.names
        ids = [i for i, n in enumerate(names) if n.startswith(_EVAL)]
        ids = trace.memo[key] = ids or [i for i, n in enumerate(names) if _BACKWARD.search(n)]
    return ids


def backward_ops(trace: Trace, cpu_rows: I64) -> I64:
    """The backward ops among cpu_rows: evaluate_function ops, else *Backward* ops."""
    ids = _backward_ids(trace)
    return cpu_rows[np.isin(trace.name[cpu_rows], ids)] if ids else cpu_rows[:0]


def inside(trace: Trace, ops: I64, rows: I64) -> npt.NDArray[np.bool_]:
    """For each row, whether an op of ops on the same lane contains its start time."""
    o_ts = trace.ts[ops]
    return held(trace.lane[ops], o_ts, o_ts + trace.dur[ops], trace.lane[rows], trace.ts[rows])


def _at(trace: Trace, ops: I64, lanes: np.ndarray, ts: np.ndarray) -> I64:
    """The longest op of ops starting exactly at (lane, ts), -1 where none."""
    out = np.full(lanes.size, -1, np.int64)
    if ops.size == 0:
        return out
    o_lane = trace.lane[ops]
    for lane in sorted(set(unique(o_lane).tolist()) & set(unique(lanes).tolist())):
        o = ops[o_lane == lane]
        sel = np.flatnonzero(lanes == lane)
        # only the ops starting within 1e-3 us at or after some point can be found: the sort
        # below is of those (a few per point), not of every op of the lane (95k on a 48 MB trace)
        pts = np.sort(ts[sel])
        at = np.searchsorted(pts, trace.ts[o], "right") - 1
        o = o[(at >= 0) & (trace.ts[o] - pts[np.maximum(at, 0)] < 1e-3)]
        if not o.size:
            continue
        o = o[nesting_order(trace.ts[o], trace.dur[o])]
        ot = trace.ts[o]
        j = np.searchsorted(ot, ts[sel], "left")
        jc = np.minimum(j, o.size - 1)
        hit = (j < o.size) & (np.abs(ot[jc] - ts[sel]) < 1e-3)
        out[sel[hit]] = o[jc[hit]]
    return out


def backward_pairs(trace: Trace, cpu_rows: I64) -> tuple[I64, I64, str | None]:
    """Forward cpu-op rows and their backward op rows, as two columns of (forward, backward)
    pairs, by fwdbwd flows (in flow order), else by sequence numbers (forward ops in cpu_rows'
    order, each with its backward ops in theirs). Columns, not a dict of lists: over every op
    of a 1.2 GB trace the dict and its lists held ~20 MB of Python objects."""
    none = np.zeros(0, np.int64)
    fb = trace.flow_fwdbwd
    if fb.any():
        ids, start = trace.flow_id[fb], trace.flow_start[fb]
        op = _at(trace, cpu_rows, trace.flow_lane[fb], trace.flow_ts[fb])
        # per flow id, the op of its last start flow (-1: none at its point)
        s_at = np.flatnonzero(start)
        s_at = s_at[np.argsort(ids[s_at], kind="stable")]
        s_ids = ids[s_at]
        last = np.ones(s_ids.size, bool)
        last[:-1] = s_ids[1:] != s_ids[:-1]
        s_ids, s_op = s_ids[last], op[s_at[last]]
        ends = np.flatnonzero(~start & (op >= 0))
        k = np.minimum(np.searchsorted(s_ids, ids[ends]), max(s_ids.size - 1, 0))
        src = np.where(s_ids[k] == ids[ends], s_op[k], -1) if s_ids.size else np.full(ends.size, -1)
        keep = src >= 0
        if keep.any():
            return src[keep].astype(np.int64, copy=False), op[ends[keep]], "fwdbwd flows"
    has = trace.seq[cpu_rows] >= 0
    if not has.any():
        return none, none, None
    names = _backward_ids(trace)
    is_bwd = has & np.isin(trace.name[cpu_rows], names) if names else np.zeros(cpu_rows.size, bool)
    if not is_bwd.any():
        return none, none, None
    bwd = cpu_rows[is_bwd]
    fwd = cpu_rows[has & ~is_bwd]
    del has, is_bwd
    bwd = bwd[np.argsort(trace.seq[bwd], kind="stable")]  # by sequence number, in order within one
    b_seq = trace.seq[bwd]
    f_seq = trace.seq[fwd]
    lo = np.searchsorted(b_seq, f_seq, "left")
    count = np.searchsorted(b_seq, f_seq, "right") - lo
    del b_seq, f_seq
    hit = count > 0
    fwd, lo, count = fwd[hit], lo[hit], count[hit]
    if not fwd.size:
        return none, none, None
    return (
        (fwd if fwd.size == count.sum() else np.repeat(fwd, count)),
        bwd[ranges(lo, count)],
        "sequence numbers",
    )


def find_region(trace: Trace, links: Links, region: str | None = None, threads: str = "own") -> Region:
    if threads not in ("own", "all"):
        raise UserError(f"--threads {threads!r}: use 'own' or 'all'")
    name, selector, rows = _select(trace, region)
    cap_rows = rows[rows >= trace.imported_from] if trace.imported_from >= 0 else rows[:0]
    rows = trace.own(rows)
    gpu_rows = links.gpu_rows
    gpu_ts = trace.ts[gpu_rows]
    all_threads = threads == "all" or selector == "ProfilerStep"
    out = Region(name=name, selector=selector, threads="all" if all_threads else "own")
    cpu_rows = trace.own(trace.rows(Kind.CPU_OP))

    if rows.size == 0 and cap_rows.size == 0:  # whole trace
        n_own = trace.imported_from if trace.imported_from >= 0 else trace.n_events
        start = float(trace.ts[:n_own].min()) if n_own else 0.0
        end = _last_end(trace, n_own)
        cpu_sorted = cpu_rows[np.argsort(trace.ts[cpu_rows], kind="stable")]
        gpu = np.argsort(gpu_ts, kind="stable")
        rule = np.full(gpu.size, 4, np.int8)  # every device op, from any thread or none
        out.instances.append(Instance(-1, start, end, cpu_sorted, gpu, rule))
        return out

    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    # CPU ops per lane, sorted by start, for a searchsorted per instance
    by_lane: dict[int, tuple[I64, np.ndarray]] = {}
    for lane in unique(trace.lane[rows]).tolist():
        ops = cpu_rows[trace.lane[cpu_rows] == lane]
        ops = ops[np.argsort(trace.ts[ops], kind="stable")]
        by_lane[lane] = (ops, trace.ts[ops])

    # GPU ops by their launch's process, then time: one sorted copy of the launch columns, each
    # process a slice of it (the transient columns of a 1.2 GB trace's launches go before the
    # instances are built)
    launched = links.launch >= 0
    unlaunched = np.flatnonzero(~launched)
    l_rows = links.launch[launched]
    l_lane = trace.lane[l_rows]
    lane_pid = [str(p) for p, _ in trace.lanes]
    pids = sorted({lane_pid[lane] for lane in unique(l_lane).tolist()})
    pid_index = {p: i for i, p in enumerate(pids)}
    pid_of_lane = np.array([pid_index.get(p, -1) for p in lane_pid], np.int32)
    l_pid = pid_of_lane[l_lane]
    # whether each launch sits inside a backward op on its thread (rule 2)
    in_bwd = inside(trace, backward_ops(trace, cpu_rows), l_rows)
    l_ts = trace.ts[l_rows]
    del l_rows
    o = np.lexsort((l_ts, l_pid))
    la_idx, la_ts, la_lane, la_bwd = np.flatnonzero(launched)[o], l_ts[o], l_lane[o], in_bwd[o]
    del o, l_ts, l_lane, in_bwd, launched
    cut = np.concatenate([[0], np.cumsum(np.bincount(l_pid, minlength=len(pids)))]).tolist()
    del l_pid
    by_pid = {
        p: (la_idx[a:b], la_ts[a:b], la_lane[a:b], la_bwd[a:b]) for p, (a, b) in enumerate(pairwise(cut))
    }

    # unlaunched GPU ops: place by time inside same-named gpu_user_annotation ranges
    gpu_ann = trace.rows(Kind.GPU_ANNOTATION)
    gpu_ann = gpu_ann[np.isin(trace.name[gpu_ann], unique(trace.name[rows]))]
    gpu_ann = gpu_ann[np.argsort(trace.ts[gpu_ann], kind="stable")]
    placed: dict[int, list[np.ndarray]] = {}
    n_placed = 0
    if unlaunched.size and gpu_ann.size:
        # match GPU annotation k to CPU annotation by External id, else by order
        ext_to_inst = {int(trace.ext[r]): i for i, r in enumerate(rows.tolist()) if trace.ext[r] >= 0}
        u_ts = gpu_ts[unlaunched]
        for k, ga in enumerate(gpu_ann.tolist()):
            inst = ext_to_inst.get(int(trace.ext[ga]), k if k < rows.size else -1)
            if inst < 0:
                continue
            s, e = trace.ts[ga], trace.ts[ga] + trace.dur[ga]
            held = unlaunched[(u_ts >= s) & (u_ts <= e)]
            if held.size:
                placed.setdefault(inst, []).append(held)
                n_placed += int(held.size)
    # rule 5: the unlaunched ops left, by the instance window that holds their start; an op
    # another module linked to a CPU op (Links.cpu_op) is not "unlinked" and is left alone
    taken = np.zeros(gpu_rows.size, bool)
    for held_list in placed.values():
        for arr in held_list:
            taken[arr] = True
    rest = unlaunched[~taken[unlaunched] & (links.cpu_op[unlaunched] < 0)]
    rest = rest[np.argsort(gpu_ts[rest], kind="stable")]
    windowed: dict[int, np.ndarray] = {}
    if rest.size:
        free = np.ones(rest.size, bool)
        r_ts = gpu_ts[rest]
        for i, r in enumerate(rows.tolist()):
            lo = int(np.searchsorted(r_ts, trace.ts[r], side="left"))
            hi = int(np.searchsorted(r_ts, trace.ts[r] + trace.dur[r], side="right"))
            sel = np.arange(lo, hi)[free[lo:hi]]
            if sel.size:
                windowed[i] = rest[sel]
                free[sel] = False
                n_placed += int(sel.size)
    out.unplaced_gpu_ops = int(unlaunched.size) - n_placed

    # linked backward: forward op -> backward ops -> the device ops launched inside them
    link_fwd, link_bwd, out.backward_link = backward_pairs(trace, cpu_rows)
    del cpu_rows
    launch_of, b_lo, b_count = _backward_launches(trace, link_bwd, la_idx, la_ts, la_lane)
    # the links whose backward op launched device work, as (forward op, backward op) columns
    # (link_bwd: the op's index in b_lo, b_count): an instance takes those of its forward ops
    # in one search (a loop over its ops took ~20 ms on the 48 MB benchmark trace)
    keep = b_count[link_bwd] > 0
    link_fwd, link_bwd = link_fwd[keep], link_bwd[keep]
    del keep

    for i, r in enumerate(rows.tolist()):
        lane = int(trace.lane[r])
        start = float(trace.ts[r])
        end = start + float(trace.dur[r])
        ops, t = by_lane[lane]
        a, b = np.searchsorted(t, start, "left"), np.searchsorted(t, end, "right")
        cpu = ops[a:b]
        if trace.kind[r] == Kind.CPU_OP:  # a legacy annotation is itself an Operator row
            cpu = cpu[cpu != r]
        cpu = cpu[trace.ts[cpu] + trace.dur[cpu] <= end + 1e-3]
        parts: list[np.ndarray] = []
        rules: list[np.ndarray] = []
        p = pid_index.get(str(trace.lanes[lane][0]) if trace.lanes else "", -1)
        if p >= 0:
            gidx, gt, glane, gbwd = by_pid[p]
            a, b = np.searchsorted(gt, start, "left"), np.searchsorted(gt, end, "right")
            g, gl, gb = gidx[a:b], glane[a:b], gbwd[a:b]
            own = gl == lane
            rule = np.where(own, 0, np.where(gb, 1, 2)).astype(np.int8)
            keep = own | gb | all_threads
            parts.append(g[keep])
            rules.append(rule[keep])
        if i in placed:
            for pl in placed[i]:
                parts.append(pl)
                rules.append(np.full(pl.size, 3, np.int8))
        if i in windowed:
            parts.append(windowed[i])
            rules.append(np.full(windowed[i].size, RULE_NAMES.index("window"), np.int8))
        gpu = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        rule_arr = np.concatenate(rules) if rules else np.zeros(0, np.int8)
        order = np.argsort(gpu_ts[gpu], kind="stable")
        gpu, rule_arr = gpu[order].astype(np.int64), rule_arr[order]
        bwd = np.zeros(0, np.int64)
        if link_fwd.size:
            # the same set of device ops in any order: unique() sorts them
            linked = unique(link_bwd[np.isin(link_fwd, cpu)])
            if linked.size:
                bwd = unique(launch_of[ranges(b_lo[linked], b_count[linked])])
                bwd = bwd[~np.isin(bwd, gpu)]
                bwd = bwd[np.argsort(gpu_ts[bwd], kind="stable")].astype(np.int64)
        out.instances.append(Instance(r, start, end, cpu, gpu, rule_arr, bwd))
    if cap_rows.size:
        # an instance of this trace that holds the graph launch holds the whole replay (as it
        # would hold those kernels eagerly): the capture's ranges place the rest
        owned = [x.gpu for x in out.instances]
        taken = unique(np.concatenate(owned)) if owned else rows[:0]
        replayed = _replay_instances(trace, links, cap_rows, taken)
        out.instances = sorted(out.instances + replayed, key=lambda x: x.start)
    return out


def _last_end(trace: Trace, n: int) -> float:
    """The latest end among the first n rows, a block at a time: ts + dur over every row of a
    1.2 GB trace was a 24 MB temporary."""
    cuts = [*range(0, n, 1 << 20), n]
    ends = [float((trace.ts[a:b] + trace.dur[a:b]).max()) for a, b in pairwise(cuts)]
    return float(np.max(ends)) if ends else 0.0  # NaN-propagating, as one max over all


def _backward_launches(
    trace: Trace, link_bwd: I64, la_idx: I64, la_ts: F64, la_lane: np.ndarray
) -> tuple[I64, I64, I64]:
    """The device ops each backward op launched (those whose launch starts inside it, on its
    lane), for the backward ops in link_bwd, which it rewrites in place to indices into the
    ranges: launch_of[lo[k] : lo[k] + count[k]] are op k's device ops, by launch time.
    Ranges into one sorted array, not an array per op (~110 bytes each, over every backward
    op of a 1.2 GB trace). la_*: the launches' device-op index, start and lane."""
    b_ops = unique(link_bwd)
    link_bwd[:] = np.searchsorted(b_ops, link_bwd)
    by_lane = np.lexsort((la_ts, la_lane))  # stable: launches at one instant in launch order
    launch_of = la_idx[by_lane]
    lt_lane, lt_ts = la_lane[by_lane], la_ts[by_lane]
    del by_lane
    lo = np.zeros(b_ops.size, np.int64)
    hi = np.zeros(b_ops.size, np.int64)
    b_lane = trace.lane[b_ops]
    for lane in unique(b_lane).tolist():
        sel = np.flatnonzero(b_lane == lane)
        a = int(np.searchsorted(lt_lane, lane, "left"))
        t = lt_ts[a : int(np.searchsorted(lt_lane, lane, "right"))]
        ob = b_ops[sel]
        lo[sel] = a + np.searchsorted(t, trace.ts[ob], "left")
        hi[sel] = a + np.searchsorted(t, trace.ts[ob] + trace.dur[ob], "right")
    return launch_of, lo, np.maximum(hi - lo, 0)


def _replay_instances(trace: Trace, links: Links, cap_rows: I64, taken: I64) -> list[Instance]:
    """Rule "capture": per captured range and replay, the replayed device ops (not in taken)
    whose captured CPU op starts inside that range on its thread."""
    idx = np.flatnonzero(links.captured & (links.launch >= 0))
    idx = idx[~np.isin(idx, taken)]
    if idx.size == 0:
        return []
    op = links.cpu_op[idx]
    op_lane, op_ts = trace.lane[op], trace.ts[op]
    gpu_ts = trace.ts[links.gpu_rows]
    out: list[Instance] = []
    for r in cap_rows.tolist():
        s, e = float(trace.ts[r]), float(trace.ts[r] + trace.dur[r])
        held = idx[(op_lane == trace.lane[r]) & (op_ts >= s) & (op_ts <= e)]
        if not held.size:
            continue
        launches = links.launch[held]
        # one instance per replay of the range: its graphs' launches in time order, a new one
        # when a graph already in it launches again (a range around several graphs is one
        # instance per step, as eagerly; a layer inside one graph is one per launch)
        groups: list[list[I64]] = []
        seen: set[int] = set()
        for g in sorted(unique(launches).tolist(), key=lambda x: float(trace.ts[x])):
            ops = held[launches == g]
            graph = int(links.cpu_op[ops].min())  # the graph's first captured op names it
            if not groups or graph in seen:
                groups.append([])
                seen = set()
            groups[-1].append(ops)
            seen.add(graph)
        for parts in groups:
            gpu = np.concatenate(parts)
            gpu = gpu[np.argsort(gpu_ts[gpu], kind="stable")].astype(np.int64)
            start = float(gpu_ts[gpu[0]])
            rule = np.full(gpu.size, _CAPTURE_RULE, np.int8)
            out.append(Instance(int(r), start, start, np.zeros(0, np.int64), gpu, rule))
    return out


def cpu_nesting(trace: Trace, rows: I64) -> tuple[I64, F64]:
    """The depth and self time of each CPU-op row in rows (in rows' order).

    An op's parent is the innermost op among rows, on its lane, that started before it (the longer
    first when two start together) and is still running when it starts (one that ends as it starts
    does not hold it), as a stack walked in that order finds it; depth counts the enclosing ops,
    and self time is the duration less that of the direct children: when the op, and not an op
    inside it, was running. Vectorised per lane and per depth level: n-row arrays only, where a
    sweep over 2n start and end points held three times as much (the peak of a 1.2 GB trace's
    region statistics).
    """
    n = int(rows.size)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    lane, ts, dur = trace.lane[rows], trace.ts[rows], trace.dur[rows]
    order = nesting_order(ts, dur, lane)
    # one column at a time: the old and the new of all three at once was the peak
    lane = lane[order]
    ts = ts[order]
    dur = dur[order]
    depth = _depths(lane, ts, dur)
    del ts
    children = _children_time(lane, dur, depth)
    depth_out = np.empty(n, np.int64)
    depth_out[order] = depth
    del depth
    np.subtract(dur, children, out=children)
    self_out = np.empty(n, np.float64)
    self_out[order] = np.maximum(children, 0.0, out=children)
    return depth_out, self_out


def _depths(lane: np.ndarray, ts: F64, dur: F64) -> I64:
    """Per op (sorted by lane, start, the longer first), the ops of its lane open when it starts.

    That is the ops of positive duration earlier in the order, less those that ended at or before
    its start (an end at an instant comes before a start there). An op of zero (or negative)
    duration ends right after it starts, before the next op starts, so it holds nothing: it is
    counted neither among the started nor the ended ones.
    """
    depth = np.empty(lane.size, np.int64)
    cuts = [0, *(np.flatnonzero(lane[1:] != lane[:-1]) + 1).tolist(), int(lane.size)]
    for a, b in pairwise(cuts):
        t, d = ts[a:b], dur[a:b]
        held = d > 0
        # the ends and the searches a block at a time: their temporaries are a block's, not
        # the lane's (most of a trace's ops are on one thread)
        ends = np.empty(int(np.count_nonzero(held)), np.float64)
        at = 0
        for c in range(0, b - a, _BLOCK):
            h = held[c : c + _BLOCK]
            k = int(np.count_nonzero(h))
            np.add(t[c : c + _BLOCK][h], d[c : c + _BLOCK][h], out=ends[at : at + k])
            at += k
        ends.sort()
        opened = depth[a:b]
        np.cumsum(held, dtype=np.int64, out=opened)
        opened -= held  # those before the op, not itself
        for c in range(0, b - a, _BLOCK):
            opened[c : c + _BLOCK] -= np.searchsorted(ends, t[c : c + _BLOCK], "right")
    return depth


_BLOCK = 1 << 16  # rows per block where a loop over blocks holds less than one n-row temporary


def _children_time(lane: np.ndarray, dur: F64, depth: I64) -> F64:
    """Per op, the summed duration of its direct children: the ops one level down whose parent
    it is, the parent being the last earlier op one level up, on the same lane. One search per
    depth level between the ops of two adjacent levels (each in order), a block at a time,
    where (depth, position) keys over all ops were five n-row arrays."""
    children = np.zeros(dur.size, np.float64)
    low = int(depth.min())
    top = int(depth.max())
    if top < 1:
        return children
    by_level = np.argsort(depth, kind="stable")  # positions, level by level, in order within one
    bounds = np.concatenate([[0], np.cumsum(np.bincount(depth - low if low else depth))])
    for level in range(max(1, low + 1), top + 1):
        ups = by_level[bounds[level - 1 - low] : bounds[level - low]]
        kids = by_level[bounds[level - low] : bounds[level + 1 - low]]
        if not ups.size:
            continue
        for c in range(0, kids.size, _BLOCK):  # a block of kids at a time: a block's temporaries
            k = kids[c : c + _BLOCK]
            j = np.searchsorted(ups, k) - 1
            ok = j >= 0
            parent = ups[np.maximum(j, 0)]
            ok &= lane[parent] == lane[k]
            # added one by one in the kids' order, as one bincount over all ops added them: the
            # same sums, to the last bit
            np.add.at(children, parent[ok], dur[k[ok]])
    return children
