"""Attention's share of a model step, measured two independent ways from one trace.

A model run's trace holds, per profiled step, one ``model_step`` range and inside it one
``attn_fwd/layer.N`` range per attention call (and ``attn_bwd/layer.N`` for a backward pass),
placed by attnprof around the model's attention function. From it:

- annotated share: the time inside the per-layer ranges / the step's time;
- analyser share: the time of the ops the analyser itself recognises as attention, with no use
  of the ranges: fused attention ops (the analyser's fused-op rule, attnprof.analysis.attribution.cpu_ops,
  and ``aten::scaled_dot_product_attention`` around them) and unfused attention, the
  GEMM -> softmax -> GEMM chains the analyser confirms by dataflow (cpu_ops.unfused_chains, the
  rule behind UNFUSED_ATTENTION; by order alone, within 24 ops, on a trace without shapes; a
  softmax backward with GEMMs around it in a backward pass), from the start of the GEMM before
  to the end of the GEMM after; each
  widened over the layout, copy and repeat ops right next to it (GQA's repeat_kv or
  repeat_interleave, the output's transpose and contiguous copy); plus, on a GPU, every kernel the classifier puts in the
  ``attention`` category.

Times are the CPU ops' own durations on a CPU-only trace; on a trace with GPU kernels they are
the kernel time launched from inside the ranges (or spans) over the kernel time launched from
inside the step. Both shares include the profiler's overhead alike; they are the same ratio
measured by two rules, so their difference is the part of attention one rule sees and the
other does not (a dtype conversion or a mask op between the layout ops and the GEMM, say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from attnprof.analysis.attribution.classify import cpu_category
from attnprof.analysis.attribution.cpu_groups import GEMM_OPS as _GEMM_OPS
from attnprof.analysis.attribution.cpu_ops import _FUSED
from attnprof.trace.model import Kind, Trace, nesting_order

__all__ = ["BWD_RANGE", "FWD_RANGE", "STEP_RANGE", "StepShares", "model_shares"]

STEP_RANGE = "model_step"
FWD_RANGE = re.compile(r"^attn_fwd/layer\.(\d+)$")
BWD_RANGE = re.compile(r"^attn_bwd/layer\.(\d+)$")
_SOFTMAX_BACKWARD = "aten::_softmax_backward_data"
_SOFTMAX = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax", _SOFTMAX_BACKWARD}
_SDPA = "aten::scaled_dot_product_attention"
_WINDOW = 24
# copies that only repeat their input (GQA's repeat_interleave of k and v), beside the layout and
# copy categories of attnprof.analysis.attribution.classify.cpu_category
_REPEATS = {"aten::repeat_interleave", "aten::repeat"}


@dataclass
class StepShares:
    """Per profiled step (lists have one entry per step, in order)."""

    step_us: list[float] = field(default_factory=list)
    annotated_us: list[float] = field(default_factory=list)
    analyser_us: list[float] = field(default_factory=list)
    # range name (attn_fwd/layer.3) -> time per step; calls: range name -> instances per step
    layers: dict[str, list[float]] = field(default_factory=dict)
    calls: dict[str, list[int]] = field(default_factory=dict)
    device_time: bool = False  # times are GPU kernel times (else CPU op durations)

    @property
    def steps(self) -> int:
        return len(self.step_us)

    def shares(self, which: str) -> list[float]:
        num = self.annotated_us if which == "annotated" else self.analyser_us
        return [n / s if s > 0 else 0.0 for n, s in zip(num, self.step_us, strict=True)]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _parents(ts: np.ndarray, end: np.ndarray) -> list[int]:
    """Index of the innermost op enclosing each op (-1 at the top), ops sorted by (start, -dur)."""
    parent: list[int] = []
    stack: list[int] = []
    for i in range(ts.size):
        while stack and end[stack[-1]] <= ts[i]:
            stack.pop()
        parent.append(stack[-1] if stack else -1)
        stack.append(i)
    return parent


def _widen(i: int, step: int, parent: list[int], movement: np.ndarray) -> int:
    """Move index i over the run of data-movement siblings next to it (step -1: before, +1:
    after). Only siblings: a layout op inside a GEMM (addmm's expand, say) never pulls the span
    into the GEMM."""
    j = i + step
    while 0 <= j < len(parent):
        if parent[j] == parent[i]:
            if not movement[j]:
                break
            i = j
        elif step < 0 and parent[i] != -1 and j == parent[i]:
            break  # reached our own parent: nothing more before us at this level
        j += step
    return i


def _analyser_spans(trace: Trace, ops: np.ndarray, chained: set[int] | None) -> list[tuple[float, float]]:
    """[start, end] of what the analyser's rules call attention among `ops`: each fused op, and
    each GEMM -> softmax -> GEMM chain (`chained`: the rows of the chains the analyser confirmed
    by dataflow, attnprof.analysis.attribution.cpu_ops.unfused_chains; None for a trace without shapes, where
    the order alone decides), widened over the layout, copy and repeat ops right next to it at
    the same nesting level (GQA's repeat_kv before, the output transpose and contiguous copy
    after), which move the attention's own inputs and output."""
    ops = ops[nesting_order(trace.ts[ops], trace.dur[ops])]
    names = trace.names
    nm = [names[int(i)] for i in trace.name[ops].tolist()]
    ts = trace.ts[ops]
    end = ts + trace.dur[ops]
    parent = _parents(ts, end)
    movement = np.array([n in _REPEATS or cpu_category(n) in ("layout", "copy") for n in nm], bool)
    rows = ops.tolist()
    any_gemm = np.array([n in _GEMM_OPS for n in nm], bool)
    gemm = np.array([g and (chained is None or r in chained) for g, r in zip(any_gemm, rows, strict=True)])
    found: list[tuple[int, int]] = []
    for i, n in enumerate(nm):
        if (n == _SDPA or _FUSED.search(n)) and not (parent[i] >= 0 and found and found[-1][0] == parent[i]):
            found.append((i, i))
    for i, n in enumerate(nm):
        backward = n == _SOFTMAX_BACKWARD
        if n not in _SOFTMAX or (chained is not None and not backward and rows[i] not in chained):
            continue
        # confirmed chains: the nearest chained GEMMs, at any distance (a bf16 bmm on a CPU records
        # dozens of ops inside it); by order alone (no shapes, or a backward pass, which the
        # dataflow rule does not cover): any GEMM within _WINDOW ops
        by_order = chained is None or backward
        g = any_gemm if by_order else gemm
        w = _WINDOW if by_order else len(nm)
        before = [j for j in range(max(0, i - w), i) if g[j] and end[j] <= ts[i] + 1e-3]
        after = [j for j in range(i + 1, min(len(nm), i + 1 + w)) if g[j] and ts[j] >= end[i] - 1e-3]
        if before and after:
            # the outermost GEMM op before (aten::matmul around its aten::bmm), the first one after
            a, b = min(j for j in before if end[j] >= end[before[-1]]), after[0]
            # lift each to the outermost GEMM around it: the analyser may name the inner op
            while parent[a] >= 0 and nm[parent[a]] in _GEMM_OPS:
                a = parent[a]
            while parent[b] >= 0 and nm[parent[b]] in _GEMM_OPS:
                b = parent[b]
            found.append((a, b))
    spans = []
    for a, b in found:
        first, last = _widen(a, -1, parent, movement), _widen(b, 1, parent, movement)
        spans.append((float(ts[first]), float(max(end[b], end[last]))))
    return spans


def model_shares(trace: Trace) -> StepShares:
    """Annotated and analyser attention time in each `model_step` range of `trace`."""
    from attnprof.analysis.attribution.classify import classify
    from attnprof.analysis.attribution.cpu_ops import unfused_chains
    from attnprof.analysis.attribution.links import link
    from attnprof.analysis.attribution.regions import find_region

    names = trace.names
    ann = trace.rows(Kind.ANNOTATION, Kind.CPU_OP)
    ann_names = [names[int(i)] for i in trace.name[ann].tolist()]
    steps = [int(r) for r, n in zip(ann.tolist(), ann_names, strict=True) if n == STEP_RANGE]
    ranges = [
        (int(r), n)
        for r, n in zip(ann.tolist(), ann_names, strict=True)
        if FWD_RANGE.match(n) or BWD_RANGE.match(n)
    ]
    steps.sort(key=lambda r: trace.ts[r])
    out = StepShares()
    cpu = trace.rows(Kind.CPU_OP)
    cpu = cpu[np.argsort(trace.ts[cpu], kind="stable")]

    links = link(trace)
    chained: set[int] | None = None
    if steps and trace.shapes:
        # the analyser's own dataflow rule over the step ranges: confirmed chains only
        chained = set(unfused_chains(trace, find_region(trace, links, region=STEP_RANGE)).ops.tolist())
    gpu = links.gpu_rows
    out.device_time = bool(trace.rows(Kind.KERNEL).size)
    launch_ts = np.where(links.launch >= 0, trace.ts[np.maximum(links.launch, 0)], np.nan)
    launch_lane = np.where(links.launch >= 0, trace.lane[np.maximum(links.launch, 0)], -1)
    gpu_dur = trace.dur[gpu]
    is_attn_kernel = np.array(
        [classify(names[int(trace.name[r])]).category == "attention" for r in gpu.tolist()], bool
    )

    def device_us(intervals: list[tuple[float, float]], lane: int) -> float:
        if not intervals or gpu.size == 0:
            return 0.0
        hit = np.zeros(gpu.size, bool)
        for s, e in intervals:
            hit |= (launch_lane == lane) & (launch_ts >= s) & (launch_ts <= e)
        return float(gpu_dur[hit].sum())

    for k, r in enumerate(steps):
        s, e, lane = float(trace.ts[r]), float(trace.ts[r] + trace.dur[r]), int(trace.lane[r])
        inside = [(rr, n) for rr, n in ranges if s <= trace.ts[rr] <= e]
        for rr, n in inside:
            lst = out.layers.setdefault(n, [0.0] * len(steps))
            cnt = out.calls.setdefault(n, [0] * len(steps))
            interval = [(float(trace.ts[rr]), float(trace.ts[rr] + trace.dur[rr]))]
            lst[k] += (
                device_us(interval, int(trace.lane[rr]))
                if out.device_time
                else interval[0][1] - interval[0][0]
            )
            cnt[k] += 1
        ops = cpu[(trace.ts[cpu] >= s) & (trace.ts[cpu] <= e) & (trace.lane[cpu] == lane)]
        spans = _analyser_spans(trace, ops, chained)
        range_iv = [(float(trace.ts[rr]), float(trace.ts[rr] + trace.dur[rr])) for rr, _ in inside]
        if out.device_time:
            step_us = device_us([(s, e)], lane)
            annotated = device_us(range_iv, lane)
            in_step = (launch_lane == lane) & (launch_ts >= s) & (launch_ts <= e)
            hit = np.zeros(gpu.size, bool)
            for a, b in spans:
                hit |= in_step & (launch_ts >= a) & (launch_ts <= b)
            analysed = float(gpu_dur[hit | (in_step & is_attn_kernel)].sum())
        else:
            step_us, annotated, analysed = e - s, _union(range_iv), _union(spans)
        out.step_us.append(step_us)
        out.annotated_us.append(annotated)
        out.analyser_us.append(analysed)
    return out
