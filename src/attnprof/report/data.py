"""What a report shows, gathered once: the records every renderer (Markdown, HTML) reads.

Building it is the only step that calls the library (compare, expectations); the renderers after
it only format. A report directory is one run directory, or a folder holding several (one per
shape, say), which adds scaling curves. A trace file alone (any torch.profiler trace, made
anywhere) gives a report of what its analysis shows: no run record, so no clean timing, accuracy
or environment beyond what the trace names; this needs neither torch nor a run directory.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from attnprof.compare.compare import Comparison, compare, load_sources
from attnprof.compare.expect import (
    ExpectationResult,
    builtin_for_device,
    check_comparison,
    load_expectations,
)
from attnprof.errors import UserError
from attnprof.records import RunRecord

__all__ = ["REPORT_SCHEMA", "ReportData", "ScalingPoint", "build_report_data", "find_run_dirs"]

REPORT_SCHEMA = "attnprof.report/1"
_SHAPE_AXES = ("seq", "batch", "heads", "head_dim")


class ScalingPoint(msgspec.Struct, kw_only=True):
    variant: str
    batch: int
    heads: int
    seq: int
    head_dim: int
    dtype: str
    median_ms: float


class ReportData(msgspec.Struct, kw_only=True):
    schema: str = REPORT_SCHEMA
    run_dirs: list[str] = []
    trace_files: list[str] = []  # a report of trace files alone (no run directory)
    # the first run: its environment and workload head the report; None for trace files alone
    record: RunRecord | None = None
    comparison: Comparison
    expectations: list[ExpectationResult] = []
    expectation_file: str | None = None
    scaling: list[ScalingPoint] = []
    scaling_axis: str | None = None
    version: str = ""


def find_run_dirs(path: str | Path) -> list[Path]:
    """The run directory itself, or the run directories directly inside a folder."""
    p = Path(path)
    if (p / "run.json").is_file():
        return [p]
    if not p.is_dir():
        raise UserError(f"{p}: no such run directory")
    found = sorted(d for d in p.iterdir() if (d / "run.json").is_file())
    if not found:
        raise UserError(
            f"{p}: no run.json here or in its subfolders; give a directory made by `attnprof run --out DIR`"
        )
    return found


def _scaling(records: list[RunRecord]) -> tuple[list[ScalingPoint], str | None]:
    shapes = {(r.workload.batch, r.workload.heads, r.workload.seq, r.workload.head_dim) for r in records}
    if len(shapes) < 2:
        return [], None
    # the axis is the shape field that takes the most values across the runs
    axis = max(_SHAPE_AXES, key=lambda a: len({getattr(r.workload, a) for r in records}))
    points = [
        ScalingPoint(
            variant=res.label,
            batch=rec.workload.batch,
            heads=rec.workload.heads,
            seq=rec.workload.seq,
            head_dim=rec.workload.head_dim,
            dtype=rec.workload.dtype,
            median_ms=res.timing.median_ms,
        )
        for rec in records
        for res in rec.results
        if res.status == "ok" and res.timing is not None and not res.incorrect
    ]
    return points, axis


def build_report_data(
    run_dir: str | Path,
    *,
    expect: str | Path | None = "auto",
    baseline: str | None = None,
) -> ReportData:
    """Compare every variant of the run(s), check expectations ("auto": the built-in file for
    the run's device; None: none) and collect scaling points when several shapes are present."""
    from attnprof._version import __version__

    if Path(run_dir).is_file() and Path(run_dir).name != "run.json":  # compare() checks it is a trace
        return _trace_report_data(Path(run_dir), expect=expect, baseline=baseline, version=__version__)
    dirs = find_run_dirs(run_dir)
    # each run.json decoded once, into the run context compare and the views below share
    sources = load_sources(dirs)
    records = [src.context.record for src in sources if src.context is not None]
    # a folder of several shapes: each workload against its own baseline, never across them
    comp = compare(sources, baseline=baseline, diff=True, group_workloads=True)
    results: list[ExpectationResult] = []
    exp_file: str | None = None
    if expect == "auto" and records[0].model is not None:
        expect = None  # the built-in expectations describe one attention call, not a model step
    if expect is not None:
        name = builtin_for_device(records[0].workload.device) if expect == "auto" else expect
        spec = load_expectations(name)
        results = check_comparison(comp, spec)
        exp_file = name if isinstance(name, str) and not Path(name).is_file() else Path(spec.path).name
    points, axis = _scaling(records)
    return ReportData(
        run_dirs=[str(d) for d in dirs],
        record=records[0],
        comparison=comp,
        expectations=results,
        expectation_file=exp_file,
        scaling=points,
        scaling_axis=axis,
        version=__version__,
    )


def _trace_report_data(
    trace: Path, *, expect: str | Path | None, baseline: str | None, version: str
) -> ReportData:
    """A trace file alone: its analysis as a comparison row. The built-in expectations describe
    a run's variants on a device, so "auto" checks none; a named file is checked as given."""
    comp = compare([trace], baseline=baseline, diff=False)
    results: list[ExpectationResult] = []
    exp_file: str | None = None
    if expect is not None and expect != "auto":
        spec = load_expectations(expect)
        results = check_comparison(comp, spec)
        exp_file = expect if isinstance(expect, str) and not Path(expect).is_file() else Path(spec.path).name
    return ReportData(
        trace_files=[str(trace)],
        comparison=comp,
        expectations=results,
        expectation_file=exp_file,
        version=version,
    )
