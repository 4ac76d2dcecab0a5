"""One trace in, one TraceAnalysis out: load, classify, link, regions, occupancy, evidence, findings.

Every table is computed with numpy over columns; Python loops run over unique kernel names,
region instances or findings, never over events.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from attnprof.analysis.classify import CATEGORIES, Classification, classify, device_event_category
from attnprof.analysis.compiled import compiled_code
from attnprof.analysis.context import Context
from attnprof.analysis.cpu_ops import cpu_evidence
from attnprof.analysis.cpu_share import cpu_share
from attnprof.analysis.devices import device_info, gap_warnings, low_precision_claim
from attnprof.analysis.idle import HostActivity, IdleBreakdown, host_activity, idle_breakdown
from attnprof.analysis.intervals import Intervals, union
from attnprof.analysis.links import Links, launched_in, link
from attnprof.analysis.occupancy import DeviceLimits, theoretical_occupancy
from attnprof.analysis.overlap import CommOverlap, comm_overlap, compute_union
from attnprof.analysis.perf_model import perf_model
from attnprof.analysis.phases import phases
from attnprof.analysis.provenance import NAME_RULE, Provenance, attention_provenance
from attnprof.analysis.provenance import RULE_NAMES as PROVENANCE_RULES
from attnprof.analysis.regions import RULE_NAMES, Instance, Region, backward_links, cpu_nesting, find_region
from attnprof.analysis.replay import graph_replays
from attnprof.analysis.result import (
    AttentionShare,
    Attribution,
    Backward,
    CategoryStat,
    CommShare,
    CpuOp,
    CpuOpByName,
    Device,
    InstanceStat,
    KernelStat,
    LaunchApi,
    MemoryOp,
    Occupancy,
    RegionComm,
    RegionGpuOp,
    RegionIdle,
    RegionStat,
    Share,
    ThreadOps,
    TimeShare,
    TopCpuOp,
    Totals,
    TraceAnalysis,
    TraceInfo,
)
from attnprof.analysis.roofline import roofline
from attnprof.analysis.sanitize import sanitize
from attnprof.trace.model import Kind, Trace, unique
from attnprof.units import short_name
from attnprof.workload import Workload

__all__ = ["analyze_trace"]

# Kineto reports 0% achieved occupancy for every kernel launched with more than 48 KB of
# (dynamic) shared memory, whatever the launch API (seen across real traces): such a 0 is a
# profiler gap, not a measurement
SMEM_OCCUPANCY_GAP = 48 * 1024


_CAT_INDEX = {c: i for i, c in enumerate(CATEGORIES)}


def analyze_trace(
    trace: Trace,
    *,
    path: str = "",
    region: str | None = None,
    workload: Workload | None = None,
    top: int = 20,
    cpu_peak: tuple[float, str] | None = None,
    materialises: bool | None = None,
    flops_executed: float | None = None,
    threads: str = "own",
    peak: tuple[float, float] | None = None,
) -> TraceAnalysis:
    from attnprof.analysis.cpu_ops import unfused_chains
    from attnprof.analysis.findings import evaluate

    links = link(trace)
    g = links.gpu_rows
    g_kind = trace.kind[g]
    g_name = trace.name[g]
    uniq, inv = np.unique(g_name, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    unique_names = [trace.names[int(i)] for i in uniq.tolist()]
    classes = [classify(n) for n in unique_names]
    name_cat = (
        np.array([_CAT_INDEX[c.category] for c in classes], np.int16) if classes else np.zeros(0, np.int16)
    )
    gpu_cat = name_cat[inv] if inv.size else np.zeros(0, np.int16)
    gpu_cat = np.where(g_kind == Kind.MEMCPY, _CAT_INDEX["memcpy"], gpu_cat)
    gpu_cat = np.where(g_kind == Kind.MEMSET, _CAT_INDEX["memset"], gpu_cat).astype(np.int16)
    dev = g_kind == Kind.DEVICE
    if dev.any():  # other accelerators' device events: by their own names
        dev_cat = {int(i): _CAT_INDEX[device_event_category(unique_names[int(i)])] for i in unique(inv[dev])}
        gpu_cat[dev] = [dev_cat[int(i)] for i in inv[dev].tolist()]
    g_dur = trace.dur[g]

    is_k = g_kind == Kind.KERNEL
    is_cpy = g_kind == Kind.MEMCPY
    is_set = g_kind == Kind.MEMSET
    kernel_time = float(g_dur[is_k].sum())
    busy_mask = gpu_cat != _CAT_INDEX["sync"]
    clean = sanitize(trace, links, busy_mask)
    host = host_activity(trace, links, busy_mask, clean.busy_end)
    g_ts = trace.ts[g]
    # for the exposed communication: compute ops with the ends busy time uses (sanitize)
    compute = compute_union(g_ts, clean.busy_end, gpu_cat)
    totals = Totals(
        kernels=int(is_k.sum()),
        kernel_time_us=round(kernel_time, 3),
        memcpy=int(is_cpy.sum()),
        memcpy_time_us=round(float(g_dur[is_cpy].sum()), 3),
        memset=int(is_set.sum()),
        memset_time_us=round(float(g_dur[is_set].sum()), 3),
        cpu_ops=int(trace.own(trace.rows(Kind.CPU_OP)).size),
        gpu_ops=int(g.size),
        unique_kernels=int(unique(g_name[is_k]).size),
        unlaunched_gpu_ops=int((links.launch < 0).sum()),
        graph_kernels=int((links.graph & is_k).sum()),
        # other accelerators' device events (MTIA compute, DMA, waits): not kernels, memcpys or
        # memsets, but device work all the same
        other_device_ops=int(dev.sum()),
        other_device_time_us=round(float(g_dur[dev].sum()), 3),
        # the union of device-op intervals (streams that overlap count once), and its span
        device_busy_us=round(float((host.busy[1] - host.busy[0]).sum()), 3),
        device_span_us=round(float(host.busy[1][-1] - host.busy[0][0]), 3) if host.busy[0].size else 0.0,
    )

    # categories (GPU ops only)
    gpu_time = float(g_dur.sum())
    counts = np.bincount(gpu_cat, minlength=len(CATEGORIES))
    times = np.bincount(gpu_cat, weights=g_dur, minlength=len(CATEGORIES))
    categories = [
        CategoryStat(
            category=CATEGORIES[i],
            count=int(counts[i]),
            time_us=round(float(times[i]), 3),
            pct_time=round(100.0 * float(times[i]) / gpu_time, 2) if gpu_time > 0 else 0.0,
        )
        for i in np.argsort(-times, kind="stable").tolist()
        if counts[i]
    ]

    reg = find_region(trace, links, region, threads=threads)
    evidence = cpu_evidence(trace, reg)
    unfused = unfused_chains(trace, reg)
    # the share is the whole trace's: its unfused chains are looked for on every thread
    cpu_all = trace.own(trace.rows(Kind.CPU_OP))
    chain_ops = unfused.ops
    if reg.selector != "whole trace":
        whole = Region("whole trace", "whole trace", [Instance(-1, 0.0, 0.0, cpu_all, np.zeros(0, np.int64))])
        chain_ops = unfused_chains(trace, whole).ops
    chain_fwd = launched_in(trace, links, chain_ops)
    chain_bwd = launched_in(trace, links, _linked_backward_ops(trace, cpu_all, chain_ops))
    # every communication op, attention's or not, for what compute hides of it
    is_comm = gpu_cat == _CAT_INDEX["communication"]
    comm_ov = comm_overlap(g_ts[is_comm], clean.busy_end[is_comm], compute)
    prov = attention_provenance(
        trace,
        links,
        gpu_cat == _CAT_INDEX["attention"],
        np.concatenate([chain_fwd, chain_bwd]),
        np.isin(gpu_cat, [_CAT_INDEX["communication"], _CAT_INDEX["sync"]]),
        gpu_cat == _CAT_INDEX["gemm"],
        np.isin(gpu_cat, [_CAT_INDEX["other"], _CAT_INDEX["triton"]]),
    )
    share = _share(trace, links, gpu_cat, inv, classes, chain_fwd, chain_bwd, comm_ov, prov, unique_names)
    if share.device_time_us <= 0:  # no device time: where the CPU time went instead
        share = cpu_share(trace, chain_ops) or share

    device, limits = device_info(trace, links)
    kernels = _kernel_table(trace, links, inv, unique_names, classes, limits, kernel_time, device, prov)
    memory_ops = _memory_table(trace, links, inv, unique_names, gpu_cat)
    launch_apis = _launch_table(links, is_k)
    idle = _idle(trace, links, reg, host, clean.busy_end)
    region_stat = _region_stat(trace, links, reg, gpu_cat, unique_names, inv, classes, idle, clean.busy_end)
    region_stat.communication = _region_comm(trace, links, reg, gpu_cat, compute, clean.busy_end)
    graphs, graph_notes = graph_replays(trace, links, busy_mask, share.device_time_us)
    compiled = compiled_code(trace, links, busy_mask, unique_names, inv, share.device_time_us)
    phase_split = phases(trace, links, busy_mask, prov.attention, unique_names, inv, device, peak)

    roof = None
    if workload is not None:
        mat = materialises
        if mat is None:  # the run did not say (or no run): the trace's own evidence, as for any trace
            mat = bool(evidence.unfused_sequences) or any(
                op.category == "softmax" for op in region_stat.gpu_ops
            )
        roof = roofline(
            workload,
            device=device,
            region=region_stat,
            materialises=mat,
            flops_executed=flops_executed,
            cpu_peak_tflops=cpu_peak[0] if cpu_peak else None,
            cpu_peak_source=cpu_peak[1] if cpu_peak else None,
        )

    # the per-op model: every op with recorded shapes, its cost, rate and roofline
    ops, perf = perf_model(
        trace, links, device, work=busy_mask, busy_us=totals.device_busy_us, peak=peak, cpu_peak=cpu_peak
    )

    gaps, gap_facts = gap_warnings(trace, links)
    ctx = Context(
        trace=trace,
        links=links,
        gpu_cat=gpu_cat,
        gpu_class=classes,
        gpu_name_idx=inv,
        gpu_unique_names=unique_names,
        region=reg,
        region_stat=region_stat,
        cpu=evidence,
        device=device,
        kernels=kernels,
        totals=totals,
        roofline=roof,
        workload=workload,
        idle=idle,
        host=host,
        gap_facts=gap_facts,
        unfused=unfused,
        ops=ops,
    )
    findings = evaluate(ctx)
    info = TraceInfo(
        events=int(trace.metadata.get("events_total", trace.n_events)),
        kept_events=trace.imported_from if trace.imported_from >= 0 else trace.n_events,
        dropped=trace.dropped,
        schema_version=trace.metadata.get("schemaVersion"),
        rank=_rank(trace),
        has_flows=bool(trace.flow_id.size),
        has_device_properties=bool(trace.metadata.get("deviceProperties_present")),
        raw_json_bytes=trace.raw_bytes,
        gaps=gap_facts,
        sanitation=clean.record,
    )
    warnings = list(trace.warnings) + gaps + clean.warnings + graph_notes
    n_dev = int(dev.sum())
    if n_dev:
        cats = sorted({trace.categories[int(c)] for c in unique(trace.cat[g[dev]])})
        warnings.append(
            f"{n_dev} device events of categories {', '.join(cats)} are counted as device ops "
            "(totals.other_device_ops, categories), not as kernels, memcpys or memsets"
        )
    return TraceAnalysis(
        source=trace.source,
        path=path,
        device=device,
        trace=info,
        totals=totals,
        categories=categories,
        kernels=kernels[:top] if top and top > 0 else kernels,
        memory_ops=memory_ops,
        launch_apis=launch_apis,
        regions=[region_stat],
        roofline=roof,
        findings=findings,
        repairs=list(trace.repairs),
        warnings=warnings,
        share=share,
        graphs=graphs,
        compiled=compiled,
        ops=ops,
        perf_model=perf,
        phases=phase_split,
    )


def _rank(trace: Trace) -> int | None:
    info = trace.metadata.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    return None


def _kernel_table(
    trace: Trace,
    links: Links,
    inv: np.ndarray,
    unique_names: list[str],
    classes: list[Classification],
    limits: DeviceLimits | None,
    kernel_time: float,
    device: Device,
    prov: Provenance,
) -> list[KernelStat]:
    g = links.gpu_rows
    is_k = trace.kind[g] == Kind.KERNEL
    if not is_k.any():
        return []
    k_inv = inv[is_k]
    k_dur = trace.dur[g][is_k]
    k_api = links.api[is_k]
    n_names = len(unique_names)
    counts = np.bincount(k_inv, minlength=n_names)
    times = np.bincount(k_inv, weights=k_dur, minlength=n_names)
    # kernel columns are indexed by position among kernel rows; kernels appear in gpu_rows in the
    # same (file) order as in kernel_rows
    reg, smem, blk = trace.registers, trace.shared_mem, trace.block_threads
    ach = trace.achieved
    n_api = len(links.api_names)
    api_pairs = np.bincount(k_inv * n_api + k_api, minlength=n_names * n_api).reshape(n_names, n_api)
    n_rules = len(PROVENANCE_RULES) + 1  # the last column: not attention
    k_rule = np.where(prov.rule[is_k] >= 0, prov.rule[is_k], n_rules - 1).astype(np.int64)
    rule_pairs = np.bincount(k_inv * n_rules + k_rule, minlength=n_names * n_rules).reshape(n_names, n_rules)
    order = np.argsort(-times, kind="stable")
    rows = []
    for i in order.tolist():
        if counts[i] == 0:
            continue
        c = classes[i]
        sel = np.flatnonzero(k_inv == i)
        apis = {links.api_names[a]: int(n) for a, n in enumerate(api_pairs[i].tolist()) if n}
        occ = _occupancy(sel, reg, smem, blk, ach, k_dur, limits, apis)
        family, tensor_cores = low_precision_claim(c, device)
        rows.append(
            KernelStat(
                name=unique_names[i],
                short_name=short_name(unique_names[i]),
                category=c.category,
                family=family,
                tensor_cores=tensor_cores,
                precision=c.precision,
                direction=c.direction,
                count=int(counts[i]),
                time_us=round(float(times[i]), 3),
                mean_us=round(float(times[i]) / int(counts[i]), 3),
                pct_time=round(100.0 * float(times[i]) / kernel_time, 2) if kernel_time > 0 else 0.0,
                launch_apis=apis,
                occupancy=occ,
                attention_rules={
                    PROVENANCE_RULES[r]: int(c) for r, c in enumerate(rule_pairs[i, :-1].tolist()) if c
                }
                or None,
            )
        )
    return rows


def _occupancy(
    sel: np.ndarray,
    reg: np.ndarray,
    smem: np.ndarray,
    blk: np.ndarray,
    ach: np.ndarray,
    dur: np.ndarray,
    limits: DeviceLimits | None,
    apis: dict[str, int],
) -> Occupancy | None:
    r, s, b = reg[sel], smem[sel], blk[sel]
    have = (r >= 0) & (b > 0)
    a = ach[sel]
    has_ach = ~np.isnan(a)
    if not have.any() and not has_ach.any():
        return None
    # launches whose 0 is the profiler's gap, not a measurement
    gap = has_ach & (a == 0.0) & (s > SMEM_OCCUPANCY_GAP)
    valid = has_ach & ~gap
    achieved = None
    if valid.any():
        w = dur[sel][valid]
        achieved = float(np.average(a[valid], weights=w)) if w.sum() > 0 else float(a[valid].mean())
    measured = achieved is not None
    reason = None
    if not measured:
        reason = (
            f"the profiler reports 0 for kernels with more than {SMEM_OCCUPANCY_GAP // 1024} KB of shared "
            f"memory (this one: {int(s[gap].max()) if gap.any() else 0} B)"
            if gap.any()
            else "no achieved-occupancy figure in the trace"
        )
    out = Occupancy(
        achieved_pct=round(achieved, 2) if achieved is not None else None,
        measured=measured,
        not_measured_reason=reason,
        launches_not_measured=int(gap.sum()),
        theoretical_pct=None,
        blocks_per_sm=None,
        warps_per_sm=None,
        limiter=None,
        registers=None,
        threads_per_block=None,
        shared_mem_bytes=None,
    )
    if have.any():
        # the most common launch configuration of this kernel
        cfg = Counter(zip(r[have].tolist(), b[have].tolist(), np.maximum(s[have], 0).tolist(), strict=True))
        (regs, threads, shm), _ = cfg.most_common(1)[0]
        out.registers, out.threads_per_block, out.shared_mem_bytes = regs, threads, shm
        if limits is not None:
            occ = theoretical_occupancy(regs, threads, shm, limits)
            if occ is not None:
                out.blocks_per_sm, out.warps_per_sm = occ.blocks_per_sm, occ.warps_per_sm
                out.theoretical_pct, out.limiter = round(100.0 * occ.occupancy, 2), occ.limiter
    return out


def _memory_table(
    trace: Trace, links: Links, inv: np.ndarray, unique_names: list[str], gpu_cat: np.ndarray
) -> list[MemoryOp]:
    g = links.gpu_rows
    k = trace.kind[g]
    m = (k == Kind.MEMCPY) | (k == Kind.MEMSET) | ((k == Kind.DEVICE) & (gpu_cat == _CAT_INDEX["memcpy"]))
    if not m.any():
        return []
    n = len(unique_names)
    counts = np.bincount(inv[m], minlength=n)
    times = np.bincount(inv[m], weights=trace.dur[g][m], minlength=n)
    cat_of = {int(i): CATEGORIES[int(c)] for i, c in zip(inv[m].tolist(), gpu_cat[m].tolist(), strict=True)}
    return [
        MemoryOp(
            name=unique_names[i],
            category=cat_of[i],
            count=int(counts[i]),
            time_us=round(float(times[i]), 3),
        )
        for i in np.argsort(-times, kind="stable").tolist()
        if counts[i]
    ]


def _launch_table(links: Links, is_k: np.ndarray) -> list[LaunchApi]:
    n = len(links.api_names)
    all_c = np.bincount(links.api, minlength=n)
    k_c = np.bincount(links.api[is_k], minlength=n)
    return [
        LaunchApi(api=links.api_names[i], gpu_ops=int(all_c[i]), kernels=int(k_c[i]))
        for i in np.argsort(-all_c, kind="stable").tolist()
        if all_c[i]
    ]


def _idle(
    trace: Trace, links: Links, reg: Region, host: HostActivity, g_end: np.ndarray
) -> list[IdleBreakdown]:
    """Per instance, the device's idle time in its window and what the host did meanwhile
    (g_end: each GPU op's end with overruns clipped, attnprof.analysis.sanitize)."""
    out = []
    for inst in reg.instances:
        if inst.row < 0:  # whole trace: from the first device op to the last
            if not host.busy[0].size:
                out.append(idle_breakdown(host, 0.0, 0.0))
                continue
            out.append(idle_breakdown(host, float(host.busy[0][0]), float(host.busy[1][-1])))
            continue
        end = max(inst.end, float(g_end[inst.gpu].max())) if inst.gpu.size else inst.end
        la = links.launch[inst.gpu]
        first = float(trace.ts[la[la >= 0]].min()) if (la >= 0).any() else None
        out.append(idle_breakdown(host, inst.start, end, first))
    return out


_MEMORY = ("memcpy", "memset", "copy")


def _linked_backward_ops(trace: Trace, cpu_rows: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """The backward ops of the given forward ops (or of ops inside them), by autograd links."""
    if ops.size == 0:
        return np.zeros(0, np.int64)
    links_map, _ = backward_links(trace, cpu_rows)
    if not links_map:
        return np.zeros(0, np.int64)
    fwd = np.array(sorted(links_map), np.int64)
    out: list[int] = []
    for r in ops.tolist():
        inside = fwd[
            (trace.lane[fwd] == trace.lane[r])
            & (trace.ts[fwd] >= trace.ts[r])
            & (trace.ts[fwd] + trace.dur[fwd] <= trace.ts[r] + trace.dur[r] + 1e-3)
        ]
        for f in inside.tolist():
            out.extend(links_map[f])
    return unique(np.array(out, np.int64)) if out else np.zeros(0, np.int64)


def _share(
    trace: Trace,
    links: Links,
    gpu_cat: np.ndarray,
    inv: np.ndarray,
    classes: list[Classification],
    unfused_gpu: np.ndarray,
    unfused_bwd_gpu: np.ndarray,
    ov: CommOverlap,
    prov: Provenance,
    unique_names: list[str],
) -> Share:
    """Where the device time went, attention first: fused + unfused attention (forward /
    backward), GEMMs, convolutions, communication, memory (memcpy, memset, copy kernels), other.
    Sums of device-op durations; waits (category "sync") are not device work."""
    g = links.gpu_rows
    dur = trace.dur[g]
    work = gpu_cat != _CAT_INDEX["sync"]
    total = float(dur[work].sum())
    is_att = gpu_cat == _CAT_INDEX["attention"]
    unf = np.zeros(g.size, bool)
    unf[unfused_gpu] = True
    unf &= ~is_att & work
    unf_b = np.zeros(g.size, bool)
    unf_b[unfused_bwd_gpu] = True
    unf_b &= ~is_att & work & ~unf
    direction = (
        np.array([c.direction or "" for c in classes], dtype=object)[inv] if inv.size else np.zeros(0, object)
    )
    att_fwd = float(dur[is_att & (direction == "fwd")].sum())
    att_bwd = float(dur[is_att & ((direction == "bwd") | (direction == "bwd-aux"))].sum())
    fused = float(dur[is_att].sum())
    # unfused: the kernels of the chains' forward ops, and of their backward ops (autograd links)
    unfused_fwd = float(dur[unf].sum())
    unfused_bwd = float(dur[unf_b].sum())
    unfused = unfused_fwd + unfused_bwd
    unf = unf | unf_b
    # attention by provenance only: an attention op launched or encloses them, their name and
    # shapes do not say so (a serving stack's own kernel, the copies inside an SDPA call)
    by_prov = prov.attention & work & ~is_att & ~unf
    provenance = float(dur[by_prov].sum())
    att_fwd += float(dur[by_prov & ~prov.backward].sum())
    att_bwd += float(dur[by_prov & prov.backward].sum())
    is_att_any = (is_att | unf | by_prov) & work
    rule_time = np.bincount(
        prov.rule[is_att_any & (prov.rule >= 0)], weights=dur[is_att_any & (prov.rule >= 0)]
    )
    name_only = is_att_any & (prov.rule == NAME_RULE)
    name_only_names = np.bincount(inv[name_only], weights=dur[name_only], minlength=len(unique_names))

    def pct(x: float) -> float | None:
        return round(100.0 * x / total, 2) if total > 0 else None

    rest = work & ~is_att & ~unf & ~by_prov
    parts = {
        "gemm": float(dur[rest & (gpu_cat == _CAT_INDEX["gemm"])].sum()),
        "conv": float(dur[rest & (gpu_cat == _CAT_INDEX["conv"])].sum()),
        "communication": float(dur[rest & (gpu_cat == _CAT_INDEX["communication"])].sum()),
        "memory": float(dur[rest & np.isin(gpu_cat, [_CAT_INDEX[c] for c in _MEMORY])].sum()),
    }
    parts["other"] = max(total - fused - unfused - provenance - sum(parts.values()), 0.0)
    of = {k: TimeShare(time_us=round(v, 3), pct=pct(v)) for k, v in parts.items()}
    comm = CommShare(
        time_us=of["communication"].time_us,
        pct=of["communication"].pct,
        exposed_us=round(ov.exposed_us, 3) if ov.hidden_pct is not None else None,
        hidden_pct=ov.hidden_pct,
    )
    return Share(
        device_time_us=round(total, 3),
        attention=AttentionShare(
            time_us=round(fused + unfused + provenance, 3),
            pct=pct(fused + unfused + provenance),
            fused_us=round(fused, 3),
            unfused_us=round(unfused, 3),
            fwd_us=round(att_fwd + unfused_fwd, 3),
            bwd_us=round(att_bwd + unfused_bwd, 3),
            unfused_bwd_us=round(unfused_bwd, 3),
            provenance_us=round(provenance, 3),
            rules={
                PROVENANCE_RULES[r]: round(float(t), 3) for r, t in enumerate(rule_time.tolist()) if t > 0
            },
            name_only_us=round(float(dur[name_only].sum()), 3),
            name_only_kernels=[
                short_name(unique_names[i])
                for i in np.argsort(-name_only_names, kind="stable")[:10].tolist()
                if name_only_names[i] > 0
            ],
        ),
        gemm=of["gemm"],
        conv=of["conv"],
        communication=comm,
        memory=of["memory"],
        other=of["other"],
        basis="sum of device-op durations (streams that overlap are counted each); attention is "
        "by provenance first (the launching op, an enclosing op or range is attention), by kernel "
        "name second; unfused attention is the kernels of GEMM -> softmax -> GEMM chains confirmed "
        "by their shapes, on every thread, and of their backward ops (fwdbwd flows or sequence numbers)",
    )


def _region_stat(
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
    g_end = busy_end  # overruns clipped (attnprof.analysis.sanitize)
    per: list[InstanceStat] = []
    cat_counts = np.zeros(len(CATEGORIES), np.int64)
    rule_counts = np.zeros(len(RULE_NAMES), np.int64)
    thread_counts: Counter[int] = Counter()
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
            thread_counts.update(trace.lane[la[la >= 0]].tolist())
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
    gpu_ops = [
        RegionGpuOp(
            name=short_name(unique_names[int(inv[i])]),
            category=CATEGORIES[int(gpu_cat[i])],
            start_us=round(float(g_ts[i]) - t0, 3),
            time_us=round(float(trace.dur[g_rows[i]]), 3),
        )
        for i in first.tolist()
    ]
    op_counter: Counter[str] = Counter()
    if len(insts) <= 2000:
        for inst in insts[:200]:
            u, c = np.unique(trace.name[inst.cpu_ops], return_counts=True)
            op_counter.update(
                {trace.names[int(a)]: int(b) for a, b in zip(u.tolist(), c.tolist(), strict=True)}
            )
    k = min(len(insts), 200) or 1
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
                for lane, c in thread_counts.most_common(8)
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
        top_cpu_ops=[TopCpuOp(name=a, per_instance=round(b / k, 3)) for a, b in op_counter.most_common(15)],
        per_instance=per[:100],
        cpu_ops=cpu_ops,
        cpu_ops_by_name=cpu_ops_by_name,
        # only a captured range's instances have an imported row (attnprof.analysis.regions)
        replayed_instances=sum(1 for i in insts if 0 <= trace.imported_from <= i.row),
    )


def _region_comm(
    trace: Trace, links: Links, reg: Region, gpu_cat: np.ndarray, compute: Intervals, g_end: np.ndarray
) -> RegionComm | None:
    """The region's communication ops per instance, and the part of them no compute hides."""
    is_comm = gpu_cat == _CAT_INDEX["communication"]
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


def _cpu_ops(trace: Trace, insts: list[Instance]) -> tuple[list[CpuOp], list[CpuOpByName]]:
    """The first instance's CPU ops in order (start, the longer first: an op before those inside
    it), and per op name the count and self time per instance, over every instance."""
    if not insts:
        return [], []
    every = np.concatenate([inst.cpu_ops for inst in insts])
    rows = unique(every)
    depth, self_us = cpu_nesting(trace, rows)
    first = insts[0].cpu_ops
    first = first[np.lexsort((-trace.dur[first], trace.ts[first]))][:_FIRST_OPS]
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
    names, idx = np.unique(trace.name[every], return_inverse=True)
    idx = idx.reshape(-1)
    counts = np.bincount(idx, minlength=names.size)
    times = np.bincount(idx, weights=self_us[np.searchsorted(rows, every)], minlength=names.size)
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
