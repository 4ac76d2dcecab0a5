"""CPU-side evidence inside a region: what the aten ops say about an implementation.

Counted per region instance (then averaged), from the cpu_op events of each instance:
- copies from out-of-place ops: aten::clone whose parent op is one PyTorch implements as clone +
  in-place op (OUT_OF_PLACE_CLONERS: out-of-place masked_fill clones its input, then fills the
  clone in place);
- dtype conversions: aten::_to_copy (aten::to when no _to_copy is recorded). With record_shapes
  the input dtype and target dtype code are known, and a 16-bit float input converted to float32
  (ScalarType 6) is an upcast for sure; without them a conversion count of three or more per call
  (q, k and v) is reported as a likely upcast;
- causal-mask construction: aten::ones, tril, triu, scalar_tensor, fill_, where, full;
- aten::_safe_softmax;
- fused attention ops (aten::_scaled_dot_product_flash_attention and friends) and the
  aten::transpose ops inside the call that reaches them (the enclosing
  aten::scaled_dot_product_attention when there is one, else the fused op itself);
- unfused attention on the CPU: a GEMM op, then a softmax, then a GEMM, within a few ops.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnprof.analysis.attribution.cpu_groups import GEMM_OPS, MASK_BUILDERS
from attnprof.analysis.attribution.regions import Region, backward_ops, backward_pairs, inside
from attnprof.trace.model import Trace, nesting_order, unique

__all__ = [
    "OUT_OF_PLACE_CLONERS",
    "CpuEvidence",
    "UnfusedChains",
    "count_gemm_softmax_gemm",
    "cpu_evidence",
    "is_downcast",
    "unfused_chains",
]

# out-of-place ops that PyTorch implements as clone() + the in-place op: their clone is a copy
# the in-place variant would not make
OUT_OF_PLACE_CLONERS = {
    f"aten::{op}"
    for op in (
        "masked_fill",
        "index_put",
        "index_fill",
        "index_add",
        "index_copy",
        "masked_scatter",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "put",
        "renorm",
        "clamp",
        "fill",
    )
}
_MASK_OPS = MASK_BUILDERS  # cpu_groups.py: the one home of what an op's name says
_FUSED = re.compile(
    r"^aten::_(scaled_dot_product_(flash|efficient|cudnn|fused)\w*|flash_attention_forward|"
    r"efficient_attention_forward|flash_attention_backward|efficient_attention_backward)"
    r"|flash_attn|FlashAttnFunc|flex_attention"
)
_SDPA = "aten::scaled_dot_product_attention"
_GEMM_OPS = GEMM_OPS
_SOFTMAX_OPS = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax", "aten::softmax.int"}
_HALF_TYPES = {"c10::BFloat16", "c10::Half", "BFloat16", "Half"}
_FLOAT_CODES = {"6", "7"}  # ScalarType Float, Double
_FLOAT_TYPES = {"float", "double", "Float", "Double"}
_HALF_CODES = {"5", "15"}  # ScalarType Half, BFloat16
# what a stability upcast is for: the softmax or normalisation computed in fp32 between the
# upcast and the downcast (RMSNorm written by hand computes rsqrt of a mean)
_STABILITY_OPS = {
    *_SOFTMAX_OPS,
    "aten::log_softmax",
    "aten::_log_softmax",
    "aten::layer_norm",
    "aten::native_layer_norm",
    "aten::rms_norm",
    "aten::_fused_rms_norm",
    "aten::group_norm",
    "aten::native_group_norm",
    "aten::rsqrt",
}
_STABILITY_LOOKAHEAD = 64  # ops after an upcast searched for its downcast


@dataclass
class CpuEvidence:
    instances: int = 0
    op_counts: Counter[str] = field(default_factory=Counter)  # summed over instances
    clones: int = 0
    clone_parents: Counter[str] = field(default_factory=Counter)
    conversions: int = 0
    upcasts_confirmed: int = 0
    upcasts_in_sdpa: int = 0  # of those, inside scaled_dot_product_attention (its math path)
    sdpa_upcast_rows: list[int] = field(default_factory=list)
    upcast_rows: list[int] = field(default_factory=list)  # the confirmed upcasts' cpu-op rows
    # of those, stability upcasts: upcast -> softmax / norm -> downcast with no GEMM in between
    # (T5's softmax in fp32): the math around them stays 16-bit
    stability_rows: list[int] = field(default_factory=list)
    # aten::clone rows made by out-of-place ops (OUT_OF_PLACE_CLONERS), with the parent's name
    oop_clones: list[tuple[int, str]] = field(default_factory=list)
    dtypes_known: bool = False
    conversion_types: Counter[str] = field(default_factory=Counter)
    mask_ops: Counter[str] = field(default_factory=Counter)
    mask_instances: int = 0  # instances that build a triangular mask
    safe_softmax: int = 0
    fused_ops: Counter[str] = field(default_factory=Counter)
    transposes_before_fused: int = 0
    fused_calls: int = 0  # outermost fused-attention calls (the SDPA call around them, if any)
    unfused_sequences: int = 0

    def per_instance(self, n: int) -> float:
        return n / self.instances if self.instances else 0.0


def count_gemm_softmax_gemm(
    is_gemm: np.ndarray, is_softmax: np.ndarray, window: int, starts: np.ndarray | None = None
) -> int:
    """Softmaxes with a GEMM among the `window` ops before and among the `window` ops after.
    starts: where each of the sequences the arrays are made of begins (ascending, from 0; the
    windows stop at a sequence's ends), as the sum of one count per sequence; None: one."""
    if not is_softmax.any() or not is_gemm.any():
        return 0
    c = np.concatenate([[0], np.cumsum(is_gemm.astype(np.int64))])
    pos = np.flatnonzero(is_softmax)
    n = is_gemm.size
    lo: np.ndarray | int = 0
    hi: np.ndarray | int = n
    if starts is not None:
        bounds = np.append(starts, n)
        seq = np.searchsorted(starts, pos, "right") - 1  # an empty sequence starts where the next does
        lo, hi = bounds[seq], bounds[seq + 1]
    before = c[pos] - c[np.maximum(pos - window, lo)]
    after = c[np.minimum(pos + 1 + window, hi)] - c[pos + 1]
    return int(((before > 0) & (after > 0)).sum())


def _parent(trace: Trace, ops: np.ndarray, p: int) -> int:
    """Innermost op enclosing ops[p]: ops is sorted by (start, -duration)."""
    t0 = trace.ts[ops[p]]
    t1 = t0 + trace.dur[ops[p]]
    for q in range(p - 1, max(p - 256, -1), -1):
        r = ops[q]
        if trace.ts[r] <= t0 and trace.ts[r] + trace.dur[r] >= t1:
            return int(r)
    return -1


def _within(trace: Trace, outer: np.ndarray, r: int) -> bool:
    """Whether op r lies inside one of the ops in outer (same lane)."""
    t0, t1 = trace.ts[r], trace.ts[r] + trace.dur[r]
    o = outer[trace.lane[outer] == trace.lane[r]]
    return bool(((trace.ts[o] <= t0) & (trace.ts[o] + trace.dur[o] >= t1)).any())


def is_downcast(trace: Trace, r: int) -> bool:
    src, tgt = trace.conversions.get(r, (None, None))
    return src in _FLOAT_TYPES and tgt in _HALF_CODES


def _stability(trace: Trace, ops: np.ndarray, r: int) -> bool:
    """Whether the upcast at row r is a stability upcast: on its thread, the ops after it reach a
    downcast (fp32 -> fp16 / bf16) having passed a softmax or normalisation and no GEMM, so the
    next GEMM runs in 16 bits. ops: the instance's ops, sorted by (start, -duration)."""
    names = trace.names
    lane, end = trace.lane[r], trace.ts[r] + trace.dur[r]
    after = ops[(trace.lane[ops] == lane) & (trace.ts[ops] >= end)][:_STABILITY_LOOKAHEAD]
    normalised = False
    for q in after.tolist():
        name = names[int(trace.name[q])]
        if name in _GEMM_OPS:
            return False
        if name in _STABILITY_OPS:
            normalised = True
        elif name in ("aten::_to_copy", "aten::to") and is_downcast(trace, q):
            return normalised
    return False


def cpu_evidence(trace: Trace, region: Region) -> CpuEvidence:
    ev = CpuEvidence(instances=len(region.instances))
    names = trace.names
    name_arr = np.array(names, dtype=object) if names else np.zeros(0, object)
    ids = {n: i for i, n in enumerate(names)}

    def idset(wanted: frozenset[str] | set[str] | tuple[str, ...]) -> np.ndarray:
        return np.array([ids[w] for w in wanted if w in ids], np.int32)

    clone_id = ids.get("aten::clone", -1)
    conv_ids = idset(("aten::_to_copy",)) if "aten::_to_copy" in ids else idset(("aten::to",))
    mask_ids = idset(_MASK_OPS)
    tri_ids = idset(("aten::tril", "aten::triu"))
    safe_id = ids.get("aten::_safe_softmax", -1)
    fused_ids = np.array([i for i, n in enumerate(names) if _FUSED.search(n)], np.int32)
    transpose_id = ids.get("aten::transpose", -1)
    gemm_ids = idset(_GEMM_OPS)
    sdpa_ids = idset((_SDPA, "aten::_scaled_dot_product_attention_math"))
    soft_ids = idset(_SOFTMAX_OPS)

    for inst in region.instances:
        ops = inst.cpu_ops
        if ops.size == 0:
            continue
        order = nesting_order(trace.ts[ops], trace.dur[ops])
        ops = ops[order]
        nm = trace.name[ops]
        if len(region.instances) <= 2000:  # per-op-name counts; skipped for huge regex regions
            u, c = np.unique(nm, return_counts=True)
            ev.op_counts.update(dict(zip(name_arr[u].tolist(), c.tolist(), strict=True)))
        if clone_id >= 0:
            for p in np.flatnonzero(nm == clone_id).tolist():
                ev.clones += 1
                par = _parent(trace, ops, p)
                parent = names[int(trace.name[par])] if par >= 0 else "(none)"
                ev.clone_parents[parent] += 1
                if parent in OUT_OF_PLACE_CLONERS:
                    ev.oop_clones.append((int(ops[p]), parent))
        if conv_ids.size:
            for r in ops[np.isin(nm, conv_ids)].tolist():
                ev.conversions += 1
                src, tgt = trace.conversions.get(r, (None, None))
                if src is not None:
                    ev.dtypes_known = True
                    ev.conversion_types[f"{src}->{tgt}"] += 1
                    if src in _HALF_TYPES and (tgt is None or tgt in _FLOAT_CODES):
                        ev.upcasts_confirmed += 1
                        ev.upcast_rows.append(int(r))
                        if _stability(trace, ops, r):
                            ev.stability_rows.append(int(r))
                        if sdpa_ids.size and _within(trace, ops[np.isin(nm, sdpa_ids)], r):
                            ev.upcasts_in_sdpa += 1
                            ev.sdpa_upcast_rows.append(int(r))
        if mask_ids.size:
            m = np.isin(nm, mask_ids)
            if m.any():
                # a mask op inside another (aten::triu calling aten::triu.out, a tril inside a
                # where) is part of the same mask build: count the outermost ones only
                mp = np.flatnonzero(m)
                m_ts = trace.ts[ops[mp]]
                reach = np.maximum.accumulate(m_ts + trace.dur[ops[mp]])
                outermost = np.ones(mp.size, bool)
                outermost[1:] = m_ts[1:] > reach[:-1]
                ev.mask_ops.update(names[int(i)] for i in nm[mp[outermost]].tolist())
            if tri_ids.size and np.isin(nm, tri_ids).any():
                ev.mask_instances += 1
        if safe_id >= 0:
            ev.safe_softmax += int((nm == safe_id).sum())
        if fused_ids.size:
            f = np.flatnonzero(np.isin(nm, fused_ids))
            if f.size:
                ev.fused_ops.update(names[int(trace.name[ops[i]])] for i in f.tolist())
                if transpose_id >= 0:
                    tr = ops[nm == transpose_id]
                    counted = np.zeros(tr.size, bool)
                    outers: set[int] = set()
                    for i in f.tolist():
                        par = _parent(trace, ops, i)
                        outer = par if par >= 0 and names[int(trace.name[par])] == _SDPA else int(ops[i])
                        s, e = trace.ts[outer], trace.ts[outer] + trace.dur[outer]
                        counted |= (trace.ts[tr] >= s) & (trace.ts[tr] <= e)
                        # a fused op nested in another fused op is one call, not two
                        if not any(
                            trace.ts[o] <= trace.ts[ops[i]] <= trace.ts[o] + trace.dur[o] for o in outers
                        ):
                            outers.add(outer)
                    ev.transposes_before_fused += int(counted.sum())
                    ev.fused_calls += len(outers)
        if gemm_ids.size and soft_ids.size:
            is_soft = np.isin(nm, soft_ids)
            # nested softmax ops (_safe_softmax > softmax > _softmax) count once: drop those
            # that start inside the previous softmax
            sp = np.flatnonzero(is_soft)
            if sp.size > 1:
                s_ts = trace.ts[ops[sp]]
                s_end = s_ts + trace.dur[ops[sp]]
                inner = np.zeros(sp.size, bool)
                inner[1:] = s_ts[1:] <= np.maximum.accumulate(s_end)[:-1]
                is_soft[sp[inner]] = False
            ev.unfused_sequences += count_gemm_softmax_gemm(np.isin(nm, gemm_ids), is_soft, window=24)
    return ev


def _out_shape(name: str, dims: list[Any]) -> list[int] | None:
    """Output shape of a GEMM op from its recorded input shapes; None when they do not say."""
    shapes = [d for d in dims if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    if name == "aten::baddbmm" and len(shapes) >= 3:
        shapes = shapes[1:3]  # (input, batch1, batch2): the product is batch1 @ batch2
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    batch = a[:-2] if len(a) >= len(b) else b[:-2]
    return [*batch, a[-2], b[-1]]


def _first_shape(dims: list[Any] | None) -> list[int] | None:
    if not dims:
        return None
    d = dims[0]
    return d if isinstance(d, list) and d and all(isinstance(x, int) for x in d) else None


def _same(a: list[int], b: list[int]) -> bool:
    """Same matrix, allowing flattened batch dims ([B, H, S, S] against [B*H, S, S])."""
    return a[-2:] == b[-2:] and int(np.prod(a[:-2])) == int(np.prod(b[:-2]))


@dataclass
class UnfusedChains:
    """GEMM -> softmax -> GEMM chains among a region's CPU ops (unfused_chains)."""

    confirmed: int = 0  # the dataflow (recorded shapes) says attention
    possible: int = 0  # no shapes: the order alone
    rejected: int = 0  # shapes recorded, and they do not chain (MoE routing)
    shapes_recorded: bool = False
    # up to 3 confirmed chains: gemm, scores_shape, softmax, gemm_after, values_shape (as the
    # UNFUSED_ATTENTION finding's evidence shows them)
    examples: list[dict[str, Any]] = field(default_factory=list)
    spans: list[tuple[int, float, float]] = field(
        default_factory=list
    )  # (lane, start, end): first GEMM to second
    ops: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )  # rows of the confirmed chains' ops
    # every confirmed chain: (first GEMM, softmax, second GEMM) rows, and the evidence dict of
    # each (as examples); the finding quotes the costliest
    chains: list[tuple[int, int, int]] = field(default_factory=list)
    chain_evidence: list[dict[str, Any]] = field(default_factory=list)


def unfused_chains(trace: Trace, region: Region, window: int = 8) -> UnfusedChains:
    """GEMM -> softmax -> GEMM chains among each instance's CPU ops, judged by dataflow.

    With recorded shapes (record_shapes=True) a chain is attention only when the softmax's input
    is the first GEMM's output [.., Sq, Skv] and the second GEMM consumes the probabilities
    [.., Sq, Skv] @ [.., Skv, D]: "confirmed"; when a softmax between two GEMMs has shapes and
    they do not chain (MoE routing: mm -> softmax over [tokens, experts] -> expert bmm), it is
    "rejected". Without shapes the order alone makes it "possible".
    """
    ids = {n: i for i, n in enumerate(trace.names)}
    gemm_ids = np.array([ids[w] for w in _GEMM_OPS if w in ids], np.int32)
    soft_ids = np.array([ids[w] for w in _SOFTMAX_OPS if w in ids], np.int32)
    out = UnfusedChains(shapes_recorded=bool(trace.shapes))
    if not gemm_ids.size or not soft_ids.size:
        return out
    chain_ops: list[int] = []
    names = trace.names
    for inst in region.instances:
        ops = inst.cpu_ops
        if ops.size == 0:
            continue
        # a chain is the forward's: GEMMs and softmaxes inside backward ops (autograd's
        # evaluate_function, *Backward*, the ends of fwdbwd flows) are left out, so a classifier's softmax followed by the
        # backward pass's mm is no chain
        targets = unique(
            backward_pairs(trace, ops)[1]
        )  # fwdbwd flows' targets: backward whatever their names
        ops = ops[~inside(trace, np.concatenate([backward_ops(trace, ops), targets]), ops)]
        for lane in unique(trace.lane[ops]).tolist():
            lo = ops[trace.lane[ops] == lane]
            lo = lo[nesting_order(trace.ts[lo], trace.dur[lo])]
            nm = trace.name[lo]
            is_g = np.isin(nm, gemm_ids)
            sp = np.flatnonzero(np.isin(nm, soft_ids))
            last_end = -np.inf
            gp = np.flatnonzero(is_g)
            sp_ts = trace.ts[lo[sp]]  # ascending: lo is in start order
            for j, p in enumerate(sp.tolist()):
                r = int(lo[p])
                if trace.ts[r] <= last_end:  # nested in the previous softmax: the same call
                    continue
                last_end = float(trace.ts[r] + trace.dur[r])
                # the softmax's shape: its own, else a nested softmax op's (those from it on that
                # start by its end)
                inner = lo[sp[j : int(np.searchsorted(sp_ts, last_end, "right"))]].tolist()
                s_shape = next(
                    (_first_shape(trace.shapes.get(i)) for i in inner if trace.shapes.get(i)), None
                )
                # the GEMMs since the previous softmax and until the next one (at most `window`
                # each way): a GEMM is in the chain of the softmax nearest to it
                prev_s = sp[j - 1] if j > 0 else -1
                next_s = sp[j + 1] if j + 1 < sp.size else lo.size
                while next_s < lo.size and trace.ts[lo[next_s]] <= last_end:  # nested softmaxes
                    k = int(np.searchsorted(sp, next_s)) + 1
                    next_s = sp[k] if k < sp.size else lo.size
                before = [int(lo[q]) for q in gp[(gp > prev_s) & (gp < p)][-window:].tolist()]
                after = [int(lo[q]) for q in gp[(gp > p) & (gp < next_s)][:window].tolist()]
                if not before or not after:
                    continue
                if s_shape is None or len(s_shape) < 2:
                    out.possible += 1
                    continue
                a = next(
                    (
                        g
                        for g in reversed(before)
                        if (o := _out_shape(names[int(trace.name[g])], trace.shapes.get(g, []))) is not None
                        and _same(o, s_shape)
                    ),
                    None,
                )
                b = next(
                    (
                        g
                        for g in after
                        if (d := trace.shapes.get(g)) is not None
                        and (f := _first_shape(d)) is not None
                        and _same(f, s_shape)
                        and len(d) > 1
                        and isinstance(d[1], list)
                        and len(d[1]) >= 2
                        and d[1][-2] == s_shape[-1]
                    ),
                    None,
                )
                if a is None or b is None:
                    out.rejected += 1
                    continue
                out.confirmed += 1
                chain_ops.extend((a, r, b))
                out.spans.append((lane, float(trace.ts[a]), float(trace.ts[b] + trace.dur[b])))
                example = {
                    "gemm": names[int(trace.name[a])],
                    "scores_shape": s_shape,
                    "softmax": names[int(trace.name[r])],
                    "gemm_after": names[int(trace.name[b])],
                    "values_shape": trace.shapes[b][1],
                }
                out.chains.append((a, r, b))
                out.chain_evidence.append(example)
                if len(out.examples) < 3:
                    out.examples.append(example)
    out.ops = unique(np.array(chain_ops, np.int64))
    return out
