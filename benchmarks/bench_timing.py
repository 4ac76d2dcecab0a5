"""attnprof's clean-timing median against torch.utils.benchmark's, on the same callable in the
same process state, for every CPU variant at two sizes.

    python benchmarks/bench_timing.py [--sizes 256,512] [--budget 1.0]

For each size: one workload (B1 H8 S D64 fp32, causal), its inputs built once, every variant
built and warmed up as `attnprof run` does (Variant.build, three warm-up calls). The allocator is
put in attnprof's warm state first (harness/allocator.py), so both timers see the same state.
Then, per variant and alternating which goes first, attnprof's time_call (perf_counter batches,
median) and torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time=budget) (median of
its blocks, with torch's thread count: Timer defaults to one thread), both under torch.no_grad(). Printed: both medians, their ratio
(attnprof / torch.utils.benchmark; target 0.97-1.03), the minor page faults per call attnprof
counted, and the load meter's verdict on the machine while timing.
"""

from __future__ import annotations

import argparse

import torch
import torch.utils.benchmark as tub

from attnprof.harness.allocator import warm_allocator
from attnprof.harness.load import LoadMeter
from attnprof.harness.timing import time_call
from attnprof.variants.registry import check, resolve_variants
from attnprof.workload import Workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,512")
    ap.add_argument("--budget", type=float, default=1.0)
    args = ap.parse_args()
    state = warm_allocator()
    print(f"allocator: {state}; threads: {torch.get_num_threads()}")
    print(f"{'S':>5} {'variant':<14} {'attnprof':>10} {'t.u.b':>10} {'ratio':>6} {'faults/call':>11}  load")
    ratios = []
    for seq in (int(s) for s in args.sizes.split(",")):
        wl = Workload(batch=1, heads=8, seq=seq, head_dim=64)
        inputs = wl.make_inputs()
        for i, v in enumerate(resolve_variants(None)):
            if not check(v, wl).accepted:
                continue
            with torch.no_grad():
                built = v.build(wl, inputs)
                for _ in range(3):
                    built.call()
                meter = LoadMeter().start()
                ours = tub_ms = 0.0
                summary = None
                for first in (0, 1) if i % 2 == 0 else (1, 0):
                    if first == 0:
                        summary = time_call(built.call, device="cpu", budget_s=args.budget)
                        ours = summary.median_ms
                    else:
                        # the same thread count (Timer defaults to one thread)
                        timer = tub.Timer(
                            stmt="call()", globals={"call": built.call}, num_threads=torch.get_num_threads()
                        )
                        m = timer.blocked_autorange(min_run_time=args.budget)
                        tub_ms = m.median * 1e3
                load = meter.stop(None)
            ratio = ours / tub_ms
            ratios.append(ratio)
            faults = summary.minor_faults_per_call if summary else None
            verdict = "busy: " + "; ".join(load.reasons) if load.unreliable else "quiet"
            print(
                f"{seq:>5} {v.label:<14} {ours:>8.3f}ms {tub_ms:>8.3f}ms {ratio:>6.3f} "
                f"{faults if faults is not None else float('nan'):>11.1f}  {verdict}"
            )
    within = sum(0.97 <= r <= 1.03 for r in ratios)
    print(f"{within} of {len(ratios)} within 3% (ratios {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
