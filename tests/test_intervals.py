"""Interval sets (analysis/timeline/intervals.py): the binary-search paths agree with the general sweep."""

from __future__ import annotations

import numpy as np
import pytest

from attnprof.analysis.timeline import intervals as iv
from attnprof.trace.model import nesting_order


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


def test_intersect_of_overlapping_sets_whose_ends_ascend() -> None:
    # starts and ends ascend, so the binary search reads them, but the pieces of two
    # overlapping intervals come out of order (2, 9, 2, 9) and must be merged in order
    a = (np.array([0.0, 1.0]), np.array([10.0, 11.0]))
    b = (np.array([2.0, 9.0]), np.array([3.0, 12.0]))
    got, want = iv.intersect(a, b), _sweep(a, b)
    assert got[0].tolist() == want[0].tolist() == [2.0, 9.0]
    assert got[1].tolist() == want[1].tolist() == [3.0, 11.0]


def test_measure_within_agrees_with_measuring_each_clipped_window() -> None:
    rng = np.random.default_rng(29)
    for i in range(300):
        b = _set(rng, int(rng.integers(1, 200)), whole=i % 3 == 0)
        ends = rng.uniform(-10, 110, (50, 2))
        if i % 3 == 0:  # windows whose bounds fall on the set's own ends, and empty windows
            ends = np.floor(ends)
        lo, hi = ends.min(axis=1), ends.max(axis=1)
        hi[:5] = lo[:5]
        want = [iv.measure(iv.clip(b, float(x), float(y))) for x, y in zip(lo, hi, strict=True)]
        np.testing.assert_allclose(iv.measure_within(b, lo, hi), want, rtol=0, atol=1e-9, err_msg=str(i))
    none = (np.zeros(0), np.zeros(0))
    assert iv.measure_within(none, np.array([0.0]), np.array([5.0])).tolist() == [0.0]


def test_idle_cut_once_equals_the_idle_cut_per_window() -> None:
    """idle_breakdowns cuts the idle time into causes once over all windows: each window must
    read what cutting only that window gives (the definition, by clip, intersect and subtract)."""
    from attnprof.analysis.timeline.idle import CAUSES, HostActivity, idle_breakdowns

    rng = np.random.default_rng(7)
    busy = _set(rng, 60, whole=False)
    priority = [
        (k, _set(rng, int(rng.integers(1, 40)), whole=False)) for k in ("sync", "launching", "sync", "python")
    ]
    host = HostActivity(priority=priority, named={}, busy=busy, launch_calls=0, has_python=True)
    windows = [
        (float(a), float(a + w), float(a + w / 3) if k % 2 else None)
        for k, (a, w) in enumerate(zip(rng.uniform(0, 90, 30), rng.uniform(0, 20, 30), strict=True))
    ]
    windows.append((40.0, 40.0, None))
    for (lo, hi, first), got in zip(windows, idle_breakdowns(host, windows), strict=True):
        window = (np.array([lo]), np.array([hi]))
        idle = iv.subtract(window, iv.clip(busy, lo, hi), lo, hi) if hi > lo else (np.zeros(0), np.zeros(0))
        rest, want = idle, dict.fromkeys(CAUSES, 0.0)
        for key, cause in priority:
            part = iv.intersect(rest, iv.clip(cause, lo, hi))
            want[key] += iv.measure(part)
            rest = iv.subtract(rest, part, lo, hi)
        want["nothing_recorded"] = iv.measure(rest)
        assert got.idle_us == pytest.approx(iv.measure(idle), abs=1e-9)
        assert got.causes == pytest.approx(want, abs=1e-9)
        assert sum(got.causes.values()) == pytest.approx(got.idle_us, abs=1e-9)
        if first is None:
            assert got.before_first_launch_us is None
        else:
            cut = min(max(first, lo), hi)
            assert got.before_first_launch_us == pytest.approx(iv.measure(iv.clip(idle, lo, cut)), abs=1e-9)


@pytest.mark.parametrize("with_lane", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 5000])
def test_nesting_order_is_lexsorts_order(n: int, with_lane: bool) -> None:
    # starts and durations from few values (many ties, equal durations among them), nearly in
    # time order as a trace writes them, plus some out of order
    rng = np.random.default_rng(n)
    ts = np.sort(rng.integers(0, max(n // 3, 1), n)).astype(np.float64)
    swap = rng.integers(0, max(n, 1), n // 10)
    ts[swap] = ts[swap[::-1]]
    dur = rng.integers(0, 4, n).astype(np.float64)
    lane = rng.integers(0, 3, n).astype(np.int32)
    if with_lane:
        want, got = np.lexsort((-dur, ts, lane)), nesting_order(ts, dur, lane)
    else:
        want, got = np.lexsort((-dur, ts)), nesting_order(ts, dur)
    assert got.tolist() == want.tolist()
