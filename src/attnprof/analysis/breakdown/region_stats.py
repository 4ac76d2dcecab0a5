"""A region's statistics: per instance (device time, span, busy union, idle and what the host
did meanwhile, communication), averaged per instance, its first instance's ops in order, and its
CPU ops by name."""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from attnprof.analysis.attribution.classify import CAT_INDEX, CATEGORIES, Classification
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.regions import RULE_NAMES, Instance, Region, cpu_nesting
from attnprof.analysis.records.result import (
    Attribution,
    Backward,
    CpuOp,
    CpuOpByName,
    InstanceStat,
    RegionComm,
    RegionGpuOp,
    RegionIdle,
    RegionStat,
    ThreadOps,
    TopCpuOp,
)
from attnprof.analysis.timeline.idle import HostActivity, IdleBreakdown, idle_breakdowns
from attnprof.analysis.timeline.intervals import Intervals, union
from attnprof.analysis.timeline.overlap import comm_overlap
from attnprof.trace.model import Trace, nesting_order, top_sums, unique
from attnprof.units import short_name

__all__ = ["idle_per_instance", "region_comm", "region_stats"]


def idle_per_instance(
    trace: Trace, links: Links, reg: Region, host: HostActivity, g_end: np.ndarray
) -> list[IdleBreakdown]:
    """Per instance, the device's idle time in its window and what the host did meanwhile
    (g_end: each GPU op's end with overruns clipped, attnprof.analysis.timeline.sanitize)."""
    windows: list[tuple[float, float, float | None]] = []
    for inst in reg.instances:
        if inst.row < 0:  # whole trace: from the first device op to the last
            b = host.busy
            windows.append((float(b[0][0]), float(b[1][-1]), None) if b[0].size else (0.0, 0.0, None))
            continue
        end = max(inst.end, float(g_end[inst.gpu].max())) if inst.gpu.size else inst.end
        la = links.launch[inst.gpu]
        first = float(trace.ts[la[la >= 0]].min()) if (la >= 0).any() else None
        windows.append((inst.start, end, first))
    return idle_breakdowns(host, windows)


def region_stats(
    trace: Trace,
    links: Links,
    reg: Region,
    gpu_cat: np.ndarray,
    unique_names: list[str],
    inv: np.ndarray,
    classes: list[Classification],
    idle: list[IdleBreakdown],
    busy_end: np.ndarray,
) -> RegionStat:
    insts = reg.instances
    n = max(len(insts), 1)
    g_rows = links.gpu_rows
    g_ts = trace.ts[g_rows]
    g_end = busy_end  # overruns clipped (attnprof.analysis.timeline.sanitize)
    per: list[InstanceStat] = []
    cat_counts = np.zeros(len(CATEGORIES), np.int64)
    rule_counts = np.zeros(len(RULE_NAMES), np.int64)
    launch_lanes: list[np.ndarray] = []  # per instance, its launched ops' lanes in order
    bwd_ops, bwd_time = 0, 0.0
    for inst, idl in zip(insts, idle, strict=True):
        gi = inst.gpu
        busy = float(trace.dur[g_rows[gi]].sum()) if gi.size else 0.0
        span = float(g_end[gi].max() - g_ts[gi].min()) if gi.size else 0.0
        bu = union(g_ts[gi], g_end[gi])
        cat_counts += np.bincount(gpu_cat[gi], minlength=len(CATEGORIES)) if gi.size else 0
        rule_counts += np.bincount(inst.rule, minlength=len(RULE_NAMES)) if inst.rule.size else 0
        if gi.size:
            la = links.launch[gi]
            launch_lanes.append(trace.lane[la[la >= 0]])
        bwd_ops += int(inst.bwd.size)
        bwd_time += float(trace.dur[g_rows[inst.bwd]].sum()) if inst.bwd.size else 0.0
        per.append(
            InstanceStat(
                start_us=round(inst.start, 3),
                cpu_time_us=round(inst.cpu_time_us, 3),
                cpu_ops=int(inst.cpu_ops.size),
                gpu_ops=int(gi.size),
                gpu_time_us=round(busy, 3),
                gpu_span_us=round(span, 3),
                gpu_busy_union_us=round(float((bu[1] - bu[0]).sum()), 3),
                idle=idl.record(),
            )
        )

    def mean(key: str) -> float:
        return round(sum(getattr(p, key) for p in per) / n, 3) if per else 0.0

    first = insts[0].gpu[:_FIRST_OPS] if insts else np.zeros(0, np.int64)
    t0 = float(g_ts[first].min()) if first.size else 0.0
    shorts = {int(k): short_name(unique_names[int(k)]) for k in unique(inv[first]).tolist()}  # per name
    gpu_ops = [
        RegionGpuOp(
            name=shorts[int(inv[i])],
            category=CATEGORIES[int(gpu_cat[i])],
            start_us=round(float(g_ts[i]) - t0, 3),
            time_us=round(float(trace.dur[g_rows[i]]), 3),
        )
        for i in first.tolist()
    ]
    k = min(len(insts), 200) or 1
    top_ops = _top_cpu_ops(trace, insts[:200]) if len(insts) <= 2000 else []
    cpu_ops, cpu_ops_by_name = _cpu_ops(trace, insts)
    return RegionStat(
        name=reg.name,
        selector=reg.selector,
        instances=len(insts),
        gpu_ops_per_instance=mean("gpu_ops"),
        cpu_ops_per_instance=mean("cpu_ops"),
        gpu_time_us_per_instance=mean("gpu_time_us"),
        gpu_span_us_per_instance=mean("gpu_span_us"),
        gpu_busy_union_us_per_instance=mean("gpu_busy_union_us"),
        cpu_time_us_per_instance=mean("cpu_time_us"),
        threads=reg.threads,
        attribution=Attribution(
            rules={RULE_NAMES[i]: round(int(c) / n, 3) for i, c in enumerate(rule_counts.tolist()) if c},
            threads=[
                ThreadOps(thread="/".join(trace.lanes[lane]), gpu_ops_per_instance=round(c / n, 3))
                for lane, c in _most_common(launch_lanes, 8)
            ],
        ),
        backward=Backward(
            linked_by=reg.backward_link,
            gpu_ops_per_instance=round(bwd_ops / n, 3),
            gpu_time_us_per_instance=round(bwd_time / n, 3),
        ),
        idle=_idle_mean(idle),
        unplaced_gpu_ops=reg.unplaced_gpu_ops,
        gpu_ops=gpu_ops,
        categories_per_instance={
            CATEGORIES[i]: round(int(c) / n, 3) for i, c in enumerate(cat_counts.tolist()) if c
        },
        top_cpu_ops=[TopCpuOp(name=trace.names[a], per_instance=round(b / k, 3)) for a, b in top_ops],
        per_instance=per[:100],
        cpu_ops=cpu_ops,
        cpu_ops_by_name=cpu_ops_by_name,
        # only a captured range's instances have an imported row (attnprof.analysis.attribution.regions)
        replayed_instances=sum(1 for i in insts if 0 <= trace.imported_from <= i.row),
    )


def region_comm(
    trace: Trace, links: Links, reg: Region, gpu_cat: np.ndarray, compute: Intervals, g_end: np.ndarray
) -> RegionComm | None:
    """The region's communication ops per instance, and the part of them no compute hides."""
    is_comm = gpu_cat == CAT_INDEX["communication"]
    g = links.gpu_rows
    total = exposed = 0.0
    for inst in reg.instances:
        gi = inst.gpu[is_comm[inst.gpu]]
        ov = comm_overlap(trace.ts[g[gi]], g_end[gi], compute)
        total += ov.comm_us
        exposed += ov.exposed_us
    if total <= 0:
        return None
    n = max(len(reg.instances), 1)
    return RegionComm(
        time_us_per_instance=round(total / n, 3),
        exposed_us_per_instance=round(exposed / n, 3),
        hidden_pct=round(100.0 * (total - exposed) / total, 2),
    )


def _idle_mean(idle: list[IdleBreakdown]) -> RegionIdle:
    """Idle breakdown summed over instances, then per instance."""
    n = max(len(idle), 1)
    window = sum(i.window_us for i in idle)
    busy = sum(i.busy_us for i in idle)
    idle_us = sum(i.idle_us for i in idle)
    causes = {k: round(sum(i.causes[k] for i in idle) / n, 3) for k in (idle[0].causes if idle else {})}
    before = [i.before_first_launch_us for i in idle if i.before_first_launch_us is not None]
    return RegionIdle(
        before_first_launch_us_per_instance=round(sum(before) / len(before), 3) if before else None,
        window_us_per_instance=round(window / n, 3),
        busy_us_per_instance=round(busy / n, 3),
        idle_us_per_instance=round(idle_us / n, 3),
        idle_pct=round(100.0 * idle_us / window, 2) if window > 0 else 0.0,
        host_during_idle_us_per_instance=causes,
    )


_FIRST_OPS = 500  # ops listed in order from a region's first instance, GPU and CPU alike


def _top_cpu_ops(trace: Trace, insts: list[Instance]) -> list[tuple[int, int]]:
    """The 15 CPU op names (ids) most recorded in these instances, with their counts: as a
    Counter updated instance by instance with each instance's names in id order gives them (ties
    in the order a name first appears so)."""
    cpu = list(map(attrgetter("cpu_ops"), insts))
    if not cpu:
        return []
    sizes = np.fromiter(map(len, cpu), np.int64, count=len(cpu))
    names = trace.name[np.concatenate(cpu)].astype(np.int64)
    # (instance, name) pairs in that order, and how often each is recorded
    pair, count = np.unique(
        np.repeat(np.arange(sizes.size), sizes) * len(trace.names) + names, return_counts=True
    )
    return [(a, int(b)) for a, b in top_sums(pair % len(trace.names), count.astype(np.float64), 15)]


def _most_common(parts: list[np.ndarray], k: int) -> list[tuple[int, int]]:
    """Counter(values of parts in order).most_common(k), counted by numpy: the k most frequent
    values, ties in the order they first appear."""
    values = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not values.size:
        return []
    u, first, counts = np.unique(values, return_index=True, return_counts=True)
    top = np.lexsort((first, -counts))[:k]
    return list(zip(u[top].tolist(), counts[top].tolist(), strict=True))


def _cpu_ops(trace: Trace, insts: list[Instance]) -> tuple[list[CpuOp], list[CpuOpByName]]:
    """The first instance's CPU ops in order (start, the longer first: an op before those inside
    it), and per op name the count and self time per instance, over every instance."""
    if not insts:
        return [], []
    # the distinct rows, sorted: a flag per trace row holds less than the sort in unique(), and
    # the ops of every instance in one column are made after cpu_nesting's peak, not during it
    seen = np.zeros(trace.kind.size, bool)
    for inst in insts:
        seen[inst.cpu_ops] = True
    rows = np.flatnonzero(seen)
    del seen
    depth, self_us = cpu_nesting(trace, rows)
    first = insts[0].cpu_ops
    first = first[nesting_order(trace.ts[first], trace.dur[first])][:_FIRST_OPS]
    at = np.searchsorted(rows, first)
    level = depth[at] - (int(depth[at].min()) if at.size else 0)
    ordered = [
        CpuOp(
            name=trace.names[int(trace.name[r])],
            start_us=round(float(trace.ts[r]) - insts[0].start, 3),
            dur_us=round(float(trace.dur[r]), 3),
            self_us=round(s, 3),
            depth=d,
        )
        for r, s, d in zip(first.tolist(), self_us[at].tolist(), level.tolist(), strict=True)
    ]
    del depth
    every = np.concatenate([inst.cpu_ops for inst in insts])
    # per name id, summed in the order of every (as over np.unique's inverse, without its sort)
    name = trace.name[every]
    counts = np.bincount(name, minlength=len(trace.names))
    times = np.bincount(name, weights=self_us[np.searchsorted(rows, every)], minlength=len(trace.names))
    del name
    names = np.flatnonzero(counts)
    counts, times = counts[names], times[names]
    n = len(insts)
    by_name = [
        CpuOpByName(
            name=trace.names[int(names[i])],
            per_instance=round(int(counts[i]) / n, 3),
            self_us_per_instance=round(float(times[i]) / n, 3),
        )
        for i in np.argsort(-times, kind="stable").tolist()
    ]
    return ordered, by_name
