"""Findings about precision: GEMMs on CUDA cores (CUDA_CORE_GEMM) and fp32 upcasts where
attention is computed (FP32_UPCAST), with advice the device's tensor cores can take.

Rules of attnprof.analysis.findings (RULES runs them), kept apart so that module stays one
concern per file; docs/findings.md documents both codes.
"""

from __future__ import annotations

import numpy as np

from attnprof.analysis.codes import finding
from attnprof.analysis.context import Context
from attnprof.analysis.cpu_ops import is_downcast
from attnprof.analysis.materiality import Cost, cost_of_ops
from attnprof.analysis.result import Finding
from attnprof.trace.model import unique
from attnprof.units import fmt_us

__all__ = ["cuda_core_gemm", "fp32_upcast"]


def _r(x: float) -> float:
    return round(float(x), 3)


def _gemm_advice(precisions: list[str], tc: list[str] | None, arch: str) -> str:
    """Advice the device can follow: its tensor-core dtypes decide (Volta: fp16 only; Turing adds
    int8; Ampere tf32 and bf16; Ada / Hopper fp8)."""
    parts = []
    if "fp32" in precisions:
        if tc is None:
            parts.append(
                "fp32 GEMMs run on CUDA cores: on a GPU with tensor cores, allow TF32 (Ampere or later: "
                "torch.backends.cuda.matmul.allow_tf32 = True) or compute in fp16 / bf16 (autocast)"
            )
        elif "tf32" in tc:
            parts.append(
                "fp32 GEMMs run on CUDA cores: allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
                "or torch.set_float32_matmul_precision('high')) or autocast to bf16 / fp16"
            )
        else:
            parts.append(
                f"fp32 GEMMs run on CUDA cores; this GPU ({arch}) has tensor cores for "
                f"{' and '.join(tc)} only (no TF32, no bf16): torch.autocast('cuda', dtype=torch.float16) "
                "moves the GEMMs onto them"
            )
    half = [p for p in precisions if p in ("fp16", "bf16")]
    if half:
        if "bf16" in half and tc is not None and "bf16" not in tc:
            parts.append(f"bf16 has no tensor-core support on this GPU ({arch}): use fp16")
        else:
            parts.append(
                f"{'/'.join(half)} GEMMs on CUDA cores usually mean a shape the tensor-core kernels "
                "refuse (a dimension not a multiple of 8) or a matrix-vector product"
            )
    if "unknown" in precisions:
        parts.append("the precision of some is not in their names")
    return "; ".join(parts)


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
    hint = _gemm_advice(precisions, tc, arch)
    # every kernel of the trace is read here, so the trace's device time is the scope
    cost = Cost(
        t,
        float(ctx.totals.kernel_time_us + ctx.totals.memcpy_time_us + ctx.totals.memset_time_us),
        "trace device time",
    )
    note = cost.note()
    return [
        finding(
            "CUDA_CORE_GEMM",
            f"{n} GEMM kernel(s) run on CUDA cores, not tensor cores: {fmt_us(t)}, "
            f"{100 * t / gemm_time:.0f}% of GEMM time ({', '.join(precisions)}){note}. {hint}",
            {
                **cost.evidence(),
                "count": n,
                "time_us": _r(t),
                "pct_of_gemm_time": round(100 * t / gemm_time, 2),
                "precisions": precisions,
                "tensor_core_dtypes": tc,
                "kernels": [{"name": k.short_name, "count": k.count, "time_us": k.time_us} for k in slow[:8]],
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
    chain_rows = [
        r
        for r in ev.upcast_rows
        if any(lane == int(t.lane[r]) and start <= t.ts[r] <= end for lane, start, end in ctx.unfused.spans)
    ]
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
    stable_note = (
        f"; {n_stable / n:g} more per instance are stability upcasts (upcast -> softmax or norm -> "
        "downcast before the next GEMM), which keep the GEMMs in 16 bits"
        if n_stable
        else ""
    )
    if fp32_rows:
        places = []
        if in_sdpa:
            places.append(
                f"{in_sdpa / n:g} inside scaled_dot_product_attention, whose math backend computes "
                "16-bit inputs in fp32"
            )
        if in_chain:
            places.append(f"{in_chain / n:g} inside unfused attention (GEMM -> softmax -> GEMM)")
        where = "; ".join(places) if places else "none inside scaled_dot_product_attention"
        fp32_cc = any(
            k.category == "gemm" and k.tensor_cores is False and k.precision == "fp32" for k in ctx.kernels
        )
        cost = cost_of_ops(ctx, _fp32_span_ops(ctx, fp32_rows))
        minor, what = _upcast_cost(cost, n)
        return [
            finding(
                "FP32_UPCAST",
                f"16-bit inputs are converted to fp32 in {ctx.region.name}: {len(fp32_rows) / n:g} upcast(s) per "
                f"instance (aten::_to_copy from bf16/fp16 to float; {where}) with no downcast before the next "
                f"GEMM: the math after them runs in fp32 ({what})"
                + ("; fp32 GEMMs in this trace run on CUDA cores" if fp32_cc else "")
                + stable_note,
                {**facts, **cost.evidence(), "cost_measured": cost.share is not None and cost.us > 0},
                minor=minor,
            )
        ]
    if n_stable:
        return [
            finding(
                "FP32_UPCAST",
                f"{n_stable / n:g} stability upcast(s) per instance in {ctx.region.name} (upcast -> softmax "
                "or norm -> downcast before the next GEMM): computed in fp32 on purpose, for numerical "
                "stability; the GEMMs stay in 16 bits",
                facts,
                minor=True,
            )
        ]
    # without recorded dtypes, only an annotated call (attn_fwd, --region) is specific enough for
    # a count to mean an upcast: a model step also converts for device transfers and inputs
    # Which conversions upcast, and so which ops run in fp32 after them, is not known: neither
    # the upcast nor its cost is measured, so this is info and claims no materiality.
    if not ev.dtypes_known and annotated and ev.conversions / n >= 3:
        return [
            finding(
                "FP32_UPCAST",
                f"{ev.conversions / n:g} dtype conversions (aten::_to_copy) per call: possibly an upcast "
                "of q, k and v to fp32 and back; dtypes not recorded: the upcast and its cost are not measured "
                "(profile with record_shapes=True to confirm)",
                {
                    "conversions_per_instance": ev.conversions / n,
                    "dtypes_recorded": False,
                    "cost_us": None,
                    "cost_measured": False,
                },
                minor=True,
            )
        ]
    return []


def _upcast_cost(cost: Cost, instances: int) -> tuple[bool, str]:
    """(minor, words) for the fp32 math after confirmed upcasts. A warning needs its share of the
    scope measured and at least MATERIAL_SHARE; a share that cannot be taken (no device or CPU
    time in the scope, or nothing the fp32 ops ran was recorded) is said to be not measured, and
    the finding is minor (info): a count of upcasts alone does not say they cost anything."""
    per = fmt_us(cost.us / instances)
    s = cost.share
    if s is None or cost.us <= 0:
        return True, f"their cost is not measured: no {cost.basis} recorded for them"
    note = cost.note()
    if note:
        return not cost.material, f"{per} per instance until the downcast{note}"
    return not cost.material, f"{per} per instance until the downcast, {100.0 * s:.2g}% of the {cost.basis}"


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
