"""attnprof's clean timing against Triton's do_bench, measured alike (harness/crosscheck.py).

    python benchmarks/bench_dobench.py [-v sdpa-flash] [--shape 8,16,1024,64] [--dtype bf16]
        [--companions naive-inplace,sdpa-math] [--rounds 12] [--round-s 0.2] [--tolerance 0.05]

One variant is built on the workload (the blog's by default) and timed in interleaved rounds
by attnprof's own sampler (rotated with --companions, as `attnprof run` rotates it with the
other variants) and by a reference: Triton's do_bench on CUDA, and do_bench's loop written out
(attnprof's flush buffer, events per call, one sync at the end) on CUDA and CPU alike. Both
timers flush L2 before every CUDA call, record on the same stream, and alternate which goes
first each round. Printed per pair: both medians, their ratio with its 95% interval over the
rounds, the bound the comparison can hold (the interval's half-width: the smallest difference
it tells apart from none) and the verdict at --tolerance. Exit 1 when a pair differs beyond it.
"""

from __future__ import annotations

import argparse
import importlib.util

import torch

from attnprof.harness.crosscheck import (
    SampleTimer,
    attnprof_timer,
    cross_check,
    dedicated_loop,
    triton_do_bench,
)
from attnprof.variants.registry import check, get_variant
from attnprof.workload import Workload


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-v", "--variant", default="sdpa-flash")
    ap.add_argument("--shape", default="8,16,1024,64")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--companions", default="", help="variants attnprof's timer rotates the call with")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--round-s", type=float, default=0.2)
    ap.add_argument("--tolerance", type=float, default=0.05)
    args = ap.parse_args()
    b, h, s, d = (int(x) for x in args.shape.split(","))
    w = Workload(batch=b, heads=h, seq=s, head_dim=d, dtype=args.dtype, device=args.device)
    inputs = w.make_inputs()
    v = get_variant(args.variant)
    decision = check(v, w)
    if not decision.accepted:
        print(f"{args.variant}: {decision.reason}")
        return 2
    call = v.build(w, inputs).call
    companions = {c: get_variant(c).build(w, inputs).call for c in args.companions.split(",") if c}
    ours = attnprof_timer(args.device, companions=companions)
    refs: dict[str, SampleTimer] = {"loop": dedicated_loop(args.device)}
    if args.device.startswith("cuda") and importlib.util.find_spec("triton") is not None:
        refs["do_bench"] = triton_do_bench()
    else:
        print("triton: not here (do_bench needs CUDA and Triton); do_bench's loop written out stands in")
    rotated = f", rotated with {', '.join(companions)}" if companions else ""
    print(f"{args.variant} on {args.shape} {args.dtype} {args.device}{rotated}")
    failed = False
    with torch.no_grad():
        for name, ref in refs.items():
            cc = cross_check(
                call,
                {"attnprof": ours, name: ref},
                device=args.device,
                rounds=args.rounds,
                round_s=args.round_s,
                tolerance=args.tolerance,
            )
            for line in cc.lines():
                print(f"  {line}")
            failed = failed or cc.verdict == "differ"
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
