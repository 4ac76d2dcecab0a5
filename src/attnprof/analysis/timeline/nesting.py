"""Nested ranges on one thread (Python frames) cut into the pieces where each is the innermost.

What a stack walked in start order gives (the outer range first when two start together): each
range is open from its start to its end, clipped to the end of the range it opened inside (a
frame that overlaps the next without containing it is clipped: frames nest, and a trace that
says otherwise is read so), and every moment some range is open belongs to the one opened last.
So the pieces are the intervals between consecutive starts and clipped ends in which a range is
open, each given to the last-opened range still open there.

Done on whole arrays, with no Python loop per range:
- the range each one opens inside is the last earlier range whose clipped end is after its start
  (`_last_above`: a binary search over maxima of blocks of 2**k ranges), and its clipped end the
  lesser of its own end and that range's. The clipped ends depend on each other in start order
  only, so iterating "clip by the parents found with the current ends" from the raw ends is
  right for one more range per round at least, and is done when a round changes nothing (the
  definition has one solution). The shared traces' frames settle in 3 to 8 rounds: only ranges
  that outlast their parent change. Where many do (more than _OUTLASTING of a thread's), or the rounds do not
  settle, the thread is walked as a stack instead (`_walked`, the definition itself), which is
  then the faster;
- the range open in each interval between boundaries is the last one started by the interval's
  start whose clipped end is after it: `_last_above` again.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from attnprof.trace.model import Trace, nesting_order, unique

__all__ = ["innermost"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# rounds of clipping tried before the lane is walked as a stack instead: each round is right for
# at least one more range, and the shared traces' frames settle in 3 to 8 (counting the round
# that finds nothing left to change)
_ROUNDS = 16
# the share of ranges outlasting the one they opened inside above which the lane is walked: each
# costs the arrays a round along its chain. On call stacks of 100k frames (docs/benchmarks.md,
# "Issue 29, fourth pass") the arrays took 95, 125, 153 and 351 ms where 0, 0.5, 5 and 33% of
# the frames outlast, the walk 178-207 ms (real traces: 0.3-0.9%)
_OUTLASTING = 0.1


def innermost(trace: Trace, rows: np.ndarray) -> tuple[F64, F64, I64]:
    """Nested ranges (rows: Python frames) cut into the pieces where each is the innermost on its
    thread: (start, end, row) per piece, lane by lane, in time order within each."""
    out_s: list[F64] = []
    out_e: list[F64] = []
    out_r: list[I64] = []
    lanes = trace.lane[rows]
    for lane in unique(lanes).tolist():  # per thread
        r = rows[lanes == lane]
        r = r[nesting_order(trace.ts[r], trace.dur[r])]  # by start, the outer range first
        s = trace.ts[r].astype(np.float64)
        e = (trace.ts[r] + trace.dur[r]).astype(np.float64)
        ps, pe, pi = _pieces(s, e)
        out_s.append(ps)
        out_e.append(pe)
        out_r.append(r[pi].astype(np.int64))
    if not out_s:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_r)


def _pieces(s: F64, e: F64) -> tuple[F64, F64, I64]:
    """(start, end, index of the range) of the pieces of one thread's ranges, sorted by start."""
    n = s.size
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
    before = np.arange(n, dtype=np.int64) - 1  # the ranges before each one
    c = e.copy()
    for k in range(_ROUNDS):
        parent = _last_above(c, before, s)
        clipped = np.where(parent >= 0, np.minimum(e, c[np.maximum(parent, 0)]), e)
        if np.array_equal(clipped, c):
            break
        if k == 0 and np.count_nonzero(clipped != e) > _OUTLASTING * n:
            return _walked(s, e)  # many chains to settle: the walk is faster
        c = clipped
    else:
        return _walked(s, e)
    bounds = np.unique(np.concatenate([s, c]))
    lo, hi = bounds[:-1], bounds[1:]
    started = np.searchsorted(s, lo, "right") - 1  # the last range started by each interval
    top = _last_above(c, started, lo)
    keep = top >= 0
    return lo[keep], hi[keep], top[keep]


def _last_above(values: F64, upto: I64, threshold: F64) -> I64:
    """Per query q, the largest j <= upto[q] with values[j] > threshold[q]; -1 where none.

    From x = upto + 1 down, a block of 2**k values before x is skipped when its maximum is not
    above the threshold, largest blocks first: the first value above it is the one before x."""
    n = values.size
    levels = [values]  # levels[k][j]: the maximum of values[j : j + 2**k]
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-half], prev[half:]))
    x = upto + 1
    for k in range(len(levels) - 1, -1, -1):
        step = 1 << k
        at = np.flatnonzero(x >= step)
        skip = at[levels[k][x[at] - step] <= threshold[at]]
        x[skip] -= step
    return x - 1


def _walked(s: F64, e: F64) -> tuple[F64, F64, I64]:
    """_pieces by the stack walk itself, range by range (the definition)."""
    pieces: list[tuple[float, float, int]] = []
    stack: list[tuple[float, int]] = []  # (clipped end, index), the innermost open range last
    t = float(s[0]) if s.size else 0.0  # pieces are cut up to here

    def close(t: float, until: float) -> float:
        """Pop the open ranges that end by `until`, each the innermost until it ends."""
        while stack and stack[-1][0] <= until:
            end, i = stack.pop()
            if end > t:
                pieces.append((t, end, i))
                t = end
        return t

    for i, (s0, e0) in enumerate(zip(s.tolist(), e.tolist(), strict=True)):
        t = close(t, s0)
        if stack and s0 > t:
            pieces.append((t, s0, stack[-1][1]))
        t = max(t, s0)
        stack.append((min(e0, stack[-1][0]) if stack else e0, i))
    close(t, np.inf)
    if not pieces:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
    ps, pe, pi = zip(*pieces, strict=True)
    return np.array(ps, np.float64), np.array(pe, np.float64), np.array(pi, np.int64)
