"""Interval sets (analysis/timeline/intervals.py): the binary-search paths agree with the general sweep."""

from __future__ import annotations

import numpy as np

from attnprof.analysis.timeline import intervals as iv


def _set(rng: np.random.Generator, n: int, whole: bool) -> iv.Intervals:
    s = np.sort(rng.uniform(0, 100.0, n))
    d = rng.exponential(100.0 / n / 2, n) * (rng.random(n) > 0.1)  # some of zero length
    if whole:  # integer ends: intervals that touch, and ends equal to the other set's
        return iv.union(np.floor(s), np.floor(s + d))
    return iv.union(s, s + d)


def _sweep(a: iv.Intervals, b: iv.Intervals) -> iv.Intervals:
    """Where both sets cover, by sorting all ends together: the definition, slowly."""
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(a[0].size), -np.ones(a[0].size), np.zeros(2 * b[0].size)])
    db = np.concatenate([np.zeros(2 * a[0].size), np.ones(b[0].size), -np.ones(b[0].size)])
    o = np.lexsort((da + db, pts))
    pts, ca, cb = pts[o], np.cumsum(da[o]), np.cumsum(db[o])
    both = (ca > 0) & (cb > 0)
    s, e = pts[:-1][both[:-1]], pts[1:][both[:-1]]
    return iv.union(s[e > s], e[e > s])


def test_intersect_and_clip_agree_with_the_definition() -> None:
    rng = np.random.default_rng(22)
    for i in range(400):
        a = _set(rng, int(rng.integers(1, 20)), whole=i % 3 == 0)
        b = _set(rng, int(rng.integers(1, 200)), whole=i % 3 == 0)
        got, want = iv.intersect(a, b), _sweep(a, b)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), i
        lo, hi = sorted(rng.uniform(-10, 110, 2).tolist())
        s2, e2 = np.maximum(b[0], lo), np.minimum(b[1], hi)  # clip by its definition
        clipped = iv.clip(b, lo, hi)
        assert np.array_equal(clipped[0], s2[e2 > s2]) and np.array_equal(clipped[1], e2[e2 > s2]), i


def test_intersect_of_sets_not_in_order_takes_the_general_sweep() -> None:
    a = (np.array([5.0, 0.0]), np.array([9.0, 2.0]))  # not sorted: the binary search cannot read it
    b = (np.array([1.0, 6.0]), np.array([3.0, 7.0]))
    got = iv.intersect(a, b)
    assert got[0].tolist() == [1.0, 6.0] and got[1].tolist() == [2.0, 7.0]
