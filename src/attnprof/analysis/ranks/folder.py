"""Trace folders and the cross-rank view: one trace per rank, side by side.

torch.profiler's tensorboard_trace_handler writes `<worker>.<timestamp>.pt.trace.json[.gz]`, one
file per rank (and per profiling cycle) in a folder, often one sub-folder per run. find_runs()
groups the traces by folder; analyze_folder() analyses every trace in parallel processes (each
worker loads, analyses and measures its trace, and sends back only the results) and puts the
ranks of each run side by side:

- per rank: profiler steps and the mean step time (ProfilerStep#N annotations, CPU side), the
  device's active window (first GPU op start to last GPU op end), busy time (the union of GPU op
  intervals, so that overlapping streams count once) and idle time (window - busy), and the
  communication and attention shares of GPU op time (sum of kernel, memcpy and memset durations),
  and the exposed communication (the communication no compute kernel hides, a union);
- the slowest rank and by how much: by mean step time when every rank has steps, else by the
  device's active window (the basis is named);
- per kernel family (attnprof.analysis.attribution.classify), the time on each rank and its spread
  ((max - min) / mean), which is where a straggler's extra time went.

Several files for one rank (several profiling cycles) are added up for that rank. A rank is the
trace's distributedInfo.rank, else a number in the worker name (rank-3, rank_3, rank3), else the
worker name itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from attnprof.analysis.attribution.rank_names import rank_in_name
from attnprof.analysis.ranks.collectives import CollectiveView, RankCollectives, cross_rank_collectives
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.errors import UserError
from attnprof.trace.model import unique

if TYPE_CHECKING:
    from attnprof.trace.model import Trace
    from attnprof.workload import Workload

__all__ = [
    "SCHEMA",
    "CrossRank",
    "FamilySpread",
    "FolderProgress",
    "FolderRun",
    "RankStats",
    "Slowest",
    "analyze_folder",
    "cross_rank",
    "find_runs",
    "note_key",
    "rank_stats",
    "summarize",
]

SCHEMA = "attnprof.folder/1"
_TB_NAME = re.compile(r"^(?P<worker>.+)\.(?P<stamp>\d+)\.pt\.trace\.json(?:\.gz)?$")
_STEP = re.compile(r"ProfilerStep#\d+")
_FAMILIES_KEPT = 30  # families listed in the JSON, by total time; the terminal shows fewer


class RankStats(msgspec.Struct, kw_only=True):
    """What one trace (or several files of one rank, added up) says about its rank."""

    rank: str  # distributedInfo.rank, a number from the worker name, or the worker name
    files: list[str]
    steps: int = 0
    step_time_us: float | None = None  # mean ProfilerStep#N duration; None without steps
    window_us: float = 0.0  # first GPU op start to last GPU op end (summed over files)
    busy_us: float = 0.0  # union of GPU op intervals
    idle_us: float = 0.0
    gpu_time_us: float = 0.0  # sum of GPU op durations (streams may overlap)
    comm_time_us: float = 0.0
    attention_time_us: float = 0.0
    comm_pct: float | None = None  # of gpu_time_us; None without GPU ops
    # the union of communication kernels, and of it the time no compute kernel runs beside
    # (attnprof.analysis.timeline.overlap); 0 without communication
    comm_union_us: float = 0.0
    comm_exposed_us: float = 0.0
    attention_pct: float | None = None
    families: dict[str, float] = msgspec.field(default_factory=dict)  # kernel family -> time_us


class Slowest(msgspec.Struct, kw_only=True):
    basis: str  # "step_time" or "gpu_window"
    rank: str
    value_us: float
    median_us: float
    fastest_rank: str
    fastest_us: float
    pct_over_median: float
    pct_over_fastest: float


class FamilySpread(msgspec.Struct, kw_only=True):
    family: str
    total_us: float
    per_rank_us: dict[str, float]
    min_us: float
    max_us: float
    max_rank: str
    spread_pct: float  # (max - min) / mean across ranks


class CrossRank(msgspec.Struct, kw_only=True):
    ranks: list[RankStats]
    slowest: Slowest | None  # None with fewer than two ranks or no GPU ops and no steps
    families: list[FamilySpread]
    note: str | None = None
    # communication kernels aligned across ranks (attnprof.analysis.ranks.collectives); None with fewer
    # than two ranks that have any
    collectives: CollectiveView | None = None


class FolderRun(msgspec.Struct, kw_only=True):
    """One folder of traces: every trace's analysis, and the ranks side by side."""

    folder: str
    traces: list[TraceAnalysis]  # per trace, in file order
    cross_rank: CrossRank

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


# -- finding the traces ---------------------------------------------------------------------------


def _is_trace_name(name: str) -> bool:
    return name.endswith((".json", ".json.gz"))


def find_runs(folder: Path) -> dict[Path, list[Path]]:
    """Trace files under folder, grouped by the folder that holds them (one run each), sorted.

    tensorboard_trace_handler's `*.pt.trace.json[.gz]` when there are any, else every
    `*.json[.gz]` (traces renamed by hand, as in many shared rank folders).
    """
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder")
    files = sorted(p for p in folder.rglob("*") if _is_trace_name(p.name) and p.is_file())
    tb = [p for p in files if _TB_NAME.match(p.name)]
    chosen = tb or files
    if not chosen:
        raise UserError(
            f"{folder}: no trace files (*.pt.trace.json[.gz] or *.json[.gz]) in it or its sub-folders"
        )
    runs: dict[Path, list[Path]] = {}
    for p in chosen:
        runs.setdefault(p.parent, []).append(p)
    for where in runs:
        # an attnprof run keeps one trace per variant (and a lean twin of each) in traces/: put
        # side by side as ranks, a variant would be called a straggler
        run_dir = where if (where / "run.json").is_file() else where.parent
        if (run_dir / "run.json").is_file():
            raise UserError(
                f"{where}: the traces of an attnprof run (one per variant, not one per rank): compare "
                f"them with `attnprof compare {run_dir}`, or analyze the files themselves "
                f"(`attnprof analyze {where}/*.json.gz`)"
            )
    return runs


def _worker(name: str) -> str:
    m = _TB_NAME.match(name)
    if m:
        return m.group("worker")
    return name.removesuffix(".gz").removesuffix(".json")


def _rank_of(trace: Trace, path: Path) -> str:
    info = trace.metadata.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and not isinstance(info["rank"], bool):
        return str(info["rank"])
    worker = _worker(path.name)
    return rank_in_name(worker) or worker


# -- one rank ---------------------------------------------------------------------------------------


def _union_us(start: Any, end: Any) -> float:
    """Length of the union of intervals [start, end), vectorised."""
    import numpy as np

    if start.size == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    seg_end = np.maximum.reduceat(e, first)
    return float((seg_end - s[first]).sum())


def rank_stats(trace: Trace, path: Path) -> RankStats:
    """One trace's rank figures (see the module doc), from its columns."""
    import numpy as np

    from attnprof.analysis.attribution.classify import classify
    from attnprof.analysis.timeline.intervals import union
    from attnprof.analysis.timeline.overlap import NOT_COMPUTE, comm_overlap
    from attnprof.trace.model import GPU_KINDS, Kind

    gpu = np.flatnonzero(np.isin(trace.kind, [int(k) for k in GPU_KINDS]))
    ts, dur = trace.ts[gpu], trace.dur[gpu]
    end = ts + dur
    window = float(end.max() - ts.min()) if gpu.size else 0.0
    busy = _union_us(ts, end)
    gpu_time = float(dur.sum())

    kern = gpu[trace.kind[gpu] == Kind.KERNEL]
    uniq, inv = np.unique(trace.name[kern], return_inverse=True)
    times = np.bincount(inv.reshape(-1), weights=trace.dur[kern], minlength=uniq.size)
    families: dict[str, float] = {}
    comm = attention = 0.0
    for name_id, t in zip(uniq.tolist(), times.tolist(), strict=True):
        c = classify(trace.names[name_id])
        families[c.family] = families.get(c.family, 0.0) + t
        if c.category == "communication":
            comm += t
        elif c.category == "attention":
            attention += t

    # what compute hides of the communication (attnprof.analysis.timeline.overlap): per kernel name, its
    # category; memcpy and memset are neither
    cat_of = {int(n): classify(trace.names[int(n)]).category for n in uniq.tolist()}
    k_cat = np.array([cat_of[int(n)] for n in trace.name[kern].tolist()], dtype=object)
    k_ts, k_end = trace.ts[kern], trace.ts[kern] + trace.dur[kern]
    is_comm = k_cat == "communication"
    work = ~np.isin(k_cat, NOT_COMPUTE)
    ov = comm_overlap(k_ts[is_comm], k_end[is_comm], union(k_ts[work], k_end[work]))

    steps_ids = [i for i, n in enumerate(trace.names) if _STEP.fullmatch(n)]
    step_rows = np.flatnonzero(
        np.isin(trace.name, steps_ids) & np.isin(trace.kind, [int(Kind.ANNOTATION), int(Kind.CPU_OP)])
    )
    steps = int(step_rows.size)
    return RankStats(
        rank=_rank_of(trace, path),
        files=[str(path)],
        steps=steps,
        step_time_us=float(trace.dur[step_rows].mean()) if steps else None,
        window_us=window,
        busy_us=busy,
        idle_us=max(window - busy, 0.0),
        gpu_time_us=gpu_time,
        comm_time_us=comm,
        attention_time_us=attention,
        comm_union_us=ov.comm_us,
        comm_exposed_us=ov.exposed_us,
        families=families,
    )


def rank_collectives(trace: Trace, rank: str) -> RankCollectives:
    """The trace's communication kernels (by kernel name, attnprof.analysis.attribution.classify), in order."""
    import numpy as np

    from attnprof.analysis.attribution.classify import classify
    from attnprof.analysis.ranks.collectives import collective_ops
    from attnprof.trace.model import Kind

    kern = np.flatnonzero(trace.kind == Kind.KERNEL)
    ids = unique(trace.name[kern])
    comm_ids = [int(i) for i in ids.tolist() if classify(trace.names[int(i)]).category == "communication"]
    rows = kern[np.isin(trace.name[kern], comm_ids)] if comm_ids else kern[:0]
    return collective_ops(trace, rank, rows.tolist())


def _merge(parts: list[RankStats]) -> RankStats:
    """Several files of one rank added up; shares computed on the sums."""
    steps = sum(p.steps for p in parts)
    step_total = sum(p.step_time_us * p.steps for p in parts if p.step_time_us is not None)
    fam: dict[str, float] = {}
    for p in parts:
        for k, v in p.families.items():
            fam[k] = fam.get(k, 0.0) + v
    gpu_time = sum(p.gpu_time_us for p in parts)
    comm = sum(p.comm_time_us for p in parts)
    attention = sum(p.attention_time_us for p in parts)
    return RankStats(
        rank=parts[0].rank,
        files=[f for p in parts for f in p.files],
        steps=steps,
        step_time_us=round(step_total / steps, 3) if steps else None,
        window_us=round(sum(p.window_us for p in parts), 3),
        busy_us=round(sum(p.busy_us for p in parts), 3),
        idle_us=round(sum(p.idle_us for p in parts), 3),
        gpu_time_us=round(gpu_time, 3),
        comm_time_us=round(comm, 3),
        attention_time_us=round(attention, 3),
        comm_pct=round(100.0 * comm / gpu_time, 2) if gpu_time > 0 else None,
        comm_union_us=round(sum(p.comm_union_us for p in parts), 3),
        comm_exposed_us=round(sum(p.comm_exposed_us for p in parts), 3),
        attention_pct=round(100.0 * attention / gpu_time, 2) if gpu_time > 0 else None,
        families={k: round(v, 3) for k, v in fam.items()},
    )


# -- ranks side by side ---------------------------------------------------------------------------


def _rank_key(rank: str) -> tuple[int, int | str]:
    return (0, int(rank)) if rank.isdigit() else (1, rank)


def cross_rank(stats: Sequence[RankStats], collectives: Sequence[RankCollectives] = ()) -> CrossRank:
    """The ranks of one run side by side: slowest rank, kernel-family spread, collectives."""
    import statistics

    by_rank: dict[str, list[RankStats]] = {}
    for s in stats:
        by_rank.setdefault(s.rank, []).append(s)
    ranks = [_merge(by_rank[r]) for r in sorted(by_rank, key=_rank_key)]
    if len(ranks) < 2:
        return _noted(CrossRank(ranks=ranks, slowest=None, families=[]))

    if all(r.step_time_us is not None for r in ranks):
        basis, values = "step_time", {r.rank: float(r.step_time_us or 0.0) for r in ranks}
    elif all(r.window_us > 0 for r in ranks):
        basis, values = "gpu_window", {r.rank: r.window_us for r in ranks}
    else:
        basis, values = "", {}
    slowest = None
    if values:
        worst = max(values, key=lambda r: values[r])
        best = min(values, key=lambda r: values[r])
        med = statistics.median(values.values())
        slowest = Slowest(
            basis=basis,
            rank=worst,
            value_us=round(values[worst], 3),
            median_us=round(med, 3),
            fastest_rank=best,
            fastest_us=round(values[best], 3),
            pct_over_median=round(100.0 * (values[worst] / med - 1.0), 2) if med > 0 else 0.0,
            pct_over_fastest=round(100.0 * (values[worst] / values[best] - 1.0), 2)
            if values[best] > 0
            else 0.0,
        )

    totals: dict[str, float] = {}
    for r in ranks:
        for fam, t in r.families.items():
            totals[fam] = totals.get(fam, 0.0) + t
    families = []
    for fam in sorted(totals, key=lambda f: -totals[f])[:_FAMILIES_KEPT]:
        per = {r.rank: r.families.get(fam, 0.0) for r in ranks}
        lo, hi = min(per.values()), max(per.values())
        mean = totals[fam] / len(ranks)
        families.append(
            FamilySpread(
                family=fam,
                total_us=round(totals[fam], 3),
                per_rank_us=per,
                min_us=lo,
                max_us=hi,
                max_rank=max(per, key=lambda r: per[r]),
                spread_pct=round(100.0 * (hi - lo) / mean, 2) if mean > 0 else 0.0,
            )
        )
    colls = cross_rank_collectives(collectives, [r.rank for r in ranks]) if collectives else None
    return _noted(CrossRank(ranks=ranks, slowest=slowest, families=families, collectives=colls))


def note_key(view: CrossRank) -> str | None:
    """The catalog message (report/i18n, ranks.note.*) that says what the view cannot compare:
    `note` holds its English; a view in another language says it from the same message."""
    if len(view.ranks) < 2:
        return "ranks.note.one_rank"
    if view.slowest is None:
        return "ranks.note.unknown"
    if view.slowest.basis == "gpu_window":
        return "ranks.note.gpu_window"
    return None


def _noted(view: CrossRank) -> CrossRank:
    from attnprof.catalogs import english

    key = note_key(view)
    view.note = english(key) if key is not None else None
    return view


# -- the folder, in parallel ----------------------------------------------------------------------

# what one trace leaves: its analysis, its rank figures, its collectives. Workers send it back as
# msgpack bytes (one encode, none of pickle's per-object work, a fraction of its size), which are
# also the summary the cache keeps (attnprof.analysis.ranks.rank_cache)
Summary = tuple[TraceAnalysis, RankStats, RankCollectives]
_DECODE = msgspec.msgpack.Decoder(Summary)


class FolderProgress(Protocol):
    """What analyze_folder reports as it goes (report/folder_progress.py draws it)."""

    def start(self, *, traces: int, cached: int, executor: str, workers: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def reducing(self) -> None: ...


def summarize(
    path: Path,
    region: str | None,
    workload: Workload | None,
    top: int,
    max_memory: float | None,
    parallel: bool | None = None,
) -> bytes:
    """One trace loaded, analysed and summarised (its Summary, msgpack-encoded)."""
    from attnprof.analysis.pipeline import analyze_trace
    from attnprof.trace.limits import MAX_MEMORY
    from attnprof.trace.load import load_trace

    trace = load_trace(path, max_memory=MAX_MEMORY if max_memory is None else max_memory, parallel=parallel)
    analysis = analyze_trace(trace, path=str(path), region=region, workload=workload, top=top)
    stats = rank_stats(trace, path)
    colls = rank_collectives(trace, stats.rank)
    return msgspec.msgpack.encode((analysis, stats, colls))


def summarize_batch(paths: Sequence[Path], *args: Any) -> list[bytes]:
    """Several traces one after the other (a Ray task's share: fewer, longer tasks)."""
    return [summarize(p, *args) for p in paths]


def analyze_folder(
    folder: str | os.PathLike[str],
    *,
    region: str | None = None,
    workload: Workload | None = None,
    top: int = 20,
    workers: int | None = None,
    max_memory: float | None = None,
    cache: bool = True,
    executor: str = "local",
    ray_address: str | None = None,
    progress: FolderProgress | None = None,
) -> list[FolderRun]:
    """Every trace under folder analysed (in parallel processes), grouped into runs by sub-folder.

    cache: reuse (and write) each trace's summary where its file, the options and the code are
    unchanged (attnprof.analysis.ranks.rank_cache; $ATTNPROF_CACHE=off turns it off everywhere). The
    summaries are read here, before any worker starts: a folder whose traces all have one starts
    no pool and no Ray.
    executor: "local" (a process pool here) or "ray" (Ray tasks of a few traces each,
    attnprof.analysis.ranks.ray_folder: a local instance on 127.0.0.1, or the cluster at ray_address).
    progress: told how many traces there are, as each is done, and when the ranks are reduced.

    Each worker process holds one trace at a time, so with the default workers (the CPU count)
    the memory limit applies to each of them against what is available when it starts.
    """
    from attnprof.analysis.ranks import rank_cache

    if executor not in ("local", "ray"):
        raise UserError(f"--executor {executor!r}: use 'local' or 'ray'")
    root = Path(folder)
    runs = find_runs(root)
    paths = [p for files in runs.values() for p in files]
    keys = {
        p: rank_cache.summary_key(p, region=region, top=top, workload=workload) if cache else None
        for p in paths
    }
    results: dict[Path, Summary] = {}
    for p, key in keys.items():
        if key is not None and (kept := rank_cache.load(key, Summary)) is not None:
            results[p] = kept
    todo = [p for p in paths if p not in results]
    n = min(len(todo), workers or os.cpu_count() or 1)
    if progress is not None:
        progress.start(traces=len(paths), cached=len(results), executor=executor, workers=max(n, 1))

    def take(p: Path, data: bytes) -> None:
        results[p] = _DECODE.decode(data)
        key = keys[p]
        if key is not None:
            rank_cache.store_bytes(key, data)

    args = (region, workload, top, max_memory)
    if not todo:
        pass
    elif executor == "ray":
        from attnprof.analysis.ranks.ray_folder import ray_map

        for batch, out in ray_map(summarize_batch, todo, (*args, False), ray_address):
            for p, data in zip(batch, out, strict=True):
                take(p, data)
            if progress is not None:
                progress.advance(len(batch))
    elif n <= 1:
        for p in todo:
            take(p, summarize(p, *args))
            if progress is not None:
                progress.advance(1)
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=n) as pool:
            # one trace per CPU already: no second decoding process inside each worker
            futures = {pool.submit(summarize, p, *args, False): p for p in todo}
            try:
                for f in as_completed(futures):
                    take(futures[f], f.result())
                    if progress is not None:
                        progress.advance(1)
            except BaseException:
                pool.shutdown(cancel_futures=True)  # a bad trace ends it: the rest are not awaited
                raise
    if progress is not None:
        progress.reducing()
    out = []
    for run_dir, files in runs.items():
        out.append(
            FolderRun(
                folder=str(run_dir),
                traces=[results[p][0] for p in files],
                cross_rank=cross_rank([results[p][1] for p in files], [results[p][2] for p in files]),
            )
        )
    return out
