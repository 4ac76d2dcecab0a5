"""Naive attention, as in the blog's 04_a and 04_b scripts.

matmul -> scale -> masked_fill -> softmax -> matmul. The out-of-place masked_fill makes a copy
of the whole score tensor (aten::clone, a Memcpy DtoD on GPU); masked_fill_ does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = ["VARIANTS", "naive_attention"]


def _expand_kv(t: torch.Tensor, heads: int) -> torch.Tensor:
    # GQA: each kv head serves heads // kv_heads query heads
    if t.shape[1] == heads:
        return t
    return t.repeat_interleave(heads // t.shape[1], dim=1)


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    *,
    inplace: bool,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """`mask` is True where attention is NOT allowed; `bias` (ALiBi, --mask bias) is added to
    the scaled scores before the mask."""
    import torch

    k = _expand_kv(k, q.shape[1])
    v = _expand_kv(v, q.shape[1])
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores.add_(bias) if inplace else scores + bias
    if mask is not None:
        if inplace:
            scores.masked_fill_(mask, float("-inf"))
        else:
            scores = scores.masked_fill(mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return torch.matmul(attn, v)


def _always(workload: Workload) -> Decision:
    return Decision.ok()


def _builder(inplace: bool):  # type: ignore[no-untyped-def]
    def build(workload: Workload, inputs: Inputs) -> Built:
        # the dense mask (and bias) are built here, after the memory check, as naive code does
        q, k, v, mask, bias, scale = inputs.q, inputs.k, inputs.v, inputs.mask, inputs.bias, inputs.scale
        parts = []
        if bias is not None:
            parts.append(f"float bias [{'x'.join(str(n) for n in bias.shape)}] added")
        if mask is not None:
            shape = "x".join(str(n) for n in mask.shape)
            parts.append(f"dense bool mask [{shape}], masked_fill{'_' if inplace else ''}")
        return Built(
            call=lambda: naive_attention(q, k, v, mask, scale, inplace=inplace, bias=bias),
            mask_path="; ".join(parts) or "no mask",
        )

    return build


VARIANTS = [
    Variant(
        name="naive",
        description="matmul, scale, out-of-place masked_fill, softmax, matmul (blog 04_a)",
        build=_builder(False),
        capability=_always,
        score_tensors=3,
    ),
    Variant(
        name="naive-inplace",
        description="the same with in-place masked_fill_: no copy of the scores (blog 04_b)",
        build=_builder(True),
        capability=_always,
        score_tensors=2,
    ),
]
