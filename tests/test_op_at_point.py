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
    from attnprof.analysis.attribution.regions import backward_pairs
    from attnprof.analysis.breakdown.device_share import linked_backward_ops
    from attnprof.trace.load import load_trace

    t = load_trace(trace("pytorch__kineto__tb_plugin__samples__resnet50"))
    cpu = t.own(t.rows(Kind.CPU_OP))
    links: dict[int, list[int]] = {}
    for f, b in zip(*(c.tolist() for c in backward_pairs(t, cpu)[:2]), strict=True):
        links.setdefault(f, []).append(b)
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


def test_ops_without_a_launch_pair_with_the_kth_free_launch_of_their_external_id() -> None:
    """links._pair_by_external against its definition: per External id, a queue of the free
    launches by time, popped by the ops in order of start."""
    from attnprof.analysis.attribution.links import _pair_by_external

    rng = random.Random(4)
    events = []
    for i in range(400):  # launches and kernels whose correlations never meet: only ids link them
        ext = rng.randrange(30)
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": rng.randrange(1000), "dur": 1, "args": {"External id": ext, "correlation": 10_000 + i}})  # fmt: skip
        if rng.random() < 0.8:
            events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": rng.randrange(1000),
                           "dur": 1, "args": {"External id": rng.choice([ext, rng.randrange(40)]), "correlation": i}})  # fmt: skip
    t = parse_trace(json.dumps({"traceEvents": events}).encode())
    gpu = t.rows(Kind.KERNEL)
    launches = t.rows(Kind.RUNTIME)
    launch = np.full(gpu.size, -1, np.int64)
    launch[: gpu.size // 5] = launches[: gpu.size // 5]  # some already paired: not free any more
    got, n = _pair_by_external(t, gpu, launches, launch)
    used = set(launch[launch >= 0].tolist())
    queues: dict[int, list[int]] = {}
    for r in sorted((r for r in launches.tolist() if r not in used), key=lambda r: (t.ext[r], t.ts[r])):
        queues.setdefault(int(t.ext[r]), []).append(r)
    want = launch.copy()
    for i in sorted(np.flatnonzero(launch < 0).tolist(), key=lambda i: t.ts[gpu[i]]):
        q = queues.get(int(t.ext[gpu[i]]))
        if q:
            want[i] = q.pop(0)
    assert got.tolist() == want.tolist()
    assert n == int(((want >= 0) & (launch < 0)).sum()) > 0
