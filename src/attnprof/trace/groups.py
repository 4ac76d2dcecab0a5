"""Array operations per group of rows (a thread, a region instance, an instance's thread) done
over all groups at once, so that no Python loop runs per group, event or op.

The times are compared exactly: where groups and times must share one sorted key, both are
replaced by their ranks (integers), never offset as floats, which would round."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from attnprof.trace.model import unique

__all__ = ["enclosing_before", "group_cummax", "held", "held_pairs", "outermost", "ranges", "runs"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_FEW = 16  # groups held() searches one by one
_CHUNK = 2048  # query rows a pass of enclosing_before looks back from: 2048 x window cells


def runs(group: np.ndarray) -> I64:
    """Per position, the number of the run of equal values it is in (group: grouped, any order
    of the groups)."""
    run = np.zeros(group.size, np.int64)
    if group.size > 1:
        np.cumsum(group[1:] != group[:-1], out=run[1:])
    return run


def group_cummax(values: F64, group: np.ndarray) -> F64:
    """The running maximum of values, restarted where group changes (group: equal values
    adjacent, as after a sort by group)."""
    if not values.size:
        return values.astype(np.float64)
    distinct, rank = np.unique(values, return_inverse=True)
    run = runs(group)
    # a later run's keys are above every earlier run's, so one running maximum restarts per run
    key = run * distinct.size + rank.reshape(-1)
    return distinct[np.maximum.accumulate(key) - run * distinct.size]


def outermost(start: F64, end: F64, group: np.ndarray) -> npt.NDArray[np.bool_]:
    """Per range (in start order within each group, groups adjacent), whether it starts after
    the furthest end of the earlier ranges of its group: the first of a call, not one nested in
    (or starting inside) an earlier one. end may be another span's end per range (a fused op's
    whole call)."""
    out = np.ones(start.size, bool)
    if start.size > 1:
        out[1:] = (start[1:] > group_cummax(end, group)[:-1]) | (group[1:] != group[:-1])
    return out


def held(
    group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    p_group: np.ndarray,
    p_start: np.ndarray,
    p_end: np.ndarray | None = None,
) -> npt.NDArray[np.bool_]:
    """Per point (p_group, p_start .. p_end; p_end None: the point p_start), whether a range
    [start, end] of its group holds it: a range starting by p_start reaches p_end iff the
    furthest end of the group's ranges started by p_start does."""
    out = np.zeros(p_start.size, bool)
    if not start.size or not p_start.size:
        return out
    if p_end is None:
        p_end = p_start
    groups = unique(group)
    if groups.size <= _FEW:
        # a search per group (threads): sorts of start times that come nearly in order, cheaper
        # than the ranks below (3.3 ms against 10 per analysis of the 48 MB benchmark trace)
        for g in groups.tolist():
            sel = np.flatnonzero(p_group == g)
            if not sel.size:
                continue
            on = group == g
            order = np.argsort(start[on], kind="stable")
            reach = np.maximum.accumulate(end[on][order])
            j = np.searchsorted(start[on][order], p_start[sel], "right") - 1
            out[sel] = (j >= 0) & (reach[np.maximum(j, 0)] >= p_end[sel])
        return out
    order = np.lexsort((start, group))
    g, s = group[order], start[order]
    reach = group_cummax(end[order], g)
    gi = np.searchsorted(groups, g)
    pg = np.minimum(np.searchsorted(groups, p_group), groups.size - 1)
    times = unique(np.concatenate([s, p_start]))
    width = times.size
    key = gi * width + np.searchsorted(times, s)
    p_key = pg * width + np.searchsorted(times, p_start)
    j = np.searchsorted(key, p_key, "right") - 1
    jc = np.maximum(j, 0)
    return (groups[pg] == p_group) & (j >= 0) & (g[jc] == p_group) & (reach[jc] >= p_end)


def enclosing_before(start: F64, end: F64, q: I64, first: I64, window: int) -> I64:
    """Per query position q, the nearest earlier position j (at most `window` back, and not
    before its first, where q's group begins) whose range holds q's: start[j] <= start[q] and
    end[j] >= end[q]; -1 for none. In ranges sorted by start, the longer first at one start, that
    is the innermost op around q's."""
    out = np.full(q.size, -1, np.int64)
    back = np.arange(1, window + 1, dtype=np.int64)
    for a in range(0, q.size, _CHUNK):  # a pass per 2048 queries bounds the memory
        qq, lo = q[a : a + _CHUNK], first[a : a + _CHUNK]
        j = qq[:, None] - back[None, :]
        jc = np.maximum(j, 0)
        ok = (j >= lo[:, None]) & (start[jc] <= start[qq][:, None]) & (end[jc] >= end[qq][:, None])
        hit = ok.argmax(1)
        out[a : a + _CHUNK] = np.where(ok.any(1), j[np.arange(qq.size), hit], -1)
    return out


def ranges(lo: I64, count: I64) -> I64:
    """The positions lo[k], lo[k] + 1, ..., lo[k] + count[k] - 1, for each k in turn.

    As steps of one summed in place (a jump where a range begins): one array of the result's
    size, where an arange and a repeat of it were three."""
    keep = count > 0
    if not keep.all():
        lo, count = lo[keep], count[keep]
    total = int(count.sum())
    if total == lo.size:  # ranges of one: the common case of sequence numbers
        return lo.astype(np.int64, copy=False)
    out = np.ones(total, np.int64)
    out[0] = lo[0]
    out[np.cumsum(count[:-1])] = lo[1:] - lo[:-1] - count[:-1] + 1
    return np.cumsum(out, out=out)


def held_pairs(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, p_group: np.ndarray, p_t: np.ndarray
) -> tuple[I64, I64]:
    """(range, point) index pairs, for every point (p_group, p_t) a range [start, end] of its
    group holds, range by range, each range's points by time: a range's points are one run of
    the points sorted by (group, time), found by two binary searches per range."""
    if not start.size or not p_t.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((p_t, p_group))
    groups = unique(np.concatenate([group, p_group]))
    times = unique(np.concatenate([p_t, start, end]))
    width = times.size
    key = np.searchsorted(groups, p_group[order]) * width + np.searchsorted(times, p_t[order])
    base = np.searchsorted(groups, group) * width
    lo = np.searchsorted(key, base + np.searchsorted(times, start), "left")
    count = np.maximum(np.searchsorted(key, base + np.searchsorted(times, end), "right") - lo, 0)
    which = np.repeat(np.arange(start.size, dtype=np.int64), count)
    return which, order[ranges(lo.astype(np.int64), count.astype(np.int64))].astype(np.int64)
