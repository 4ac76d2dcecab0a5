"""Benchmark: `attnprof analyze DIR` of a folder of rank traces: the local process pool, a local
Ray instance, and a second run answered from the per-trace summaries (analysis/rank_cache.py).

The folder is built as tests/test_ray_folder.py builds it: the shared 71-event Triton trace per
rank (its events shifted a few us per rank), eight all-reduce kernels per rank with random
arrival skews, and one planted straggler that every measured way must find. Each way runs in a
fresh process (`python -m attnprof analyze --json DIR`, imports included); ratios are against
the local pool measured in the same run, with the load average before and after.

usage: python benchmarks/bench_folder.py [--ranks 64] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def build(folder: Path, ranks: int, straggler: int, n_coll: int = 8) -> None:
    src = next(iter(sorted(TRACES.glob(f"{TRITON}*.json.gz"))))
    base = json.loads(gzip.decompress(src.read_bytes()))
    rng = random.Random(3)
    t0 = max(e["ts"] + e.get("dur", 0) for e in base["traceEvents"] if isinstance(e.get("ts"), int | float))
    arrivals = []
    for k in range(n_coll):
        a = {r: t0 + 1000.0 * k + rng.uniform(0, 30) for r in range(ranks)}
        a[straggler] += 200.0
        arrivals.append((a, max(a.values()) + 50.0))
    for r in range(ranks):
        skew = rng.uniform(-3, 3)
        events = [
            dict(e, ts=e["ts"] + skew) if isinstance(e.get("ts"), int | float) else e
            for e in base["traceEvents"]
        ]
        for a, end in arrivals:
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": ALLREDUCE,
                    "pid": 0,
                    "tid": 13,
                    "ts": a[r],
                    "dur": end - a[r],
                }
            )
        doc = dict(
            base, traceEvents=events, distributedInfo={"backend": "nccl", "rank": r, "world_size": ranks}
        )
        (folder / f"rank-{r}.1.pt.trace.json").write_text(json.dumps(doc))


def run(folder: Path, cache: str, *extra: str) -> tuple[float, dict[str, object]]:
    env = dict(os.environ, ATTNPROF_CACHE=cache)
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "attnprof", "analyze", "--json", str(folder), *extra],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"analyze {' '.join(extra)} failed: {p.stderr[-2000:]}")
    return wall, json.loads(p.stdout)


def _straggler(doc: dict[str, object]) -> list[str]:
    runs = doc["runs"]
    assert isinstance(runs, list)
    view = runs[0]["cross_rank"]["collectives"]
    return [s["rank"] for s in view["stragglers"]] if view else []


def _load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_folder_"))
    folder = tmp / "ranks"
    folder.mkdir()
    straggler = args.ranks * 2 // 3
    build(folder, args.ranks, straggler)
    print(
        f"{args.ranks} rank traces in {folder}, straggler planted at rank {straggler}; {os.cpu_count()} CPUs; {_load()}"
    )
    try:
        local, d_local = run(folder, "off")
        ray, d_ray = run(folder, "off", "--executor", "ray")
        cache = str(tmp / "cache")
        first, _ = run(folder, cache)
        again, d_again = run(folder, cache)
        for name, d in (("local pool", d_local), ("ray", d_ray), ("from the summaries", d_again)):
            found = _straggler(d)
            print(f"{name}: stragglers {found} ({'found' if found == [str(straggler)] else 'NOT FOUND'})")
        print(f"local pool (--executor local, cache off):  {local:7.2f} s")
        print(f"local Ray  (--executor ray, cache off):    {ray:7.2f} s  ({ray / local:.2f}x the pool)")
        print(f"first run writing the summaries:           {first:7.2f} s  ({first / local:.2f}x)")
        print(f"second run from the summaries:             {again:7.2f} s  ({again / local:.2f}x the pool)")
        same = d_again == d_local == d_ray
        print(f"same JSON from all three: {same}; {_load()}")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
