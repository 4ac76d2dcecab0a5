"""Audit: which Python functions of the analysis run lines in proportion to the trace's events.

The analysis is meant to work on whole columns, with Python loops only over what does not grow
with the recording (unique names, threads, streams, findings). A loop per event, kernel, op or
region instance shows as lines executed that grow with the trace. So: one real trace is
replicated 1x and K x (bench_analyze.build: timestamps and linking ids shifted per copy, so the
copies repeat the same names and threads, as more steps of one recording do), each is loaded and
analysed with a line counter on (sys.settrace), and every function whose executed lines grow by
more than a small share of the events added is printed, worst first.

usage: python benchmarks/loop_audit.py [--copies 3] [--trace PREFIX ...] [--all]
Exit status 1 when a function over the limit is found (tests/test_loop_scaling.py runs the same
count on chosen traces).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import TRACES, build

# lines a function may add per event added, beyond SLACK: a loop over the events of a kind that
# is 1% of the trace, one line a pass, stays below it; one per kernel or op does not
PER_EVENT = 0.01
SLACK = 200  # a loop over what grows little (profiler steps, a few annotations per copy)


def count_lines(fn: Callable[[], Any], under: str) -> Counter[str]:
    """Lines executed per function (file:name:first line) by fn(), for code whose file path
    holds `under`."""
    counts: Counter[str] = Counter()
    keys: dict[CodeType, str | None] = {}

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            key = keys[frame.f_code]
            if key is not None:
                counts[key] += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        key = keys.get(code, "")
        if key == "":
            file = code.co_filename
            key = keys[code] = (
                f"{file.split(under, 1)[1]}:{code.co_name}:{code.co_firstlineno}" if under in file else None
            )
        return local if key is not None else None

    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts


def growth(source: Path, copies: int, *, stage: str = "analysis") -> tuple[int, list[tuple[str, int, int]]]:
    """(events added, [(function, lines at 1x, lines at copies x)]) for the functions over the
    limit, worst first. stage: "analysis" (what runs after the load) or "load"."""
    from attnprof.analysis.pipeline import analyze_trace
    from attnprof.trace.load import load_trace
    from attnprof.trace.model import Trace

    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        n_events = []
        for k in (1, copies):
            path = Path(tmp) / f"{k}x.json"
            build(source, k, path)
            if stage == "load":
                loaded: list[Trace] = []
                runs.append(
                    count_lines(
                        lambda p=path, out=loaded: out.append(load_trace(p, parallel=False)), "/attnprof/"
                    )
                )
                trace = loaded[0]
            else:
                trace = load_trace(path, parallel=False)
                analyze_trace(trace, path=str(path))  # first-use work (compiles, caches) out of the count
                runs.append(count_lines(lambda t=trace: analyze_trace(t, path="x"), "/attnprof/"))
            n_events.append(trace.n_events)
    added = n_events[1] - n_events[0]
    limit = SLACK + PER_EVENT * added
    over = [(f, runs[0][f], runs[1][f]) for f in runs[1] if runs[1][f] - runs[0][f] > limit]
    return added, sorted(over, key=lambda x: x[1] - x[2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--trace", nargs="*", default=[], help="file-name prefixes in ../shared/traces")
    ap.add_argument("--all", action="store_true", help="every shared trace")
    ap.add_argument("--stage", choices=("analysis", "load"), default="analysis")
    args = ap.parse_args()
    files = sorted(TRACES.glob("*.json.gz"))  # bench_analyze.build reads gzip
    if not args.all:
        files = [f for f in files if any(f.name.startswith(p) for p in args.trace)]
    found = 0
    for f in files:
        added, over = growth(f, args.copies, stage=args.stage)
        print(f"{f.name[:70]}: {added} events added, {len(over)} function(s) over the limit", flush=True)
        for name, a, b in over:
            print(f"  {b - a:>9} more lines  ({a} -> {b})  {name}")
        found += len(over)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
