"""Sets of time intervals: sorted, disjoint (start, end) arrays, in microseconds.

The idle analysis (attnprof.analysis.timeline.idle) and the communication overlap
(attnprof.analysis.timeline.overlap) work on them; every operation is a sort and a cumsum, so a trace
of a million device ops costs milliseconds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "F64",
    "Intervals",
    "clip",
    "intersect",
    "measure",
    "measure_within",
    "subtract",
    "union",
    "union_sorted",
]

F64 = npt.NDArray[np.float64]
Intervals = tuple[F64, F64]


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """Sorted disjoint intervals covering the given ones."""
    if start.size == 0:
        return np.zeros(0), np.zeros(0)
    o = np.argsort(start, kind="stable")
    # copy=False: the fancy index made the copy already (a second one was an n-sized transient)
    s, e = start[o].astype(np.float64, copy=False), end[o].astype(np.float64, copy=False)
    del o
    return union_sorted(s, e)


def union_sorted(s: F64, e: F64) -> Intervals:
    """union() of intervals already in order of start (stable: ties as given). `e` is
    overwritten with the running maximum of the ends: a caller that built it for this saves a
    copy of its size (attnprof.analysis.timeline.idle unions close to a million CPU ops at a time)."""
    if s.size == 0:
        return np.zeros(0), np.zeros(0)
    reach = np.maximum.accumulate(e, out=e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(reach[idx[1:] - 1], reach[-1])
    return s[idx], ends


def clip(iv: Intervals, lo: float, hi: float) -> Intervals:
    """iv within [lo, hi]. Only the intervals that can overlap the window are looked at (starts
    and ends of a sorted disjoint set both ascend): the idle analysis clips the whole trace's
    sets to each region instance's window, which read every interval per instance before (the
    cost grew with instances x intervals: quadratic in a trace's steps)."""
    s, e = iv
    i0 = int(np.searchsorted(e, lo, side="right"))
    i1 = int(np.searchsorted(s, hi, side="left"))
    s, e = s[i0 : max(i0, i1)], e[i0 : max(i0, i1)]
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def measure(iv: Intervals) -> float:
    return float((iv[1] - iv[0]).sum())


def measure_within(iv: Intervals, lo: F64, hi: F64) -> F64:
    """measure(clip(iv, lo[k], hi[k])) for every window k at once: the lengths' running sum
    between the first interval ending after lo and the last starting before hi, less the parts
    of those two outside the window (both ends of a sorted disjoint set ascend)."""
    s, e = iv
    if s.size == 0:
        return np.zeros(lo.size)
    run = np.concatenate([[0.0], np.cumsum(e - s)])
    i0 = np.searchsorted(e, lo, side="right")
    i1 = np.maximum(np.searchsorted(s, hi, side="left"), i0)
    out = run[i1] - run[i0]
    some = i1 > i0
    a, b = np.minimum(i0, s.size - 1), np.maximum(i1 - 1, 0)
    out -= np.where(some, np.maximum(lo - s[a], 0.0) + np.maximum(e[b] - hi, 0.0), 0.0)
    return np.where(some & (hi > lo), np.maximum(out, 0.0), 0.0)


def _ascending(x: np.ndarray) -> bool:
    return bool((x[1:] >= x[:-1]).all())


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two sorted disjoint interval sets.

    Each interval of the smaller set is met with the run of the other's that overlap it, found by
    binary search (both sets' starts and ends ascend): the idle analysis intersects each region
    instance's few gaps with the trace's sets of host activity, where sorting both together
    (the general sweep below) cost a third of the analysis of a 300 MB trace. The same set either
    way: pieces of the same intervals, merged by union."""
    if a[0].size == 0 or b[0].size == 0:
        return np.zeros(0), np.zeros(0)
    if a[0].size > b[0].size:
        a, b = b, a
    if all(_ascending(x) for x in (*a, *b)):
        lo = np.searchsorted(b[1], a[0], side="right")  # first of b's ending after a's start
        hi = np.searchsorted(b[0], a[1], side="left")  # past the last of b's starting before a's end
        n = np.maximum(hi - lo, 0)
        total = int(n.sum())
        if total == 0:
            return np.zeros(0), np.zeros(0)
        j = np.repeat(np.arange(n.size), n)
        k = np.arange(total) - np.repeat(np.cumsum(n) - n - lo, n)
        s, e = np.maximum(a[0][j], b[0][k]), np.minimum(a[1][j], b[1][k])
        keep = e > s
        s, e = s[keep], e[keep]
        # of two disjoint sets the pieces come in order already: only touching ones to merge,
        # without union's sort (a third of this function's time in the idle analysis); sets
        # whose starts and ends ascend but overlap can give pieces out of order, and are sorted
        return union_sorted(s, e) if _ascending(s) else union(s, e)
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(a[0].size), -np.ones(a[0].size), np.zeros(2 * b[0].size)])
    db = np.concatenate([np.zeros(2 * a[0].size), np.ones(b[0].size), -np.ones(b[0].size)])
    o = np.lexsort((da + db, pts))  # at one point, ends before starts
    pts, ca, cb = pts[o], np.cumsum(da[o]), np.cumsum(db[o])
    both = (ca > 0) & (cb > 0)
    s, e = pts[:-1][both[:-1]], pts[1:][both[:-1]]
    keep = e > s
    return union(s[keep], e[keep])


def subtract(a: Intervals, b: Intervals, lo: float, hi: float) -> Intervals:
    """a minus b, within [lo, hi]."""
    bs, be = clip(b, lo, hi)
    gaps_s = np.concatenate([[lo], be])
    gaps_e = np.concatenate([bs, [hi]])
    keep = gaps_e > gaps_s
    return intersect(a, (gaps_s[keep], gaps_e[keep]))
