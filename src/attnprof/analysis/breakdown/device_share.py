"""Where a trace's device time went, attention first (fused, unfused chains and their
backward, by provenance), then GEMMs, convolutions, communication, memory and the rest."""

from __future__ import annotations

import numpy as np

from attnprof.analysis.attribution.attention_side import SIDE_KINDS
from attnprof.analysis.attribution.classify import CAT_INDEX, Classification
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.provenance import NAME_RULE, Provenance
from attnprof.analysis.attribution.provenance import RULE_NAMES as PROVENANCE_RULES
from attnprof.analysis.attribution.regions import backward_pairs
from attnprof.analysis.records.result import (
    AttentionShare,
    AttentionSideShare,
    CommShare,
    Share,
    TimeShare,
)
from attnprof.analysis.timeline.overlap import CommOverlap
from attnprof.trace.model import Trace, unique
from attnprof.units import short_name

__all__ = ["device_share", "linked_backward_ops"]


_MEMORY = ("memcpy", "memset", "copy")


def linked_backward_ops(trace: Trace, cpu_rows: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """The backward ops of the given forward ops (or of ops inside them), by autograd links.

    A linked forward op counts when one of ops on its thread starts at or before it and ends
    (within 1e-3 us) at or after its end: per thread, the furthest end of the ops started so far
    says so for every forward op at once (a scan of every forward op per op was ops x links)."""
    if ops.size == 0:
        return np.zeros(0, np.int64)
    fwd, bwd, _ = backward_pairs(trace, cpu_rows)
    if not fwd.size:
        return np.zeros(0, np.int64)
    keep = np.zeros(fwd.size, bool)
    o_lane, f_lane = trace.lane[ops], trace.lane[fwd]
    for lane in sorted(set(unique(o_lane).tolist()) & set(unique(f_lane).tolist())):
        o = ops[o_lane == lane]
        o = o[np.argsort(trace.ts[o], kind="stable")]
        reach = np.maximum.accumulate(trace.ts[o] + trace.dur[o]) + 1e-3
        sel = np.flatnonzero(f_lane == lane)
        f = fwd[sel]
        j = np.searchsorted(trace.ts[o], trace.ts[f], "right") - 1
        keep[sel] = (j >= 0) & (reach[np.maximum(j, 0)] >= trace.ts[f] + trace.dur[f])
    return unique(bwd[keep].astype(np.int64)) if keep.any() else np.zeros(0, np.int64)


def device_share(
    trace: Trace,
    links: Links,
    gpu_cat: np.ndarray,
    inv: np.ndarray,
    classes: list[Classification],
    unfused_gpu: np.ndarray,
    unfused_bwd_gpu: np.ndarray,
    ov: CommOverlap,
    prov: Provenance,
    unique_names: list[str],
) -> Share:
    """Where the device time went, attention first: fused + unfused attention (forward /
    backward), GEMMs, convolutions, communication, memory (memcpy, memset, copy kernels), other.
    Sums of device-op durations; waits (category "sync") are not device work."""
    g = links.gpu_rows
    dur = trace.dur[g]
    work = gpu_cat != CAT_INDEX["sync"]
    total = float(dur[work].sum())
    is_att = gpu_cat == CAT_INDEX["attention"]
    unf = np.zeros(g.size, bool)
    unf[unfused_gpu] = True
    unf &= ~is_att & work
    unf_b = np.zeros(g.size, bool)
    unf_b[unfused_bwd_gpu] = True
    unf_b &= ~is_att & work & ~unf
    direction = (
        np.array([c.direction or "" for c in classes], dtype=object)[inv] if inv.size else np.zeros(0, object)
    )
    att_fwd = float(dur[is_att & (direction == "fwd")].sum())
    att_bwd = float(dur[is_att & ((direction == "bwd") | (direction == "bwd-aux"))].sum())
    fused = float(dur[is_att].sum())
    # unfused: the kernels of the chains' forward ops, and of their backward ops (autograd links)
    unfused_fwd = float(dur[unf].sum())
    unfused_bwd = float(dur[unf_b].sum())
    unfused = unfused_fwd + unfused_bwd
    unf = unf | unf_b
    # attention by provenance only: an attention op launched or encloses them, their name and
    # shapes do not say so (a serving stack's own kernel, the copies inside an SDPA call)
    by_prov = prov.attention & work & ~is_att & ~unf
    provenance = float(dur[by_prov].sum())
    att_fwd += float(dur[by_prov & ~prov.backward].sum())
    att_bwd += float(dur[by_prov & prov.backward].sum())
    is_att_any = (is_att | unf | by_prov) & work
    rule_time = np.bincount(
        prov.rule[is_att_any & (prov.rule >= 0)], weights=dur[is_att_any & (prov.rule >= 0)]
    )
    name_only = is_att_any & (prov.rule == NAME_RULE)
    name_only_names = np.bincount(inv[name_only], weights=dur[name_only], minlength=len(unique_names))

    def pct(x: float) -> float | None:
        return round(100.0 * x / total, 2) if total > 0 else None

    # attention-side memory: what an attention op runs that is memory work, its own part
    side = prov.attention_side & work & ~is_att & ~unf
    side_us = float(dur[side].sum())

    def by(codes: np.ndarray, names: tuple[str, ...]) -> dict[str, float]:
        t = np.bincount(codes[side], weights=dur[side], minlength=len(names))
        return {names[i]: round(float(v), 3) for i, v in enumerate(t.tolist()) if v > 0}

    attention_side = AttentionSideShare(
        time_us=round(side_us, 3),
        pct=pct(side_us),
        kinds=by(prov.side_kind.astype(np.int64), SIDE_KINDS),
        rules=by(prov.side.astype(np.int64), PROVENANCE_RULES),
    )

    rest = work & ~is_att & ~unf & ~by_prov & ~side
    parts = {
        "gemm": float(dur[rest & (gpu_cat == CAT_INDEX["gemm"])].sum()),
        "conv": float(dur[rest & (gpu_cat == CAT_INDEX["conv"])].sum()),
        "communication": float(dur[rest & (gpu_cat == CAT_INDEX["communication"])].sum()),
        "memory": float(dur[rest & np.isin(gpu_cat, [CAT_INDEX[c] for c in _MEMORY])].sum()),
    }
    parts["other"] = max(total - fused - unfused - provenance - side_us - sum(parts.values()), 0.0)
    of = {k: TimeShare(time_us=round(v, 3), pct=pct(v)) for k, v in parts.items()}
    comm = CommShare(
        time_us=of["communication"].time_us,
        pct=of["communication"].pct,
        exposed_us=round(ov.exposed_us, 3) if ov.hidden_pct is not None else None,
        hidden_pct=ov.hidden_pct,
    )
    return Share(
        device_time_us=round(total, 3),
        attention=AttentionShare(
            time_us=round(fused + unfused + provenance, 3),
            pct=pct(fused + unfused + provenance),
            fused_us=round(fused, 3),
            unfused_us=round(unfused, 3),
            fwd_us=round(att_fwd + unfused_fwd, 3),
            bwd_us=round(att_bwd + unfused_bwd, 3),
            unfused_bwd_us=round(unfused_bwd, 3),
            provenance_us=round(provenance, 3),
            rules={
                PROVENANCE_RULES[r]: round(float(t), 3) for r, t in enumerate(rule_time.tolist()) if t > 0
            },
            name_only_us=round(float(dur[name_only].sum()), 3),
            name_only_kernels=[
                short_name(unique_names[i])
                for i in np.argsort(-name_only_names, kind="stable")[:10].tolist()
                if name_only_names[i] > 0
            ],
        ),
        gemm=of["gemm"],
        conv=of["conv"],
        communication=comm,
        memory=of["memory"],
        other=of["other"],
        attention_side=attention_side,
        basis="sum of device-op durations (streams that overlap are counted each); attention is "
        "by provenance first (the launching op, an enclosing op or range is attention), by kernel "
        "name second, its memory work (fills, memsets, memcpys, casts, copies, KV-cache writes) "
        "is attention_side, not attention; unfused attention is the kernels of GEMM -> softmax -> GEMM chains confirmed "
        "by their shapes, on every thread, and of their backward ops (fwdbwd flows or sequence numbers)",
    )
