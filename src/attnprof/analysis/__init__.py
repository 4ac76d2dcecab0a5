"""attnprof.analysis: read any PyTorch profiler trace and say what it shows.

Public API (stable; compare/report code relies on it):

    analyze(path, *, region=None, workload=None, top=20, max_memory=None, context=None,
            capture=None)                                          -> TraceAnalysis
                              capture: a graph capture trace (vLLM / SGLang) whose captured CPU
                              ops the trace's graph replays are attributed to
                              (attnprof.analysis.replay.replay)
    analyze(list_of_paths, ...) -> list[TraceAnalysis]        (parallel processes)
    analyze_many(paths, *, region=None, workload=None, top=20, workers=None) -> list[TraceAnalysis]
    TraceAnalysis             a typed record (msgspec Structs, attnprof.analysis.records.result): .device,
                              .trace, .totals, .share, .kernels, .categories, .memory_ops,
                              .launch_apis, .regions, .roofline, .findings (list[Finding]: code,
                              severity, message, evidence), .codes, .finding(code), and DataFrame
                              accessors kernels_df(), categories_df(), regions_df(),
                              launch_apis_df(), findings_df()
    TraceAnalysis.to_dict()   the "attnprof.analysis/1" JSON contract (msgspec.to_builtins of the
                              record); decode_analysis(json) gives the record back

The workload for the roofline is the one given, else the run's (attnprof.run_context.RunContext:
the one passed, or <run>/run.json when the trace sits in <run>/traces/), else none (no roofline).
From the run also come the CPU peak and what the traced variant executes and materialises. This
package never imports torch, the harness or the variants: it works on traces from anywhere.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from attnprof.analysis.records.result import SCHEMA, Finding, TraceAnalysis, decode_analysis

if TYPE_CHECKING:
    from attnprof.run_context import RunContext
    from attnprof.workload import Workload

__all__ = [
    "CODES",
    "SCHEMA",
    "Finding",
    "TraceAnalysis",
    "analyze",
    "analyze_many",
    "decode_analysis",
]

PathLike = str | os.PathLike[str]


def __getattr__(name: str) -> Any:
    # CODES lives with the rules; importing them (numpy, the pipeline) waits until asked, so that
    # sibling modules (compare, expect) importing this package stay light
    if name == "CODES":
        from attnprof.analysis.findings.rules import CODES

        return CODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _one(
    path: PathLike,
    region: str | None,
    workload: Workload | None,
    top: int,
    max_memory: float | None = None,
    threads: str = "own",
    context: RunContext | None = None,
    capture: PathLike | None = None,
    peak: tuple[float, float] | None = None,
) -> TraceAnalysis:
    from attnprof.run_context import RunContext
    from attnprof.trace.load import MAX_MEMORY, load_trace

    ctx = context if context is not None else RunContext.beside_trace(path)
    # a model run's workload is one attention call inside each traced step: nothing from its
    # record describes the FLOPs of what the trace holds
    run = ctx if ctx is not None and not ctx.model_run else None
    facts = run.for_trace(path) if run is not None else None
    # what the variant materialises and executes describes the run's workload, not one given here
    own = workload is None and facts is not None

    def prepare(forked: bool) -> None:
        # the analysis modules (findings: the pipeline imports it when it runs), imported while
        # a forked process decodes part of a large trace; and then the name tables read ahead
        # (matching.prepare), which only pays off for the many names of a large trace
        for name in ("attnprof.analysis.pipeline", "attnprof.analysis.findings.rules"):
            importlib.import_module(name)
        if forked:
            from attnprof.analysis.attribution.matching import prepare as read_tables

            read_tables()

    limit = MAX_MEMORY if max_memory is None else max_memory
    trace = load_trace(path, max_memory=limit, meanwhile=prepare)
    if capture is not None:  # graph replays attributed to the ops that captured them
        from attnprof.analysis.replay.replay import attach

        trace = attach(trace, load_trace(capture, max_memory=limit), capture=Path(capture).name)
    from attnprof.analysis.pipeline import analyze_trace

    return analyze_trace(
        trace,
        path=str(path),
        region=region,
        workload=workload if workload is not None else run.workload if run is not None else None,
        top=top,
        cpu_peak=(run.peak.tflops, run.peak.source) if run is not None and run.peak is not None else None,
        materialises=facts.materialises if own and facts is not None else None,
        flops_executed=facts.flops_executed if own and facts is not None else None,
        block_sparsity=facts.block_sparsity if facts is not None else None,
        threads=threads,
        peak=peak,
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
    context: RunContext | None = ...,
    capture: PathLike | None = ...,
    peak: tuple[float, float] | None = ...,
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
    context: RunContext | None = ...,
    peak: tuple[float, float] | None = ...,
) -> list[TraceAnalysis]: ...
def analyze(
    path_or_paths: PathLike | Sequence[PathLike],
    *,
    region: str | None = None,
    workload: Workload | None = None,
    top: int = 20,
    max_memory: float | None = None,
    threads: str = "own",
    context: RunContext | None = None,
    capture: PathLike | None = None,
    peak: tuple[float, float] | None = None,
) -> TraceAnalysis | list[TraceAnalysis]:
    """Analyse one trace (returns a TraceAnalysis) or several (a list, analysed in parallel).

    Raises attnprof.errors.UserError for unreadable, empty, truncated or non-trace input, for a
    file too large for the memory available (max_memory: fraction of it a load may need; default
    attnprof.trace.load.MAX_MEMORY, 0 = no limit) and for a --region that matches nothing.
    threads: "own" (a region owns the device work its thread and the autograd threads launch) or
    "all" (also every other thread of the process while it is open; see attnprof.analysis.attribution.regions).
    context: the run the traces belong to (attnprof.run_context.RunContext), when the caller
    already decoded it; else it is read from <run>/run.json when a trace sits in <run>/traces/.
    capture: the graph capture trace of one execution trace (attnprof.analysis.replay.replay).
    peak: (TFLOP/s, TB/s) that replace the device table's roofs in the per-op model (--peak).
    """
    if isinstance(path_or_paths, str | os.PathLike):
        return _one(path_or_paths, region, workload, top, max_memory, threads, context, capture, peak)
    if capture is not None:
        from attnprof.errors import UserError

        raise UserError("--capture belongs to one execution trace: give one trace with it")
    return analyze_many(
        list(path_or_paths),
        region=region,
        workload=workload,
        top=top,
        max_memory=max_memory,
        threads=threads,
        context=context,
        peak=peak,
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
    context: RunContext | None = None,
    peak: tuple[float, float] | None = None,
) -> list[TraceAnalysis]:
    """Analyse several traces (one per rank, say) in parallel processes, results in input order.

    One process per trace up to the CPU count; a single trace is analysed in this process.
    """
    paths = list(paths)
    n = min(len(paths), workers or os.cpu_count() or 1)
    if n <= 1:
        return [_one(p, region, workload, top, max_memory, threads, context, None, peak) for p in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = [
            pool.submit(_one, p, region, workload, top, max_memory, threads, context, None, peak)
            for p in paths
        ]
        return [f.result() for f in futures]
