"""One trace in, one TraceAnalysis out: load, classify, link, regions, occupancy, evidence, findings.

Every table is computed with numpy over columns; Python loops run over unique kernel names,
region instances or findings, never over events.
"""

from __future__ import annotations

import numpy as np

from attnprof.analysis.attribution.attention_side import memory_kinds
from attnprof.analysis.attribution.classify import CAT_INDEX, CATEGORIES, classify, device_event_category
from attnprof.analysis.attribution.cpu_ops import cpu_evidence
from attnprof.analysis.attribution.devices import device_info, gap_warnings
from attnprof.analysis.attribution.links import launched_in, link
from attnprof.analysis.attribution.provenance import attention_provenance
from attnprof.analysis.attribution.regions import Instance, Region, find_region
from attnprof.analysis.breakdown.cpu_share import cpu_share
from attnprof.analysis.breakdown.device_share import device_share, linked_backward_ops
from attnprof.analysis.breakdown.kernel_tables import kernel_table, launch_table, memory_table
from attnprof.analysis.breakdown.phases import phases
from attnprof.analysis.breakdown.region_stats import idle_per_instance, region_comm, region_stats
from attnprof.analysis.findings.context import Context
from attnprof.analysis.perf.perf_model import perf_model
from attnprof.analysis.perf.roofline import roofline
from attnprof.analysis.records.result import (
    CategoryStat,
    Totals,
    TraceAnalysis,
    TraceInfo,
)
from attnprof.analysis.replay.compiled import compiled_code
from attnprof.analysis.replay.replay import graph_replays
from attnprof.analysis.timeline.idle import host_activity
from attnprof.analysis.timeline.overlap import comm_overlap, compute_union
from attnprof.analysis.timeline.sanitize import sanitize
from attnprof.trace.model import Kind, Trace, unique
from attnprof.workload import Workload

__all__ = ["analyze_trace"]


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
    block_sparsity: float | None = None,
    threads: str = "own",
    peak: tuple[float, float] | None = None,
) -> TraceAnalysis:
    from attnprof.analysis.attribution.cpu_ops import unfused_chains
    from attnprof.analysis.findings.rules import evaluate

    links = link(trace)
    g = links.gpu_rows
    g_kind = trace.kind[g]
    g_name = trace.name[g]
    uniq, inv = np.unique(g_name, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    unique_names = [trace.names[int(i)] for i in uniq.tolist()]
    classes = [classify(n) for n in unique_names]
    name_cat = (
        np.array([CAT_INDEX[c.category] for c in classes], np.int16) if classes else np.zeros(0, np.int16)
    )
    gpu_cat = name_cat[inv] if inv.size else np.zeros(0, np.int16)
    gpu_cat = np.where(g_kind == Kind.MEMCPY, CAT_INDEX["memcpy"], gpu_cat)
    gpu_cat = np.where(g_kind == Kind.MEMSET, CAT_INDEX["memset"], gpu_cat).astype(np.int16)
    dev = g_kind == Kind.DEVICE
    if dev.any():  # other accelerators' device events: by their own names
        dev_cat = np.zeros(len(unique_names), np.int16)
        for i in unique(inv[dev]).tolist():  # per name
            dev_cat[i] = CAT_INDEX[device_event_category(unique_names[i])]
        gpu_cat[dev] = dev_cat[inv[dev]]
    g_dur = trace.dur[g]

    is_k = g_kind == Kind.KERNEL
    is_cpy = g_kind == Kind.MEMCPY
    is_set = g_kind == Kind.MEMSET
    kernel_time = float(g_dur[is_k].sum())
    busy_mask = gpu_cat != CAT_INDEX["sync"]
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
    chain_bwd = launched_in(trace, links, linked_backward_ops(trace, cpu_all, chain_ops))
    # every communication op, attention's or not, for what compute hides of it
    is_comm = gpu_cat == CAT_INDEX["communication"]
    comm_ov = comm_overlap(g_ts[is_comm], clean.busy_end[is_comm], compute)
    prov = attention_provenance(
        trace,
        links,
        gpu_cat == CAT_INDEX["attention"],
        np.concatenate([chain_fwd, chain_bwd]),
        np.isin(gpu_cat, [CAT_INDEX["communication"], CAT_INDEX["sync"]]),
        gpu_cat == CAT_INDEX["gemm"],
        np.isin(gpu_cat, [CAT_INDEX["other"], CAT_INDEX["triton"]]),
        memory_kinds(trace, links, gpu_cat),
    )
    share = device_share(
        trace, links, gpu_cat, inv, classes, chain_fwd, chain_bwd, comm_ov, prov, unique_names
    )
    if share.device_time_us <= 0:  # no device time: where the CPU time went instead
        share = cpu_share(trace, chain_ops) or share

    device, limits = device_info(trace, links)
    kernels = kernel_table(trace, links, inv, unique_names, classes, limits, kernel_time, device, prov)
    memory_ops = memory_table(trace, links, inv, unique_names, gpu_cat)
    launch_apis = launch_table(links, is_k)
    idle = idle_per_instance(trace, links, reg, host, clean.busy_end)
    region_stat = region_stats(trace, links, reg, gpu_cat, unique_names, inv, classes, idle, clean.busy_end)
    region_stat.communication = region_comm(trace, links, reg, gpu_cat, compute, clean.busy_end)
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
        trace,
        links,
        device,
        work=busy_mask,
        busy_us=totals.device_busy_us,
        peak=peak,
        cpu_peak=cpu_peak,
        block_sparsity=block_sparsity,
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
