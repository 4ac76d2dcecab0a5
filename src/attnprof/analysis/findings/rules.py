"""Findings: rules over the analysis, each with a stable code and its evidence; the severity and
whether the code is good or bad are the catalogue's, the words the catalogs' (report/i18n/*.po
`finding.<CODE>[.<variant>]`, filled from the evidence by analysis/findings/codes.py `finding`): a rule
decides whether its finding fires, gathers the evidence, and names which phrasing and clauses
(`clause.*` keys in the evidence) apply.

Every code is documented in docs/findings.md (meaning, evidence, what to do). Codes are stable:
compare and report code match on them. Rules read only the Context the pipeline built, and each
returns zero or more Findings; evaluate() runs them in the order of RULES.

Codes: TRACE_REPAIRED, NO_GPU_ACTIVITY, the trace file's own (attnprof.analysis.findings.trace_findings:
DEVICE_EVENTS_NOT_ANALYSED), FUSED_ATTENTION, UNFUSED_ATTENTION, CUDA_CORE_GEMM,
FP32_UPCAST, MASK_REBUILT_EACH_CALL, SAFE_SOFTMAX, TRANSPOSES_BEFORE_KERNEL, OUT_OF_PLACE_COPY,
LOW_OCCUPANCY_BY_DESIGN, OCCUPANCY_NOT_MEASURED, the idle causes (attnprof.analysis.findings.idle_findings:
GPU_IDLE_SYNC, GPU_IDLE_BLOCKING_COPY, GPU_IDLE_ALLOCATOR, GPU_IDLE_INIT, GPU_IDLE_SLOW_LAUNCH,
GPU_IDLE_STREAM_WAIT, GPU_WAIT_UNRECORDED_WORK, LAUNCH_BOUND, GPU_IDLE_HOST_COMPUTE,
GPU_IDLE_DATA_LOADING, GPU_IDLE_PYTHON, GPU_IDLE_UNRECORDED), CUDA_GRAPH, UNATTRIBUTED_GPU_OPS, ABOVE_PEAK, and the per-op model's (attnprof.analysis.findings.perf_findings:
MEMORY_BOUND_GEMM, ATTENTION_BELOW_ROOF, DECODE_BELOW_BANDWIDTH, OP_ABOVE_ROOF). (CPU_BOUND, which compared CPU
time with GPU busy time, is replaced by the idle findings: they say why the device idles.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from attnprof.analysis.attribution.classify import CATEGORIES
from attnprof.analysis.attribution.links import launched_in
from attnprof.analysis.findings.codes import CATALOGUE, finding
from attnprof.analysis.findings.context import Context, gpu_unfused_count
from attnprof.analysis.findings.idle_findings import gpu_idle
from attnprof.analysis.findings.materiality import cost_of_gpu_ops, cost_of_ops, costs_of_op_groups
from attnprof.analysis.findings.perf_findings import PERF_RULES
from attnprof.analysis.findings.precision_findings import cuda_core_gemm, fp32_upcast
from attnprof.analysis.findings.trace_findings import TRACE_RULES
from attnprof.analysis.records.result import Finding, KernelStat, Occupancy
from attnprof.trace.model import Kind, Trace, top_sums, unique
from attnprof.units import short_name

__all__ = ["CODES", "RULES", "evaluate"]

_ATT = CATEGORIES.index("attention")
_GPU = attrgetter("gpu")  # an instance's GPU ops


def _r(x: float) -> float:
    return round(float(x), 3)


# what limits a kernel's occupancy, in the catalogs' words
_LIMITER_WORDS = {"registers": "clause.limit.registers", "shared memory": "clause.limit.shared_memory"}


def trace_repaired(ctx: Context) -> list[Finding]:
    if not ctx.trace.repairs:
        return []
    return [finding("TRACE_REPAIRED", {"repairs": list(ctx.trace.repairs)})]


def no_gpu_activity(ctx: Context) -> list[Finding]:
    t = ctx.trace
    launches = t.rows(Kind.RUNTIME, Kind.DRIVER)
    names = {t.names[int(i)] for i in unique(t.name[launches])}
    kernel_launches = sorted(n for n in names if "Launch" in n)
    if not (ctx.links.gpu_rows.size or launches.size or (t.kind == Kind.CPU_OP).any()) and _gpu_listed(t):
        # a GPU listed, and nothing at all recorded: the profiler ran but not over the work
        return [finding("NO_GPU_ACTIVITY", {"launch_events": 0, "launch_apis": []}, variant="empty")]
    if ctx.links.gpu_rows.size or not kernel_launches:
        return []
    n = int(np.isin(t.name[launches], [t.names.index(k) for k in kernel_launches]).sum())
    return [finding("NO_GPU_ACTIVITY", {"launch_events": n, "launch_apis": kernel_launches})]


def _gpu_listed(t: Trace) -> bool:
    """deviceProperties lists a device, or distributedInfo names a GPU backend (gloo is a CPU's)."""
    dist = t.metadata.get("distributedInfo")
    backend = dist.get("backend") if isinstance(dist, dict) else None
    return bool(t.device_properties) or backend in ("nccl", "rccl", "xccl", "hccl")


def fused_attention(ctx: Context) -> list[Finding]:
    out = []
    att = [k for k in ctx.kernels if k.category == "attention"]
    if att:
        fams: dict[str, dict[str, Any]] = {}
        for k in att:
            f = fams.setdefault(
                k.family, {"count": 0, "time_us": 0.0, "kernels": [], "by_direction": Counter()}
            )
            f["count"] += k.count
            f["time_us"] += k.time_us
            f["kernels"].append(k.short_name)
            f["by_direction"][k.direction or "fwd"] += k.time_us
        for fam, f in fams.items():
            dirs = {d: _r(v) for d, v in sorted(f["by_direction"].items())}
            out.append(
                finding(
                    "FUSED_ATTENTION",
                    {
                        "family": fam,
                        "count": f["count"],
                        "time_us": _r(f["time_us"]),
                        "time_us_by_direction": dirs,
                        "kernels": f["kernels"][:5],
                    },
                    # one direction is named, more each with its time
                    variant="gpu" if len(dirs) > 1 else "gpu_one",
                )
            )
    elif ctx.cpu.fused_ops:
        ops = dict(ctx.cpu.fused_ops)
        n = ctx.cpu.instances or 1
        out.append(
            finding(
                "FUSED_ATTENTION",
                {"family": "CPU fused SDPA", "ops": ops, "per_instance": {k: v / n for k, v in ops.items()}},
                variant="cpu",
            )
        )
    return out


def unfused_attention(ctx: Context) -> list[Finding]:
    """Attention only by dataflow: with recorded shapes the GEMM -> softmax -> GEMM chain must
    carry the scores [.., Sq, Skv] through (attnprof.analysis.attribution.cpu_ops.unfused_chains); without
    shapes the order alone makes it "possible", said as such."""
    reg = ctx.region
    n = len(reg.instances) or 1
    u = ctx.unfused
    scope = "clause.per_region_instance" if reg.selector != "whole trace" else "clause.in_the_trace"
    cpu_ops = any(inst.cpu_ops.size for inst in reg.instances)
    if u.confirmed:
        total, confidence, source = u.confirmed, "confirmed", "CPU ops with recorded shapes"
        source_words = "clause.unfused_source.shapes"
    elif u.possible:
        total, confidence, source = u.possible, "possible", "CPU ops in order (shapes not recorded)"
        source_words = "clause.unfused_source.cpu_order"
    elif not cpu_ops:
        total = gpu_unfused_count(ctx, list(map(_GPU, reg.instances)))
        confidence, source = "possible", "GPU kernels in order (no CPU ops, no shapes)"
        source_words = "clause.unfused_source.gpu_order"
    else:
        return []
    if total == 0:
        return []

    def most_run(category: str) -> list[str]:
        """The 3 kernels of a category run most often (the first run first among equals)."""
        idx = ctx.gpu_name_idx[ctx.gpu_cat == CATEGORIES.index(category)]
        return [short_name(ctx.gpu_unique_names[k]) for k, _ in top_sums(idx, np.ones(idx.size), 3)]

    evidence = {
        "occurrences": total,
        "per_instance": total / n,
        "region": reg.name,
        "source": source,
        "source_words": source_words,
        "scope": scope,
        "confidence": confidence,
        "shape_chains": u.examples,
        "rejected_by_shapes": u.rejected,
        "gemm_kernels": most_run("gemm"),
        "softmax_kernels": most_run("softmax"),
    }
    if confidence == "confirmed":
        # each chain's cost: the device time of what its three ops launched (CPU time on a CPU
        # trace); the message quotes the costliest, not the first
        rows = np.array(u.chains, np.int64)
        cost_arr = costs_of_op_groups(ctx, rows.ravel(), np.repeat(np.arange(len(rows)), 3), len(rows))
        costs = cost_arr.tolist()
        order = np.argsort(-cost_arr, kind="stable").tolist()  # the costliest first, ties in order
        ex = u.chain_evidence[order[0]]
        # chains of the same shapes (one per region instance, mostly) once each, with their count
        # and time, the costliest shapes first
        same: dict[str, list[int]] = {}
        for i in order:
            same.setdefault(repr(sorted(u.chain_evidence[i].items())), []).append(i)
        groups = sorted(same.values(), key=lambda ix: -sum(costs[i] for i in ix))
        evidence["shape_chains"] = [
            {**u.chain_evidence[ix[0]], "count": len(ix), "time_us": _r(sum(costs[i] for i in ix))}
            for ix in groups[:3]
        ]
        cost = cost_of_ops(ctx, u.ops)
        evidence |= cost.evidence()
        # the costliest chain's shapes and cost, as the sentence names them
        evidence |= {"costliest": ex, "costliest_us": _r(costs[order[0]])}
        return [
            finding(
                "UNFUSED_ATTENTION",
                evidence,
                # a CPU trace's cost is CPU time, and PyTorch's CPU build has one fused SDPA
                # kernel, the flash one
                variant="confirmed" if ctx.device.kind != "cpu" else "confirmed_cpu",
                minor=not cost.material,
            )
        ]
    return [finding("UNFUSED_ATTENTION", evidence, variant="possible", minor=True)]


def mask_rebuilt(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    n = len(ctx.region.instances)
    mask_gpu = [
        np.count_nonzero(ctx.gpu_cat[inst.gpu] == CATEGORIES.index("mask"))
        for inst in ctx.region.instances
        if inst.gpu.size
    ]
    tri_gpu = [k for k in ctx.kernels if "triu_tril" in k.name]
    cpu_every = n > 0 and ev.mask_instances == n
    gpu_every = bool(tri_gpu) and n > 0 and len(mask_gpu) == n and all(m > 0 for m in mask_gpu)
    if ctx.region.selector == "whole trace":
        # one instance says nothing about "every call": ask for the mask to be built repeatedly
        cpu_every = (
            cpu_every and sum(v for k, v in ev.mask_ops.items() if k in ("aten::tril", "aten::triu")) >= 2
        )
        gpu_every = gpu_every and sum(k.count for k in tri_gpu) >= 2
    if not (cpu_every or gpu_every):
        return []
    ops = {k: v / max(n, 1) for k, v in ev.mask_ops.items()}
    # the cost: the mask kernels the instances run (on a CPU trace, the tril / triu ops' time)
    if ctx.device.kind == "cpu":
        t = ctx.trace
        tri = [i for i, nm in enumerate(t.names) if nm in ("aten::tril", "aten::triu")]
        rows = np.concatenate(
            [inst.cpu_ops[np.isin(t.name[inst.cpu_ops], tri)] for inst in ctx.region.instances]
        )
        cost = cost_of_ops(ctx, rows)
    else:
        idx = np.concatenate(
            [inst.gpu[ctx.gpu_cat[inst.gpu] == CATEGORIES.index("mask")] for inst in ctx.region.instances]
        )
        cost = cost_of_gpu_ops(ctx, idx)
    return [
        finding(
            "MASK_REBUILT_EACH_CALL",
            {
                **cost.evidence(),
                "instances": n,
                "region": ctx.region.name,
                "cpu_ops_per_instance": ops,
                "gpu_mask_kernels": [{"name": k.short_name, "count": k.count} for k in tri_gpu],
                "triu_tril_kernels": sum(k.count for k in tri_gpu),
                "triu_tril_clause": "clause.triu_tril_kernels" if tri_gpu else "",
                "cost_us_per_call": _r(cost.us / max(n, 1)),
            },
            minor=not cost.material,
        )
    ]


def safe_softmax(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    if not ev.safe_softmax:
        return []
    n = ev.instances or 1
    return [finding("SAFE_SOFTMAX", {"per_instance": ev.safe_softmax / n})]


def transposes(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    if not ev.fused_ops or not ev.transposes_before_fused:
        return []
    n = ev.instances or 1
    calls = ev.fused_calls or 1
    return [
        finding(
            "TRANSPOSES_BEFORE_KERNEL",
            {
                "transposes_per_call": ev.transposes_before_fused / calls,
                "transposes_per_instance": ev.transposes_before_fused / n,
                "fused_calls_per_instance": ev.fused_calls / n,
                "fused_ops": dict(ev.fused_ops),
                "region": ctx.region.name,
            },
            # a CPU-only trace has no GPU to speak of: there the views' point is that they copy nothing
            variant="cpu" if ctx.device.kind == "cpu" else "",
        )
    ]


def out_of_place_copy(ctx: Context) -> list[Finding]:
    """aten::clone made by out-of-place ops PyTorch implements as clone + in-place op. Evidence
    counts only those clones and the device copies launched inside them; the advice names each
    op's own in-place variant."""
    ev = ctx.cpu
    if not ev.oop_clones:
        return []
    parents = Counter(p for _, p in ev.oop_clones)
    n = ev.instances or 1
    t = ctx.trace
    rows = np.array([r for r, _ in ev.oop_clones], np.int64)
    gpu = launched_in(t, ctx.links, rows)
    memcpy = ctx.links.gpu_rows[gpu]
    dtod = sum(1 for r in memcpy.tolist() if t.kind[r] == Kind.MEMCPY and "DtoD" in t.names[int(t.name[r])])
    cost = cost_of_ops(ctx, rows)
    total = sum(parents.values())
    return [
        finding(
            "OUT_OF_PLACE_COPY",
            {
                "clones_per_instance": total / n,
                "parents": dict(parents),
                "parents_per_instance": {p: c / n for p, c in parents.items()},
                # each op's own in-place variant, the advice
                "inplace_ops": [f"{p.removeprefix('aten::')}_" for p in parents],
                "memcpy_dtod_per_instance": dtod / n,
                "dtod_clause": "clause.dtod_copies" if dtod else "",
                "cost_us_per_call": _r(cost.us / n),
                **cost.evidence(),
            },
            minor=not cost.material,
        )
    ]


def occupancy_findings(ctx: Context) -> list[Finding]:
    out = []
    total = ctx.totals.kernel_time_us or 1.0
    low: list[tuple[KernelStat, Occupancy]] = []
    gaps: list[tuple[KernelStat, Occupancy]] = []
    for k in ctx.kernels:
        occ = k.occupancy
        if occ is None:
            continue
        if occ.launches_not_measured:
            gaps.append((k, occ))
        th = occ.theoretical_pct
        if (
            k.category in ("attention", "gemm", "conv")
            and th is not None
            and th <= 25.0
            and occ.limiter in ("registers", "shared memory")
            and k.time_us >= 0.01 * total
        ):
            low.append((k, occ))
    for k, occ in low[:5]:
        out.append(
            finding(
                "LOW_OCCUPANCY_BY_DESIGN",
                {
                    "kernel": k.name,
                    "short_name": k.short_name,
                    "family": k.family,
                    **msgspec.structs.asdict(occ),
                    "limiter_words": _LIMITER_WORDS[str(occ.limiter)],
                },
            )
        )
    if gaps:
        n = sum(occ.launches_not_measured for _, occ in gaps)
        t = sum(k.time_us for k, _ in gaps)
        names = [k.short_name for k, _ in gaps[:5]]
        out.append(
            finding(
                "OCCUPANCY_NOT_MEASURED",
                {
                    "kernel_count": len(gaps),
                    "names": names,
                    "kernels": [
                        {
                            "kernel": k.name,
                            "launches": occ.launches_not_measured,
                            "shared_mem_bytes": occ.shared_mem_bytes,
                            "theoretical_pct": occ.theoretical_pct,
                            "reason": occ.not_measured_reason,
                        }
                        for k, occ in gaps[:10]
                    ],
                    "launches": n,
                    "time_us": _r(t),
                },
            )
        )
    return out


def cuda_graph(ctx: Context) -> list[Finding]:
    graph = ctx.links.graph
    if not graph.any():
        return []
    launches = unique(ctx.links.launch[graph])
    att = int(np.count_nonzero(graph & (ctx.gpu_cat == _ATT)))
    return [
        finding(
            "CUDA_GRAPH",
            {
                "gpu_ops": int(graph.sum()),
                "graph_launches": int(launches.size),
                "attention_kernels": att,
                "attention_clause": "clause.graph_attention" if att else "",
            },
        )
    ]


def unattributed(ctx: Context) -> list[Finding]:
    n = ctx.totals.unlaunched_gpu_ops
    if not n:
        return []
    return [finding("UNATTRIBUTED_GPU_OPS", {"gpu_ops": n, "unplaced": ctx.region.unplaced_gpu_ops})]


def above_peak(ctx: Context) -> list[Finding]:
    roof = ctx.roofline
    if not roof:
        return []
    out = []
    for key, what in (("pct_of_peak_flops", "flops"), ("pct_of_peak_bandwidth", "bandwidth")):
        v = getattr(roof, key)
        if v is not None and v > 100.0:
            out.append(
                finding(
                    "ABOVE_PEAK",
                    {
                        key: round(v, 2),
                        "time_us": roof.time_us,
                        "workload": roof.workload,
                        "peak_source": roof.peak_source,
                    },
                    variant=what,
                )
            )
    return out


RULES: tuple[Callable[[Context], list[Finding]], ...] = (
    trace_repaired,
    no_gpu_activity,
    *TRACE_RULES,
    fused_attention,
    unfused_attention,
    cuda_core_gemm,
    fp32_upcast,
    mask_rebuilt,
    safe_softmax,
    transposes,
    out_of_place_copy,
    occupancy_findings,
    gpu_idle,
    cuda_graph,
    unattributed,
    above_peak,
    *PERF_RULES,
)

# every code the rules emit: the catalogue's (analysis/findings/codes.py; tests/test_codes.py holds the
# rules' sources to it)
CODES: tuple[str, ...] = tuple(c.code for c in CATALOGUE if c.where == "analysis")


def evaluate(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(ctx))
    return findings
