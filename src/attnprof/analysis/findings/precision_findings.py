"""Findings about precision: GEMMs on CUDA cores (CUDA_CORE_GEMM) and fp32 upcasts where
attention is computed (FP32_UPCAST), with advice the device's tensor cores can take.

Rules of attnprof.analysis.findings.rules (RULES runs them), kept apart so that module stays one
concern per file; docs/findings.md documents both codes.
"""

from __future__ import annotations

import numpy as np

from attnprof.analysis.attribution.cpu_ops import is_downcast
from attnprof.analysis.findings.codes import finding
from attnprof.analysis.findings.context import Context
from attnprof.analysis.findings.materiality import Cost, cost_of_ops
from attnprof.analysis.records.result import Finding
from attnprof.trace.groups import held
from attnprof.trace.model import Trace, unique

__all__ = ["cuda_core_gemm", "fp32_upcast"]


def _r(x: float) -> float:
    return round(float(x), 3)


def _gemm_advice(precisions: list[str], tc: list[str] | None) -> list[str]:
    """Advice the device can follow, as the catalogs' clauses (said one after the other): its
    tensor-core dtypes decide (Volta: fp16 only; Turing adds int8; Ampere tf32 and bf16; Ada /
    Hopper fp8)."""
    parts = []
    if "fp32" in precisions:
        if tc is None:
            parts.append("clause.gemm_advice.fp32_unknown_device")
        elif "tf32" in tc:
            parts.append("clause.gemm_advice.fp32_allow_tf32")
        else:
            parts.append("clause.gemm_advice.fp32_no_tf32")
    half = [p for p in precisions if p in ("fp16", "bf16")]
    if half:
        if "bf16" in half and tc is not None and "bf16" not in tc:
            parts.append("clause.gemm_advice.bf16_unsupported")
        else:
            parts.append("clause.gemm_advice.half_on_cuda_cores")
    if "unknown" in precisions:
        parts.append("clause.gemm_advice.precision_unknown")
    return parts


def cuda_core_gemm(ctx: Context) -> list[Finding]:
    if ctx.device.accelerator != "cuda":
        return []  # the tensor-core markers in these rules are NVIDIA's
    tc = ctx.device.tensor_core_dtypes
    if tc == []:
        return []  # no tensor cores before Volta
    gemm = [k for k in ctx.kernels if k.category == "gemm"]
    slow = [k for k in gemm if k.tensor_cores is False and "gemv" not in k.family]
    if not slow:
        return []
    gemm_time = sum(k.time_us for k in gemm) or 1.0
    t = sum(k.time_us for k in slow)
    n = sum(k.count for k in slow)
    precisions = sorted({k.precision or "unknown" for k in slow})
    cc = ctx.device.compute_capability
    arch = f"sm{cc.replace('.', '')}" if cc else "compute capability unknown"
    # every kernel of the trace is read here, so the trace's device time is the scope
    cost = Cost(
        t,
        float(ctx.totals.kernel_time_us + ctx.totals.memcpy_time_us + ctx.totals.memset_time_us),
        "trace device time",
    )
    return [
        finding(
            "CUDA_CORE_GEMM",
            {
                **cost.evidence(),
                "count": n,
                "time_us": _r(t),
                "pct_of_gemm_time": round(100 * t / gemm_time, 2),
                "precisions": precisions,
                "tensor_core_dtypes": tc,
                "kernels": [{"name": k.short_name, "count": k.count, "time_us": k.time_us} for k in slow[:8]],
                "arch": arch,
                "half_precisions": "/".join(p for p in precisions if p in ("fp16", "bf16")),
                "advice": _gemm_advice(precisions, tc),
            },
            minor=not cost.material,
        )
    ]


def fp32_upcast(ctx: Context) -> list[Finding]:
    """16-bit to fp32 conversions where attention is computed. In an annotated attention call
    (attn_fwd, --region) every upcast counts; in a model step or a whole trace only those inside
    scaled_dot_product_attention or inside a confirmed unfused attention chain do: norms
    (RMSNorm's .to(float32)) and losses upcast on purpose."""
    ev = ctx.cpu
    n = ev.instances or 1
    annotated = ctx.region.selector in ("default", "exact", "regex")
    # upcasts inside a confirmed unfused attention chain (first GEMM to second: autocast runs
    # the softmax in fp32) are attention's too
    t = ctx.trace
    up = np.array(ev.upcast_rows, np.int64)
    chain_rows = up[_in_spans(t, up, ctx.unfused.spans)].tolist()
    named = ev.upcast_rows if annotated else sorted({*ev.sdpa_upcast_rows, *chain_rows})
    # a stability upcast (upcast -> softmax / norm -> downcast, the next GEMM in 16 bits, as T5's
    # softmax) is deliberate: only the others make the math run in fp32
    stable = set(ev.stability_rows)
    fp32_rows = [r for r in named if r not in stable]
    n_stable = len(named) - len(fp32_rows)
    in_sdpa = sum(1 for r in ev.sdpa_upcast_rows if r not in stable)
    in_chain = sum(1 for r in chain_rows if r not in stable)
    facts = {
        "upcasts_per_instance": len(fp32_rows) / n,
        "stability_upcasts_per_instance": n_stable / n,
        "upcasts_in_sdpa_per_instance": in_sdpa / n,
        "upcasts_in_unfused_attention_per_instance": in_chain / n,
        "all_upcasts_per_instance": ev.upcasts_confirmed / n,
        "conversions_per_instance": ev.conversions / n,
        "conversions": dict(ev.conversion_types),
        "dtypes_recorded": True,
    }
    if fp32_rows:
        places = []
        if in_sdpa:
            places.append("clause.upcast_where.in_sdpa")
        if in_chain:
            places.append("clause.upcast_where.in_unfused")
        fp32_cc = any(
            k.category == "gemm" and k.tensor_cores is False and k.precision == "fp32" for k in ctx.kernels
        )
        cost = cost_of_ops(ctx, _fp32_span_ops(ctx, fp32_rows))
        minor, what = _upcast_cost(cost)
        return [
            finding(
                "FP32_UPCAST",
                {
                    **facts,
                    **cost.evidence(),
                    "cost_measured": cost.share is not None and cost.us > 0,
                    "region": ctx.region.name,
                    "upcasts_where": places or ["clause.upcast_where.none_in_sdpa"],
                    "cost_words": what,
                    "cost_us_per_instance": _r(cost.us / n),
                    "fp32_cuda_core_clause": "clause.upcast.fp32_cuda_cores" if fp32_cc else "",
                    "stability_clause": "clause.upcast.stability_too" if n_stable else "",
                },
                minor=minor,
            )
        ]
    if n_stable:
        return [finding("FP32_UPCAST", {**facts, "region": ctx.region.name}, variant="stability", minor=True)]
    # without recorded dtypes, only an annotated call (attn_fwd, --region) is specific enough for
    # a count to mean an upcast: a model step also converts for device transfers and inputs
    # Which conversions upcast, and so which ops run in fp32 after them, is not known: neither
    # the upcast nor its cost is measured, so this is info and claims no materiality.
    if not ev.dtypes_known and annotated and ev.conversions / n >= 3:
        return [
            finding(
                "FP32_UPCAST",
                {
                    "conversions_per_instance": ev.conversions / n,
                    "dtypes_recorded": False,
                    "cost_us": None,
                    "cost_measured": False,
                },
                variant="unrecorded",
                minor=True,
            )
        ]
    return []


def _upcast_cost(cost: Cost) -> tuple[bool, str]:
    """(minor, the clause that words it) for the fp32 math after confirmed upcasts. A warning
    needs its share of the scope measured and at least MATERIAL_SHARE; a share that cannot be
    taken (no device or CPU time in the scope, or nothing the fp32 ops ran was recorded) is said
    to be not measured, and the finding is minor (info): a count of upcasts alone does not say
    they cost anything."""
    if cost.share is None or cost.us <= 0:
        return True, "clause.upcast_cost.not_measured"
    if not cost.material:
        return True, "clause.upcast_cost.minor"
    return False, "clause.upcast_cost.measured"


def _fp32_span_ops(ctx: Context, upcasts: list[int]) -> np.ndarray:
    """The CPU ops that run in fp32 after each upcast: on its thread, from the upcast to the end
    of the next downcast (fp32 -> 16 bits), else to the end of the instance that holds it."""
    t = ctx.trace
    out: list[np.ndarray] = []
    for inst in ctx.region.instances:
        ops = inst.cpu_ops
        for r in upcasts:
            if not (inst.start <= t.ts[r] <= max(inst.end, inst.start)) and inst.row >= 0:
                continue
            lane_ops = ops[(t.lane[ops] == t.lane[r]) & (t.ts[ops] >= t.ts[r])]
            lane_ops = lane_ops[np.argsort(t.ts[lane_ops], kind="stable")]
            down = [q for q in lane_ops.tolist() if q != r and is_downcast(t, q)]
            end = t.ts[down[0]] + t.dur[down[0]] if down else np.inf
            out.append(lane_ops[t.ts[lane_ops] <= end])
    return unique(np.concatenate(out)) if out else np.zeros(0, np.int64)


def _in_spans(t: Trace, rows: np.ndarray, spans: list[tuple[int, float, float]]) -> np.ndarray:
    """Per row, whether its start lies in one of the (lane, start, end) spans on its lane."""
    sp = np.array(spans, np.float64).reshape(-1, 3)
    return held(sp[:, 0].astype(np.int64), sp[:, 1], sp[:, 2], t.lane[rows], t.ts[rows])
