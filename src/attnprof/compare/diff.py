"""Kernel-level diff of two comparison rows: B's ops against A's per forward, grouped by family.

compare.compare builds the rows and picks the pairs (diffs_for); this module sets one pair side
by side. It reads only a Row's ops (OpStat), its lane and its label."""

from __future__ import annotations

from typing import Literal

from attnprof.compare.records import Diff, FamilyDiff, KernelChange, Row

__all__ = ["SHARE_CHANGE", "Diff", "FamilyDiff", "KernelChange", "diff_rows"]


# an op (a GPU kernel or a CPU op) whose share of its side's traced time in the diff's lane moves
# by this much is "changed" at equal counts: one rule for both lanes, on the same kind of time on
# both sides (absolute times differ between two traces by how much the profiler, and the machine,
# stretched each, not only by what the op did)
SHARE_CHANGE = 0.10


def diff_rows(a: Row, b: Row) -> Diff:
    """GPU ops of B against A per forward, grouped by family, with time deltas.

    A kernel name in B only is "added", in A only "removed", in both with a different count per
    forward or a share of its side's traced time in the lane that moved by SHARE_CHANGE (10
    points) or more, "changed": the same rule for GPU kernels and CPU ops (the profiler inflates
    op times, more for variants with many ops, and two traces are stretched unequally, so shares
    compare where absolute times do not). When neither side ran GPU ops (CPU runs), the same is
    done for the CPU ops by name."""
    lane = "gpu"
    ops_a = [o for o in a.ops if a.ops_lane == "gpu"]
    ops_b = [o for o in b.ops if b.ops_lane == "gpu"]
    if not ops_a and not ops_b:
        lane = "cpu"
        ops_a = [o for o in a.ops if a.ops_lane == "cpu"]
        ops_b = [o for o in b.ops if b.ops_lane == "cpu"]
    by_a = {o.name: o for o in ops_a}
    by_b = {o.name: o for o in ops_b}
    total_a = sum(o.time_us for o in ops_a) or 1.0
    total_b = sum(o.time_us for o in ops_b) or 1.0
    clean_a, clean_b = (_clean_scale(a), _clean_scale(b)) if lane == "cpu" else (None, None)
    basis: Literal["clean", "traced"] = "traced"
    scale_a = scale_b = 1.0
    if clean_a is not None and clean_b is not None:
        basis, scale_a, scale_b = "clean", clean_a, clean_b
    groups: dict[str, list[KernelChange]] = {}
    cat_of: dict[str, str] = {}
    counts = {"added": 0, "removed": 0, "changed": 0, "same": 0}
    for name in list(by_a) + [n for n in by_b if n not in by_a]:
        oa, ob = by_a.get(name), by_b.get(name)
        ref = oa or ob
        assert ref is not None
        ca, cb = (oa.count if oa else 0.0), (ob.count if ob else 0.0)
        ta, tb = (oa.time_us * scale_a if oa else 0.0), (ob.time_us * scale_b if ob else 0.0)
        # shares from the traced times on both sides (never a scaled time over a traced total)
        sa, sb = (oa.time_us / total_a if oa else 0.0), (ob.time_us / total_b if ob else 0.0)
        if oa is None:
            change: Literal["added", "removed", "changed", "same"] = "added"
        elif ob is None:
            change = "removed"
        elif abs(ca - cb) > 1e-9 or abs(sb - sa) >= SHARE_CHANGE:
            change = "changed"
        else:
            change = "same"
        counts[change] += 1
        fam = (ob.family if ob else None) or ref.family
        cat_of.setdefault(fam, ref.category)
        groups.setdefault(fam, []).append(
            KernelChange(
                name=name,
                short=ref.short,
                change=change,
                count_a=ca,
                count_b=cb,
                time_a_us=ta,
                time_b_us=tb,
                share_a=sa,
                share_b=sb,
            )
        )
    fams = [
        FamilyDiff(
            family=fam,
            category=cat_of[fam],
            count_a=sum(k.count_a for k in ks),
            count_b=sum(k.count_b for k in ks),
            time_a_us=sum(k.time_a_us for k in ks),
            time_b_us=sum(k.time_b_us for k in ks),
            kernels=sorted(ks, key=lambda k: -abs(k.delta_us)),
        )
        for fam, ks in groups.items()
    ]
    # attention first (the point of the diff: did it fuse?), then by the size of the time change
    fams.sort(key=lambda f: (f.category != "attention", -abs(f.delta_us)))
    return Diff(
        a=a.label,
        b=b.label,
        lane=lane,
        ops_a=sum(o.count for o in ops_a),
        ops_b=sum(o.count for o in ops_b),
        time_a_us=sum(o.time_us for o in ops_a) * scale_a,
        time_b_us=sum(o.time_us for o in ops_b) * scale_b,
        added=counts["added"],
        removed=counts["removed"],
        changed=counts["changed"],
        families=fams,
        basis=basis,
    )


def _clean_scale(row: Row) -> float | None:
    """Clean µs per traced µs of a row's CPU ops: its clean median over the traced time per
    forward its ops' times are shares of; None without either."""
    traced = row.ops_time_us_per_forward
    if row.median_ms is None or row.median_ms <= 0 or not traced or traced <= 0:
        return None
    return row.median_ms * 1e3 / traced
