"""The synthetic folder of rank traces that tests/test_ray_folder.py and benchmarks/bench_folder.py
both analyse: one builder, so that the test and the benchmark measure the same folder.

Each rank is the shared 71-event Triton trace (HTA's triton_example) with its events shifted a
few us (real ranks' clocks differ a little), its distributedInfo rank set, and n_coll all-reduce
kernels after it: every rank arrives at each within 30 us of the others, the planted straggler
200 us later, and all of them end together 50 us after the last arrival. With comm_args the
kernels carry what c10d records (process group "0", Seq, sizes, dtype, group size), so the
collectives are aligned by group and sequence number and their bus bandwidth is measured.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
NELEMS = 1 << 20  # fp32 elements per all-reduce, with comm_args


def build(folder: Path, ranks: int, straggler: int, n_coll: int = 8, *, comm_args: bool = False) -> Path:
    """Write `ranks` traces rank-<r>.1.pt.trace.json into folder (made if missing); return it."""
    folder.mkdir(parents=True, exist_ok=True)
    (src,) = sorted(TRACES.glob(f"{TRITON}*.json.gz"))
    base = json.loads(gzip.decompress(src.read_bytes()))
    rng = random.Random(3)
    t0 = max(e["ts"] + e.get("dur", 0) for e in base["traceEvents"] if isinstance(e.get("ts"), int | float))
    arrivals = []
    for k in range(n_coll):
        a = {r: t0 + 1000.0 * k + rng.uniform(0, 30) for r in range(ranks)}
        a[straggler] += 200.0
        arrivals.append((a, max(a.values()) + 50.0))
    for r in range(ranks):
        skew = rng.uniform(-3, 3)  # each rank's events a little apart, as real ranks are
        events = [
            dict(e, ts=e["ts"] + skew) if isinstance(e.get("ts"), int | float) else e
            for e in base["traceEvents"]
        ]
        for k, (a, end) in enumerate(arrivals):
            kernel: dict[str, object] = {
                "ph": "X",
                "cat": "kernel",
                "name": ALLREDUCE,
                "pid": 0,
                "tid": 13,
                "ts": a[r],
                "dur": end - a[r],
            }
            if comm_args:
                kernel["args"] = {
                    "Collective name": "allreduce",
                    "Process Group Name": "0",
                    "Seq": k,
                    "In msg nelems": NELEMS,
                    "Out msg nelems": NELEMS,
                    "dtype": "Float",
                    "Group size": ranks,
                }
            events.append(kernel)
        doc = dict(
            base, traceEvents=events, distributedInfo={"backend": "nccl", "rank": r, "world_size": ranks}
        )
        (folder / f"rank-{r}.1.pt.trace.json").write_text(json.dumps(doc))
    return folder
