"""The containment searches of analysis/attribution/links.py work on whole arrays (a loop per
thread, never per launch); they must find exactly what a search launch by launch finds."""

from __future__ import annotations

import numpy as np
import pytest

from _paths import TRACES as DIR
from attnprof.analysis.attribution.links import _containing, launched_in, link
from attnprof.trace.load import load_trace
from attnprof.trace.model import Kind, Trace

TRACES = [
    "pytorch__kineto__tb_plugin__samples__resnet50",  # V100 training, one host thread
    "facebookresearch__HolisticTraceAnalysis__tests__data__call_stack__backward_thread",
    "AMD-AGI__TraceLens__tests__traces__mi300__Qwen",
]


def _load(prefix: str) -> Trace:
    found = sorted(DIR.glob(f"{prefix}*.json*"))
    assert len(found) == 1, found
    return load_trace(found[0])


def _innermost_by_hand(tr: Trace, op_rows: np.ndarray, launch: int) -> int:
    """Of the ops on the launch's thread that contain its start, the one started last (stable)."""
    t = tr.ts[launch]
    ops = op_rows[tr.lane[op_rows] == tr.lane[launch]]
    ops = ops[np.argsort(tr.ts[ops], kind="stable")]
    inside = np.flatnonzero((tr.ts[ops] <= t) & (t <= tr.ts[ops] + tr.dur[ops]))
    return int(ops[inside[-1]]) if inside.size else -1


@pytest.mark.parametrize("prefix", TRACES)
def test_containing_finds_what_a_search_per_launch_finds(prefix: str) -> None:
    tr = _load(prefix)
    op_rows = tr.own(tr.rows(Kind.CPU_OP))
    launches = tr.rows(Kind.RUNTIME)
    assert launches.size > 0 and op_rows.size > 0
    got = _containing(tr, op_rows, launches)
    want = np.array([_innermost_by_hand(tr, op_rows, int(r)) for r in launches.tolist()])
    assert (got >= 0).any()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("prefix", TRACES[:1])
def test_launched_in_finds_what_a_search_per_op_finds(prefix: str) -> None:
    tr = _load(prefix)
    links = link(tr)
    op_rows = tr.own(tr.rows(Kind.CPU_OP))
    # a sample of ops, nested and not: every 7th
    ops = op_rows[::7]
    got = launched_in(tr, links, ops)
    has = np.flatnonzero(links.launch >= 0)
    want = []
    for i in has.tolist():
        r = int(links.launch[i])
        t = tr.ts[r]
        same = ops[tr.lane[ops] == tr.lane[r]]
        if ((tr.ts[same] <= t) & (t <= tr.ts[same] + tr.dur[same])).any():
            want.append(i)
    assert 0 < len(want) < has.size  # the sample leaves some launches out: the test can fail
    np.testing.assert_array_equal(got, np.array(want, np.int64))
