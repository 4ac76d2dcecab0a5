"""Side-by-side comparison of variants and traces, and which pairs get a kernel-level diff (diff.py).

Inputs are run directories (every variant in their run.json) and trace files, mixed. Each becomes
one Row that joins what the harness measured (clean timing, memory, accuracy) with what the
trace analysis found (ops per forward, categories, families, occupancy, findings).

The analysis is consumed through its typed record (attnprof.analysis.result.TraceAnalysis, the
`attnprof.analysis/1` JSON contract's own types, DESIGN.md) and never the analyser's internals, so
either side can change its implementation freely. Every number in a Row states where it came from:

- median_ms / iqr_ms: the harness's clean timing (no profiler), median and interquartile range of
  its raw samples (one sample = one forward call); None for a bare trace, which has no clean timing.
- speedup: baseline median / this median (> 1 means faster than the baseline); speedup_low/high:
  its 95% bootstrap interval (analysis/stats.py), paired by round within one run. A tie when it
  holds 1.
- *_per_forward: trace-derived, per instance of the analysed region (attn_fwd in a run's traces;
  ProfilerStep or the whole trace for foreign traces). Profiler overhead is included in these times.
- ops, *_category_time_us, timeline, ops_time_us_per_forward, cause_shares: the times reports
  split into shares, from the trace `time_source` names. A run profiles each variant twice: the
  lean pass (no shapes, memory or stacks; the profiler stretches each op less) gives these when
  its trace was kept (RunResult.lean_trace), the rich pass otherwise (older run directories).
  _apply_times is the one place that reads them. Everything else (op counts per forward, memcpy,
  findings and their evidence, families, occupancy) comes from the rich pass's trace, which
  records shapes, dtypes and memory.
- tensor_core_share: tensor-core GEMM time / all GEMM time whose tensor-core use is known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from attnprof.analysis.classify import cpu_category
from attnprof.analysis.codes import code_info
from attnprof.analysis.perf_records import OpPerf, PerfModel
from attnprof.analysis.result import CpuOp, Finding, KernelStat, MemoryOp, RegionStat, TraceAnalysis
from attnprof.analysis.stats import ratio_interval
from attnprof.compare.diff import Diff, diff_rows
from attnprof.compare.rank import speed
from attnprof.errors import UserError
from attnprof.records import (
    ReasonCode,
    RunRecord,
    RunResult,
    TimingSummary,
    is_incorrect,
)
from attnprof.run_context import RunContext
from attnprof.workload import WorkloadId

__all__ = [
    "COMPARE_SCHEMA",
    "DEFAULT_BASELINE",
    "INCORRECT",
    "Comparison",
    "Row",
    "Source",
    "TimelineOp",
    "baseline_for",
    "compare",
    "diffs_for",
    "load_sources",
]

COMPARE_SCHEMA = "attnprof.compare/1"
# a Row's status when the variant ran but its output failed the accuracy check: it keeps its time
# and error, and gets no speed ratio, TFLOP/s, % of peak, baseline role or explanation
INCORRECT = "incorrect"
DEFAULT_BASELINE = "naive-inplace"
TRACE_SUFFIXES = (".json", ".json.gz")


class TimelineOp(msgspec.Struct, frozen=True):
    """One op of one forward, relative to the forward's first op."""

    name: str
    category: str
    start_us: float
    dur_us: float


class OpStat(msgspec.Struct, kw_only=True):
    """One kernel (GPU) or op name (CPU) per forward: what the diff compares."""

    name: str
    category: str
    family: str
    count: float
    time_us: float
    short: str = ""  # the analyser's shortened kernel name, for display


class Row(msgspec.Struct, kw_only=True):
    label: str
    kind: Literal["run", "trace"]
    source: str
    input: int = 0  # position of its run directory or trace among the inputs
    # its run's workload identity, WorkloadId.label (workload.py); None for a bare trace
    workload: str | None = None
    minor_faults_per_call: float | None = None  # page faults per call while timing (getrusage)
    lean_time_us_per_forward: float | None = None  # the lean profiler pass's (no shapes/memory)
    allocator: str | None = None  # the allocator state it was timed in
    cold_median_ms: float | None = None  # the same calls in the cold allocator state (CPU, glibc)
    cold_minor_faults_per_call: float | None = None
    variant: str | None = None
    mode: str | None = None
    status: str = "ok"
    reason: str | None = None
    reason_code: ReasonCode | None = None  # the result's: why it did not run, as data
    backend: str | None = None
    device: str | None = None
    device_name: str | None = None
    dtype: str | None = None
    shape: str | None = None
    # the workload beyond its shape (from run.json; None for a bare trace): expectations' `when`
    mask: str | None = None  # causal, none, sliding=W, ... (--mask)
    gqa: bool | None = None  # kv heads differ from query heads
    direction: str | None = None  # fwd, or fwd+bwd with --backward
    phase: str | None = None  # prefill or decode
    median_ms: float | None = None  # the forward's clean median (with --backward too)
    iqr_ms: float | None = None
    samples_ms: list[float] = []
    # --backward: the backward's clean median, and forward + backward timed as one call
    bwd_median_ms: float | None = None
    total_median_ms: float | None = None
    total_samples_ms: list[float] = []
    # the timing speedups and rankings read (compare/rank.py): forward, forward + backward
    # (--backward), step (a model run)
    ranked_by: Literal["forward", "forward + backward", "step"] = "forward"
    noisy: bool | None = None
    threads: int | None = None
    speedup: float | None = None  # the baseline's ranked median / this one's (compare/rank.py)
    # the speedup's 95% bootstrap interval (analysis/stats.py); a tie when it holds 1. Only with
    # rank.MIN_INTERVAL_SAMPLES samples a side: with fewer, speedup_claim is "too_few" and
    # speedup_range_low/high hold the range of the ratios instead
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_claim: str | None = None  # faster, slower, tie, too_few (rank.Speed.claim)
    speedup_range_low: float | None = None
    speedup_range_high: float | None = None
    paired_rounds: bool = False  # samples interleaved round by round with its run's other variants
    unreliable: bool = False  # the machine was busy while this row was timed (load_reasons says how)
    load_reasons: list[str] = []
    forwards: int | None = None
    gpu_time_us_per_forward: float | None = None
    cpu_time_us_per_forward: float | None = None
    gpu_ops_per_forward: float | None = None
    cpu_ops_per_forward: float | None = None
    memcpy_per_forward: float | None = None
    tensor_core_share: float | None = None
    families: list[str] = []
    fused_families: list[str] = []
    occupancy_kernel: str | None = None
    occupancy_achieved: float | None = None
    occupancy_theoretical: float | None = None
    occupancy_limiter: str | None = None
    peak_bytes: int | None = None
    peak_method: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    accuracy_ok: bool | None = None  # the output's check (the forward)
    # --backward: each gradient's max abs error against the fp64 reference, and those that failed
    grad_max_abs_err: dict[str, float] = {}
    failed_gradients: list[str] = []
    nan_count: int | None = None
    inf_count: int | None = None
    atol: float | None = None  # the accuracy tolerance it was held to: atol + rtol * |reference|
    rtol: float | None = None
    tflops_useful: float | None = None
    # % of the run's peak, 0-100 like every field named pct (run.json's, the analysis's)
    pct_of_peak: float | None = None
    findings: list[Finding] = []  # the analyser's, then compare's own (INCORRECT_OUTPUT, ABOVE_PEAK, ...)
    # the per-op performance model of the row's trace (analysis/perf_model.py)
    perf_ops: list[OpPerf] = []
    perf_model: PerfModel | None = None
    category_sequence: list[str] = []
    gpu_category_time_us: dict[str, float] = {}
    cpu_category_time_us: dict[str, float] = {}
    timeline: list[TimelineOp] = []
    timeline_lane: str | None = None
    ops: list[OpStat] = []
    ops_lane: str | None = None
    # the trace time per forward (in the ops' lane) that ops, categories and the timeline are
    # shares of: the time source's, like them
    ops_time_us_per_forward: float | None = None
    # finding code -> the share of the traced forward its evidence times (GPU idle causes, GEMMs
    # on CUDA cores), from the time source's analysis
    cause_shares: dict[str, float] = {}
    # which profiler pass's trace gave the times above: "lean" (RunResult.lean_trace), "rich"
    # (no lean trace kept: an older run), None for a bare trace or one not analysed
    time_source: Literal["lean", "rich"] | None = None
    trace: str | None = None
    lean_trace: str | None = None
    analysis_error: str | None = None

    @property
    def finding_codes(self) -> list[str]:
        """Distinct codes in the analyser's order (one code can fire for several kernels)."""
        return list(dict.fromkeys(f.code for f in self.findings))

    @property
    def ok(self) -> bool:
        """Ran and gave a correct answer (or one nobody checked): may be timed against others."""
        return self.status == "ok"

    @property
    def compiled_region(self) -> bool:
        """Runs as compiled code: its trace shows one generated region, not the ops an eager
        variant runs, so its ops cannot be set against an eager variant's one by one."""
        return self.mode == "compile" or (self.backend or "") in ("inductor", "flex")

    @property
    def profiler_inflation(self) -> float | None:
        """Trace time per forward over the clean median: how much the profiler stretched this
        variant (per-op times in its trace are inflated alike, so they are shown as shares)."""
        gpu = bool(self.gpu_ops_per_forward)
        traced = self.gpu_time_us_per_forward if gpu else self.cpu_time_us_per_forward
        if not traced or not self.median_ms:
            return None
        return traced / 1000.0 / self.median_ms

    @property
    def lean_inflation(self) -> float | None:
        """The lean profiler pass's time per forward over the clean median (no shapes, memory or
        stacks recorded): what profiling costs before the rich pass's recording."""
        if not self.lean_time_us_per_forward or not self.median_ms:
            return None
        return self.lean_time_us_per_forward / 1000.0 / self.median_ms

    @property
    def above_peak(self) -> bool:
        """More than 100% of the peak: the peak or the timing is wrong (one flag for every output)."""
        return self.pct_of_peak is not None and self.pct_of_peak > 100.0

    @property
    def tie(self) -> bool:
        """Its speedup's 95% interval holds 1: no faster or slower claim can be made."""
        return self.speedup_claim == "tie"

    @property
    def ran(self) -> bool:
        """Ran to the end, correct or not: shown in the tables (an incorrect row with its error)."""
        return self.status in ("ok", INCORRECT)


class Comparison(msgspec.Struct, kw_only=True):
    schema: str = COMPARE_SCHEMA
    baseline: str | None
    rows: list[Row]
    sources: list[str]
    notes: list[str] = []
    diffs: list[Diff] = []
    # the distinct workloads of the run rows, in input order (WorkloadId.label)
    workloads: list[str] = []
    # workload -> its baseline's label, when rows of several workloads are compared in groups
    baselines: dict[str, str] = {}
    # rows of different workloads set against one baseline (only on request: --mixed-workloads)
    mixed_workloads: bool = False

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(label)

    @property
    def baseline_row(self) -> Row | None:
        return next((r for r in self.rows if r.label == self.baseline), None)


class Source(msgspec.Struct, kw_only=True):
    """One input path: a run directory (with its run context, run.json decoded once) or a trace
    file."""

    path: str
    kind: Literal["run", "trace"]
    context: RunContext | None = None

    @property
    def record(self) -> RunRecord | None:
        return self.context.record if self.context is not None else None


# -- loading ---------------------------------------------------------------------------------------


def _is_trace(p: Path) -> bool:
    return p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name != "run.json"


def load_sources(paths: Iterable[str | Path | Source]) -> list[Source]:
    """Resolve each path to a run directory (holding run.json, decoded here once into its
    RunContext) or a trace file; a Source already loaded is kept as it is."""
    out: list[Source] = []
    for raw in paths:
        if isinstance(raw, Source):
            out.append(raw)
            continue
        p = Path(raw)
        if p.is_dir() or p.name == "run.json":
            run_json = p / "run.json" if p.is_dir() else p
            if not run_json.is_file():
                raise UserError(
                    f"{p}: not a run directory (no run.json); give a run directory or a trace file"
                )
            out.append(
                Source(path=str(run_json.parent), kind="run", context=RunContext.load(run_json.parent))
            )
        elif _is_trace(p):
            out.append(Source(path=str(p), kind="trace"))
        elif not p.exists():
            raise UserError(f"{p}: no such file or directory")
        else:
            raise UserError(f"{p}: neither a run directory nor a trace file (.json or .json.gz)")
    if not out:
        raise UserError("nothing to compare: give at least one run directory or trace file")
    return out


def trace_label(path: str | Path) -> str:
    name = Path(path).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.removesuffix(".pt.trace")


# -- analysis (the typed record, attnprof.analysis.result) -----------------------------------------


def analyze_every_kernel(path: Path, context: RunContext | None = None) -> TraceAnalysis:
    """The analysis of one trace (of the run `context`, when given: its workload, peak and what
    the variant executes) with every kernel listed (top=0), so that diffs see them all.
    Imported lazily: comparing run records alone works without the analyser."""
    from attnprof.analysis import analyze

    return analyze(path, region=None, top=0, context=context)


def _pick_region(a: TraceAnalysis) -> RegionStat | None:
    """attn_fwd when the trace has it (a run's traces), else the analysis's first region."""
    return next((r for r in a.regions if r.name == "attn_fwd"), a.regions[0] if a.regions else None)


def _family(k: KernelStat | MemoryOp) -> str:
    family = k.family if isinstance(k, KernelStat) else None
    return family or k.category or "other"


def _tensor_core_share(kernels: Sequence[KernelStat]) -> float | None:
    tc = known = 0.0
    for k in kernels:
        if k.category != "gemm" or k.tensor_cores is None:
            continue
        known += k.time_us
        if k.tensor_cores:
            tc += k.time_us
    return tc / known if known > 0 else None


def _occupancy(k: KernelStat) -> tuple[float | None, float | None, str | None]:
    """(achieved, theoretical, limiter) of one kernel, as fractions. Achieved is None when the
    profiler did not measure it (Occupancy.measured: a reported 0 may be a gap, not a value)."""
    occ = k.occupancy
    if occ is None:
        return None, None, None
    ach = occ.achieved_pct if occ.measured else None
    theo = occ.theoretical_pct
    return (
        (ach / 100 if ach is not None else None),
        (theo / 100 if theo is not None else None),
        occ.limiter or None,
    )


def _gpu_ops(a: TraceAnalysis, per: int) -> list[OpStat]:
    """Kernels and memory ops (memcpy, memset) per forward: what a GPU diff compares."""
    ops: list[KernelStat | MemoryOp] = [*a.kernels, *a.memory_ops]
    return [
        OpStat(
            name=k.name,
            category=k.category or "other",
            family=_family(k),
            count=k.count / per,
            time_us=k.time_us / per,
            short=k.short_name if isinstance(k, KernelStat) else "",
        )
        for k in ops
    ]


def _cpu_ops(region: RegionStat | None) -> list[OpStat]:
    """CPU ops per forward by name, with their self time: the region's cpu_ops_by_name (the
    largest self time first)."""
    out = []
    for o in region.cpu_ops_by_name if region is not None else []:
        if o.name:
            cat = cpu_category(o.name)
            out.append(
                OpStat(
                    name=o.name,
                    category=cat,
                    family=cat,
                    count=float(o.per_instance),
                    time_us=float(o.self_us_per_instance),
                )
            )
    return out


def _self_segments(ops: Sequence[CpuOp]) -> list[TimelineOp]:
    """What ran when in one forward: the parts of each op's interval that none of the ops directly
    inside it cover, in time order. ops: the region's cpu_ops (in order, each with its depth)."""
    kids: list[list[CpuOp]] = [[] for _ in ops]
    stack: list[int] = []
    for i, o in enumerate(ops):
        del stack[o.depth :]
        if stack:
            kids[stack[-1]].append(o)
        stack.append(i)
    out: list[TimelineOp] = []

    def segment(name: str, start: float, end: float) -> None:
        out.append(TimelineOp(name=name, category=cpu_category(name), start_us=start, dur_us=end - start))

    for o, inside in zip(ops, kids, strict=True):
        cursor = float(o.start_us)
        end = cursor + o.dur_us
        for k in inside:
            if k.start_us > cursor:
                segment(o.name, cursor, k.start_us)
            cursor = max(cursor, k.start_us + k.dur_us)
        if end > cursor:
            segment(o.name, cursor, end)
    out.sort(key=lambda seg: seg.start_us)
    return out


def _apply_analysis(row: Row, a: TraceAnalysis) -> None:
    """What a row takes from the rich pass's trace: counts, findings, families, occupancy, the
    roofline and the GPU op sequence (shapes, dtypes and memory are recorded in it)."""
    region = _pick_region(a)
    per = max(1, region.instances) if region is not None else 1
    row.forwards = per if region is not None else None
    kernels = a.kernels
    if region is not None:
        row.gpu_ops_per_forward = float(region.gpu_ops_per_instance)
        row.cpu_ops_per_forward = float(region.cpu_ops_per_instance)
        row.gpu_time_us_per_forward = float(region.gpu_time_us_per_instance)
        row.cpu_time_us_per_forward = float(region.cpu_time_us_per_instance)
        row.memcpy_per_forward = float(region.categories_per_instance.get("memcpy", 0.0))
    else:
        row.memcpy_per_forward = float(a.totals.memcpy)
    row.tensor_core_share = _tensor_core_share(kernels)
    row.families = sorted({_family(k) for k in kernels if k.family})
    attn = [k for k in kernels if k.category == "attention"]
    row.fused_families = sorted({_family(k) for k in attn})
    # occupancy of the fused attention kernel if any, else of the longest kernel: the one that matters
    focus = max(attn or kernels, key=lambda k: k.time_us, default=None)
    if focus is not None:
        ach, theo, lim = _occupancy(focus)
        if ach is not None or theo is not None:
            row.occupancy_kernel = focus.name
            row.occupancy_achieved, row.occupancy_theoretical, row.occupancy_limiter = ach, theo, lim
    row.findings = list(a.findings)
    row.perf_ops, row.perf_model = list(a.ops), a.perf_model
    roof = a.roofline
    # a run's clean timing beats the trace's profiled time; traces alone use the roofline
    if roof is not None and row.tflops_useful is None:
        row.pct_of_peak = roof.pct_of_peak_flops
        row.tflops_useful = roof.achieved_tflops
    if row.device_name is None and a.device.name:
        row.device_name = a.device.name
    gpu_seq = region.gpu_ops if region is not None else []
    row.category_sequence = [o.category or "other" for o in gpu_seq]


def _evidence_shares(a: TraceAnalysis, region: RegionStat | None) -> dict[str, float]:
    """Findings whose evidence carries their own time, as shares of the traced forward: the GPU
    idle causes (their cause time over the window) and GEMMs on CUDA cores (their kernel time
    over the GPU time)."""
    out: dict[str, float] = {}
    for f in a.findings:
        ev = f.evidence
        if f.code == "CUDA_CORE_GEMM" and region is not None and region.gpu_time_us_per_instance:
            per = max(1, region.instances)
            out[f.code] = float(ev["time_us"]) / per / float(region.gpu_time_us_per_instance)
        elif "cause_us_per_instance" in ev and ev.get("window_us_per_instance"):
            out.setdefault(f.code, float(ev["cause_us_per_instance"]) / float(ev["window_us_per_instance"]))
    return out


def _apply_times(row: Row, a: TraceAnalysis) -> None:
    """The times a row's shares come from, all from one trace `a` (the time source, chosen in
    _analyse_into): per-op times, time by category, the timeline strip, the traced time per
    forward they are shares of, and the evidence shares of timed findings."""
    region = _pick_region(a)
    per = max(1, region.instances) if region is not None else 1
    # per forward: the region's share of each category is not in the contract, so the trace's
    # category totals are divided by the instances (a run's trace holds only attn_fwd steps)
    row.gpu_category_time_us = {c.category: c.time_us / per for c in a.categories if c.time_us > 0}
    row.cause_shares = _evidence_shares(a, region)
    gpu_seq = region.gpu_ops if region is not None else []
    if gpu_seq:
        row.timeline = [
            TimelineOp(name=o.name, category=o.category or "other", start_us=o.start_us, dur_us=o.time_us)
            for o in gpu_seq
        ]
        row.timeline_lane = "gpu"
    gpu_ops = _gpu_ops(a, per)
    if gpu_ops:
        row.ops, row.ops_lane = gpu_ops, "gpu"
        row.ops_time_us_per_forward = float(region.gpu_time_us_per_instance) if region is not None else None
        return
    # no GPU ops (a CPU run): the CPU ops by name with their self time, that time by group, and
    # the first forward's ops in order for the timeline strip
    row.ops, row.ops_lane = _cpu_ops(region), "cpu"
    row.ops_time_us_per_forward = float(region.cpu_time_us_per_instance) if region is not None else None
    agg: dict[str, float] = {}
    for o in row.ops:
        agg[o.category] = agg.get(o.category, 0.0) + o.time_us
    row.cpu_category_time_us = {c: v for c, v in sorted(agg.items(), key=lambda kv: -kv[1]) if v > 0}
    if region is not None and region.cpu_ops:
        row.timeline, row.timeline_lane = _self_segments(region.cpu_ops), "cpu"


def _row_from_result(src: Source, res: RunResult, record: RunRecord) -> Row:
    w = record.workload
    ident = WorkloadId.of(w)  # old records normalised here, once (an empty mask, kv 0)
    run_dir = Path(src.path)
    t = res.timing
    row = Row(
        label=res.label,  # "naive", or "naive:compile" for a compiled twin
        kind="run",
        source=src.path,
        variant=res.variant,
        mode=res.mode,
        status=res.status,
        reason=res.reason,
        reason_code=res.reason_code,
        backend=res.backend,
        device=w.device,
        device_name=record.environment.device_name,
        dtype=w.dtype,
        shape=f"{w.batch}_{w.heads}_{w.seq}_{w.head_dim}",
        mask=ident.mask,
        gqa=ident.gqa,
        direction=ident.direction,
        phase=ident.phase,
        median_ms=t.median_ms if t else None,
        iqr_ms=t.iqr_ms if t else None,
        samples_ms=list(t.samples_ms) if t else [],
        noisy=t.noisy if t else None,
        paired_rounds=bool(t and t.rounds_paired),
        minor_faults_per_call=t.minor_faults_per_call if t else None,
        allocator=t.allocator if t else None,
        cold_median_ms=t.cold.median_ms if t and t.cold else None,
        cold_minor_faults_per_call=t.cold.minor_faults_per_call if t and t.cold else None,
        unreliable=bool(t and t.load and t.load.unreliable),
        load_reasons=list(t.load.reasons) if t and t.load else [],
        threads=t.threads if t else None,
        peak_bytes=res.memory.peak_bytes if res.memory else None,
        peak_method=res.memory.method if res.memory else None,
        max_abs_err=res.accuracy.max_abs_err if res.accuracy else None,
        max_rel_err=res.accuracy.max_rel_err if res.accuracy else None,
        accuracy_ok=res.accuracy.ok if res.accuracy else None,
        grad_max_abs_err={name: a.max_abs_err for name, a in res.grad_accuracy.items()},
        failed_gradients=res.failed_gradients(),
        bwd_median_ms=res.timing_bwd.median_ms if res.timing_bwd else None,
        total_median_ms=res.timing_total.median_ms if res.timing_total else None,
        total_samples_ms=list(res.timing_total.samples_ms) if res.timing_total else [],
        ranked_by="step" if record.model is not None else "forward + backward" if w.backward else "forward",
        nan_count=res.accuracy.nan_count if res.accuracy else None,
        inf_count=res.accuracy.inf_count if res.accuracy else None,
        atol=res.accuracy.tolerance if res.accuracy else None,
        rtol=res.accuracy.rtol if res.accuracy else None,
        tflops_useful=res.tflops_useful,
        # from the clean timing, like tflops_useful; the trace's roofline is only a fallback
        pct_of_peak=res.pct_of_peak,
        trace=str(run_dir / res.trace) if res.trace else None,
        lean_trace=str(run_dir / res.lean_trace) if res.lean_trace else None,
        workload=ident.label,
    )
    if res.profile is not None:  # the harness's own per-forward counts; the analysis refines them
        row.gpu_ops_per_forward = res.profile.gpu_ops_per_forward
        row.cpu_ops_per_forward = res.profile.cpu_ops_per_forward
        row.gpu_time_us_per_forward = res.profile.gpu_time_us_per_forward
        row.cpu_time_us_per_forward = res.profile.cpu_time_us_per_forward
        row.forwards = res.profile.forwards
        gpu = bool(res.profile.gpu_ops_per_forward)
        row.lean_time_us_per_forward = (
            res.profile.lean_gpu_time_us_per_forward if gpu else res.profile.lean_cpu_time_us_per_forward
        )
    return row


def _severity(code: str) -> str:
    """A compare finding's severity, from the catalogue of finding codes (analysis/codes.py)."""
    info = code_info(code)
    assert info is not None, f"{code} is not in analysis/codes.py CATALOGUE"
    return info.severity


def _peak_check(row: Row, ctx: RunContext) -> None:
    """One figure for "% of peak" on a run's row: the clean timing's, as in the table. The
    analyser's ABOVE_PEAK (from the trace's profiled time, another number) is replaced by one
    that states the clean figure, so the table, finding, summary and JSON say the same."""
    row.findings = [f for f in row.findings if f.code != "ABOVE_PEAK"]
    if row.pct_of_peak is None or row.pct_of_peak <= 100.0:
        return
    env = ctx.record.environment
    pct = int(f"{row.pct_of_peak:.0f}")  # as the tables print it (units.fmt_pct)
    row.findings.append(
        Finding(
            code="ABOVE_PEAK",
            severity=_severity("ABOVE_PEAK"),
            message=f"{pct}% of the peak ({env.peak_tflops:.3g} TFLOP/s, {env.peak_source}): the peak is "
            "too low or the timing misses part of the work, so this figure cannot be trusted",
            evidence={
                "pct_of_peak": pct,
                "tflops_useful": row.tflops_useful,
                "peak_tflops": env.peak_tflops,
                "peak_source": env.peak_source,
            },
        )
    )


# minor page faults per call from which a variant's time includes mapping fresh memory: 64 faults
# are 256 KiB of 4 KiB pages touched for the first time, on every call
PAGE_FAULTS_PER_CALL = 64


def _fault_check(row: Row) -> None:
    """PAGE_FAULTS: the variant maps fresh memory on every call even in the warm allocator state
    (an allocation above its 32 MiB mmap threshold, or memory a library maps itself), so
    allocation and page faults, not arithmetic, are part of what its time measures."""
    n = row.minor_faults_per_call
    if n is None or n < PAGE_FAULTS_PER_CALL:
        return
    row.findings.append(
        Finding(
            code="PAGE_FAULTS",
            severity=_severity("PAGE_FAULTS"),
            message=f"{n:.0f} minor page faults per call while timing ({n * 4 / 1024:.1f} MiB of fresh 4 KiB "
            "pages each call): allocation and page faults, not arithmetic, are part of this variant's time",
            evidence={"minor_faults_per_call": round(n), "allocator": row.allocator},
        )
    )


# the least cold/warm ratio (its interval's lower end) that COLD_ALLOCATOR reports: smaller
# differences, even when outside noise, change no ranking the reports make
COLD_MIN_RATIO = 1.05


def _cold_check(row: Row, t: TimingSummary | None) -> None:
    """COLD_ALLOCATOR: in the cold allocator state (as in a fresh process) the variant is slower
    than in the warm one beyond noise, AND it page-faults more there: only then do allocation and
    page faults, not arithmetic, account for the difference (a slower cold time without the
    faults names no cause). Not on an unreliable run: the two states are timed one after the
    other, so load that came and went between them would pass for a cause."""
    if t is None or t.cold is None or (t.load is not None and t.load.unreliable):
        return
    cold = t.cold
    iv = ratio_interval(cold.samples_ms, t.samples_ms, paired=False)
    warm_faults = t.minor_faults_per_call or 0.0
    cold_faults = cold.minor_faults_per_call
    if iv is None or iv.low < COLD_MIN_RATIO or cold_faults is None:
        return
    if cold_faults - warm_faults < PAGE_FAULTS_PER_CALL:
        return
    row.findings.append(
        Finding(
            code="COLD_ALLOCATOR",
            severity=_severity("COLD_ALLOCATOR"),
            message=f"In the cold allocator state (larger buffers mapped afresh each call, as in a fresh "
            f"process) {cold.median_ms:.3g} ms per call, {iv.ratio:.2f}x ({iv.low:.2f}-{iv.high:.2f}) the "
            f"warm {t.median_ms:.3g} ms, with {cold_faults:.0f} minor page faults per call against "
            f"{warm_faults:.0f}: allocation and page faults, not arithmetic, make the difference. The "
            "times shown are warm.",
            evidence={
                "cold_ms": round(cold.median_ms, 4),
                "warm_ms": round(t.median_ms, 4),
                "ratio": round(iv.ratio, 2),
                "ratio_low": round(iv.low, 2),
                "ratio_high": round(iv.high, 2),
                "cold_faults_per_call": round(cold_faults),
                "warm_faults_per_call": round(warm_faults),
            },
        )
    )


def _total_check(row: Row) -> None:
    """TOTAL_BELOW_BACKWARD: forward + backward timed as one call came out shorter than the
    backward alone. The one call does all the backward's work and more, so this is a measurement
    problem (load that came and went between the two timings, or a backward timed with work the
    one call skips), not a speed: the ranking by forward + backward is not to be trusted."""
    bwd, total = row.bwd_median_ms, row.total_median_ms
    if bwd is None or total is None or total >= bwd:
        return
    row.findings.append(
        Finding(
            code="TOTAL_BELOW_BACKWARD",
            severity=_severity("TOTAL_BELOW_BACKWARD"),
            message=f"Forward + backward timed as one call ({total:.3g} ms) is shorter than the backward "
            f"alone ({bwd:.3g} ms): a measurement problem, not a speed; its ranking by forward + backward "
            "cannot be trusted.",
            evidence={"total_ms": round(total, 4), "bwd_ms": round(bwd, 4)},
        )
    )


def _gate(row: Row, res: RunResult, dtype: str) -> None:
    """The correctness gate: a result whose output failed the accuracy check is `incorrect`, loses
    every figure that would rank it (TFLOP/s, % of peak) and carries an INCORRECT_OUTPUT finding."""
    if res.status != "ok" or not res.incorrect:
        return
    grads = res.failed_gradients()
    code = "INCORRECT_OUTPUT"
    if is_incorrect(res.accuracy) or not grads:
        assert res.accuracy is not None
        acc = res.accuracy
        row.reason = acc.failure(dtype)
    else:  # the output is right, a gradient is not
        code = "INCORRECT_GRADIENT"
        acc = max((res.grad_accuracy[g] for g in grads), key=lambda a: a.max_abs_err)
        row.reason = acc.failure(dtype, what=f"gradient {', '.join(grads)}")
    row.status = INCORRECT
    row.tflops_useful = row.pct_of_peak = None
    row.findings.insert(
        0,
        Finding(
            code=code,
            severity=_severity(code),
            message=row.reason[0].upper()
            + row.reason[1:]
            + "; it is excluded from speed comparisons, the baseline and recommendations.",
            evidence={
                "max_abs_err": acc.max_abs_err,
                "nan_count": acc.nan_count,
                "inf_count": acc.inf_count,
                "atol": acc.tolerance,
                "rtol": acc.rtol,
                **({"gradients": ", ".join(grads)} if code == "INCORRECT_GRADIENT" else {}),
            },
        ),
    )


def _analysis(row: Row, path: Path, context: RunContext | None, notes: list[str]) -> TraceAnalysis | None:
    """The analysis of one of the row's traces; None (the row and `notes` say why) when it
    cannot be had."""
    try:
        return analyze_every_kernel(path, context)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("attnprof"):
            row.analysis_error = "trace analysis unavailable in this installation"
            if row.analysis_error not in notes:
                notes.append(row.analysis_error)
            return None
        raise
    except UserError as exc:
        row.analysis_error = str(exc)
        notes.append(f"{row.label}: {exc}")
        return None


def _time_analysis(
    row: Row, rich: TraceAnalysis, context: RunContext | None, notes: list[str]
) -> TraceAnalysis:
    """The one place that decides which trace a row's time shares come from: the lean pass's
    when the run kept it and it can be analysed, else the rich pass's (row.time_source says
    which; a lean trace that is recorded but gone or unreadable is a note)."""
    if row.kind != "run":
        return rich
    row.time_source = "rich"
    if not row.lean_trace:
        return rich
    lean_path = Path(row.lean_trace)
    if not lean_path.is_file():
        notes.append(
            f"{row.label}: lean trace {row.lean_trace} is missing; its time shares are the rich trace's"
        )
        return rich
    try:
        lean = analyze_every_kernel(lean_path, context)
    except UserError as exc:
        notes.append(f"{row.label}: lean trace: {exc}; its time shares are the rich trace's")
        return rich
    row.time_source = "lean"
    return lean


def _analyse_into(row: Row, path: Path, context: RunContext | None, notes: list[str]) -> None:
    a = _analysis(row, path, context, notes)
    if a is None:
        return
    # the harness's per-forward figures stay when the analysis has no region for them
    saved = (
        row.gpu_ops_per_forward,
        row.cpu_ops_per_forward,
        row.gpu_time_us_per_forward,
        row.cpu_time_us_per_forward,
        row.forwards,
    )
    _apply_analysis(row, a)
    _apply_times(row, _time_analysis(row, a, context, notes))
    fields = (
        "gpu_ops_per_forward",
        "cpu_ops_per_forward",
        "gpu_time_us_per_forward",
        "cpu_time_us_per_forward",
        "forwards",
    )
    for name, old in zip(fields, saved, strict=True):
        if getattr(row, name) is None:
            setattr(row, name, old)


def _dedupe_labels(rows: list[Row]) -> None:
    """Variant names repeat across run directories: prefix the directory's name, and its
    position among the inputs when two inputs share a name."""
    seen = Counter(r.label for r in rows)
    dirs = Counter(Path(src).name for src in {r.input: r.source for r in rows}.values())
    for r in rows:
        if seen[r.label] > 1:
            d = Path(r.source).name
            r.label = f"{d}/{r.label}" if dirs[d] == 1 else f"{d}#{r.input + 1}/{r.label}"


def choose_baseline(rows: Sequence[Row], name: str | None) -> str | None:
    """--baseline NAME matches a label, a variant or a trace name; default naive-inplace, else
    the first row with a timing, else the first row."""
    if name:
        for key in ("label", "variant"):
            for r in rows:
                if getattr(r, key) == name:
                    if r.status == INCORRECT:
                        raise UserError(
                            f"--baseline {name!r} gave incorrect output ({r.reason}); pick a correct variant"
                        )
                    return r.label
        valid = ", ".join(r.label for r in rows)
        raise UserError(f"--baseline {name!r} is not among the compared rows: {valid}")
    # never an incorrect one: a wrong answer is no yardstick
    rows = [r for r in rows if r.status != INCORRECT]
    timed = [r for r in rows if r.median_ms is not None]
    for r in timed or rows:
        if r.variant == DEFAULT_BASELINE and r.mode != "compile":
            return r.label
    pool = timed or list(rows)
    return pool[0].label if pool else None


def compare(
    paths: Iterable[str | Path | Source],
    *,
    baseline: str | None = None,
    analyse: bool = True,
    diff: bool = False,
    mixed_workloads: bool = False,
    group_workloads: bool = False,
) -> Comparison:
    """Build one Row per variant (run directories) or per trace file, then speedups against the
    baseline; with diff=True also the kernel-level diffs (see diffs_for).

    Runs of different workloads (WorkloadId: shape, GQA, KV length, dtype, device, mask, backward,
    phase) are not compared by default: that is
    a UserError. group_workloads=True compares each workload's rows against that workload's own
    baseline (reports of a folder of several shapes); mixed_workloads=True sets them all against
    one baseline, and the comparison says so (mixed_workloads, a note)."""
    sources = load_sources(paths)
    rows: list[Row] = []
    notes: list[str] = []
    for i, src in enumerate(sources):
        if src.kind == "run":
            ctx = src.context
            assert ctx is not None
            record = ctx.record
            if record.interrupted and record.resume is not None:
                pending = record.resume.pending
                notes.append(
                    f"{src.path}: interrupted run; not run yet: {', '.join(pending)} "
                    f"(attnprof run --resume {src.path})"
                )
            for res in record.results:
                row = _row_from_result(src, res, record)
                if not analyse:
                    row.analysis_error = "trace analysis not requested"
                elif row.trace:
                    if Path(row.trace).is_file():
                        # the run's workload, peak and what the variant executes come with ctx
                        # (a model run's workload describes no traced region: no roofline)
                        _analyse_into(row, Path(row.trace), ctx, notes)
                    else:
                        row.analysis_error = f"trace {row.trace} is missing"
                        notes.append(f"{row.label}: {row.analysis_error}")
                _peak_check(row, ctx)
                _fault_check(row)
                _cold_check(row, res.timing)
                _total_check(row)
                _gate(row, res, record.workload.dtype)
                row.input = i
                rows.append(row)
        else:
            row = Row(label=trace_label(src.path), kind="trace", source=src.path, trace=src.path)
            if analyse:
                _analyse_into(row, Path(src.path), None, notes)
            else:
                row.analysis_error = "trace analysis not requested"
            row.input = i
            rows.append(row)
    _dedupe_labels(rows)
    workloads = list(dict.fromkeys(r.workload for r in rows if r.workload))
    groups: list[list[Row]] = [rows]
    if len(workloads) > 1 and not mixed_workloads:
        if not group_workloads:
            where = "; ".join(
                f"{w} in {', '.join(sorted({Path(r.source).name for r in rows if r.workload == w}))}"
                for w in workloads
            )
            raise UserError(
                f"the runs hold different workloads ({where}): compare one workload at a time, or pass "
                "--mixed-workloads to set them against one baseline anyway (the output says so)"
            )
        # each workload against its own baseline; bare traces go with the first workload
        groups = [
            [r for r in rows if r.workload == w or (r.workload is None and w == workloads[0])]
            for w in workloads
        ]
    if len(workloads) > 1 and mixed_workloads:
        notes.insert(0, f"mixed workloads: speed ratios set {' vs '.join(workloads)} against one baseline")
    baselines: dict[str, str] = {}
    base: str | None = None
    for group in groups:
        name = baseline
        if name and len(groups) > 1 and not any(name in (r.label, r.variant) for r in group):
            name = None  # --baseline names a variant another workload has: this one uses its default
        gbase = choose_baseline(group, name)
        base = base or gbase
        base_row = next((r for r in group if r.label == gbase), None)
        if base_row is not None and base_row.workload and len(groups) > 1:
            baselines[base_row.workload] = base_row.label
        _speedups(group, base_row)
    for reason in dict.fromkeys(x for r in rows for x in r.load_reasons):
        notes.append(f"unreliable timing: {reason}")
    result = Comparison(
        baseline=base,
        rows=rows,
        sources=[s.path for s in sources],
        notes=notes,
        workloads=workloads,
        baselines=baselines,
        mixed_workloads=mixed_workloads and len(workloads) > 1,
    )
    if diff:
        result.diffs = diffs_for(result, [s.kind for s in sources])
    return result


def _speedups(rows: Sequence[Row], base_row: Row | None) -> None:
    """Each row against the baseline, by the rule of compare/rank.py."""
    if base_row is None:
        return
    for r in rows:
        if r.status == INCORRECT:
            continue
        sp = speed(r, base_row)
        if sp is None:
            continue
        r.speedup = sp.ratio
        if r is base_row:
            continue
        r.speedup_claim = sp.claim
        r.speedup_low, r.speedup_high = sp.low, sp.high
        r.speedup_range_low, r.speedup_range_high = sp.range_low, sp.range_high


def baseline_for(comp: Comparison, row: Row) -> Row | None:
    """The row `row` was measured against: its workload's baseline in a grouped comparison."""
    label = comp.baselines.get(row.workload or "", comp.baseline)
    return next((r for r in comp.rows if r.label == label), None)


# -- kernel-level diff (the pair itself: compare/diff.py) ----------------------------------------


def diffs_for(comp: Comparison, kinds: Sequence[str]) -> list[Diff]:
    """Which pairs to diff: two traces -> that pair; two runs -> each variant present in both;
    otherwise (one run, or a mix) every row against the baseline."""
    rows = [r for r in comp.rows if r.ok or r.kind == "trace"]
    if len(comp.sources) == 2 and list(kinds) == ["trace", "trace"] and len(rows) == 2:
        return [diff_rows(rows[0], rows[1])]
    if len(comp.sources) == 2 and list(kinds) == ["run", "run"]:
        first = [r for r in rows if r.input == 0]
        second = {(r.variant, r.mode): r for r in rows if r.input == 1}
        return [diff_rows(r, second[(r.variant, r.mode)]) for r in first if (r.variant, r.mode) in second]
    out = []
    for r in rows:
        base = baseline_for(comp, r)
        if base is None or r.label == base.label:
            continue
        if r.compiled_region != base.compiled_region:
            compiled, eager = (r, base) if r.compiled_region else (base, r)
            note = (
                f"{compiled.label} runs as compiled code (one generated region in its trace): "
                f"not diffed op by op against eager {eager.label}"
            )
            if note not in comp.notes:
                comp.notes.append(note)
            continue
        out.append(diff_rows(base, r))
    return out
