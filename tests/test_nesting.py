"""analysis/timeline/nesting.py's innermost pieces against their definition, a stack walked in
start order written out here, on real Python frames (some of which outlast the frame they opened
inside) and on random ranges that nest, overlap without nesting, repeat and last no time."""

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


def _outlasting(s: np.ndarray, e: np.ndarray) -> int:
    """How many ranges (in start order) end after the range they opened inside."""
    stack: list[float] = []
    n = 0
    for s0, e0 in zip(s.tolist(), e.tolist(), strict=True):
        while stack and stack[-1] <= s0:
            stack.pop()
        n += bool(stack and e0 > stack[-1])
        stack.append(min(e0, stack[-1]) if stack else e0)
    return n


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
        clipped += _outlasting(s[o], e[o])
    assert clipped > 0  # frames that outlast the one they opened inside: the clipping is tried
    ps, pe, pr = innermost(tr, rows)
    assert ps.size > rows.size // 2 and (pe > ps).all() and np.isin(pr, rows).all()


def _call_stacks(rng: np.random.Generator, n: int, outlast: float) -> tuple[np.ndarray, np.ndarray]:
    """Frames as a profiler records a call stack (each splits into a few children), a share of
    them ending after the frame they opened inside."""
    s: list[float] = []
    e: list[float] = []

    def frame(t0: float, t1: float, depth: int) -> None:
        if len(s) >= n:
            return
        s.append(t0)
        e.append(t1)
        if depth < 12 and t1 - t0 > 2:
            k = int(rng.integers(1, 4))
            w = (t1 - t0) / k
            for j in range(k):
                late = 0.3 if rng.random() < outlast else 0.0
                frame(t0 + j * w + 0.1, t0 + (j + 1) * w - 0.1 + late, depth + 1)

    while len(s) < n:
        frame(len(s) * 1000.0, len(s) * 1000.0 + 900.0, 0)
    return np.array(s), np.array(e)


@pytest.mark.parametrize("arrays_only", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_random_ranges_cut_as_the_stack_walk_cuts_them(
    seed: int, arrays_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if arrays_only:  # the arrays whatever the share of outlasting ranges
        monkeypatch.setattr(nesting, "_OUTLASTING", 1.0)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    # a coarse grid of times, so that starts and ends coincide often; some ranges of no length
    s = rng.integers(0, 60, n).astype(np.float64)
    e = s + rng.choice([0.0, 1.0, 2.0, 5.0, 20.0, 50.0], n)
    _check(s, e)


@pytest.mark.parametrize("outlast", [0.0, 0.005, 0.05, 0.3])
def test_call_stacks_cut_as_the_stack_walk_cuts_them(outlast: float, monkeypatch: pytest.MonkeyPatch) -> None:
    s, e = _call_stacks(np.random.default_rng(7), 3000, outlast)
    _check(s, e)
    monkeypatch.setattr(nesting, "_OUTLASTING", 1.0)
    _check(s, e)


def test_a_chain_that_does_not_settle_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    # each range outlasts the one it opens inside: every round of clipping fixes one more
    s = np.arange(12, dtype=np.float64)
    e = s + 10.0
    e[0] = 3.0
    monkeypatch.setattr(nesting, "_OUTLASTING", 1.0)
    monkeypatch.setattr(nesting, "_ROUNDS", 1)
    _check(s, e)
