"""Findings from the per-op performance model (analysis/perf_model.py): which op shapes are far
from their roof, in ways a user can act on, and which are above it (a wrong peak or model).

Every rule reads the outermost modelled ops (`nested` ones share their kernels) and needs the
roofs: a device the peak table does not name gets no bound, and so none of these findings.
Codes (docs/findings.md): MEMORY_BOUND_GEMM, ATTENTION_BELOW_ROOF, DECODE_BELOW_BANDWIDTH,
OP_ABOVE_ROOF.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnprof.analysis.codes import finding
from attnprof.analysis.result import Finding

if TYPE_CHECKING:
    from attnprof.analysis.context import Context
    from attnprof.analysis.perf_records import OpPerf

__all__ = ["PERF_CODES", "PERF_RULES"]

# a finding names shapes that together take at least this share of the device time: below it,
# fixing them would not move the whole trace
MATERIAL_SHARE = 10.0
# each shape named takes at least this share (the long tail of tiny shapes is left out)
SHAPE_SHARE = 1.0
# "far below its roof": under this % of the bound's roof
FAR_BELOW = 30.0


def _outer(ctx: Context) -> list[OpPerf]:
    return [o for o in ctx.ops if not o.nested and o.pct_time is not None]


def _shape(o: OpPerf) -> dict[str, Any]:
    return {
        "op": o.name,
        "input_dims": o.input_dims,
        "count": o.count,
        "pct_time": o.pct_time,
        "intensity": o.intensity,
        "tflops": o.tflops,
        "tbps": o.tbps,
        "pct_of_bound": o.pct_of_bound,
        "formula": o.formula,
    }


def _dims(o: OpPerf) -> str:
    return " ".join(str(d) for d in o.input_dims if isinstance(d, list) and d)


def memory_bound_gemm(ctx: Context) -> list[Finding]:
    hits = [
        o
        for o in _outer(ctx)
        if o.family == "gemm" and o.bound == "memory" and (o.pct_time or 0.0) >= SHAPE_SHARE
    ]
    share = sum(o.pct_time or 0.0 for o in hits)
    if not hits or share < MATERIAL_SHARE:
        return []
    o = hits[0]
    ridge = (o.peak_tflops or 0.0) / (o.peak_tbps or 1.0)
    return [
        finding(
            "MEMORY_BOUND_GEMM",
            f"{len(hits)} GEMM shape(s) take {share:.3g}% of the device time and are memory-bound: "
            f"their intensity ({min(h.intensity or 0.0 for h in hits):.3g} to "
            f"{max(h.intensity or 0.0 for h in hits):.3g} FLOP/byte) is below the ridge of "
            f"{ridge:.3g} FLOP/byte, so they wait on memory, not on the tensor cores (the largest: "
            f"{o.name} {_dims(o)}). More rows per weight (a larger batch, or tokens batched "
            "together) or fusing them with their neighbours would raise it.",
            {
                "share_pct": round(share, 2),
                "ridge_flop_per_byte": round(ridge, 3),
                "shapes": [_shape(h) for h in hits],
            },
        )
    ]


def _attention_far_below(ctx: Context, *, decode: bool) -> tuple[list[OpPerf], float]:
    """Attention shapes (decode-shaped or not) far below their roof, each a share of the device
    time worth naming, and their summed share; none when the sum is not material."""
    hits = [
        o
        for o in _outer(ctx)
        if o.family == "attention"
        and o.decode is decode
        and o.pct_of_bound is not None
        and o.pct_of_bound < FAR_BELOW
        and (o.pct_time or 0.0) >= SHAPE_SHARE
    ]
    share = sum(o.pct_time or 0.0 for o in hits)
    return (hits, share) if hits and share >= MATERIAL_SHARE else ([], share)


def attention_below_roof(ctx: Context) -> list[Finding]:
    hits, share = _attention_far_below(ctx, decode=False)
    if not hits:
        return []
    o = hits[0]
    return [
        finding(
            "ATTENTION_BELOW_ROOF",
            f"Attention takes {share:.3g}% of the device time at under {FAR_BELOW:.0f}% of its roof "
            f"(the largest: {o.name} {_dims(o)} at {o.pct_of_bound:.3g}% of the {o.bound} roof, "
            f"{o.tflops:.3g} TFLOP/s): compare implementations for this shape (attnprof run --shape) or "
            "check that the fused kernel is the one running.",
            {"share_pct": round(share, 2), "below_pct": FAR_BELOW, "shapes": [_shape(h) for h in hits]},
        )
    ]


def decode_below_bandwidth(ctx: Context) -> list[Finding]:
    hits, share = _attention_far_below(ctx, decode=True)
    if not hits:
        return []
    o = hits[0]
    return [
        finding(
            "DECODE_BELOW_BANDWIDTH",
            f"Decode attention takes {share:.3g}% of the device time at under {FAR_BELOW:.0f}% of the "
            f"memory bandwidth (the largest: {o.name} {_dims(o)} reads K and V at {o.tbps:.3g} TB/s, "
            f"{o.pct_of_bound:.3g}% of {o.peak_tbps:.3g} TB/s): with few queries per sequence the "
            "bandwidth is the roof; a split-KV (flash-decoding) kernel, or more sequences per call, "
            "keeps more of the device reading.",
            {"share_pct": round(share, 2), "below_pct": FAR_BELOW, "shapes": [_shape(h) for h in hits]},
        )
    ]


def op_above_roof(ctx: Context) -> list[Finding]:
    hits = [o for o in _outer(ctx) if o.pct_of_bound is not None and o.pct_of_bound > 100.0]
    if not hits:
        return []
    tf32 = any(h.dtype == "fp32" and h.family in ("gemm", "conv", "attention") for h in hits)
    hint = (
        " fp32 matrix ops above the fp32 roof usually ran in TF32 (torch.backends.cuda.matmul.allow_tf32): "
        "give --peak with the TF32 figure."
        if tf32
        else ""
    )
    o = max(hits, key=lambda h: h.pct_of_bound or 0.0)
    return [
        finding(
            "OP_ABOVE_ROOF",
            f"{len(hits)} op shape(s) ran above their roof (up to {o.pct_of_bound:.3g}%: {o.name} "
            f"{_dims(o)}, {o.formula}): the peak ({o.peak_tflops} TFLOP/s, {o.peak_tbps} TB/s) or "
            f"the model is wrong for them, so their percentages are not to be trusted.{hint}",
            {"shapes": [_shape(h) for h in hits], "peak_tflops": o.peak_tflops, "peak_tbps": o.peak_tbps},
        )
    ]


PERF_RULES = (memory_bound_gemm, attention_below_roof, decode_below_bandwidth, op_above_roof)
PERF_CODES = ("MEMORY_BOUND_GEMM", "ATTENTION_BELOW_ROOF", "DECODE_BELOW_BANDWIDTH", "OP_ABOVE_ROOF")
