"""Findings from the per-op performance model (analysis/perf/perf_model.py): which op shapes are far
from their roof, in ways a user can act on, and which are above it (a wrong peak or model).

Every rule reads the outermost modelled ops (`nested` ones share their kernels) and needs the
roofs: a device the peak table does not name gets no bound, and so none of these findings.
Codes (docs/findings.md): MEMORY_BOUND_GEMM, ATTENTION_BELOW_ROOF, DECODE_BELOW_BANDWIDTH,
OP_ABOVE_ROOF.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnprof.analysis.findings.codes import finding
from attnprof.analysis.records.result import Finding

if TYPE_CHECKING:
    from attnprof.analysis.findings.context import Context
    from attnprof.analysis.records.perf_records import OpPerf

__all__ = ["PERF_CODES", "PERF_RULES"]

# Both shares are percentages of the device time (OpPerf.pct_time is a percent). Neither is
# materiality's MATERIAL_SHARE (analysis/findings/materiality.py: the 1% fraction of a scope's time
# that makes a finding about named ops a warning rather than info): these decide whether a per-op
# model finding is made at all. A finding names shapes that together take at least SHAPES_PCT of
# the device time (below it, fixing them would not move the whole trace) ...
SHAPES_PCT = 10.0
# ... each shape named taking at least SHAPE_PCT (the long tail of tiny shapes is left out)
SHAPE_PCT = 1.0
# "far below its roof": under this % of the bound's roof
FAR_BELOW = 30.0


# the roof an op is bound by, in the catalogs' words
_ROOF_WORDS = {"compute": "clause.roof.compute", "memory": "clause.roof.memory"}


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


def _largest(o: OpPerf, shapes: int, share: float | None) -> dict[str, Any]:
    """The figures the sentence names: how many shapes, their share, and the op it names (the
    largest, or the furthest above its roof) with its dims."""
    return {
        "shape_count": shapes,
        **({"share": share} if share is not None else {}),
        "largest_op": o.name,
        "largest_dims": _dims(o),
        "largest_pct_of_bound": o.pct_of_bound,
        "largest_tflops": o.tflops,
        "largest_tbps": o.tbps,
        "largest_peak_tbps": o.peak_tbps,
        "largest_formula": o.formula,
    }


def memory_bound_gemm(ctx: Context) -> list[Finding]:
    hits = [
        o
        for o in _outer(ctx)
        if o.family == "gemm" and o.bound == "memory" and (o.pct_time or 0.0) >= SHAPE_PCT
    ]
    share = sum(o.pct_time or 0.0 for o in hits)
    if not hits or share < SHAPES_PCT:
        return []
    o = hits[0]
    ridge = (o.peak_tflops or 0.0) / (o.peak_tbps or 1.0)
    return [
        finding(
            "MEMORY_BOUND_GEMM",
            {
                "share_pct": round(share, 2),
                "ridge_flop_per_byte": round(ridge, 3),
                "shapes": [_shape(h) for h in hits],
                **_largest(o, len(hits), share),
                "intensity_min": min(h.intensity or 0.0 for h in hits),
                "intensity_max": max(h.intensity or 0.0 for h in hits),
                "ridge": ridge,
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
        and (o.pct_time or 0.0) >= SHAPE_PCT
    ]
    share = sum(o.pct_time or 0.0 for o in hits)
    return (hits, share) if hits and share >= SHAPES_PCT else ([], share)


def attention_below_roof(ctx: Context) -> list[Finding]:
    hits, share = _attention_far_below(ctx, decode=False)
    if not hits:
        return []
    o = hits[0]
    return [
        finding(
            "ATTENTION_BELOW_ROOF",
            {
                "share_pct": round(share, 2),
                "below_pct": FAR_BELOW,
                "shapes": [_shape(h) for h in hits],
                **_largest(o, len(hits), share),
                "largest_roof": _ROOF_WORDS[str(o.bound)],
            },
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
            {
                "share_pct": round(share, 2),
                "below_pct": FAR_BELOW,
                "shapes": [_shape(h) for h in hits],
                **_largest(o, len(hits), share),
            },
        )
    ]


def op_above_roof(ctx: Context) -> list[Finding]:
    hits = [o for o in _outer(ctx) if o.pct_of_bound is not None and o.pct_of_bound > 100.0]
    if not hits:
        return []
    tf32 = any(h.dtype == "fp32" and h.family in ("gemm", "conv", "attention") for h in hits)
    o = max(hits, key=lambda h: h.pct_of_bound or 0.0)
    return [
        finding(
            "OP_ABOVE_ROOF",
            {
                "shapes": [_shape(h) for h in hits],
                "peak_tflops": o.peak_tflops,
                "peak_tbps": o.peak_tbps,
                **_largest(o, len(hits), None),
                # fp32 matrix ops above the fp32 roof usually ran in TF32
                "tf32_clause": "clause.tf32_hint" if tf32 else "",
            },
        )
    ]


PERF_RULES = (memory_bound_gemm, attention_below_roof, decode_below_bandwidth, op_above_roof)
PERF_CODES = ("MEMORY_BOUND_GEMM", "ATTENTION_BELOW_ROOF", "DECODE_BELOW_BANDWIDTH", "OP_ABOVE_ROOF")
