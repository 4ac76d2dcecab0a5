"""Varlen (packed) attention: FLOPs from the per-sequence lengths its cu_seqlens give.

A varlen op packs its sequences along one token axis (q [total_q, Hq, D], k and v [total_k,
Hkv, D]) and says where each sequence starts in cu_seqlens_q / cu_seqlens_k (cumulative, N+1
entries). Its work is the sum over sequences of the pairs each one's mask allows, never the
square of the packed total: FLOPs = 4 * Hq * D * sum_i pairs(Sq_i, Sk_i) (2.5x backward), with
pairs from attnprof.formulas.attention_pairs (causal: half the square plus the diagonal where
Sq_i == Sk_i; the bottom-right or top-left offset formula otherwise; windows narrow it).

The lengths are tensor values. torch.profiler's record_shapes records a tensor's dims and dtype
only ("Concrete Inputs" is empty for a tensor), so in a trace they are known only where:
- the values are recorded (a list in Concrete Inputs at cu_seqlens' position);
- cu_seqlens has 2 entries: one sequence, of the packed totals;
- the recorded max_seqlen times the number of sequences equals the packed total: every sequence
  is at the maximum (each is at most max_seqlen and they sum to the total).
Otherwise the FLOPs are not measured (OpCost.flops None, basis "not measured"): bytes (every
packed token read once) are still exact. A paged or seqused_k call (block_table / seqused_k
given: K's rows are cache blocks, its lengths tensor values) is not measured either.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from attnprof.analysis.perf.op_args import Args, OpCost
from attnprof.formulas import BACKWARD_FLOP_FACTOR, attention_bytes, attention_flops, attention_pairs

__all__ = ["VARLEN_OPS", "seq_lengths", "varlen_cost"]


@dataclass(frozen=True)
class _Spec:
    qkv: tuple[int, int, int]
    cu: tuple[int, int]  # cu_seqlens_q, cu_seqlens_k
    max: tuple[int, int]  # max_seqlen_q, max_seqlen_k
    causal: int
    alignment: str  # how the op aligns its causal mask when Sq_i != Sk_i
    backward: bool
    window: tuple[int, int] | None = None  # window_size_left / right positions
    window_list: int | None = None  # or one [left, right] argument
    paged: tuple[int, ...] = ()  # block_table / seqused_k / leftpad_k: K's lengths not its rows
    k_defaults_to_q: bool = False  # cu_seqlens_k None means cu_seqlens_q


# flash_attn (>= 2.6 registers them as torch ops, "flash_attn::" or "flashattn::" by version):
# _flash_attn_varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale,
# causal, window_size_left, window_size_right, softcap, alibi_slopes, return_softmax,
# block_table, leftpad_k, seqused_k) and _flash_attn_varlen_backward(dout, q, k, v, out, lse,
# dq, dk, dv, cu_q, cu_k, max_q, max_k, dropout_p, softmax_scale, causal, window_size_left,
# window_size_right, ...); flash_attn's causal is bottom-right (>= 2.1)
_FA_FWD = _Spec((0, 1, 2), (3, 4), (5, 6), 9, "bottom-right", False, window=(10, 11), paged=(15, 16, 17))
_FA_BWD = _Spec((1, 2, 3), (9, 10), (11, 12), 15, "bottom-right", True, window=(16, 17))
VARLEN_OPS: dict[str, _Spec] = {
    "flash_attn::_flash_attn_varlen_forward": _FA_FWD,
    "flashattn::_flash_attn_varlen_forward": _FA_FWD,
    "flash_attn::_flash_attn_varlen_backward": _FA_BWD,
    "flashattn::_flash_attn_varlen_backward": _FA_BWD,
    # torch.nn.attention.varlen.varlen_attn's ops (torch >= 2.9): (query, key, value, cu_seq_q,
    # cu_seq_k, max_q, max_k, is_causal, scale, window_size, ...); backward (grad_out, query,
    # key, value, out, lse, cu_seq_q, cu_seq_k, max_q, max_k, is_causal, rng_state, scale,
    # window_size). They call aten::_flash_attention_*: PyTorch's is_causal, top-left
    "torch_attn::_varlen_attn": _Spec(
        (0, 1, 2), (3, 4), (5, 6), 7, "top-left", False, window_list=9, paged=(11, 12), k_defaults_to_q=True
    ),
    "torch_attn::_varlen_attn_backward": _Spec(
        (1, 2, 3), (6, 7), (8, 9), 10, "top-left", True, window_list=13, k_defaults_to_q=True
    ),
    # (vLLM's and SGLang's varlen ops are not here: their schemas were not checked against a
    # recording, and a wrong position would count a causal call as dense)
    # PyTorch's own flash / efficient ops with cum_seq tensors (nested-tensor SDPA, varlen_attn):
    # _flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
    # is_causal, ...) with 3-D [total, H, D] operands; its backward (grad_out, query, key, value,
    # out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)
    "aten::_flash_attention_forward": _Spec(
        (0, 1, 2), (3, 4), (5, 6), 8, "top-left", False, window=(11, 12), paged=(13, 14)
    ),
    "aten::_flash_attention_backward": _Spec(
        (1, 2, 3), (6, 7), (8, 9), 11, "top-left", True, window=(15, 16)
    ),
}


def seq_lengths(a: Args, pos: int, total: int, max_len: int | None) -> tuple[list[int] | None, str]:
    """The per-sequence lengths cu_seqlens at `pos` gives, and how they are known (see the
    module's docstring); (None, why) when they are not."""
    t = a.tensor(pos)
    values = a.ints(pos)
    if values is not None and len(values) >= 2:
        lens = [b - e for e, b in itertools.pairwise(values)]
        if values[0] < 0 or any(n < 0 for n in lens) or values[-1] > total:
            return None, "recorded cu_seqlens are not cumulative lengths within the packed tokens"
        return lens, "recorded cu_seqlens"
    if t is None or len(t[0]) != 1:
        return None, "cu_seqlens not recorded"
    n = t[0][0] - 1
    if n == 1:
        return [total], "one sequence (cu_seqlens has 2 entries)"
    if n >= 1 and max_len is not None and n * max_len == total:
        return [max_len] * n, f"{n} sequences at max_seqlen {max_len} (max x count = packed total)"
    return None, "cu_seqlens values not recorded"


def varlen_cost(name: str, a: Args) -> OpCost | None:
    """The cost of one varlen call, or None when its operands are not packed [tokens, H, D]."""
    spec = VARLEN_OPS[name]
    iq, ik, iv = spec.qkv
    q, k, v = a.tensor(iq), a.tensor(ik), a.tensor(iv)
    if q is None or k is None or v is None or len(q[0]) != 3:
        return None
    paged = any(a.tensor(i) is not None for i in spec.paged)
    if (len(k[0]) != 3 or len(v[0]) != 3) and not paged:
        return None
    (tq, hq, d), dv = q[0], v[0][-1]
    hkv = k[0][-2]
    tk = k[0][0] if len(k[0]) == 3 else 0
    what = ["attention varlen", "bwd (2.5x fwd)" if spec.backward else "fwd"]
    causal = spec.alignment if a.flag(spec.causal) else None
    left = right = None
    if spec.window is not None:
        left, right = a.integer(spec.window[0]), a.integer(spec.window[1])
    elif spec.window_list is not None and (w := a.ints(spec.window_list)) is not None and len(w) == 2:
        left, right = w
    left = left if left is not None and left >= 0 else None
    right = right if right is not None and right >= 0 else None
    what.append(f"causal {causal}" if causal else "dense")
    if left is not None or right is not None:
        what.append(f"window ({left if left is not None else '-'}, {right if right is not None else '-'})")
    if hkv != hq:
        what.append(f"GQA {hq}/{hkv} heads")
    size = attention_bytes(1, hq, hkv, tq, tk, d, q[2], head_dim_v=dv, backward=spec.backward)
    if paged:
        # K and V are cache blocks: which rows each sequence reads are tensor values
        what.append("paged KV / seqused_k: lengths not recorded, FLOPs not measured")
        return OpCost(None, size, ", ".join(what), q[1], True, "attention", basis="not measured")
    lq, how_q = seq_lengths(a, spec.cu[0], tq, a.integer(spec.max[0]))
    if spec.k_defaults_to_q and a.tensor(spec.cu[1]) is None and a.ints(spec.cu[1]) is None:
        lk, how_k = (lq, how_q) if tk == tq else (None, "cu_seqlens_k not recorded")
    else:
        lk, how_k = seq_lengths(a, spec.cu[1], tk, a.integer(spec.max[1]))
    if lq is None or lk is None or len(lq) != len(lk):
        why = how_q if lq is None else how_k if lk is None else "cu_seqlens_q and _k disagree in count"
        what.append(f"{why}: FLOPs not measured")
        return OpCost(None, size, ", ".join(what), q[1], True, "attention", basis="not measured")
    pairs = sum(
        attention_pairs(sq, sk, causal=causal, window_left=left, window_right=right)
        for sq, sk in zip(lq, lk, strict=True)
    )
    flops = attention_flops(1, hq, pairs, d, dv)
    if spec.backward:
        flops *= BACKWARD_FLOP_FACTOR
    what.append(f"{len(lq)} sequences from {how_q if how_q == how_k else how_q + ' / ' + how_k}")
    return OpCost(flops, size, ", ".join(what), q[1], True, "attention")
