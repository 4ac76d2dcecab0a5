"""The exact answer: attention in fp64, and with --backward its gradients dQ, dK, dV.

Computed in blocks of query rows (Workload.reference_block_rows, which also sizes its memory), so
its score blocks stay near 256 MiB whatever the sequence length (rows are independent in the
forward; dK and dV are sums over rows, accumulated block by block). The mask of each block is
built from the mask's rule for those rows only
(Workload.mask_rows), never as one S x S tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = ["Exact", "exact"]


@dataclass
class Exact:
    out: torch.Tensor  # [B, H, Sq, D] fp64
    grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # dq, dk, dv (fp64)


def exact(workload: Workload, inputs: Inputs) -> Exact:
    import torch

    from attnprof.variants.naive import naive_attention

    backward = workload.backward and inputs.grad_out is not None
    rows = workload.reference_block_rows()
    kind = workload.mask_spec.kind
    outs, dqs, dks, dvs = [], [], [], []
    padding = workload.mask_rows(0, 0) if kind == "padding" else None
    for b in range(workload.batch):
        k, v = (t[b : b + 1].detach().double().requires_grad_(backward) for t in (inputs.k, inputs.v))
        dk = torch.zeros_like(k) if backward else None
        dv = torch.zeros_like(v) if backward else None
        parts, dq_parts = [], []
        for r0 in range(0, workload.seq, rows):
            r1 = min(workload.seq, r0 + rows)
            q = inputs.q[b : b + 1, :, r0:r1].detach().double().requires_grad_(backward)
            mask = padding[b : b + 1] if padding is not None else workload.mask_rows(r0, r1)
            if kind == "bias":
                full = inputs.bias
                bias = full[:, :, r0:r1].double() if full is not None else None
            else:
                bias = workload.bias_rows(r0, r1, dtype=torch.float64)
            with torch.set_grad_enabled(backward):
                o = naive_attention(q, k, v, mask, inputs.scale, inplace=True, bias=bias)
                if backward:
                    assert inputs.grad_out is not None and dk is not None and dv is not None
                    g = inputs.grad_out[b : b + 1, :, r0:r1].double()
                    dq_b, dk_b, dv_b = torch.autograd.grad(o, (q, k, v), g)
                    dq_parts.append(dq_b)
                    dk += dk_b
                    dv += dv_b
            parts.append(o.detach())
        outs.append(torch.cat(parts, dim=2))
        if backward:
            assert dk is not None and dv is not None
            dqs.append(torch.cat(dq_parts, dim=2))
            dks.append(dk)
            dvs.append(dv)
    out = torch.cat(outs)
    if not backward:
        return Exact(out=out)
    return Exact(out=out, grads=(torch.cat(dqs), torch.cat(dks), torch.cat(dvs)))
