"""Accuracy: a variant's output (or gradient) against an fp64 reference computed once per workload.

The tolerance rule lives here, once, for outputs and gradients alike (docs/run.md, "Accuracy"):
an element passes when |out - ref| <= atol + rtol * |ref|, and a result is correct when every
element passes and none is NaN or inf. The reference is computed in fp64 from the very same
(already rounded) inputs, so the error measures only the arithmetic the variant does in its dtype:

- fp32: atol = rtol = 1e-3. fp32's own rounding is ~6e-8; the room is for TF32 GEMMs on GPUs
  (10-bit mantissa, unit roundoff 2^-11 ~ 4.9e-4) accumulated over the head dimension.
- fp16: atol = rtol = 1e-2, about 20 units of fp16 roundoff (2^-11), for scores, softmax and
  output rounded to fp16 in turn.
- bf16: atol = rtol = 5e-2, about 13 units of bf16 roundoff (2^-8 ~ 3.9e-3), for the same.

A wrong answer from a working kernel (a mis-scaled q, a dropped mask) moves attention outputs by
tenths at unit-variance inputs, far beyond these; reduced-precision rounding stays well inside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from attnprof.records import Accuracy, is_incorrect

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = ["TOLERANCE", "Tolerance", "compare", "is_incorrect", "reference", "tolerance"]


class Tolerance(NamedTuple):
    atol: float
    rtol: float


_TOLERANCES = {
    "fp32": Tolerance(1e-3, 1e-3),
    "fp16": Tolerance(1e-2, 1e-2),
    "bf16": Tolerance(5e-2, 5e-2),
    "fp64": Tolerance(1e-9, 1e-9),
}
# the absolute part per dtype, kept for callers that read the old table
TOLERANCE = {k: v.atol for k, v in _TOLERANCES.items() if k != "fp64"}


def tolerance(dtype: str) -> Tolerance:
    """The (atol, rtol) a result in `dtype` must meet against its fp64 reference. One rule for
    forward outputs and gradients; see the module docstring for why these values."""
    try:
        return _TOLERANCES[dtype]
    except KeyError:
        raise ValueError(f"no tolerance for dtype {dtype!r}: use one of {', '.join(_TOLERANCES)}") from None


def reference(workload: Workload, inputs: Inputs) -> torch.Tensor:
    """Exact attention in fp64 (harness/reference.py: in blocks of query rows, mask-aware)."""
    from attnprof.harness.reference import exact

    return exact(workload, inputs).out


# fp64 output-sized tensors compare() holds at its peak: the output upcast, the difference, and
# the temporaries of one expression at a time (abs, where's zeros, the bound, the quotient)
COMPARE_COPIES = 6


def compare_bytes(workload: Workload) -> int:
    """Memory compare() needs for the largest tensor it checks: the output, or with backward
    dK and dV when they are larger (decode: Skv > Sq); they are compared one at a time."""
    w = workload
    largest = w.batch * w.heads * w.seq * w.head_dim
    if w.backward:
        largest = max(largest, w.batch * w.kv_heads * w.kv_seq * w.head_dim)
    return COMPARE_COPIES * largest * 8


def compare(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> Accuracy:
    """`out` against `ref` under tolerance(dtype): errors, non-finite counts and the verdict."""
    import torch

    o = out.detach().to(device=ref.device, dtype=torch.float64)
    if o.shape != ref.shape:
        raise ValueError(f"output shape {tuple(o.shape)} differs from the reference's {tuple(ref.shape)}")
    nan = int(torch.isnan(o).sum())
    inf = int(torch.isinf(o).sum())
    finite = torch.isfinite(o)
    diff = (o - ref).abs().where(finite, torch.zeros_like(o))
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / ref.abs().clamp_min(1e-3)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    tol = tolerance(dtype)
    # how far the worst element is past its own bound: > 1 fails
    excess = diff / (tol.atol + tol.rtol * ref.abs())
    worst = float(excess.max()) if excess.numel() else 0.0
    finite_only = nan == 0 and inf == 0
    return Accuracy(
        max_abs_err=max_abs if finite_only else None,
        max_rel_err=max_rel if finite_only else None,
        nan_count=nan,
        inf_count=inf,
        tolerance=tol.atol,
        rtol=tol.rtol,
        worst_over_tolerance=worst if finite_only else None,
        ok=nan == 0 and inf == 0 and worst <= 1.0,
    )
