"""The per-kernel table (time, launch APIs, occupancy, attention rules, low-precision claims),
the memory-op table and the launch-API table of a trace."""

from __future__ import annotations

import numpy as np

from attnprof.analysis.attribution.classify import CAT_INDEX, CATEGORIES, Classification
from attnprof.analysis.attribution.devices import low_precision_claim
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.occupancy import DeviceLimits, theoretical_occupancy
from attnprof.analysis.attribution.provenance import RULE_NAMES as PROVENANCE_RULES
from attnprof.analysis.attribution.provenance import Provenance
from attnprof.analysis.records.result import (
    Device,
    KernelStat,
    LaunchApi,
    MemoryOp,
    Occupancy,
)
from attnprof.trace.model import Kind, Trace
from attnprof.units import short_name

__all__ = ["SMEM_OCCUPANCY_GAP", "kernel_table", "launch_table", "memory_table"]


# Kineto reports 0% achieved occupancy for every kernel launched with more than 48 KB of
# (dynamic) shared memory, whatever the launch API (seen across real traces): such a 0 is a
# profiler gap, not a measurement
SMEM_OCCUPANCY_GAP = 48 * 1024


def kernel_table(
    trace: Trace,
    links: Links,
    inv: np.ndarray,
    unique_names: list[str],
    classes: list[Classification],
    limits: DeviceLimits | None,
    kernel_time: float,
    device: Device,
    prov: Provenance,
) -> list[KernelStat]:
    g = links.gpu_rows
    is_k = trace.kind[g] == Kind.KERNEL
    if not is_k.any():
        return []
    k_inv = inv[is_k]
    k_dur = trace.dur[g][is_k]
    k_api = links.api[is_k]
    n_names = len(unique_names)
    counts = np.bincount(k_inv, minlength=n_names)
    times = np.bincount(k_inv, weights=k_dur, minlength=n_names)
    # kernel columns are indexed by position among kernel rows; kernels appear in gpu_rows in the
    # same (file) order as in kernel_rows
    reg, smem, blk = trace.registers, trace.shared_mem, trace.block_threads
    ach = trace.achieved
    n_api = len(links.api_names)
    api_pairs = np.bincount(k_inv * n_api + k_api, minlength=n_names * n_api).reshape(n_names, n_api)
    n_rules = len(PROVENANCE_RULES) + 1  # the last column: not attention
    k_rule = np.where(prov.rule[is_k] >= 0, prov.rule[is_k], n_rules - 1).astype(np.int64)
    rule_pairs = np.bincount(k_inv * n_rules + k_rule, minlength=n_names * n_rules).reshape(n_names, n_rules)
    # the same per rule that placed a launch under an attention op as memory work (attention-side)
    k_side = np.where(prov.side[is_k] >= 0, prov.side[is_k], n_rules - 1).astype(np.int64)
    side_pairs = np.bincount(k_inv * n_rules + k_side, minlength=n_names * n_rules).reshape(n_names, n_rules)
    order = np.argsort(-times, kind="stable")
    # each name's kernels, in file order: one stable sort, not a scan of every kernel per name
    # (names x kernels: thousands of names by a million kernels on a large trace)
    by_name = np.argsort(k_inv, kind="stable")
    ends = np.cumsum(counts)
    configs = _configs(k_inv, reg, blk, smem)
    rows = []
    for i in order.tolist():
        if counts[i] == 0:
            continue
        c = classes[i]
        sel = by_name[ends[i] - counts[i] : ends[i]]
        apis = {links.api_names[a]: int(n) for a, n in enumerate(api_pairs[i].tolist()) if n}
        occ = _occupancy(sel, reg, smem, blk, ach, k_dur, limits, apis, configs.get(i))
        family, tensor_cores = low_precision_claim(c, device)
        rows.append(
            KernelStat(
                name=unique_names[i],
                short_name=short_name(unique_names[i]),
                category=c.category,
                family=family,
                tensor_cores=tensor_cores,
                precision=c.precision,
                direction=c.direction,
                count=int(counts[i]),
                time_us=round(float(times[i]), 3),
                mean_us=round(float(times[i]) / int(counts[i]), 3),
                pct_time=round(100.0 * float(times[i]) / kernel_time, 2) if kernel_time > 0 else 0.0,
                launch_apis=apis,
                occupancy=occ,
                attention_rules={
                    PROVENANCE_RULES[r]: int(c) for r, c in enumerate(rule_pairs[i, :-1].tolist()) if c
                }
                or None,
                attention_side_rules={
                    PROVENANCE_RULES[r]: int(c) for r, c in enumerate(side_pairs[i, :-1].tolist()) if c
                }
                or None,
            )
        )
    return rows


def _occupancy(
    sel: np.ndarray,
    reg: np.ndarray,
    smem: np.ndarray,
    blk: np.ndarray,
    ach: np.ndarray,
    dur: np.ndarray,
    limits: DeviceLimits | None,
    apis: dict[str, int],
    config: tuple[int, int, int] | None,
) -> Occupancy | None:
    r, s, b = reg[sel], smem[sel], blk[sel]
    have = (r >= 0) & (b > 0)
    a = ach[sel]
    has_ach = ~np.isnan(a)
    if not have.any() and not has_ach.any():
        return None
    # launches whose 0 is the profiler's gap, not a measurement
    gap = has_ach & (a == 0.0) & (s > SMEM_OCCUPANCY_GAP)
    valid = has_ach & ~gap
    achieved = None
    if valid.any():
        w = dur[sel][valid]
        achieved = float(np.average(a[valid], weights=w)) if w.sum() > 0 else float(a[valid].mean())
    measured = achieved is not None
    reason = None
    if not measured:
        reason = (
            f"the profiler reports 0 for kernels with more than {SMEM_OCCUPANCY_GAP // 1024} KB of shared "
            f"memory (this one: {int(s[gap].max()) if gap.any() else 0} B)"
            if gap.any()
            else "no achieved-occupancy figure in the trace"
        )
    out = Occupancy(
        achieved_pct=round(achieved, 2) if achieved is not None else None,
        measured=measured,
        not_measured_reason=reason,
        launches_not_measured=int(gap.sum()),
        theoretical_pct=None,
        blocks_per_sm=None,
        warps_per_sm=None,
        limiter=None,
        registers=None,
        threads_per_block=None,
        shared_mem_bytes=None,
    )
    if config is not None:
        regs, threads, shm = config
        out.registers, out.threads_per_block, out.shared_mem_bytes = regs, threads, shm
        if limits is not None:
            occ = theoretical_occupancy(regs, threads, shm, limits)
            if occ is not None:
                out.blocks_per_sm, out.warps_per_sm = occ.blocks_per_sm, occ.warps_per_sm
                out.theoretical_pct, out.limiter = round(100.0 * occ.occupancy, 2), occ.limiter
    return out


def _configs(
    k_inv: np.ndarray, reg: np.ndarray, blk: np.ndarray, smem: np.ndarray
) -> dict[int, tuple[int, int, int]]:
    """Per kernel name (its index), its most common launch configuration (registers, threads per
    block, shared memory) among the launches that record one; of equally common ones, the first
    launched. For all names at once: one sort of the launches' (name, configuration) rows."""
    have = np.flatnonzero((reg >= 0) & (blk > 0))
    if not have.size:
        return {}
    # each row as one integer made of its four values' ranks (np.unique over rows, axis=0,
    # sorts them as opaque records: 14 ms for the 17k launches of the 48 MB benchmark trace);
    # where the next column would take it past int64, it is ranked first (below the rows' count)
    cols = [k_inv[have], reg[have], blk[have], np.maximum(smem[have], 0)]
    code = np.zeros(have.size, np.int64)
    for col in cols:
        v, inv = np.unique(col, return_inverse=True)
        if int(code.max()) >= 2**62 // v.size:
            code = np.unique(code, return_inverse=True)[1].reshape(-1)
        code = code * v.size + inv.reshape(-1)
    _, first, count = np.unique(code, return_index=True, return_counts=True)
    name, r, b, sm = (col[first] for col in cols)
    best = np.lexsort((first, -count, name))  # per name: the most launches, then the first
    lead = np.ones(best.size, bool)
    lead[1:] = name[best[1:]] != name[best[:-1]]
    best = best[lead]
    return {
        int(k): (int(x), int(y), int(z))
        for k, x, y, z in zip(
            name[best].tolist(), r[best].tolist(), b[best].tolist(), sm[best].tolist(), strict=True
        )
    }


def memory_table(
    trace: Trace, links: Links, inv: np.ndarray, unique_names: list[str], gpu_cat: np.ndarray
) -> list[MemoryOp]:
    g = links.gpu_rows
    k = trace.kind[g]
    m = (k == Kind.MEMCPY) | (k == Kind.MEMSET) | ((k == Kind.DEVICE) & (gpu_cat == CAT_INDEX["memcpy"]))
    if not m.any():
        return []
    n = len(unique_names)
    counts = np.bincount(inv[m], minlength=n)
    times = np.bincount(inv[m], weights=trace.dur[g][m], minlength=n)
    # each name's category is its last memory op's
    m_inv, m_cat = inv[m], gpu_cat[m]
    names_m, from_end = np.unique(m_inv[::-1], return_index=True)
    cat_of = dict(
        zip(names_m.tolist(), (CATEGORIES[int(c)] for c in m_cat[m_inv.size - 1 - from_end]), strict=True)
    )
    return [
        MemoryOp(
            name=unique_names[i],
            category=cat_of[i],
            count=int(counts[i]),
            time_us=round(float(times[i]), 3),
        )
        for i in np.argsort(-times, kind="stable").tolist()
        if counts[i]
    ]


def launch_table(links: Links, is_k: np.ndarray) -> list[LaunchApi]:
    n = len(links.api_names)
    all_c = np.bincount(links.api, minlength=n)
    k_c = np.bincount(links.api[is_k], minlength=n)
    return [
        LaunchApi(api=links.api_names[i], gpu_ops=int(all_c[i]), kernels=int(k_c[i]))
        for i in np.argsort(-all_c, kind="stable").tolist()
        if all_c[i]
    ]
