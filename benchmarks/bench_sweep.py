"""Per-job overhead of the local sweep executor, against two baselines measured in the same run.

    python benchmarks/bench_sweep.py [--jobs 40] [--fresh 5]

The work: N jobs at a tiny shape (B1 H2 S=16.. D16 fp32, sdpa-flash, no profiler, 10 ms timing
budget), each what `attnprof run` does for one variant. Three ways to run them:
  in-process   the same jobs called one after another in this process (attnprof.sweep.jobs.execute):
               the work itself, with nothing around it.
  local pool   `attnprof sweep`'s local executor with one worker, storing every result in SQLite:
               per-job time in steady state = the time between consecutive results.
  fresh proc   a new Python process per job, as a one-script-per-run loop does (import torch,
               run the job, exit); measured on fewer jobs because each takes seconds.
Overhead per job = per-job time minus the in-process per-job time. Reported: both overheads and
their ratio (target: local pool <= 50 ms, and >= 20x less than a fresh process per job).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, expand, job_key, run_sweep
from attnprof.sweep.jobs import JobRequest, execute

RUN = RunSettings(profile=False, time_budget_s=0.01, min_samples=3, warmup_calls=1)

ONE_JOB = """
import sys, msgspec
from attnprof.sweep.jobs import JobRequest, execute
reply = execute(msgspec.json.decode(sys.argv[1].encode(), type=JobRequest))
assert reply.result.status == "ok", reply.result.reason
"""


class Stamp:
    """on_result callback: the time each result was stored."""

    def __init__(self, stamps: list[float]) -> None:
        self.stamps = stamps

    def __call__(self, row: object, summary: object) -> None:
        self.stamps.append(time.perf_counter())


def config(store: Path, n: int) -> SweepConfig:
    return SweepConfig(
        grid=GridSpec(heads=[2], seq=list(range(16, 16 + n)), head_dim=[16], variants=["sdpa-flash"]),
        run=RUN,
        sweep=SweepSettings(store=str(store), workers=1),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20, help="jobs per round and way")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fresh", type=int, default=5)
    args = ap.parse_args()

    inproc: list[float] = []
    pool: list[float] = []
    startups: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        # warm this process up (torch import, first calls) outside the clock
        warm = config(Path(tmp) / "warm.db", 1)
        execute(JobRequest(key="warm", spec=expand(warm)[0][0], run=RUN))
        # rounds alternate the two ways, so background load on a shared machine hits both alike;
        # each round a new store, so nothing is resumed
        for rnd in range(args.rounds):
            cfg = config(Path(tmp) / f"bench{rnd}.db", args.jobs)
            jobs, _ = expand(cfg)
            for j in jobs:
                t0 = time.perf_counter()
                assert execute(JobRequest(key=job_key(j, "bench"), spec=j, run=RUN)).result.status == "ok"
                inproc.append(time.perf_counter() - t0)
            stamps: list[float] = []
            t0 = time.perf_counter()
            summary = run_sweep(cfg, on_result=Stamp(stamps))
            assert summary.counts == {"ok": args.jobs}, summary.counts
            startups.append(stamps[0] - t0)
            # steady state: the time from one stored result to the next
            pool.extend(b - a for a, b in itertools.pairwise(stamps))

        fresh: list[float] = []
        jobs, _ = expand(config(Path(tmp) / "fresh.db", args.fresh))
        for j in jobs:
            payload = msgspec.json.encode(JobRequest(key="fresh", spec=j, run=RUN)).decode()
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", ONE_JOB, payload], check=True, capture_output=True)
            fresh.append(time.perf_counter() - t0)

    work = statistics.median(inproc)
    pool_job = statistics.median(pool)
    fresh_job = statistics.median(fresh)
    pool_over = pool_job - work
    fresh_over = fresh_job - work
    print(
        f"{args.rounds} rounds x {args.jobs} jobs per way ({args.fresh} for a fresh process per job); "
        f"B1 H2 S16..{15 + args.jobs} D16 fp32 sdpa-flash, no profiler; medians"
    )
    print(f"in-process work per job      {work * 1e3:8.1f} ms")
    print(f"local pool per job           {pool_job * 1e3:8.1f} ms   overhead {pool_over * 1e3:7.1f} ms/job")
    print(f"fresh process per job        {fresh_job * 1e3:8.1f} ms   overhead {fresh_over * 1e3:7.1f} ms/job")
    print(
        f"local pool start-up (once per sweep: worker spawn, torch import, probe) {statistics.median(startups) * 1e3:.0f} ms"
    )
    ratio = fresh_over / max(pool_over, 1e-3)
    print(f"overhead ratio fresh/pool    {ratio:8.1f}x  (pool overhead floored at 1 ms for the ratio)")
    ok = pool_over <= 0.050 and ratio >= 20
    print("target (<= 50 ms/job and >= 20x less than a process per job):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
