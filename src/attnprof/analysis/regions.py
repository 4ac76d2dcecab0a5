"""Regions: the instances of one annotation, and what happens inside each.

Which annotation: --region NAME (exact record_function name), else --region as a regular
expression (re.search) over annotation names; by default ``attn_fwd`` when the trace has it, else
the ProfilerStep#N steps, else the whole trace as one instance.

Per instance:
- CPU ops: cpu_op events on the annotation's thread that start inside its [ts, ts + dur], at every
  nesting depth (aten::matmul and the aten::bmm inside it are two ops), as the blog counts them;
- GPU ops (kernels, memcpys, memsets): those whose launch event lies inside the annotation on the
  same thread (a CUDA-graph launch brings all its kernels); GPU ops with no launch event are placed
  by time inside the gpu_user_annotation range of the same name;
- CPU time: the annotation's duration; GPU time: the sum of GPU-op durations (busy time) and the
  span from the first GPU-op start to the last GPU-op end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from attnprof.analysis.links import Links
from attnprof.errors import UserError
from attnprof.trace.model import Kind, Trace, unique

__all__ = ["DEFAULT_REGION", "Instance", "Region", "cpu_nesting", "find_region"]

DEFAULT_REGION = "attn_fwd"
_STEP = re.compile(r"ProfilerStep#\d+")

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass
class Instance:
    row: int  # the annotation's event row, -1 for the whole trace
    start: float
    end: float
    cpu_ops: I64  # cpu_op rows inside, by start time
    gpu: I64  # indices into Links.gpu_rows, by GPU start time

    @property
    def cpu_time_us(self) -> float:
        return self.end - self.start


@dataclass
class Region:
    name: str
    selector: str  # how it was chosen: "default", "exact", "regex", "ProfilerStep", "whole trace"
    instances: list[Instance] = field(default_factory=list)
    unplaced_gpu_ops: int = 0  # GPU ops with no launch that no gpu_user_annotation range holds


def _candidates(trace: Trace) -> I64:
    # annotations; legacy traces record record_function ranges as Operator events
    return trace.rows(Kind.ANNOTATION, Kind.CPU_OP)


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
        ann = rows[np.isin(trace.name[rows], ids)] if ids else rows[:0]
        if ann.size:
            return "ProfilerStep#*", "ProfilerStep", ann
        return "whole trace", "whole trace", rows[:0]
    ids = [i for i, n in enumerate(names) if n == region]
    hit = rows[np.isin(trace.name[rows], ids)] if ids else rows[:0]
    if hit.size:
        return region, "exact", hit
    try:
        pattern = re.compile(region)
    except re.error as exc:
        raise UserError(
            f"--region {region!r} is neither an annotation in the trace nor a valid regex ({exc})"
        ) from None
    ids = [i for i, n in enumerate(names) if pattern.search(n)]
    hit = rows[np.isin(trace.name[rows], ids)] if ids else rows[:0]
    if hit.size:
        return region, "regex", hit
    ann = trace.rows(Kind.ANNOTATION)
    known = sorted({names[int(i)] for i in unique(trace.name[ann])})[:12]
    hint = f"; annotations here: {', '.join(known)}" if known else "; the trace has no user annotations"
    raise UserError(f"--region {region!r} matches no annotation or op in {trace.source}{hint}")


def find_region(trace: Trace, links: Links, region: str | None = None) -> Region:
    name, selector, rows = _select(trace, region)
    gpu_rows = links.gpu_rows
    gpu_ts = trace.ts[gpu_rows]
    gpu_order = np.argsort(gpu_ts, kind="stable")
    out = Region(name=name, selector=selector)
    cpu_rows = trace.rows(Kind.CPU_OP)

    if rows.size == 0:  # whole trace
        start = float(trace.ts.min()) if trace.n_events else 0.0
        end = float((trace.ts + trace.dur).max()) if trace.n_events else 0.0
        cpu_sorted = cpu_rows[np.argsort(trace.ts[cpu_rows], kind="stable")]
        out.instances.append(Instance(-1, start, end, cpu_sorted, gpu_order.astype(np.int64)))
        return out

    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    # CPU ops per lane, sorted by start, for a searchsorted per instance
    cpu_lane = trace.lane[cpu_rows]
    by_lane: dict[int, tuple[I64, np.ndarray]] = {}
    for lane in unique(trace.lane[rows]).tolist():
        ops = cpu_rows[cpu_lane == lane]
        ops = ops[np.argsort(trace.ts[ops], kind="stable")]
        by_lane[lane] = (ops, trace.ts[ops])

    # GPU ops by their launch's lane and time
    launched = links.launch >= 0
    l_rows = links.launch[launched]
    l_idx = np.flatnonzero(launched)
    l_lane = trace.lane[l_rows]
    l_ts = trace.ts[l_rows]
    gpu_by_lane: dict[int, tuple[I64, np.ndarray]] = {}
    for lane in by_lane:
        sel = l_lane == lane
        idx = l_idx[sel]
        t = l_ts[sel]
        o = np.argsort(t, kind="stable")
        gpu_by_lane[lane] = (idx[o], t[o])

    # unlaunched GPU ops: place by time inside same-named gpu_user_annotation ranges
    unlaunched = np.flatnonzero(~launched)
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
            inside = unlaunched[(u_ts >= s) & (u_ts <= e)]
            if inside.size:
                placed.setdefault(inst, []).append(inside)
                n_placed += int(inside.size)
    out.unplaced_gpu_ops = int(unlaunched.size) - n_placed

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
        gidx, gt = gpu_by_lane[lane]
        a, b = np.searchsorted(gt, start, "left"), np.searchsorted(gt, end, "right")
        gpu = gidx[a:b]
        if i in placed:
            gpu = np.concatenate([gpu, *placed[i]])
        gpu = gpu[np.argsort(gpu_ts[gpu], kind="stable")].astype(np.int64)
        out.instances.append(Instance(r, start, end, cpu, gpu))
    return out


def cpu_nesting(trace: Trace, rows: I64) -> tuple[I64, F64]:
    """The depth and self time of each CPU-op row in rows (in rows' order).

    An op's parent is the innermost op among rows, on its lane, that started before it (the longer
    first when two start together) and is still running when it starts (one that ends as it starts
    does not hold it), as a stack walked in that order finds it; depth counts the enclosing ops,
    and self time is the duration less that of the direct children: when the op, and not an op
    inside it, was running. Vectorised: a sweep over start and end points gives each op's depth,
    and one search its parent.
    """
    n = int(rows.size)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    lane, ts, dur = trace.lane[rows], trace.ts[rows], trace.dur[rows]
    order = np.lexsort((-dur, ts, lane))
    lane, ts, dur = lane[order], ts[order], dur[order]
    pos = np.arange(n, dtype=np.int64)
    zero = dur <= 0
    # at one instant ends come before starts, except a zero-length op's end, right after its start
    point = np.concatenate([ts, np.where(zero, ts, ts + dur)])
    group = np.concatenate([np.ones(n, np.int8), zero.astype(np.int8)])
    seq = np.concatenate([2 * pos, 2 * pos + 1])
    step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    sweep = np.lexsort((seq, group, point, np.concatenate([lane, lane])))
    level = np.cumsum(step[sweep])
    starts = sweep < n
    depth = np.empty(n, np.int64)
    depth[sweep[starts]] = level[starts] - 1
    # the parent: the last earlier op one level up, found among the keys (depth, position)
    keys = np.sort(depth * n + pos)
    j = np.searchsorted(keys, (depth - 1) * n + pos) - 1
    cand = keys[np.maximum(j, 0)]
    parent = np.where((depth > 0) & (j >= 0) & (cand // n == depth - 1), cand % n, -1)
    parent = np.where((parent >= 0) & (lane[np.maximum(parent, 0)] == lane), parent, -1)
    has = parent >= 0
    children = np.bincount(parent[has], weights=dur[has], minlength=n)
    depth_out = np.empty(n, np.int64)
    self_out = np.empty(n, np.float64)
    depth_out[order] = depth
    self_out[order] = np.maximum(dur - children, 0.0)
    return depth_out, self_out
