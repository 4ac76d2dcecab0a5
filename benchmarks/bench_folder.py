"""Benchmark: `attnprof analyze DIR` of a folder of rank traces: the local process pool, a local
Ray instance, and a second run answered from the per-trace summaries (analysis/ranks/rank_cache.py).

The folder is tests/_rank_folder.py's, which tests/test_ray_folder.py analyses too: the shared
71-event Triton trace per rank (its events shifted a few us per rank), eight all-reduce kernels
per rank with random arrival skews and c10d's args (group, Seq, sizes), and one planted
straggler that every measured way must find. Each way runs in a
fresh process (`python -m attnprof analyze --json DIR`, imports included); ratios are against
the local pool measured in the same run, with the load average before and after.

The Ray way's time is split into Ray's own start and shutdown (measured alone, in the same run)
and the rest; a second Ray run answered from the summaries starts no Ray.

usage: python benchmarks/bench_folder.py [--ranks 64] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the folder is built by the tests' builder (tests/_rank_folder.py): the test and the benchmark
# analyse the same folder
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _rank_folder import build


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


_RAY_START = """
import time
from attnprof.ray_start import ray_started
t = time.perf_counter()
ray, _ = ray_started(None)  # as analyze starts it (the import of ray counts, as it does there)
t1 = time.perf_counter()
ray.shutdown()
print(f"{t1 - t:.3f} {time.perf_counter() - t1:.3f}")
"""


def ray_start() -> tuple[float, float]:
    """Seconds a local Ray takes to start and to shut down, nothing else: the part of the Ray
    way's wall time that is Ray's own."""
    p = subprocess.run([sys.executable, "-c", _RAY_START], capture_output=True, text=True, check=True)
    up, down = p.stdout.split()[-2:]
    return float(up), float(down)


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
    build(folder, args.ranks, straggler, comm_args=True)
    print(
        f"{args.ranks} rank traces in {folder}, straggler planted at rank {straggler}; {os.cpu_count()} CPUs; {_load()}"
    )
    try:
        local, d_local = run(folder, "off")
        ray, d_ray = run(folder, "off", "--executor", "ray")
        up, down = ray_start()
        cache = str(tmp / "cache")
        first, _ = run(folder, cache)
        again, d_again = run(folder, cache)
        again_ray, d_again_ray = run(folder, cache, "--executor", "ray")  # starts no Ray
        for name, d in (("local pool", d_local), ("ray", d_ray), ("from the summaries", d_again)):
            found = _straggler(d)
            print(f"{name}: stragglers {found} ({'found' if found == [str(straggler)] else 'NOT FOUND'})")
        print(f"local pool (--executor local, cache off):  {local:7.2f} s")
        print(f"local Ray  (--executor ray, cache off):    {ray:7.2f} s  ({ray / local:.2f}x the pool)")
        print(
            f"  of which Ray's own start and shutdown:   {up + down:7.2f} s  ({up:.2f} + {down:.2f}, measured alone)"
        )
        print(
            f"  the rest (tasks, imports, reduction):    {ray - up - down:7.2f} s  ({(ray - up - down) / local:.2f}x the pool)"
        )
        print(f"first run writing the summaries:           {first:7.2f} s  ({first / local:.2f}x)")
        print(f"second run from the summaries:             {again:7.2f} s  ({again / local:.2f}x the pool)")
        print(
            f"  the same with --executor ray (no Ray):   {again_ray:7.2f} s  ({again_ray / ray:.2f}x the Ray way)"
        )
        same = d_again == d_local == d_ray == d_again_ray
        print(f"same JSON from all four: {same}; {_load()}")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
