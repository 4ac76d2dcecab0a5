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
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.cpu_groups import GEMM_OPS, MASK_BUILDERS
from attnprof.analysis.attribution.regions import Region, backward_ops, backward_pairs, inside
from attnprof.trace.groups import enclosing_before, held, outermost, runs
from attnprof.trace.model import Trace, ids_at, nesting_order, row_columns, unique, value_ids

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

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
    conversions: int = 0
    upcasts_confirmed: int = 0
    sdpa_upcast_rows: list[int] = field(default_factory=list)  # upcasts inside an SDPA call (its math path)
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


def is_downcast(trace: Trace, r: int) -> bool:
    src, tgt = trace.conversions.get(r, (None, None))
    return src in _FLOAT_TYPES and tgt in _HALF_CODES


@dataclass
class _Ops:
    """A region's CPU ops as columns: instance after instance, each in nesting order (by start,
    the longer first), with per position its instance, thread, start, end and name id."""

    rows: I64
    seg: I64
    lane: np.ndarray
    ts: F64
    end: F64
    name: np.ndarray
    starts: I64  # each instance's first position (an empty instance: where the next begins)

    @classmethod
    def of(cls, trace: Trace, region: Region) -> _Ops:
        cpu = list(map(attrgetter("cpu_ops"), region.instances))
        sizes = np.fromiter(map(len, cpu), np.int64, count=len(cpu))
        rows = np.concatenate(cpu).astype(np.int64) if cpu else np.zeros(0, np.int64)
        seg = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        # one sort by (instance, start, longer first), ties as recorded: each instance's own order
        rows = rows[nesting_order(trace.ts[rows], trace.dur[rows], seg)]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        ts = trace.ts[rows]
        return cls(rows, seg, trace.lane[rows], ts, ts + trace.dur[rows], trace.name[rows], starts)

    def parent(self, q: I64) -> I64:
        """Per position, the innermost op of its instance around it among the 255 before it
        (position; -1 for none)."""
        return enclosing_before(self.ts, self.end, q, self.starts[self.seg[q]], _PARENT_WINDOW)

    def lane_group(self, p: np.ndarray) -> I64:
        """A group id per position for its (instance, thread)."""
        return self.seg[p] * (int(self.lane.max()) + 1) + self.lane[p].astype(np.int64)


_PARENT_WINDOW = 255  # ops before a clone or fused op searched for the op it is called from


def _name_ids(names: list[str], wanted: set[str] | frozenset[str] | tuple[str, ...]) -> np.ndarray:
    return np.array([i for i, n in enumerate(names) if n in wanted], np.int32)


def _counted(names: list[str], ids: np.ndarray) -> Counter[str]:
    """Names counted in the order they first occur (the insertion order the JSON shows)."""
    return Counter(map(names.__getitem__, ids.tolist()))


def _stability(trace: Trace, ops: _Ops, up: I64) -> npt.NDArray[np.bool_]:
    """Per upcast position, whether it is a stability upcast: on its thread and in its instance,
    the ops after it (the next 64 that start at its end or later) reach a downcast (fp32 -> fp16
    / bf16) having passed a softmax or normalisation and no GEMM, so the next GEMM runs in 16
    bits."""
    out = np.zeros(up.size, bool)
    if not up.size:
        return out
    names = trace.names
    code = np.zeros(len(names), np.int8)  # per name: 1 GEMM, 2 softmax or norm, 3 a conversion
    code[_name_ids(names, _STABILITY_OPS)] = 2
    code[_name_ids(names, ("aten::_to_copy", "aten::to"))] = 3
    code[_name_ids(names, _GEMM_OPS)] = 1
    c = code[ops.name]
    conv = np.flatnonzero(c == 3)
    vid, distinct = value_ids(trace.conversions, ops.rows[conv])
    down = np.array([s in _FLOAT_TYPES and t in _HALF_CODES for s, t in distinct] + [False], bool)
    c[conv[~down[vid]]] = 0  # a conversion that is no downcast neither ends nor breaks the run
    # each (instance, thread)'s ops in order, and per upcast the first of them at its end or later
    by = np.lexsort((np.arange(ops.seg.size), ops.lane, ops.seg))
    g = ops.lane_group(by)
    times = unique(np.concatenate([ops.ts, ops.end[up]]))
    run = runs(g)
    key = run * times.size + np.searchsorted(times, ops.ts[by])
    inv = np.empty_like(by)
    inv[by] = np.arange(by.size)
    u_run = run[inv[up]]
    k = np.searchsorted(key, u_run * times.size + np.searchsorted(times, ops.end[up]), "left")
    group_end = np.searchsorted(run, u_run, "right")
    ahead = np.arange(_STABILITY_LOOKAHEAD)
    for a in range(0, up.size, 4096):  # a pass per 4096 upcasts bounds the memory
        steps = k[a : a + 4096, None] + ahead[None, :]
        cc = np.where(steps < group_end[a : a + 4096, None], c[by[np.minimum(steps, by.size - 1)]], 0)
        ends = (cc == 1) | (cc == 3)
        stop = ends.argmax(1)
        at = np.arange(stop.size)
        out[a : a + 4096] = ends.any(1) & (cc[at, stop] == 3) & (np.cumsum(cc == 2, axis=1)[at, stop] > 0)
    return out


def cpu_evidence(trace: Trace, region: Region) -> CpuEvidence:
    """The region's CPU-side evidence, over all its instances' ops at once (_Ops)."""
    ev = CpuEvidence(instances=len(region.instances))
    names = trace.names
    ops = _Ops.of(trace, region)
    if not ops.rows.size:
        return ev
    nm = ops.name
    ids = {n: i for i, n in enumerate(names)}

    def where(wanted: set[str] | frozenset[str] | tuple[str, ...]) -> I64:
        return np.flatnonzero(np.isin(nm, _name_ids(names, wanted)))

    # copies: a clone whose caller is an out-of-place op
    if "aten::clone" in ids:
        p = np.flatnonzero(nm == ids["aten::clone"])
        par = ops.parent(p)
        oop = np.zeros(p.size, bool)
        ok = par >= 0
        oop[ok] = np.isin(nm[par[ok]], _name_ids(names, OUT_OF_PLACE_CLONERS))
        ev.oop_clones = list(
            zip(ops.rows[p[oop]].tolist(), map(names.__getitem__, nm[par[oop]].tolist()), strict=True)
        )

    # conversions: aten::_to_copy (aten::to when no _to_copy is recorded), by their dtypes
    conv = where(("aten::_to_copy",) if "aten::_to_copy" in ids else ("aten::to",))
    ev.conversions = int(conv.size)
    if conv.size:
        vid, distinct = value_ids(trace.conversions, ops.rows[conv])
        known = np.array([s is not None for s, _ in distinct] + [False], bool)[vid]
        upcast = np.array(
            [s in _HALF_TYPES and (t is None or t in _FLOAT_CODES) for s, t in distinct] + [False], bool
        )[vid]
        ev.dtypes_known = bool(known.any())
        labels = [f"{s}->{t}" for s, t in distinct]
        ev.conversion_types = Counter(map(labels.__getitem__, vid[known].tolist()))
        up = conv[upcast]
        ev.upcasts_confirmed = int(up.size)
        ev.upcast_rows = ops.rows[up].tolist()
        ev.stability_rows = ops.rows[up[_stability(trace, ops, up)]].tolist()
        sdpa = where((_SDPA, "aten::_scaled_dot_product_attention_math"))
        if sdpa.size:
            inside_sdpa = held(
                ops.lane_group(sdpa),
                ops.ts[sdpa],
                ops.end[sdpa],
                ops.lane_group(up),
                ops.ts[up],
                ops.end[up],
            )
            ev.sdpa_upcast_rows = ops.rows[up[inside_sdpa]].tolist()

    # causal masks: a mask op inside another (aten::triu calling aten::triu.out, a tril inside a
    # where) is part of the same mask build: the outermost ones only
    m = where(_MASK_OPS)
    if m.size:
        ev.mask_ops = _counted(names, nm[m[outermost(ops.ts[m], ops.end[m], ops.seg[m])]])
        ev.mask_instances = int(unique(ops.seg[where(("aten::tril", "aten::triu"))]).size)
    if "aten::_safe_softmax" in ids:
        ev.safe_softmax = int((nm == ids["aten::_safe_softmax"]).sum())

    # fused attention ops, and the transposes inside the call that reaches them (the SDPA call
    # around a fused op, else the fused op itself)
    f = np.flatnonzero(np.isin(nm, np.array([i for i, n in enumerate(names) if _FUSED.search(n)], np.int32)))
    if f.size:
        ev.fused_ops = _counted(names, nm[f])
        if "aten::transpose" in ids:
            par = ops.parent(f)
            outer = np.where((par >= 0) & (nm[np.maximum(par, 0)] == ids.get(_SDPA, -2)), par, f)
            tr = np.flatnonzero(nm == ids["aten::transpose"])
            ev.transposes_before_fused = int(
                held(ops.seg[outer], ops.ts[outer], ops.end[outer], ops.seg[tr], ops.ts[tr]).sum()
            )
            # a fused op that starts inside the call of an earlier one (a fused op nested in
            # another) is part of that call, not a second
            ev.fused_calls = int(outermost(ops.ts[f], ops.end[outer], ops.seg[f]).sum())

    # unfused attention: a GEMM, a softmax, a GEMM within 24 ops, in one instance; nested softmax
    # ops (_safe_softmax > softmax > _softmax) count once: those that start inside the previous
    # softmax of their instance are dropped
    s = where(_SOFTMAX_OPS)
    gemm = np.isin(nm, _name_ids(names, _GEMM_OPS))
    if s.size and gemm.any():
        is_soft = np.zeros(nm.size, bool)
        is_soft[s[outermost(ops.ts[s], ops.end[s], ops.seg[s])]] = True
        ev.unfused_sequences = count_gemm_softmax_gemm(gemm, is_soft, window=24, starts=ops.starts)
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


class _Shapes:
    """The recorded input shapes (Trace.shapes) as columns: per row an id of its distinct value,
    and what the chain tests need of each distinct value, worked out once per value."""

    def __init__(self, trace: Trace) -> None:
        self.keys, self.idx, self.values = row_columns(trace.shapes)
        self._first: dict[int, list[int] | None] = {}

    def ids(self, rows: np.ndarray) -> I64:
        """Per row, its shapes' id; -1: none recorded."""
        return ids_at(self.keys, self.idx, rows)

    def first(self, v: int) -> list[int] | None:
        """The first input's shape of shapes v (None for v -1, or no such shape)."""
        if v not in self._first:
            self._first[v] = _first_shape(self.values[v]) if v >= 0 else None
        return self._first[v]

    def any(self, ids: I64) -> npt.NDArray[np.bool_]:
        """Per id, whether a non-empty list of shapes was recorded."""
        u, inv = np.unique(ids, return_inverse=True)
        return np.array([v >= 0 and bool(self.values[v]) for v in u.tolist()], bool)[inv.reshape(-1)]


def _first_true(mask: np.ndarray, keys: np.ndarray, test: Any) -> I64:
    """Per row of a matrix of candidate keys (rows x tuples of key columns; mask: which cells
    hold a candidate), the column of the first cell whose key passes test(*key), -1 for none:
    test runs once per distinct key, not per cell."""
    out = np.full(mask.shape[0], -1, np.int64)
    if not mask.any():
        return out
    cells = np.flatnonzero(mask.reshape(-1))
    u, inv = np.unique(keys.reshape(-1, keys.shape[-1])[cells], axis=0, return_inverse=True)
    flat = np.zeros(mask.size, bool)
    flat[cells] = np.array([bool(test(*k)) for k in u.tolist()], bool)[inv.reshape(-1)]
    ok = flat.reshape(mask.shape)
    hit = ok.any(1)
    out[hit] = ok.argmax(1)[hit]
    return out


def _lane_chains(
    trace: Trace, lo: I64, gemm_ids: np.ndarray, soft_ids: np.ndarray, window: int, shapes: _Shapes
) -> tuple[int, int, I64, I64, I64, I64]:
    """The chains of one thread's ops of an instance (lo, in nesting order), every softmax at
    once: (possible, rejected, and per confirmed chain its first GEMM, softmax and second GEMM
    rows and the softmax's shapes id)."""
    none = np.zeros(0, np.int64)
    nm = trace.name[lo]
    sp = np.flatnonzero(np.isin(nm, soft_ids))
    gp = np.flatnonzero(np.isin(nm, gemm_ids))
    if not sp.size or not gp.size:
        return 0, 0, none, none, none, none
    s_ts = trace.ts[lo[sp]]  # ascending: lo is in start order
    s_end = s_ts + trace.dur[lo[sp]]
    # a softmax that starts inside an earlier one (_safe_softmax > softmax > _softmax) is part
    # of that call; each call's shape is its own, else a nested softmax op's (those from it on
    # that start by its end)
    j = np.flatnonzero(outermost(s_ts, s_end, np.zeros(sp.size, np.int64)))
    e = np.searchsorted(s_ts, s_end[j], "right")  # its nested softmaxes: sp[j:e]
    sid = shapes.ids(lo[sp])
    has = shapes.any(sid)
    nxt = np.minimum.accumulate(np.where(has, np.arange(sp.size), sp.size)[::-1])[::-1]
    found = nxt[j] < e
    s_sid = np.where(found, sid[np.minimum(nxt[j], sp.size - 1)], -1)
    # the GEMMs since the previous softmax and until the next call (at most `window` each way):
    # a GEMM is in the chain of the softmax nearest to it
    p = sp[j]
    prev_s = np.where(j > 0, sp[np.maximum(j - 1, 0)], -1)
    next_s = np.where(e < sp.size, sp[np.minimum(e, sp.size - 1)], lo.size)
    b_hi = np.searchsorted(gp, p, "left")
    b_lo = np.maximum(np.searchsorted(gp, prev_s, "right"), b_hi - window)
    a_lo = np.searchsorted(gp, p, "right")
    a_hi = np.minimum(np.searchsorted(gp, next_s, "left"), a_lo + window)
    valid = (b_hi > b_lo) & (a_hi > a_lo)
    s_ok = np.array([(f := shapes.first(v)) is not None and len(f) >= 2 for v in s_sid.tolist()], bool)
    possible = int((valid & ~s_ok).sum())
    c = np.flatnonzero(valid & s_ok)
    if not c.size:
        return possible, 0, none, none, none, none
    names = trace.names
    k = np.arange(window)
    s_col = np.repeat(s_sid[c][:, None], window, 1)
    # before: the nearest first; after: in order
    before = b_hi[c][:, None] - 1 - k[None, :]
    in_b = before >= b_lo[c][:, None]
    g_b = lo[gp[np.maximum(before, 0)]]
    ka = np.stack(
        [trace.name[g_b].astype(np.int64), shapes.ids(g_b.reshape(-1)).reshape(g_b.shape), s_col], -1
    )

    def makes_scores(name: int, v: int, s: int) -> bool:
        o = _out_shape(names[name], shapes.values[v] if v >= 0 else [])
        return o is not None and _same(o, shapes.first(s) or [])

    after = a_lo[c][:, None] + k[None, :]
    in_a = after < a_hi[c][:, None]
    g_a = lo[gp[np.minimum(after, gp.size - 1)]]
    kb = np.stack([shapes.ids(g_a.reshape(-1)).reshape(g_a.shape), s_col], -1)

    def takes_probs(v: int, s: int) -> bool:
        d = shapes.values[v] if v >= 0 else None
        f, sc = _first_shape(d), shapes.first(s) or []
        return (
            d is not None
            and f is not None
            and _same(f, sc)
            and len(d) > 1
            and isinstance(d[1], list)
            and len(d[1]) >= 2
            and d[1][-2] == sc[-1]
        )

    ia, ib = _first_true(in_b, ka, makes_scores), _first_true(in_a, kb, takes_probs)
    ok = (ia >= 0) & (ib >= 0)
    rows = np.arange(c.size)[ok]
    return (
        possible,
        int(c.size - ok.sum()),
        g_b[rows, ia[ok]],
        lo[p[c[ok]]],
        g_a[rows, ib[ok]],
        s_sid[c[ok]],
    )


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
    shapes = _Shapes(trace)
    parts: list[tuple[I64, I64, I64, I64, I64]] = []
    for inst in region.instances:
        ops = inst.cpu_ops
        if ops.size == 0:
            continue
        # a chain is the forward's: GEMMs and softmaxes inside backward ops (autograd's
        # evaluate_function, *Backward*, the ends of fwdbwd flows) are left out, so a
        # classifier's softmax followed by the backward pass's mm is no chain
        targets = unique(backward_pairs(trace, ops)[1])  # fwdbwd flows' targets, whatever their names
        ops = ops[~inside(trace, np.concatenate([backward_ops(trace, ops), targets]), ops)]
        for lane in unique(trace.lane[ops]).tolist():
            lo = ops[trace.lane[ops] == lane]
            lo = lo[nesting_order(trace.ts[lo], trace.dur[lo])]
            possible, rejected, a, r, b, s = _lane_chains(trace, lo, gemm_ids, soft_ids, window, shapes)
            out.possible += possible
            out.rejected += rejected
            if a.size:
                parts.append((a, r, b, s, np.full(a.size, lane, np.int64)))
    if not parts:
        return out
    a, r, b, s, lanes = (np.concatenate(col) for col in zip(*parts, strict=True))
    out.confirmed = int(a.size)
    out.ops = unique(np.concatenate([a, r, b]))
    out.spans = list(
        zip(lanes.tolist(), trace.ts[a].tolist(), (trace.ts[b] + trace.dur[b]).tolist(), strict=True)
    )
    out.chains = list(zip(a.tolist(), r.tolist(), b.tolist(), strict=True))
    # one evidence dict per distinct (GEMM, scores shape, softmax, GEMM, its shapes), shared by
    # the chains that have it
    b_sid = shapes.ids(b)
    key = np.stack(
        [
            trace.name[a].astype(np.int64),
            s,
            trace.name[r].astype(np.int64),
            trace.name[b].astype(np.int64),
            b_sid,
        ],
        1,
    )
    u, inv = np.unique(key, axis=0, return_inverse=True)
    names = trace.names
    evidence = [
        {
            "gemm": names[ga],
            "scores_shape": shapes.first(sv),
            "softmax": names[sm],
            "gemm_after": names[gb],
            "values_shape": shapes.values[bv][1],
        }
        for ga, sv, sm, gb, bv in u.tolist()
    ]
    out.chain_evidence = list(map(evidence.__getitem__, inv.reshape(-1).tolist()))
    out.examples = out.chain_evidence[:3]
    return out
