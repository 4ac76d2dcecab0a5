"""analysis/timeline/nesting.py's innermost pieces, on whole arrays, against the stack walk that
defines them (frame by frame, as it was written before), on real Python frames and on random
ranges that nest, overlap without nesting, repeat and last no time."""

from __future__ import annotations

import numpy as np
import pytest

from _paths import trace
from attnprof.analysis.timeline import nesting
from attnprof.analysis.timeline.nesting import _pieces, innermost
from attnprof.trace.load import load_trace
from attnprof.trace.model import Kind, nesting_order


def _walk(s: list[float], e: list[float]) -> list[tuple[float, float, int]]:
    """The definition: a stack walked in start order (outer first), each range clipped to the
    range it opened inside, every moment given to the range opened last that is still open."""
    pieces: list[tuple[float, float, int]] = []
    stack: list[tuple[float, int]] = []

    def close(t: float, until: float) -> float:
        while stack and stack[-1][0] <= until:
            end, i = stack.pop()
            if end > t:
                pieces.append((t, end, i))
                t = end
        return t

    t = s[0] if s else 0.0
    for i, (s0, e0) in enumerate(zip(s, e, strict=True)):
        t = close(t, s0)
        if stack and s0 > t:
            pieces.append((t, s0, stack[-1][1]))
        t = max(t, s0)
        stack.append((min(e0, stack[-1][0]) if stack else e0, i))
    close(t, np.inf)
    return pieces


def _check(s: np.ndarray, e: np.ndarray) -> None:
    o = nesting_order(s, e - s)
    s, e = s[o], e[o]
    got = _pieces(s, e)
    want = _walk(s.tolist(), e.tolist())
    assert list(zip(*(a.tolist() for a in got), strict=True)) == want


@pytest.mark.parametrize(
    "prefix",
    [
        "AMD-AGI__TraceLens__tests__traces__h100__gaunernst",
        "AMD-AGI__TraceLens__tests__traces__mi300__gaunernst",
        "marcalph__kernelforge",
    ],
)
def test_real_frames_cut_as_the_stack_walk_cuts_them(prefix: str) -> None:
    tr = load_trace(trace(prefix))
    rows = tr.rows(Kind.PYTHON)
    assert rows.size > 1000
    clipped = 0
    for lane in np.unique(tr.lane[rows]).tolist():
        r = rows[tr.lane[rows] == lane]
        s, e = tr.ts[r].astype(np.float64), (tr.ts[r] + tr.dur[r]).astype(np.float64)
        _check(s, e)
        o = nesting_order(s, e - s)
        clipped += int((nesting._stack_ends(s[o], e[o]) < e[o]).sum())
    assert clipped > 0  # frames that outlast the one they opened inside: the clipping is tried
    ps, pe, pr = innermost(tr, rows)
    assert ps.size > rows.size // 2 and (pe > ps).all() and np.isin(pr, rows).all()


@pytest.mark.parametrize("seed", range(40))
def test_random_ranges_cut_as_the_stack_walk_cuts_them(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    # a coarse grid of times, so that starts and ends coincide often; some ranges of no length
    s = rng.integers(0, 60, n).astype(np.float64)
    e = s + rng.choice([0.0, 1.0, 2.0, 5.0, 20.0, 50.0], n)
    _check(s, e)


def test_a_chain_that_does_not_settle_is_walked_as_a_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    # each range outlasts the one it opens inside: every round of clipping fixes one more
    s = np.arange(12, dtype=np.float64)
    e = s + 10.0
    e[0] = 3.0
    monkeypatch.setattr(nesting, "_ROUNDS", 1)
    _check(s, e)
