"""Accuracy: a variant's output against an fp64 reference computed once per workload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.records import Accuracy

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = ["TOLERANCE", "compare", "reference"]

# max absolute error accepted per dtype for unit-variance inputs; fp32 leaves room for TF32
TOLERANCE = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 5e-2}


_BLOCK_BYTES = 256 * 1024 * 1024


def reference(workload: Workload, inputs: Inputs) -> torch.Tensor:
    """Exact attention in fp64, in blocks of query rows so its score blocks stay near 256 MiB
    whatever the sequence length (rows are independent in attention)."""
    import torch

    from attnprof.variants.naive import naive_attention

    rows = max(1, _BLOCK_BYTES // max(1, workload.heads * workload.kv_seq * 8))
    outs = []
    for b in range(workload.batch):
        k, v = (t[b : b + 1].double() for t in (inputs.k, inputs.v))
        parts = []
        for r0 in range(0, workload.seq, rows):
            q = inputs.q[b : b + 1, :, r0 : r0 + rows].double()
            mask = inputs.mask[r0 : r0 + rows] if inputs.mask is not None else None
            parts.append(naive_attention(q, k, v, mask, inputs.scale, inplace=True))
        outs.append(torch.cat(parts, dim=2))
    return torch.cat(outs)


def compare(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> Accuracy:
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
    tol = TOLERANCE[dtype]
    return Accuracy(
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        nan_count=nan,
        inf_count=inf,
        tolerance=tol,
        ok=nan == 0 and inf == 0 and max_abs <= tol,
    )
