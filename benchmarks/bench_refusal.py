"""How fast and how light a memory refusal is: `attnprof run -v naive --seq 65536`.

    python benchmarks/bench_refusal.py [--seq 65536] [--repeat 3]

Measured in the same run:
  startup      a fresh `python -c "import torch, attnprof.cli"`: the floor any CLI call pays
  cli refusal  the whole `attnprof run -v naive --seq S` (exit 2, "refused"), wall time and peak RSS
  in-process   harness.run.run() on the same workload after torch is imported: the refusal alone
Reported: medians, the CLI refusal minus startup, and peak RSS. Target: refused in under 5 s
(beyond startup) with a peak RSS under 2 GB; before the fix it took 15-50 s and 9 GB.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child_run(cmd: list[str]) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, max over children so far
    return wall, rss, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    startup, cli = [], []
    rss = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            w, _, _ = _child_run([sys.executable, "-c", "import torch, attnprof.cli"])
            startup.append(w)
            out = Path(tmp) / f"r{i}"
            w, rss, rc = _child_run(
                [
                    sys.executable,
                    "-m",
                    "attnprof",
                    "run",
                    "-v",
                    "naive",
                    "--seq",
                    str(args.seq),
                    "--out",
                    str(out),
                ]
            )
            assert rc == 2, f"expected exit 2 (nothing ran), got {rc}"
            cli.append(w)
        import torch  # noqa: F401

        from attnprof.harness.run import run
        from attnprof.workload import Workload

        inproc = []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            rec = run(
                Workload(batch=1, heads=8, seq=args.seq, head_dim=64), ["naive"], out=Path(tmp) / f"p{i}"
            )
            inproc.append(time.perf_counter() - t0)
            assert rec.results[0].status == "refused"
    med = statistics.median
    print(f"S={args.seq}, {args.repeat} repeats (medians)")
    print(f"  startup (import torch, attnprof.cli): {med(startup):.2f} s")
    print(
        f"  cli refusal, whole process:           {med(cli):.2f} s  ({med(cli) - med(startup):+.2f} s over startup)"
    )
    print(f"  in-process refusal (run()):           {med(inproc) * 1e3:.0f} ms")
    print(f"  peak RSS of the CLI processes:        {rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
