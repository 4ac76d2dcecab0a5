"""Benchmark: `attnprof analyze` end to end against orjson.loads of the same file.

Builds a large, realistic trace by replicating a shared trace N times (default: the 2021 V100
ResNet-50 training trace, 10x) with timestamps shifted past the previous copy and every id that
links events (correlation, External id, flow id) shifted past the previous copy's largest, so
the copies do not link to each other. The file is written as plain JSON to a temp directory.

Then, in fresh subprocesses, alternating, `--repeat` times each:
- baseline: read the file and orjson.loads it (parse only: no analysis at all);
- attnprof: analyze(path) end to end: read, decode, build columns, classify, link, regions,
  occupancy, CPU evidence, findings, and to_dict().
Each subprocess reports its wall time (time.perf_counter around the work, imports excluded) and
its peak RSS growth over the peak after imports (VmHWM in /proc/self/status; Linux). The figures are
medians over the repeats; the ratio analyze / orjson.loads is printed, with the targets
(<= 0.75x time, <= 2x raw JSON size in peak memory).

usage: python benchmarks/bench_analyze.py [--copies 10] [--repeat 3] [--trace PREFIX] [--keep]
                                         [--hta-path DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
DEFAULT = "pytorch__kineto__tb_plugin__samples__resnet50"
_ID_ARGS = ("correlation", "External id", "external id")

_CHILD = r"""
import json, sys, time
from pathlib import Path

def hwm():
    # peak resident set of this process (VmHWM, kB): unlike ru_maxrss it is not inherited from
    # the parent across fork + exec
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

mode, path = sys.argv[1], sys.argv[2]
if mode == "orjson":
    import orjson
elif mode == "hta":
    import logging
    logging.disable(logging.CRITICAL)
    from hta.common.trace import Trace
else:
    from attnprof.analysis import analyze
base = hwm()
t = time.perf_counter()
if mode == "orjson":
    doc = orjson.loads(Path(path).read_bytes())
    n = len(doc["traceEvents"])
elif mode == "hta":
    trace = Trace(trace_files={0: Path(path).name}, trace_dir=str(Path(path).parent))
    trace.parse_traces(max_ranks=1, use_multiprocessing=False)
    n = len(trace.get_trace(0))
else:
    doc = analyze(path).to_dict()
    n = doc["trace"]["events"]
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "peak_rss_growth_bytes": hwm() - base, "events": n}))
"""


def build(src: Path, copies: int, out: Path) -> dict[str, Any]:
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), int | float)]
    ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    span = max(ends) - min(ts) + 1000.0
    ids = [
        e["args"][k]
        for e in events
        for k in _ID_ARGS
        if isinstance(e.get("args"), dict) and isinstance(e["args"].get(k), int)
    ]
    ids += [e["id"] for e in events if isinstance(e.get("id"), int)]
    id_step = max(ids) + 1 if ids else 0
    out_events: list[dict[str, Any]] = []
    for k in range(copies):
        for e in events:
            if k == 0:
                out_events.append(e)
                continue
            c = dict(e)
            if isinstance(c.get("ts"), int | float):
                c["ts"] = c["ts"] + k * span
            if isinstance(c.get("id"), int):
                c["id"] = c["id"] + k * id_step
            args = c.get("args")
            if isinstance(args, dict) and any(key in args for key in _ID_ARGS):
                args = dict(args)
                for key in _ID_ARGS:
                    if isinstance(args.get(key), int):
                        args[key] += k * id_step
                c["args"] = args
            out_events.append(c)
    doc["traceEvents"] = out_events
    out.write_bytes(orjson.dumps(doc))
    return {
        "events": len(out_events),
        "bytes": out.stat().st_size,
        "kernels": sum(1 for e in out_events if str(e.get("cat")).lower() == "kernel"),
    }


def child(mode: str, path: Path, pythonpath: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True, check=False, env=env
    )
    if p.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{p.stderr}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", default=DEFAULT, help="file-name prefix of a trace in ../shared/traces")
    ap.add_argument("--keep", action="store_true", help="keep the built trace and print its path")
    ap.add_argument(
        "--hta-path",
        help="PYTHONPATH where HTA (PyPI traceinsight) and its dependencies are installed: also time "
        "HTA's parse_traces on the same file, once, for comparison only",
    )
    args = ap.parse_args()
    src = next(iter(sorted(TRACES.glob(f"{args.trace}*.json.gz"))), None)
    if src is None:
        raise SystemExit(f"no trace starting with {args.trace!r} in {TRACES}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_analyze_"))
    path = tmp / f"{args.copies}x_{src.name.removesuffix('.gz')}"
    info = build(src, args.copies, path)
    print(
        f"trace: {src.name} x{args.copies} -> {info['events']:,} events, {info['kernels']:,} kernels, "
        f"{info['bytes'] / 1e6:.1f} MB plain JSON"
    )
    runs: dict[str, list[dict[str, Any]]] = {"orjson": [], "attnprof": []}
    for _ in range(args.repeat):  # alternate, so that machine noise hits both alike
        for mode in runs:
            runs[mode].append(child(mode, path))
    t_or = statistics.median(r["seconds"] for r in runs["orjson"])
    t_an = statistics.median(r["seconds"] for r in runs["attnprof"])
    m_or = statistics.median(r["peak_rss_growth_bytes"] for r in runs["orjson"])
    m_an = statistics.median(r["peak_rss_growth_bytes"] for r in runs["attnprof"])
    mb = info["bytes"] / 1e6
    print(
        f"orjson.loads (parse only):   {t_or:7.3f} s  {mb / t_or:6.0f} MB/s  peak RSS +{m_or / 1e6:6.0f} MB "
        f"({m_or / info['bytes']:.2f}x raw)"
    )
    print(
        f"attnprof analyze (all of it): {t_an:6.3f} s  {mb / t_an:6.0f} MB/s  peak RSS +{m_an / 1e6:6.0f} MB "
        f"({m_an / info['bytes']:.2f}x raw)"
    )
    print(
        f"ratio analyze / orjson.loads: {t_an / t_or:.2f}x time (target <= 0.75x); "
        f"peak memory {m_an / info['bytes']:.2f}x raw JSON (target <= 2x)"
    )
    print(f"median of {args.repeat} runs each, fresh process per run, {os.cpu_count()} CPUs", flush=True)
    if args.hta_path:
        h = child("hta", path, args.hta_path)
        print(
            f"HTA parse_traces (load only):  {h['seconds']:6.3f} s  {mb / h['seconds']:6.0f} MB/s  peak RSS "
            f"+{h['peak_rss_growth_bytes'] / 1e6:6.0f} MB ({h['peak_rss_growth_bytes'] / info['bytes']:.2f}x raw), one run"
        )
    if args.keep:
        print(f"kept: {path}")
    else:
        path.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
