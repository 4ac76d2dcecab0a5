"""Findings: rules over the analysis, each with a stable code, a severity and its evidence.

Every code is documented in docs/findings.md (meaning, evidence, what to do). Codes are stable:
compare and report code match on them. Rules read only the Context the pipeline built, and each
returns zero or more Findings; evaluate() runs them in the order of RULES.

Codes: TRACE_REPAIRED, NO_GPU_ACTIVITY, FUSED_ATTENTION, UNFUSED_ATTENTION, CUDA_CORE_GEMM,
FP32_UPCAST, MASK_REBUILT_EACH_CALL, SAFE_SOFTMAX, TRANSPOSES_BEFORE_KERNEL, OUT_OF_PLACE_COPY,
LOW_OCCUPANCY_BY_DESIGN, OCCUPANCY_NOT_MEASURED, CPU_BOUND, CUDA_GRAPH, UNATTRIBUTED_GPU_OPS,
ABOVE_PEAK.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from attnprof.analysis.classify import CATEGORIES
from attnprof.analysis.cpu_ops import OUT_OF_PLACE_CLONERS
from attnprof.analysis.pipeline import Context, gpu_unfused_count, short_name
from attnprof.analysis.result import Finding
from attnprof.trace.model import Kind, unique

__all__ = ["CODES", "RULES", "evaluate"]

_ATT = CATEGORIES.index("attention")


def _r(x: float) -> float:
    return round(float(x), 3)


def trace_repaired(ctx: Context) -> list[Finding]:
    if not ctx.trace.repairs:
        return []
    return [
        Finding(
            "TRACE_REPAIRED",
            "warning",
            "The trace was not valid JSON and was repaired before analysis: " + "; ".join(ctx.trace.repairs),
            {"repairs": list(ctx.trace.repairs)},
        )
    ]


def no_gpu_activity(ctx: Context) -> list[Finding]:
    t = ctx.trace
    launches = t.rows(Kind.RUNTIME, Kind.DRIVER)
    names = {t.names[int(i)] for i in unique(t.name[launches])}
    kernel_launches = sorted(n for n in names if "Launch" in n)
    if ctx.links.gpu_rows.size or not kernel_launches:
        return []
    n = int(np.isin(t.name[launches], [t.names.index(k) for k in kernel_launches]).sum())
    return [
        Finding(
            "NO_GPU_ACTIVITY",
            "warning",
            f"{n} kernel launches on the CPU but no GPU events: GPU activity was not recorded "
            "(profile with ProfilerActivity.CUDA, and check CUPTI is available)",
            {"launch_events": n, "launch_apis": kernel_launches},
        )
    ]


def fused_attention(ctx: Context) -> list[Finding]:
    out = []
    att = [k for k in ctx.kernels if k["category"] == "attention"]
    if att:
        fams: dict[str, dict[str, Any]] = {}
        for k in att:
            f = fams.setdefault(k["family"], {"count": 0, "time_us": 0.0, "kernels": []})
            f["count"] += k["count"]
            f["time_us"] += k["time_us"]
            f["kernels"].append(k["short_name"])
        for fam, f in fams.items():
            out.append(
                Finding(
                    "FUSED_ATTENTION",
                    "info",
                    f"Fused attention: {fam}, {f['count']} kernel(s), {_r(f['time_us'])} us in total",
                    {
                        "family": fam,
                        "count": f["count"],
                        "time_us": _r(f["time_us"]),
                        "kernels": f["kernels"][:5],
                    },
                )
            )
    elif ctx.cpu.fused_ops:
        ops = dict(ctx.cpu.fused_ops)
        n = ctx.cpu.instances or 1
        out.append(
            Finding(
                "FUSED_ATTENTION",
                "info",
                "Fused attention on the CPU: "
                + ", ".join(f"{k} ({v / n:g} per call)" for k, v in ops.items()),
                {"family": "CPU fused SDPA", "ops": ops, "per_instance": {k: v / n for k, v in ops.items()}},
            )
        )
    return out


def unfused_attention(ctx: Context) -> list[Finding]:
    reg = ctx.region
    per = [gpu_unfused_count(ctx, inst.gpu) for inst in reg.instances]
    total = sum(per)
    where = "GPU kernels"
    if total == 0 and ctx.links.gpu_rows.size == 0:
        total = ctx.cpu.unfused_sequences
        where = "CPU ops"
    if total == 0:
        return []
    n = len(reg.instances) or 1
    g = ctx.gpu_cat
    gemm_names = Counter(
        ctx.gpu_unique_names[int(ctx.gpu_name_idx[i])]
        for i in np.flatnonzero(g == CATEGORIES.index("gemm"))[:2000]
    )
    soft_names = Counter(
        ctx.gpu_unique_names[int(ctx.gpu_name_idx[i])]
        for i in np.flatnonzero(g == CATEGORIES.index("softmax"))[:2000]
    )
    scope = f"per {reg.name} instance" if reg.selector != "whole trace" else "in the trace"
    return [
        Finding(
            "UNFUSED_ATTENTION",
            "warning",
            f"Unfused attention: GEMM -> softmax -> GEMM with the scores materialised in memory, "
            f"{total} time(s) ({total / n:g} {scope}, from {where}); a fused kernel "
            "(F.scaled_dot_product_attention with a flash / efficient / cuDNN backend) avoids writing "
            "and re-reading the S x S score matrix",
            {
                "occurrences": total,
                "per_instance": total / n,
                "region": reg.name,
                "source": where,
                "gemm_kernels": [short_name(k) for k, _ in gemm_names.most_common(3)],
                "softmax_kernels": [short_name(k) for k, _ in soft_names.most_common(3)],
            },
        )
    ]


def cuda_core_gemm(ctx: Context) -> list[Finding]:
    cc = ctx.device.get("compute_capability")
    if cc is not None and float(cc) < 7.0:
        return []  # no tensor cores before Volta
    gemm = [k for k in ctx.kernels if k["category"] == "gemm"]
    slow = [k for k in gemm if k["tensor_cores"] is False and "gemv" not in k["family"]]
    if not slow:
        return []
    gemm_time = sum(k["time_us"] for k in gemm) or 1.0
    t = sum(k["time_us"] for k in slow)
    n = sum(k["count"] for k in slow)
    precisions = sorted({k["precision"] or "unknown" for k in slow})
    hint = (
        "fp32 GEMMs run on CUDA cores: allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True) or "
        "compute in bf16/fp16 to use tensor cores"
        if precisions == ["fp32"]
        else "16-bit GEMMs on CUDA cores usually mean an upcast to fp32 or an unaligned shape"
    )
    return [
        Finding(
            "CUDA_CORE_GEMM",
            "warning",
            f"{n} GEMM kernel(s) run on CUDA cores, not tensor cores: {_r(t)} us, "
            f"{100 * t / gemm_time:.0f}% of GEMM time ({', '.join(precisions)}). {hint}",
            {
                "count": n,
                "time_us": _r(t),
                "pct_of_gemm_time": round(100 * t / gemm_time, 2),
                "precisions": precisions,
                "kernels": [
                    {"name": k["short_name"], "count": k["count"], "time_us": k["time_us"]} for k in slow[:8]
                ],
            },
        )
    ]


def fp32_upcast(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    n = ev.instances or 1
    if ev.upcasts_confirmed:
        return [
            Finding(
                "FP32_UPCAST",
                "warning",
                f"16-bit inputs are converted to fp32: {ev.upcasts_confirmed / n:g} upcast(s) per call "
                f"(aten::_to_copy from bf16/fp16 to float). The math then runs in fp32 (slower, "
                "CUDA-core GEMMs on GPU); SDPA's math backend does this for 16-bit inputs",
                {
                    "upcasts_per_instance": ev.upcasts_confirmed / n,
                    "conversions_per_instance": ev.conversions / n,
                    "conversions": dict(ev.conversion_types),
                    "dtypes_recorded": True,
                },
            )
        ]
    # without recorded dtypes, only an annotated call (attn_fwd, --region) is specific enough for
    # a count to mean an upcast: a model step also converts for device transfers and inputs
    annotated = ctx.region.selector in ("default", "exact", "regex")
    if not ev.dtypes_known and annotated and ev.conversions / n >= 3:
        return [
            Finding(
                "FP32_UPCAST",
                "warning",
                f"{ev.conversions / n:g} dtype conversions (aten::_to_copy) per call: likely an upcast "
                "of q, k and v to fp32 and back (dtypes not recorded: profile with record_shapes=True "
                "to confirm)",
                {"conversions_per_instance": ev.conversions / n, "dtypes_recorded": False},
            )
        ]
    return []


def mask_rebuilt(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    n = len(ctx.region.instances)
    mask_gpu = [
        np.count_nonzero(ctx.gpu_cat[inst.gpu] == CATEGORIES.index("mask"))
        for inst in ctx.region.instances
        if inst.gpu.size
    ]
    tri_gpu = [k for k in ctx.kernels if "triu_tril" in k["name"]]
    cpu_every = n > 0 and ev.mask_instances == n
    gpu_every = bool(tri_gpu) and n > 0 and len(mask_gpu) == n and all(m > 0 for m in mask_gpu)
    if ctx.region.selector == "whole trace":
        # one instance says nothing about "every call": ask for the mask to be built repeatedly
        cpu_every = (
            cpu_every and sum(v for k, v in ev.mask_ops.items() if k in ("aten::tril", "aten::triu")) >= 2
        )
        gpu_every = gpu_every and sum(k["count"] for k in tri_gpu) >= 2
    if not (cpu_every or gpu_every):
        return []
    ops = {k: v / max(n, 1) for k, v in ev.mask_ops.items()}
    return [
        Finding(
            "MASK_REBUILT_EACH_CALL",
            "warning",
            f"The causal mask is built again on every call ({ctx.region.name}: "
            + ", ".join(f"{k} x{v:g}" for k, v in ops.items())
            + (f"; {sum(k['count'] for k in tri_gpu)} triu_tril kernels on GPU" if tri_gpu else "")
            + "). Build it once outside the call, or pass is_causal=True to a fused backend",
            {
                "instances": n,
                "cpu_ops_per_instance": ops,
                "gpu_mask_kernels": [{"name": k["short_name"], "count": k["count"]} for k in tri_gpu],
            },
        )
    ]


def safe_softmax(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    if not ev.safe_softmax:
        return []
    n = ev.instances or 1
    return [
        Finding(
            "SAFE_SOFTMAX",
            "info",
            f"aten::_safe_softmax runs {ev.safe_softmax / n:g} time(s) per call: SDPA's math path guards "
            "fully-masked rows (isneginf, all, where) with extra passes over the scores",
            {"per_instance": ev.safe_softmax / n},
        )
    ]


def transposes(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    if not ev.fused_ops or not ev.transposes_before_fused:
        return []
    n = ev.instances or 1
    calls = ev.fused_calls or 1
    return [
        Finding(
            "TRANSPOSES_BEFORE_KERNEL",
            "info",
            f"{ev.transposes_before_fused / calls:g} aten::transpose per fused attention call "
            f"({', '.join(ev.fused_ops)}; {ev.fused_calls / n:g} call(s) per {ctx.region.name} instance): "
            "the kernel wants [B, S, H, D], so q, k, v (and the output) are transposed around it; the "
            "views cost no GPU time but add CPU ops per call",
            {
                "transposes_per_call": ev.transposes_before_fused / calls,
                "transposes_per_instance": ev.transposes_before_fused / n,
                "fused_calls_per_instance": ev.fused_calls / n,
                "fused_ops": dict(ev.fused_ops),
            },
        )
    ]


def out_of_place_copy(ctx: Context) -> list[Finding]:
    ev = ctx.cpu
    parents = {p: c for p, c in ev.clone_parents.items() if p in OUT_OF_PLACE_CLONERS}
    n = ev.instances or 1
    t = ctx.trace
    dtod = 0
    for inst in ctx.region.instances:
        rows = ctx.links.gpu_rows[inst.gpu]
        memcpy = rows[t.kind[rows] == Kind.MEMCPY]
        dtod += sum(1 for r in memcpy.tolist() if "DtoD" in t.names[int(t.name[r])])
    if not parents:
        return []
    total = sum(parents.values())
    return [
        Finding(
            "OUT_OF_PLACE_COPY",
            "warning",
            f"{total / n:g} aten::clone per call from out-of-place op(s) "
            + ", ".join(f"{p} (x{c / n:g})" for p, c in parents.items())
            + (f"; {dtod / n:g} Memcpy DtoD per call on the GPU" if dtod else "")
            + ". Use the in-place variant (e.g. masked_fill_) on a tensor you own",
            {"clones_per_instance": total / n, "parents": parents, "memcpy_dtod_per_instance": dtod / n},
        )
    ]


def occupancy_findings(ctx: Context) -> list[Finding]:
    out = []
    total = ctx.totals["kernel_time_us"] or 1.0
    low = []
    gaps = []
    for k in ctx.kernels:
        occ = k.get("occupancy")
        if not occ:
            continue
        if not occ["measured"] and occ.get("theoretical_pct") is not None:
            gaps.append(k)
        th = occ.get("theoretical_pct")
        if (
            k["category"] in ("attention", "gemm")
            and th is not None
            and th <= 25.0
            and occ.get("limiter") in ("registers", "shared memory")
            and k["time_us"] >= 0.01 * total
        ):
            low.append(k)
    for k in low[:5]:
        occ = k["occupancy"]
        out.append(
            Finding(
                "LOW_OCCUPANCY_BY_DESIGN",
                "info",
                f"{k['short_name']}: theoretical occupancy {occ['theoretical_pct']:g}% "
                f"({occ['registers']} registers x {occ['threads_per_block']} threads, "
                f"{occ['shared_mem_bytes']} B shared; limited by {occ['limiter']}). Tiled "
                "attention and GEMM kernels trade occupancy for registers and shared memory on purpose: "
                "low occupancy here is not a problem by itself",
                {"kernel": k["name"], "family": k["family"], **occ},
            )
        )
    for k in gaps[:5]:
        occ = k["occupancy"]
        out.append(
            Finding(
                "OCCUPANCY_NOT_MEASURED",
                "warning",
                f"{k['short_name']}: the profiler reports {occ['achieved_pct']}% achieved occupancy for a "
                f"driver-API launch ({', '.join(k['launch_apis'])}); that is a measurement gap, not an "
                f"idle GPU. Theoretical: {occ['theoretical_pct']:g}% (limited by {occ['limiter']})",
                {"kernel": k["name"], "launch_apis": k["launch_apis"], **occ},
            )
        )
    return out


def cpu_bound(ctx: Context) -> list[Finding]:
    r = ctx.region_dict
    if ctx.region.selector == "whole trace" or not r["gpu_ops_per_instance"]:
        return []
    cpu_t, gpu_t = r["cpu_time_us_per_instance"], r["gpu_time_us_per_instance"]
    if cpu_t <= gpu_t:
        return []
    return [
        Finding(
            "CPU_BOUND",
            "warning",
            f"{r['name']}: CPU time per instance {cpu_t:g} us exceeds GPU busy time {gpu_t:g} us: the GPU "
            "waits for the CPU to launch work. Fewer, larger kernels, CUDA graphs or torch.compile help",
            {"region": r["name"], "cpu_time_us_per_instance": cpu_t, "gpu_time_us_per_instance": gpu_t},
        )
    ]


def cuda_graph(ctx: Context) -> list[Finding]:
    graph = ctx.links.graph
    if not graph.any():
        return []
    launches = unique(ctx.links.launch[graph])
    att = int(np.count_nonzero(graph & (ctx.gpu_cat == _ATT)))
    return [
        Finding(
            "CUDA_GRAPH",
            "info",
            f"{int(graph.sum())} GPU op(s) come from {launches.size} CUDA-graph launch(es)"
            + (f", {att} of them fused attention kernels" if att else "")
            + ": they are attributed to the cudaGraphLaunch; per-kernel CPU ops are not recorded",
            {"gpu_ops": int(graph.sum()), "graph_launches": int(launches.size), "attention_kernels": att},
        )
    ]


def unattributed(ctx: Context) -> list[Finding]:
    n = ctx.totals["unlaunched_gpu_ops"]
    if not n:
        return []
    return [
        Finding(
            "UNATTRIBUTED_GPU_OPS",
            "info",
            f"{n} GPU op(s) have no launch event in the trace; "
            f"{ctx.region.unplaced_gpu_ops} could not be placed in a region by time",
            {"gpu_ops": n, "unplaced": ctx.region.unplaced_gpu_ops},
        )
    ]


def above_peak(ctx: Context) -> list[Finding]:
    roof = ctx.roofline
    if not roof:
        return []
    out = []
    for key, what in (("pct_of_peak_flops", "FLOP/s"), ("pct_of_peak_bandwidth", "bandwidth")):
        v = roof.get(key)
        if v is not None and v > 100.0:
            out.append(
                Finding(
                    "ABOVE_PEAK",
                    "error",
                    f"Achieved {what} is {v:.0f}% of the peak ({roof['peak_source']}): a measurement "
                    "error (wrong peak, wrong workload, or a time that misses part of the work)",
                    {key: round(v, 2), "time_us": roof["time_us"], "workload": roof["workload"]},
                )
            )
    return out


RULES: tuple[Callable[[Context], list[Finding]], ...] = (
    trace_repaired,
    no_gpu_activity,
    fused_attention,
    unfused_attention,
    cuda_core_gemm,
    fp32_upcast,
    mask_rebuilt,
    safe_softmax,
    transposes,
    out_of_place_copy,
    occupancy_findings,
    cpu_bound,
    cuda_graph,
    unattributed,
    above_peak,
)

CODES = (
    "TRACE_REPAIRED",
    "NO_GPU_ACTIVITY",
    "FUSED_ATTENTION",
    "UNFUSED_ATTENTION",
    "CUDA_CORE_GEMM",
    "FP32_UPCAST",
    "MASK_REBUILT_EACH_CALL",
    "SAFE_SOFTMAX",
    "TRANSPOSES_BEFORE_KERNEL",
    "OUT_OF_PLACE_COPY",
    "LOW_OCCUPANCY_BY_DESIGN",
    "OCCUPANCY_NOT_MEASURED",
    "CPU_BOUND",
    "CUDA_GRAPH",
    "UNATTRIBUTED_GPU_OPS",
    "ABOVE_PEAK",
)


def evaluate(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(ctx))
    return findings
