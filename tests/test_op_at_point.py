"""regions._at, the op a fwdbwd flow point starts: the longest op of its lane starting at the
point (within 1e-3 us after it), against the definition by brute force on a loaded trace."""

from __future__ import annotations

import json
import random

import numpy as np

from attnprof.analysis.attribution.regions import _at
from attnprof.trace.load import parse_trace
from attnprof.trace.model import Kind


def test_the_op_at_each_point_is_the_one_the_definition_picks() -> None:
    rng = random.Random(3)
    events = []
    for _ in range(600):
        ts = rng.choice([rng.randint(0, 300) * 1.0, rng.randint(0, 300) + 0.0004, rng.uniform(0, 300)])
        events.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": rng.choice([1, 2, 3]),
                       "ts": ts, "dur": float(rng.randint(1, 4))})  # fmt: skip
    t = parse_trace(json.dumps({"traceEvents": events}).encode())
    ops = t.rows(Kind.CPU_OP)
    for _ in range(20):
        n = 50
        lanes = np.array([rng.randrange(4) for _ in range(n)])  # lane 3: no op there
        pts = np.array([rng.choice([rng.randint(0, 300) * 1.0, rng.uniform(0, 300)]) for _ in range(n)])
        got = _at(t, ops, lanes, pts)
        for k in range(n):
            on = ops[t.lane[ops] == lanes[k]]
            after = on[t.ts[on] >= pts[k]]
            want = -1
            if after.size:
                first = float(t.ts[after].min())
                if first - pts[k] < 1e-3:
                    tied = after[t.ts[after] == first]
                    want = int(tied[np.argmax(t.dur[tied])])  # the longest; the first of equals
            assert got[k] == want or (
                want >= 0 and t.dur[got[k]] == t.dur[want] and t.ts[got[k]] == t.ts[want]
            )


def test_linked_backward_ops_are_those_of_the_forward_ops_inside_the_given_ones() -> None:
    """device_share.linked_backward_ops against its definition, op by op, on a real training
    trace whose backward ops are linked by sequence numbers and fwdbwd flows."""
    from _paths import trace
    from attnprof.analysis.attribution.regions import backward_links
    from attnprof.analysis.breakdown.device_share import linked_backward_ops
    from attnprof.trace.load import load_trace

    t = load_trace(trace("pytorch__kineto__tb_plugin__samples__resnet50"))
    cpu = t.own(t.rows(Kind.CPU_OP))
    links, _ = backward_links(t, cpu)
    assert links  # the trace links its backward ops
    fwd = np.array(sorted(links), np.int64)
    rng = np.random.default_rng(1)
    for size in (1, 5, 40, 400):
        ops = np.sort(rng.choice(cpu, size, replace=False))
        want: set[int] = set()
        for r in ops.tolist():
            inside = fwd[
                (t.lane[fwd] == t.lane[r])
                & (t.ts[fwd] >= t.ts[r])
                & (t.ts[fwd] + t.dur[fwd] <= t.ts[r] + t.dur[r] + 1e-3)
            ]
            for f in inside.tolist():
                want.update(links[f])
        assert linked_backward_ops(t, cpu, ops).tolist() == sorted(want), size
