"""analysis/attribution/regions.py at its edges, on small synthetic traces with answers worked out by hand:
cpu_nesting (depth and self time of CPU ops, the CPU-op tables' and the CPU share's basis) with
ops that end as another starts, ops of zero duration, two ops that start together, ops on two
threads; the whole trace as a region when a capture trace's events were imported into it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from attnprof.analysis.attribution.links import link
from attnprof.analysis.attribution.regions import cpu_nesting, find_region
from attnprof.trace.load import parse_trace
from attnprof.trace.model import Kind


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def test_depth_and_self_time_at_the_edges() -> None:
    events = [
        _op("A", 0, 10),
        _op("B", 1, 4),  # inside A, ends at 5
        _op("G", 2, 1),  # inside B
        _op("C", 5, 0),  # zero length as B ends and D starts: D, the longer, holds it
        _op("D", 5, 3),  # starts as B ends: A's child, not B's
        _op("E", 6, 0),  # zero length inside D
        _op("F", 6, 0),  # zero length right after E: E holds nothing
        _op("K", 20, 2),  # starts with J, the shorter: inside J whatever the file order
        _op("J", 20, 5),
        _op("H", 1, 3, tid=2),  # another thread: A does not hold it
        _op("I", 2, 1, tid=2),
    ]
    trace = parse_trace(json.dumps({"traceEvents": events}).encode())
    rows = trace.rows(Kind.CPU_OP)
    depth, self_us = cpu_nesting(trace, rows)
    got = {trace.names[int(trace.name[r])]: (d, s) for r, d, s in zip(rows, depth, self_us, strict=True)}
    assert got == {
        "A": (0, 3.0),  # 10 less B 4 and D 3
        "B": (1, 3.0),
        "G": (2, 1.0),
        "C": (2, 0.0),
        "D": (1, 3.0),
        "E": (2, 0.0),
        "F": (2, 0.0),
        "J": (0, 3.0),
        "K": (1, 2.0),
        "H": (0, 2.0),
        "I": (1, 1.0),
    }
    assert depth.dtype.name == "int64" and self_us.dtype.name == "float64"


def test_the_whole_trace_ends_with_its_own_events_not_the_imported_ones() -> None:
    # rows from row 1 on came from a capture trace (Trace.imported_from): the whole trace, as a
    # region, spans this trace's events only, however late the imported ones end
    events = [_op("A", 0, 10), _op("B", 20, 5)]
    parsed = parse_trace(json.dumps({"traceEvents": events}).encode())
    assert [parsed.names[int(i)] for i in parsed.name] == ["A", "B"]
    trace = replace(parsed, imported_from=1)
    region = find_region(trace, link(trace))
    whole = region.instances[0]
    assert region.selector == "whole trace" and (whole.start, whole.end) == (0.0, 10.0)
    assert find_region(parsed, link(parsed)).instances[0].end == 25.0  # without the import: B's end


def test_thread_counts_rank_as_a_counter_does() -> None:
    # the threads launching a region's device ops: the most frequent first, ties in the order
    # they first appear (Counter.most_common's order), counted by numpy
    from collections import Counter

    from attnprof.analysis.breakdown.region_stats import _most_common

    rng = np.random.default_rng(7)
    for _ in range(200):
        parts = [rng.integers(0, 6, rng.integers(0, 12)) for _ in range(rng.integers(0, 5))]
        want = Counter(v for p in parts for v in p.tolist()).most_common(3)
        assert _most_common(parts, 3) == want
