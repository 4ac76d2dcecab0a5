"""Progress of a large trace's load: the loader's hook sees the bytes read grow to the raw size
and the events decoded; `attnprof analyze` of a large file on a pipe prints one line per stage
on stderr, and nothing for a small one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attnprof.report.load_progress import PROGRESS_MIN
from attnprof.trace import load_trace
from attnprof.trace import stream as loader

EV = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 2, "args": {"correlation": 1}}


def _big(path: Path, min_bytes: int) -> int:
    one = len(json.dumps(dict(EV, ts=0.0)))  # the shortest event: the file is at least min_bytes
    n = min_bytes // one + 1
    path.write_text(json.dumps({"traceEvents": [dict(EV, ts=float(i)) for i in range(n)]}))
    return n


def test_the_hook_sees_bytes_and_events_grow_to_the_whole_trace(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    n = _big(p, 4 << 20)
    calls: list[tuple[int, int, bool]] = []
    token = loader.PROGRESS.set(lambda b, e, done: calls.append((b, e, done)))
    try:
        t = load_trace(p, parallel=False)
    finally:
        loader.PROGRESS.reset(token)
    assert t.n_events == n
    assert len(calls) >= (4 << 20) // loader.BLOCK  # one per block, at least
    assert calls[-1] == (p.stat().st_size, n, True)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    assert [c[1] for c in calls] == sorted(c[1] for c in calls)
    assert not any(done for *_, done in calls[:-1])


def test_no_hook_no_calls(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    _big(p, 1 << 20)
    assert loader.PROGRESS.get() is None
    assert load_trace(p).n_events > 0


def test_a_large_trace_on_a_pipe_gets_one_line_per_stage(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    n = _big(p, PROGRESS_MIN)
    r = subprocess.run(
        [sys.executable, "-m", "attnprof", "analyze", "--json", str(p)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("loading big.json: ") and "of JSON" in lines[0]
    assert lines[1].startswith(f"loaded big.json: {n:,} events, ") and lines[1].endswith("; analysing")
    assert lines[2].startswith("analysed big.json in ")
    assert json.loads(r.stdout)["trace"]["events"] == n  # stdout is the JSON alone


def test_a_small_trace_prints_no_progress(tmp_path: Path) -> None:
    p = tmp_path / "small.json"
    _big(p, 1 << 20)
    r = subprocess.run(
        [sys.executable, "-m", "attnprof", "analyze", "--json", str(p)], capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stderr == ""
