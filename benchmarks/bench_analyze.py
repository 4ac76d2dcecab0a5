"""Benchmark: `attnprof analyze` end to end against orjson.loads of the same file.

Builds a large, realistic trace by replicating a shared trace N times (default: the 2021 V100
ResNet-50 training trace, 10x) with timestamps shifted past the previous copy and every id that
links events (correlation, External id, flow id, autograd Sequence number) shifted past the
previous copy's largest, so the copies do not link to each other, as the steps of one longer
recording would not. The file is written as plain JSON to a temp directory.

Then, in fresh subprocesses, alternating, `--repeat` times each:
- baseline: read the file and orjson.loads it (parse only: no analysis at all);
- attnprof: analyze(path) end to end: read, decode, build columns, classify, link, regions,
  occupancy, CPU evidence, findings, and to_dict().
Each subprocess reports its wall time and CPU time (its own and its forked decoder's) around the
work (imports excluded) and its peak RSS growth over the peak after imports (VmHWM in
/proc/self/status; Linux). Where a forked decoder runs (large plain JSON, a CPU to spare), the
memory that counts is what both processes hold together: this driver samples, every 20 ms, the
sum of their proportional set sizes (a page they share counts once) and of the in-memory file
the decoder's part waits in, and reports its peak over the analysing process's set after imports
(never below that process's own exact peak growth); the forked decoder's peak RSS less what it
shared at the fork is printed too (adding the two peaks overstates: they are not at the same
time). The figures are medians over the repeats; ratios against orjson.loads are printed with
the targets.

--whole-process times whole processes instead, start to exit, imports included: `python -m
attnprof analyze --json FILE` against `python -c "orjson.loads(open(FILE).read())"` (and HTA's
load with --hta-path), plus `attnprof analyze` (and --json) of a small shared trace against a
process that only imports numpy, msgspec, typer and orjson.
The machine is shared: the load average is printed before and after; ratios measured in the same
run are what count.

--baseline REF times this checkout against another commit's analysis of the same file, in the
same run, alternating: whole processes (`python -m attnprof analyze --json FILE`, PYTHONPATH at
each src) and, in fresh processes, each stage (stage_child.py: load, link, classify,
attribution, regions, idle, replay, perf model, findings, render), with the ratio per stage, so
that a regression shows where it is.

usage: python benchmarks/bench_analyze.py [--copies 10] [--repeat 3] [--trace PREFIX] [--keep]
                                         [--file TRACE] [--whole-process] [--hta-path DIR]
                                         [--baseline REF]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
DEFAULT = "pytorch__kineto__tb_plugin__samples__resnet50"
SMALL = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"
# every id that links events, shifted per copy; "Sequence number" too: a real trace of N steps
# numbers its autograd ops on (the counter never resets), and copies that shared them linked
# every forward op to the backward ops of all N copies (N**2 links: 830 MB and 146 s of region
# finding on the 40-copy trace)
_ID_ARGS = ("correlation", "External id", "external id", "Sequence number")

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path

def status(key):
    # VmHWM: peak resident set of this process (kB); unlike ru_maxrss it is not inherited from
    # the parent across fork + exec. VmRSS: the current one.
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

mode, path = sys.argv[1], sys.argv[2]
if mode == "orjson":
    import orjson
elif mode == "hta":
    import logging
    logging.disable(logging.CRITICAL)
    from hta.common.trace import Trace
else:
    # everything analyze() imports on first use, so that its memory and time count as imports
    # (as orjson's do for the baseline), not as growth
    import attnprof.analysis.findings.rules, attnprof.analysis.pipeline, attnprof.trace.load
    from attnprof.analysis import analyze
base, base_rss = status("VmHWM:"), status("VmRSS:")
# the driver samples the proportional set size of this process and its forked decoder: its base
base_pss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/smaps_rollup") if l.startswith("Pss:"))
print(json.dumps({"base_pss": base_pss}), flush=True)
t = time.perf_counter()
c = time.process_time()
if mode == "orjson":
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":  # the baseline gunzips too
        import gzip
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    del data
    n = len(doc["traceEvents"])
elif mode == "hta":
    trace = Trace(trace_files={0: Path(path).name}, trace_dir=str(Path(path).parent))
    trace.parse_traces(max_ranks=1, use_multiprocessing=False)
    n = len(trace.get_trace(0))
else:
    doc = analyze(path).to_dict()
    n = doc["trace"]["events"]
dt = time.perf_counter() - t
cpu = time.process_time() - c
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
# a forked decoder (large plain JSON): its peak resident set less what it shared at the fork
child = max(0, ch.ru_maxrss * 1024 - base_rss) if ch.ru_maxrss else 0
print(json.dumps({"seconds": dt, "cpu": cpu + ch.ru_utime + ch.ru_stime, "peak_rss_growth_bytes": status("VmHWM:") - base,
                  "child_rss_growth_bytes": child, "events": n}), flush=True)
"""

_ORJSON_ONLY = (
    "import gzip, orjson, sys; d = open(sys.argv[1], 'rb').read(); "
    "orjson.loads(gzip.decompress(d) if d[:2] == b'\\x1f\\x8b' else d)"
)
_HTA_ONLY = (
    "import logging, sys; from pathlib import Path; logging.disable(logging.CRITICAL); "
    "from hta.common.trace import Trace; p = Path(sys.argv[1]); "
    "t = Trace(trace_files={0: p.name}, trace_dir=str(p.parent)); "
    "t.parse_traces(max_ranks=1, use_multiprocessing=False)"
)


def build(src: Path, copies: int, out: Path) -> dict[str, Any]:
    """Write `copies` shifted copies of src's events to out, one copy at a time: only the source
    and one copy's events are held, so that a 2.5 GB trace is built without 15 GB of dicts."""
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
    # the document's other keys keep their place around traceEvents
    keys = list(doc)
    at = keys.index("traceEvents")
    before = orjson.dumps({k: doc[k] for k in keys[:at]})[:-1]  # without its closing "}"
    after = orjson.dumps({k: doc[k] for k in keys[at + 1 :]})[1:]  # without its opening "{"
    n_events = 0
    with open(out, "wb") as f:
        f.write(before + (b"," if at else b"") + b'"traceEvents":[')
        for k in range(copies):
            copy = events if k == 0 else [_shifted(e, k * span, k * id_step) for e in events]
            if k and events:
                f.write(b",")
            f.write(orjson.dumps(copy)[1:-1])
            n_events += len(copy)
        f.write(b"]" + (b"," if after != b"}" else b"") + after)
    kernels = sum(1 for e in events if str(e.get("cat")).lower() == "kernel") * copies
    return {"events": n_events, "bytes": out.stat().st_size, "kernels": kernels}


def _shifted(e: dict[str, Any], dt: float, did: int) -> dict[str, Any]:
    """One event of a later copy: its time and every id that links events moved on."""
    c = dict(e)
    if isinstance(c.get("ts"), int | float):
        c["ts"] = c["ts"] + dt
    if isinstance(c.get("id"), int):
        c["id"] = c["id"] + did
    args = c.get("args")
    if isinstance(args, dict) and any(key in args for key in _ID_ARGS):
        args = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int):
                args[key] += did
        c["args"] = args
    return c


def _info(path: Path) -> dict[str, Any]:
    """build()'s figures for a trace built before (--file), without parsing it here: the events
    are counted by the runs (their "events")."""
    from attnprof.trace.stream import is_gzip

    size = path.stat().st_size
    if is_gzip(path):
        with gzip.open(path, "rb") as f:
            size = sum(len(b) for b in iter(lambda: f.read(1 << 20), b""))
    return {"events": 0, "bytes": size, "kernels": 0}


def _env(pythonpath: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _kb(path: str, key: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def _tree(pid: int) -> list[int]:
    """pid and its descendants (the forked decoder), from /proc/PID/task/TID/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:  # exited meanwhile
            continue
    return out


def _held(pid: int) -> int:
    """The memory pid's process tree holds now: the sum of each process's proportional set size
    (a page shared by the two processes after the fork counts once in all), plus the in-memory
    files (memfd) they hold open, whose pages no process maps: the forked decoder's part waits in
    one until the parent reads it."""
    total, files = 0, {}
    for p in _tree(pid):
        try:
            total += _kb(f"/proc/{p}/smaps_rollup", "Pss:")
            for fd in os.listdir(f"/proc/{p}/fd"):
                link = f"/proc/{p}/fd/{fd}"
                if os.readlink(link).startswith("/memfd:"):
                    st = os.stat(link)
                    files[st.st_ino] = st.st_size
        except OSError:  # exited, or the fd closed, meanwhile
            continue
    return total + sum(files.values())


# how often the driver samples what the analysing process tree holds (_held): the stages whose
# peaks count last tens of ms to seconds on the large traces
SAMPLE_S = 0.02


def child(mode: str, path: Path, pythonpath: str | None = None) -> dict[str, Any]:
    """One fresh process's figures; with `combined_growth_bytes`: the peak of what its process
    tree held together (sampled every SAMPLE_S, _held) over its proportional set after imports,
    and never below its own exact peak RSS growth (VmHWM), which a sample may miss."""
    # stderr to a file, not a pipe: a full pipe would stop the child while it is sampled
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, mode, str(path)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=_env(pythonpath),
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # after imports: {"base_pss": ...}
        peak = 0
        # only attnprof's process tree is sampled: reading the proportional set of orjson's or
        # HTA's process (GBs) walks its page tables under its memory map's lock, which held up
        # its allocations (orjson's 1.2 GB parse took 39-42 s wall for 26 s of CPU, sampled;
        # 26 s unsampled). Theirs is one process: its VmHWM is the figure
        while proc.poll() is None:
            if mode == "attnprof":
                peak = max(peak, _held(proc.pid))
            time.sleep(SAMPLE_S)
        rest = proc.stdout.read()
        errors.seek(0)
        err = errors.read()
    if proc.returncode != 0 or not first.strip():
        raise SystemExit(f"{mode} run failed:\n{err}")
    out = dict(json.loads(rest.strip().splitlines()[-1]))
    base = int(json.loads(first)["base_pss"])
    out["combined_growth_bytes"] = max(peak - base, out["peak_rss_growth_bytes"])
    return out


def whole(cmd: list[str], pythonpath: str | None = None) -> dict[str, float]:
    """One whole process, start to exit: wall time, CPU time (its own and its children's, user +
    system) and peak RSS (ru_maxrss of the process, or of its largest waited-for child)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(pythonpath))
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss": ru.ru_maxrss * 1024}


def _med(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", default=DEFAULT, help="file-name prefix of a trace in ../shared/traces")
    ap.add_argument("--keep", action="store_true", help="keep the built trace and print its path")
    ap.add_argument(
        "--file",
        type=Path,
        help="a trace built before (--keep) to measure instead of building one; left in place",
    )
    ap.add_argument("--gzip", action="store_true", help="write the built trace as .json.gz (level 1)")
    ap.add_argument(
        "--whole-process",
        action="store_true",
        help="time whole processes instead: `python -m attnprof analyze --json FILE` against a "
        "process that only reads and orjson.loads FILE (and HTA's load, with --hta-path), plus "
        "`attnprof analyze` of a small trace",
    )
    ap.add_argument(
        "--hta-path",
        help="PYTHONPATH where HTA (PyPI holistictraceanalysis) is installed: also time HTA's "
        "parse_traces on the same file, for comparison only",
    )
    ap.add_argument(
        "--baseline",
        metavar="REF",
        help="a commit (hash, tag, branch) to time against this checkout on the same file, per "
        "stage and whole process, alternating",
    )
    args = ap.parse_args()
    src = next(iter(sorted(TRACES.glob(f"{args.trace}*.json.gz"))), None)
    if src is None:
        raise SystemExit(f"no trace starting with {args.trace!r} in {TRACES}")
    if args.file is not None:
        if args.gzip:
            raise SystemExit("--gzip builds a trace; with --file, give a .json.gz built before instead")
        if not args.file.is_file():
            raise SystemExit(f"--file {args.file}: no such file (build one with --keep)")
        path, tmp = args.file, None
        info = _info(path)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench_analyze_"))
        path = tmp / f"{args.copies}x_{src.name.removesuffix('.gz')}"
        info = build(src, args.copies, path)
    mb = info["bytes"] / 1e6  # raw JSON, also for a .json.gz: MB/s and memory are per raw byte
    if args.gzip:
        gz = path.with_name(path.name + ".gz")
        with open(path, "rb") as fin, gzip.open(gz, "wb", compresslevel=1) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        path.unlink()
        path = gz
        print(f"written as {path.name}: {path.stat().st_size / 1e6:.1f} MB gzip")
    what = f"{path.name} (built before)" if args.file is not None else f"{src.name} x{args.copies}"
    counts = f"{info['events']:,} events, {info['kernels']:,} kernels, " if info["events"] else ""
    print(f"trace: {what} -> {counts}{mb:.1f} MB plain JSON; {os.cpu_count()} CPUs; {_load()}")
    try:
        if args.baseline:
            _against_baseline(path, args)
        elif args.whole_process:
            _whole_process(path, mb, args)
        else:
            _in_process(path, mb, info["bytes"], args)
        print(f"median of {args.repeat} runs each, fresh process per run, alternating; {_load()}", flush=True)
    finally:
        if args.keep:
            print(f"kept: {path}")
        elif tmp is not None:
            path.unlink()
            tmp.rmdir()


def _in_process(path: Path, mb: float, raw: int, args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, Any]]] = {"orjson": [], "attnprof": []}
    failed = None  # orjson's error where it cannot parse the file (2.4 GB on a 24 GB machine)
    for _ in range(args.repeat):  # alternate, so that machine noise hits both alike
        for mode in runs:
            if mode == "orjson" and failed is not None:
                continue
            try:
                runs[mode].append(child(mode, path))
            except SystemExit as exc:
                if mode != "orjson":
                    raise
                failed = str(exc).strip().splitlines()[-1]
    t_an, c_an = _med(runs["attnprof"], "seconds"), _med(runs["attnprof"], "cpu")
    m_an = _med(runs["attnprof"], "peak_rss_growth_bytes")
    m_ch = _med(runs["attnprof"], "child_rss_growth_bytes")
    m_all = _med(runs["attnprof"], "combined_growth_bytes")
    if failed is not None:
        print(f"orjson.loads (parse only):    failed: {failed}")
        print(
            f"attnprof analyze (all of it): {t_an:6.3f} s wall {c_an:6.3f} s CPU {mb / t_an:6.0f} MB/s  "
            f"peak RSS +{m_an / 1e6:5.0f} MB; both processes together at their joint peak "
            f"+{m_all / 1e6:.0f} MB ({m_all / raw:.3f}x raw); no ratio: the baseline did not run"
        )
        return
    t_or, c_or = _med(runs["orjson"], "seconds"), _med(runs["orjson"], "cpu")
    m_or = _med(runs["orjson"], "peak_rss_growth_bytes")
    print(
        f"orjson.loads (parse only):    {t_or:6.3f} s wall {c_or:6.3f} s CPU {mb / t_or:6.0f} MB/s  "
        f"peak RSS +{m_or / 1e6:5.0f} MB ({m_or / raw:.2f}x raw)"
    )
    print(
        f"attnprof analyze (all of it): {t_an:6.3f} s wall {c_an:6.3f} s CPU {mb / t_an:6.0f} MB/s  "
        f"peak RSS +{m_an / 1e6:5.0f} MB ({m_an / raw:.2f}x raw), forked decoder +{m_ch / 1e6:.0f} MB at "
        f"its own peak; both processes together at their joint peak +{m_all / 1e6:.0f} MB "
        f"({m_all / raw:.2f}x raw; the two peaks added: {(m_an + m_ch) / raw:.2f}x)"
    )
    print(
        f"ratio analyze / orjson.loads: {t_an / t_or:.2f}x wall, {c_an / c_or:.2f}x CPU (target <= 0.5x, "
        f"issue 22); {mb / t_an:.0f} MB/s; peak memory {m_all / raw:.2f}x raw JSON, both processes "
        f"together (target <= 0.3x at 1.2 GB, issue 22)"
    )
    if args.hta_path:
        h = child("hta", path, args.hta_path)
        print(
            f"HTA parse_traces (load only): {h['seconds']:6.3f} s  {mb / h['seconds']:6.0f} MB/s  peak RSS "
            f"+{h['peak_rss_growth_bytes'] / 1e6:5.0f} MB; attnprof analyze is {h['seconds'] / t_an:.1f}x "
            "faster (one HTA run)"
        )


def _whole_process(path: Path, mb: float, args: argparse.Namespace) -> None:
    py = sys.executable
    # An installed attnprof has its bytecode compiled; a checkout run with PYTHONDONTWRITEBYTECODE
    # (as on the shared machine) would compile every module from source on every call instead.
    import compileall

    import attnprof

    compileall.compile_dir(str(Path(attnprof.__file__).parent), quiet=1)
    cmds = {
        "orjson": [py, "-c", _ORJSON_ONLY, str(path)],
        "attnprof": [py, "-m", "attnprof", "analyze", "--json", str(path)],
    }
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in cmds}
    for _ in range(args.repeat):
        for k, cmd in cmds.items():
            runs[k].append(whole(cmd))
    w_or, w_an = _med(runs["orjson"], "wall"), _med(runs["attnprof"], "wall")
    c_or, c_an = _med(runs["orjson"], "cpu"), _med(runs["attnprof"], "cpu")
    print(f"process that only reads + orjson.loads:  {w_or:6.3f} s wall {c_or:6.3f} s CPU")
    print(f"attnprof analyze --json (whole process): {w_an:6.3f} s wall {c_an:6.3f} s CPU")
    print(f"ratio: {w_an / w_or:.2f}x wall, {c_an / c_or:.2f}x CPU (target <= 0.75x)")
    if args.hta_path:
        h = [whole([py, "-c", _HTA_ONLY, str(path)], args.hta_path) for _ in range(max(1, args.repeat // 2))]
        w_h, c_h = _med(h, "wall"), _med(h, "cpu")
        print(
            f"HTA load (whole process, {len(h)} run(s)):  {w_h:6.3f} s wall {c_h:6.3f} s CPU; attnprof analyze "
            f"is {w_h / w_an:.1f}x faster by wall, {c_h / c_an:.1f}x by CPU (target >= 10x)"
        )
    small = next(iter(sorted(TRACES.glob(f"{SMALL}*.json.gz"))))
    # the floor for a tiny trace: the imports of the libraries the command is built on
    floor = [whole([py, "-c", "import numpy, msgspec, typer, orjson"]) for _ in range(5)]
    text = [whole([py, "-m", "attnprof", "analyze", str(small)]) for _ in range(5)]
    as_json = [whole([py, "-m", "attnprof", "analyze", "--json", str(small)]) for _ in range(5)]
    f = min(r["wall"] for r in floor)
    t, j = min(r["wall"] for r in text), min(r["wall"] for r in as_json)
    print(
        f"small trace ({small.name[:40]}...), best of 5: attnprof analyze {t:.3f} s wall, --json {j:.3f} s; "
        f"`import numpy, msgspec, typer, orjson` alone {f:.3f} s: +{t - f:.3f} s and +{j - f:.3f} s "
        "(target: within 0.15 s)"
    )


def _export(ref: str, into: Path) -> Path:
    """REF's src/ unpacked into `into` (git archive: the checkout's worktree is left alone), with
    its bytecode compiled, as an installed package's is."""
    import compileall

    repo = Path(__file__).resolve().parents[1]
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"], capture_output=True, text=True
    )
    if sha.returncode != 0:
        raise SystemExit(f"--baseline {ref}: not a commit of {repo} (give a hash, tag or branch)")
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", sha.stdout.strip(), "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    compileall.compile_dir(str(into / "src"), quiet=1)
    return into / "src"


def _against_baseline(path: Path, args: argparse.Namespace) -> None:
    import compileall

    here = Path(__file__).resolve().parents[1] / "src"
    compileall.compile_dir(str(here), quiet=1)
    stage_child = str(Path(__file__).with_name("stage_child.py"))
    with tempfile.TemporaryDirectory(prefix="bench_baseline_") as tmp:
        ref_src = _export(args.baseline, Path(tmp))
        sides = {"this checkout": str(here), f"baseline {args.baseline}": str(ref_src)}
        stages: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
        procs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
        cmd = [sys.executable, "-m", "attnprof", "analyze", "--json", str(path)]
        for _ in range(args.repeat):  # alternating, so that the machine's noise hits both alike
            for side, pp in sides.items():
                procs[side].append(whole(cmd, pp))
                out = subprocess.run(
                    [sys.executable, stage_child, str(path)], capture_output=True, text=True, env=_env(pp)
                )
                if out.returncode != 0:
                    raise SystemExit(f"{side}: stage run failed:\n{out.stderr[-2000:]}")
                stages[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    mine, base = sides
    w_m, w_b = _med(procs[mine], "wall"), _med(procs[base], "wall")
    c_m, c_b = _med(procs[mine], "cpu"), _med(procs[base], "cpu")
    print(f"whole process, `attnprof analyze --json` ({args.repeat} runs each, medians):")
    print(f"  {mine}: {w_m:.3f} s wall {c_m:.3f} s CPU; {base}: {w_b:.3f} s wall {c_b:.3f} s CPU")
    print(f"  ratio this / baseline: {w_m / w_b:.2f}x wall, {c_m / c_b:.2f}x CPU")
    print("per stage, in process (imports excluded), medians:")
    print(f"  {'stage':<12} {'this s':>8} {'baseline s':>10} {'ratio':>7}")
    names = list(stages[mine][0]["stages"])
    for name in [*names, "total"]:

        def med(side: str, name: str = name) -> float:
            rows = stages[side]
            return float(
                statistics.median(r["total"] if name == "total" else r["stages"].get(name, 0.0) for r in rows)
            )

        m, b = med(mine), med(base)
        ratio = f"{m / b:6.2f}x" if b > 0.0005 else "   -   "
        print(f"  {name:<12} {m:8.3f} {b:10.3f} {ratio}")
    print("  (a stage at 0 on one side: the functions it is timed by are named differently there)")


if __name__ == "__main__":
    main()
