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
