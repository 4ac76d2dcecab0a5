"""FlexAttention: what its op records, and FLOPs that say whether the BlockMask was counted.

FlexAttention skips the blocks its BlockMask marks empty, so its work is the computed blocks
only. Eager flex_attention records one op, FlexAttentionAutogradOp, with query, key and value
[B, H, S, D] (key and value with Hkv heads under enable_gqa) and the scale; the BlockMask
argument is a tuple of tensors, recorded as nothing (checked on torch 2.13: Input Dims [] and
Concrete Inputs "" at its position), and under torch.compile the op is gone (one Triton kernel
with no shapes). So a trace alone never says the sparsity: the FLOPs counted here are every
(query, key) pair, labelled "dense upper bound" (OpCost.basis), never presented as the work done.

The sparsity is known where the run recorded it: an `attnprof run` of a flex variant keeps its
BlockMask's share of skipped blocks in run.json (VariantFacts.block_sparsity), and
`computed_blocks` scales the dense count by the blocks kept (block-granular: a kept block is
computed whole, the work the kernel does).
"""

from __future__ import annotations

import dataclasses

from attnprof.analysis.perf.op_args import Args, OpCost
from attnprof.formulas import attention_bytes, attention_flops

__all__ = ["DENSE_UPPER_BOUND", "FLEX_OPS", "computed_blocks", "flex_cost"]

DENSE_UPPER_BOUND = "dense upper bound"
# op -> positions of query, key, value ([B, H, S, D])
FLEX_OPS: dict[str, tuple[int, int, int]] = {
    "FlexAttentionAutogradOp": (0, 1, 2),
}


def flex_cost(name: str, a: Args) -> OpCost | None:
    iq, ik, iv = FLEX_OPS[name]
    q, k, v = a.tensor(iq), a.tensor(ik), a.tensor(iv)
    if q is None or k is None or v is None or not (len(q[0]) == len(k[0]) == len(v[0]) == 4):
        return None
    (b, hq, sq, d), (_, hkv, skv, _), dv = q[0], k[0], v[0][3]
    what = ["attention fwd", "flex: BlockMask sparsity not recorded, every pair counted (dense upper bound)"]
    if hkv != hq:
        what.append(f"GQA {hq}/{hkv} heads")
    flops = attention_flops(b, hq, sq * skv, d, dv)
    size = attention_bytes(b, hq, hkv, sq, skv, d, q[2], head_dim_v=dv)
    return OpCost(
        flops,
        size,
        ", ".join(what),
        q[1],
        True,
        "attention",
        basis=DENSE_UPPER_BOUND,
        convention=DENSE_UPPER_BOUND,
    )


def computed_blocks(cost: OpCost, sparsity: float) -> OpCost:
    """A flex op's dense count scaled to the blocks its recorded BlockMask computes
    (`sparsity`: the share of blocks skipped, 0..1)."""
    if cost.basis != DENSE_UPPER_BOUND or cost.flops is None or not 0.0 <= sparsity <= 1.0:
        return cost
    kept = 1.0 - sparsity
    formula = cost.formula.replace(
        "flex: BlockMask sparsity not recorded, every pair counted (dense upper bound)",
        f"flex: computed blocks only ({100.0 * kept:.4g}% of the BlockMask's blocks, as the run recorded)",
    )
    basis = "computed blocks"
    return dataclasses.replace(cost, flops=cost.flops * kept, formula=formula, basis=basis, convention=basis)
