"""attnprof's clean-timing median against torch.utils.benchmark's, on the same callable in the
same process state, for every CPU variant at two sizes.

    python benchmarks/bench_timing.py [--sizes 256,512] [--budget 4.0] [--rounds 48]

For each size: one workload (B1 H8 S D64 fp32, causal), its inputs built once, every variant
built and warmed up as `attnprof run` does (Variant.build, three warm-up calls). The allocator is
put in attnprof's warm state first (harness/allocator.py), so both timers see the same state.
Then, per variant, `--rounds` short rounds alternating which timer goes first: attnprof's
time_call (perf_counter samples) and torch.utils.benchmark.Timer(...).blocked_autorange
(per-call time of each of its blocks, with torch's thread count: Timer defaults to one thread),
each for budget / rounds seconds, both under torch.no_grad(); each side's median is over all its
samples from every round. Printed: both medians, and the ratio attnprof / torch.utils.benchmark
(target 0.97-1.03) as the median over the rounds of each round's ratio of the two medians: the
machine drifts by tens of percent over seconds (sdpa at S=512: 4.35, 5.30, 5.72 ms medians in
three one-second timings in a row on a quiet machine), so only timings seconds apart compare, and
pooled samples would weigh the rounds by how many samples each timer took in them, the minor page faults per call attnprof
counted, and the load meter's verdict on the machine while timing.
"""

from __future__ import annotations

import argparse
import statistics

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
    ap.add_argument("--budget", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=48)
    args = ap.parse_args()
    state = warm_allocator()
    print(f"allocator: {state}; threads: {torch.get_num_threads()}")
    print(
        f"{'S':>5} {'variant':<14} {'attnprof':>10} {'t.u.b':>10} {'ratio':>6} {'mean r':>6} {'faults/call':>11}  load"
    )
    ratios: list[float] = []
    mean_ratio_all: list[float] = []
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
                ours_samples: list[float] = []
                tub_samples: list[float] = []
                round_ratios: list[float] = []
                mean_ratios: list[float] = []
                faults: list[float] = []
                # the budget in short alternating rounds: the machine drifts (clock, cache, other
                # processes) over seconds, and two timers run one after the other each see a
                # different part of that drift; rounds spread it over both alike
                for r in range(args.rounds):
                    order = (0, 1) if (i + r) % 2 == 0 else (1, 0)
                    medians: dict[int, float] = {}
                    means: dict[int, float] = {}
                    for which in order:
                        if which == 0:
                            summary = time_call(
                                built.call,
                                device="cpu",
                                budget_s=args.budget / args.rounds,
                                min_samples=3,
                                warmup_s=0.02,
                            )
                            ours_samples.extend(summary.samples_ms)
                            medians[0], means[0] = summary.median_ms, summary.mean_ms
                            if summary.minor_faults_per_call is not None:
                                faults.append(summary.minor_faults_per_call)
                        else:
                            # the same thread count (Timer defaults to one thread)
                            timer = tub.Timer(
                                stmt="call()",
                                globals={"call": built.call},
                                num_threads=torch.get_num_threads(),
                            )
                            m = timer.blocked_autorange(min_run_time=args.budget / args.rounds)
                            tub_samples.extend(t * 1e3 for t in m.times)
                            medians[1], means[1] = m.median * 1e3, m.mean * 1e3
                    round_ratios.append(medians[0] / medians[1])
                    mean_ratios.append(means[0] / means[1])
                load = meter.stop(None)
            ours = statistics.median(ours_samples)
            tub_ms = statistics.median(tub_samples)
            # paired: each round's two medians, taken seconds apart, against each other; pooled
            # medians would weigh the rounds by how many samples each timer took in them
            ratio = statistics.median(round_ratios)
            # the same for the means: a skewed distribution (page faults, preemption) puts a median
            # of single calls below torch.utils.benchmark's median of block means; means agree
            mean_ratio = statistics.median(mean_ratios)
            ratios.append(ratio)
            mean_ratio_all.append(mean_ratio)
            fault = statistics.fmean(faults) if faults else None
            verdict = "busy: " + "; ".join(load.reasons) if load.unreliable else "quiet"
            print(
                f"{seq:>5} {v.label:<14} {ours:>8.3f}ms {tub_ms:>8.3f}ms {ratio:>6.3f} {mean_ratio:>6.3f} "
                f"{fault if fault is not None else float('nan'):>11.1f}  {verdict}"
            )
    within = sum(0.97 <= r <= 1.03 for r in ratios)
    within_mean = sum(0.97 <= r <= 1.03 for r in mean_ratio_all)
    print(f"{within} of {len(ratios)} within 3% (ratios {min(ratios):.3f}-{max(ratios):.3f})")
    print(
        f"means: {within_mean} of {len(mean_ratio_all)} within 3% "
        f"(ratios {min(mean_ratio_all):.3f}-{max(mean_ratio_all):.3f})"
    )


if __name__ == "__main__":
    main()
