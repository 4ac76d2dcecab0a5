"""Materiality: a finding is a warning only when what it names costs enough to matter.

A rule that names ops (the kernels of unfused chains, CUDA-core GEMMs, the copies of out-of-place
ops, the fp32 math after upcasts, a mask built on every call) measures what they cost and
compares it with the time of the scope it speaks of: the region's device time (the sum of the
device-op durations its instances own), or the whole trace's for a rule that reads every kernel;
on a CPU-only trace, CPU time instead (the region's instances' durations). Below MATERIAL_SHARE
of that, the finding is info and says the share; a warning costs at least MATERIAL_SHARE.
"""

from __future__ import annotations

import numpy as np

from attnprof.analysis.attribution.classify import CATEGORIES
from attnprof.analysis.attribution.links import launched_in
from attnprof.analysis.findings.context import Context
from attnprof.analysis.timeline.intervals import measure, union
from attnprof.trace.groups import group_cummax, held_pairs
from attnprof.trace.model import unique

__all__ = ["MATERIAL_SHARE", "Cost", "cost_of_gpu_ops", "cost_of_ops"]

MATERIAL_SHARE = 0.01  # of the scope's device (or CPU) time
_SYNC = CATEGORIES.index("sync")


class Cost:
    """What the named ops cost, against the scope's time."""

    def __init__(self, us: float, basis_us: float, basis: str) -> None:
        self.us = us
        self.basis_us = basis_us
        self.basis = basis  # "region device time", "trace device time", "region CPU time"

    @property
    def share(self) -> float | None:
        return self.us / self.basis_us if self.basis_us > 0 else None

    @property
    def material(self) -> bool:
        """At least MATERIAL_SHARE of the scope; unknown (no basis) counts as material."""
        s = self.share
        return s is None or s >= MATERIAL_SHARE

    def evidence(self) -> dict[str, object]:
        """The cost's figures, and the clauses a finding's sentence says them with (the
        catalogs' `clause.cost_note`, said when the finding is info because it costs little,
        and the basis in words)."""
        s = self.share
        return {
            "cost_us": round(self.us, 3),
            "cost_basis": self.basis,
            "cost_pct": round(100.0 * s, 3) if s is not None else None,
            # the share as the sentences say it (two significant figures, however small)
            "cost_share_pct": float(f"{100.0 * s:.2g}") if s is not None else None,
            "material_pct": 100.0 * MATERIAL_SHARE,
            "cost_basis_words": _BASIS_WORDS[self.basis],
            "cost_note": "clause.cost_note" if not self.material and s is not None else "",
        }


# each basis's words in the catalogs
_BASIS_WORDS = {
    "region device time": "clause.basis.region_device",
    "trace device time": "clause.basis.trace_device",
    "region CPU time": "clause.basis.region_cpu",
}


def _basis(ctx: Context, trace_wide: bool) -> tuple[float, str]:
    r = ctx.region_stat
    if ctx.device.kind == "cpu":
        return r.cpu_time_us_per_instance * r.instances, "region CPU time"
    if trace_wide:
        return float(ctx.totals.kernel_time_us + ctx.totals.memcpy_time_us + ctx.totals.memset_time_us), (
            "trace device time"
        )
    return r.gpu_time_us_per_instance * r.instances, "region device time"


def cost_of_gpu_ops(ctx: Context, idx: np.ndarray, trace_wide: bool = False) -> Cost:
    """Device ops (indices into Links.gpu_rows): the sum of their durations (waits excluded)."""
    idx = unique(idx)
    idx = idx[ctx.gpu_cat[idx] != _SYNC] if idx.size else idx
    us = float(ctx.trace.dur[ctx.links.gpu_rows[idx]].sum()) if idx.size else 0.0
    return Cost(us, *_basis(ctx, trace_wide))


def cost_of_ops(ctx: Context, rows: np.ndarray) -> Cost:
    """CPU ops (rows): the device time of what they (and the ops inside them) launched; on a
    CPU-only trace the CPU time they cover (nested ops once)."""
    t = ctx.trace
    if ctx.device.kind == "cpu":
        us = measure(union(t.ts[rows], t.ts[rows] + t.dur[rows])) if rows.size else 0.0
        return Cost(us, *_basis(ctx, False))
    return cost_of_gpu_ops(ctx, launched_in(t, ctx.links, rows))


def costs_of_op_groups(ctx: Context, rows: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Per group of CPU ops (group: per row, its group in 0..n-1), cost_of_ops(ctx, that group's
    rows).us, over all groups at once: per group the device ops its ops launched (each once,
    waits excluded), summed in the order of their index; on a CPU-only trace the CPU time the
    group's ops cover."""
    t = ctx.trace
    if not rows.size:
        return np.zeros(n)
    if ctx.device.kind == "cpu":
        o = np.lexsort((t.ts[rows], group))
        g, s = group[o], t.ts[rows][o]
        e = s + t.dur[rows][o]
        # what each op adds past the furthest end of the group's ops before it
        before = np.full(g.size, -np.inf)
        before[1:] = np.where(g[1:] == g[:-1], group_cummax(e, g)[:-1], -np.inf)
        return np.bincount(g, np.maximum(e - np.maximum(s, before), 0.0), minlength=n)
    launched = np.flatnonzero(ctx.links.launch >= 0)
    if not launched.size:
        return np.zeros(n)
    l_rows = ctx.links.launch[launched]
    # per op, the launches on its thread it holds
    which, points = held_pairs(
        t.lane[rows].astype(np.int64),
        t.ts[rows],
        t.ts[rows] + t.dur[rows],
        t.lane[l_rows].astype(np.int64),
        t.ts[l_rows],
    )
    idx = launched[points]
    pair = unique(group[which].astype(np.int64) * ctx.links.gpu_rows.size + idx)
    g, idx = pair // ctx.links.gpu_rows.size, pair % ctx.links.gpu_rows.size
    keep = ctx.gpu_cat[idx] != _SYNC
    return np.bincount(g[keep], t.dur[ctx.links.gpu_rows[idx[keep]]], minlength=n)
