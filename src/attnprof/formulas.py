"""FLOP and byte formulas: the one home of every count attnprof makes (DOMAIN.md section 6).

Pure arithmetic on shapes, importing nothing: the workload's model (attnprof.workload), a
trace's per-op model (attnprof.analysis.perf.perf_model) and the per-run roofline
(attnprof.analysis.perf.roofline) all call these, so a count is defined once.

Conventions (docs/analysis.md "Per-op performance model"):
- a multiply-add is two FLOPs; a GEMM [M, K] @ [K, N] is 2*M*N*K, plus M*N for a bias added;
- attention forward is two GEMMs over the (query, key) pairs the mask allows: 2*pairs*(Dqk + Dv)
  per head (4*pairs*D when Dqk = Dv); its backward is 2.5x that (FlashAttention's convention:
  five GEMMs where the forward has two);
- bytes are what an op must read and write at least: every input once and every output once, at
  their element sizes (K and V have Hkv heads, so GQA reads less than Hq heads' worth).
"""

from __future__ import annotations

import itertools
import math

__all__ = [
    "BACKWARD_FLOP_FACTOR",
    "attention_bytes",
    "attention_flops",
    "attention_pairs",
    "conv_flops",
    "conv_out_size",
    "gemm_flops",
    "numel",
]

# FlashAttention's convention (DOMAIN.md section 6): backward = 2.5 x the forward's matmul FLOPs
BACKWARD_FLOP_FACTOR = 2.5


def numel(shape: list[int] | tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def gemm_flops(m: int, n: int, k: int, *, batch: int = 1, bias: bool = False) -> float:
    """2*M*N*K per matrix product (a multiply-add is two FLOPs), plus M*N for an added bias."""
    return float(batch) * (2.0 * m * n * k + (m * n if bias else 0))


def attention_pairs(
    sq: int,
    skv: int,
    *,
    causal: str | None = None,
    window_left: int | None = None,
    window_right: int | None = None,
) -> int:
    """(query, key) pairs a mask allows, per (batch, head), in closed form.

    causal: None (dense), "top-left" (PyTorch's is_causal: query i sees keys 0..i) or
    "bottom-right" (flash_attn, CausalBias lower_right, decode and chunked prefill: query i sees
    keys 0..i + Skv - Sq). window_left / window_right (flash_attn's window_size, bottom-right
    aligned like its causal mask; None or a negative value = unbounded) narrow each row to keys
    [i + off - left, i + off + right]. Causal is window_right = 0.
    """
    if sq <= 0 or skv <= 0:
        return 0
    off = 0
    if causal == "bottom-right" or (causal is None and (window_left is not None or window_right is not None)):
        off = skv - sq
    left = window_left if window_left is not None and window_left >= 0 else None
    right = window_right if window_right is not None and window_right >= 0 else None
    if causal is not None:
        right = 0 if right is None else min(right, 0)
    if left is None and right is None:
        return sq * skv
    # row i (0-based) sees keys lo_i..hi_i clipped to 0..skv-1, with lo_i = i + off - left and
    # hi_i = i + off + right. Between the rows where a clip starts or stops, the row length is
    # linear in i, so each piece sums in closed form (O(1), whatever the sequence length)
    cuts = {0, sq}
    if left is not None:
        cuts.add(min(max(left - off, 0), sq))  # first row with lo_i >= 0
    if right is not None:
        cuts.add(min(max(skv - right - off, 0), sq))  # first row with hi_i > skv - 1
    pts = sorted(cuts)
    total = 0
    for i0, i1 in itertools.pairwise(pts):
        if i0 >= i1:
            continue
        slope, const = 0, 1  # length = slope * i + const
        if right is None or i0 + off + right > skv - 1:
            const += skv - 1
        else:
            slope, const = slope + 1, const + off + right
        if left is not None and i0 + off - left >= 0:
            slope, const = slope - 1, const - (off - left)
        total += _positive_sum(slope, const, i0, i1)
    return total


def _positive_sum(slope: int, const: int, i0: int, i1: int) -> int:
    """Sum of max(0, slope*i + const) for i in [i0, i1), slope in {-1, 0, 1}."""
    if slope == 0:
        return (i1 - i0) * max(const, 0)
    if slope > 0:  # positive from i > -const
        i0 = max(i0, 1 - const)
    else:  # positive while i < const
        i1 = min(i1, const)
    if i0 >= i1:
        return 0
    n = i1 - i0
    return slope * (i0 + i1 - 1) * n // 2 + const * n


def attention_flops(
    batch: int, heads_q: int, pairs: int, head_dim: int, head_dim_v: int | None = None
) -> float:
    """Forward FLOPs over `pairs` (query, key) pairs per (batch, head): QK^T and PV."""
    dv = head_dim if head_dim_v is None else head_dim_v
    return 2.0 * batch * heads_q * pairs * (head_dim + dv)


def attention_bytes(
    batch: int,
    heads_q: int,
    heads_kv: int,
    sq: int,
    skv: int,
    head_dim: int,
    element_size: int,
    *,
    head_dim_v: int | None = None,
    backward: bool = False,
) -> float:
    """Q, K, V read once and O written once (K and V with Hkv heads); a backward also reads O and
    dO and writes dQ, dK, dV."""
    dv = head_dim if head_dim_v is None else head_dim_v
    q = batch * heads_q * sq * head_dim
    kv = batch * heads_kv * skv * (head_dim + dv)
    o = batch * heads_q * sq * dv
    return float((2 * (q + kv + o) + o if backward else q + kv + o) * element_size)


def conv_out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """One output spatial extent of a convolution (PyTorch's formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_flops(
    batch: int, c_out: int, out_spatial: list[int], c_in_per_group: int, kernel: list[int]
) -> float:
    """2 FLOPs per multiply-add: every output element sums C_in/groups x prod(kernel) products."""
    return 2.0 * batch * c_out * numel(out_spatial) * c_in_per_group * numel(kernel)
