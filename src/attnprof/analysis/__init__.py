"""attnprof.analysis: read any PyTorch profiler trace and say what it shows.

Public API (stable; compare/report code relies on it):

    analyze(path, *, region=None, workload=None, top=20, max_memory=None) -> TraceAnalysis
    analyze(list_of_paths, ...) -> list[TraceAnalysis]        (parallel processes)
    analyze_many(paths, *, region=None, workload=None, top=20, workers=None) -> list[TraceAnalysis]
    TraceAnalysis             a typed record (msgspec Structs, attnprof.analysis.result): .device,
                              .trace, .totals, .share, .kernels, .categories, .memory_ops,
                              .launch_apis, .regions, .roofline, .findings (list[Finding]: code,
                              severity, message, evidence), .codes, .finding(code), and DataFrame
                              accessors kernels_df(), categories_df(), regions_df(),
                              launch_apis_df(), findings_df()
    TraceAnalysis.to_dict()   the "attnprof.analysis/1" JSON contract (msgspec.to_builtins of the
                              record); decode_analysis(json) gives the record back

The workload for the roofline is the one given, else the one in the run directory's run.json
when the trace sits in <run>/traces/, else none (no roofline). This package never imports torch,
the harness or the variants: it works on traces from anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from attnprof.analysis.result import SCHEMA, Finding, TraceAnalysis, decode_analysis

if TYPE_CHECKING:
    from attnprof.workload import Workload

__all__ = [
    "CODES",
    "SCHEMA",
    "Finding",
    "TraceAnalysis",
    "analyze",
    "analyze_many",
    "decode_analysis",
    "run_context",
]

PathLike = str | os.PathLike[str]


def __getattr__(name: str) -> Any:
    # CODES lives with the rules; importing them (numpy, the pipeline) waits until asked, so that
    # sibling modules (compare, expect) importing this package stay light
    if name == "CODES":
        from attnprof.analysis.findings import CODES

        return CODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_context(path: PathLike) -> tuple[Workload | None, tuple[float, str] | None, bool | None]:
    """Workload, CPU peak and 'materialises' from <run>/run.json when path is <run>/traces/<file>.

    Returns (None, None, None) when the trace is not in a run directory or run.json is unreadable
    (analysis of a bare trace must not fail because of a neighbouring file).
    """
    p = Path(path)
    run_json = p.parent.parent / "run.json"
    if p.parent.name != "traces" or not run_json.is_file():
        return None, None, None
    import msgspec

    from attnprof.records import decode_run
    from attnprof.workload import Workload

    try:
        data = run_json.read_bytes()
        record = decode_run(data)
        workload = Workload.from_record(record.workload)
    except (OSError, msgspec.MsgspecError, TypeError, ValueError):
        return None, None, None
    if record.model is not None:
        # an `attnprof model` run: its workload is one attention call inside each traced model
        # step, so it says nothing about the FLOPs of the step
        return None, None, None
    peak = _find_peak(msgspec.json.decode(data))
    materialises = None
    for res in record.results:
        if res.trace and Path(res.trace).name == p.name and res.flops_executed and res.flops_useful:
            materialises = res.flops_executed > res.flops_useful * 1.0001
    return workload, peak, materialises


def _find_peak(doc: Any) -> tuple[float, str] | None:
    """A CPU peak the harness measured: a numeric key naming "peak" and "tflop" anywhere in
    run.json (environment.peak_tflops today), with its peak_source beside it when given."""
    stack = [doc]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                if isinstance(v, int | float) and "peak" in k.lower() and "tflop" in k.lower() and v > 0:
                    source = cur.get("peak_source")
                    what = f"run.json {k}" + (
                        f" ({source})" if isinstance(source, str) else " (measured by the harness)"
                    )
                    return float(v), what
                if isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(cur, list):
            stack.extend(cur)
    return None


def _one(
    path: PathLike,
    region: str | None,
    workload: Workload | None,
    top: int,
    max_memory: float | None = None,
    threads: str = "own",
) -> TraceAnalysis:
    from attnprof.analysis.pipeline import analyze_trace
    from attnprof.trace.load import MAX_MEMORY, load_trace

    run_wl, peak, materialises = run_context(path)
    return analyze_trace(
        load_trace(path, max_memory=MAX_MEMORY if max_memory is None else max_memory),
        path=str(path),
        region=region,
        workload=workload if workload is not None else run_wl,
        top=top,
        cpu_peak=peak,
        materialises=materialises if workload is None else None,
        threads=threads,
    )


@overload
def analyze(
    path_or_paths: PathLike,
    *,
    region: str | None = ...,
    workload: Workload | None = ...,
    top: int = ...,
    max_memory: float | None = ...,
    threads: str = ...,
) -> TraceAnalysis: ...
@overload
def analyze(
    path_or_paths: list[PathLike] | tuple[PathLike, ...],
    *,
    region: str | None = ...,
    workload: Workload | None = ...,
    top: int = ...,
    max_memory: float | None = ...,
    threads: str = ...,
) -> list[TraceAnalysis]: ...
def analyze(
    path_or_paths: PathLike | Sequence[PathLike],
    *,
    region: str | None = None,
    workload: Workload | None = None,
    top: int = 20,
    max_memory: float | None = None,
    threads: str = "own",
) -> TraceAnalysis | list[TraceAnalysis]:
    """Analyse one trace (returns a TraceAnalysis) or several (a list, analysed in parallel).

    Raises attnprof.errors.UserError for unreadable, empty, truncated or non-trace input, for a
    file too large for the memory available (max_memory: fraction of it a load may need; default
    attnprof.trace.load.MAX_MEMORY, 0 = no limit) and for a --region that matches nothing.
    threads: "own" (a region owns the device work its thread and the autograd threads launch) or
    "all" (also every other thread of the process while it is open; see attnprof.analysis.regions).
    """
    if isinstance(path_or_paths, str | os.PathLike):
        return _one(path_or_paths, region, workload, top, max_memory, threads)
    return analyze_many(
        list(path_or_paths), region=region, workload=workload, top=top, max_memory=max_memory, threads=threads
    )


def analyze_many(
    paths: Sequence[PathLike],
    *,
    region: str | None = None,
    workload: Workload | None = None,
    top: int = 20,
    workers: int | None = None,
    max_memory: float | None = None,
    threads: str = "own",
) -> list[TraceAnalysis]:
    """Analyse several traces (one per rank, say) in parallel processes, results in input order.

    One process per trace up to the CPU count; a single trace is analysed in this process.
    """
    paths = list(paths)
    n = min(len(paths), workers or os.cpu_count() or 1)
    if n <= 1:
        return [_one(p, region, workload, top, max_memory, threads) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(_one, p, region, workload, top, max_memory, threads) for p in paths]
        return [f.result() for f in futures]
