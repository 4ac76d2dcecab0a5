"""Building a comparison's rows: each input path resolved to a run directory or a trace file, each
run result and trace turned into a Row, and what the trace analysis adds to it (counts, findings,
families, occupancy; the time shares from the time-source trace: _apply_times is the one place
that reads them, _time_analysis the one that picks that trace)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from attnprof.analysis.attribution.classify import cpu_category
from attnprof.analysis.records.result import CpuOp, KernelStat, MemoryOp, RegionStat, TraceAnalysis
from attnprof.compare.records import TRACE_SUFFIXES, OpStat, Row, Source, TimelineOp
from attnprof.errors import UserError
from attnprof.records import (
    RunRecord,
    RunResult,
)
from attnprof.run_context import RunContext
from attnprof.workload import WorkloadId

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


# -- analysis (the typed record, attnprof.analysis.records.result) -----------------------------------------


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
        row.attention_kernels_per_forward = float(region.categories_per_instance.get("attention", 0.0))
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


def _own_measurement(res: RunResult, record: RunRecord) -> tuple[tuple[int, int, int] | None, int | None]:
    """The profiler schedule and least timing rounds a result was measured with, each only where
    it differs from the run's default (a slow call's 0, 0, 1 and 3 rounds: harness/run.py), so
    that no view states the run's default for a variant measured otherwise."""
    steps = res.profile_steps
    own_steps = steps if steps is not None and tuple(steps) != tuple(record.steps) else None
    rounds, default = res.min_rounds, record.min_rounds
    own_rounds = rounds if rounds is not None and default is not None and rounds != default else None
    return own_steps, own_rounds


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
        load_reason_codes=list(t.load.reason_codes) if t and t.load else [],
        threads=t.threads if t else None,
        peak_bytes=res.memory.peak_bytes if res.memory else None,
        peak_method=res.memory.method if res.memory else None,
        max_abs_err=res.accuracy.max_abs_err if res.accuracy else None,
        max_rel_err=res.accuracy.max_rel_err if res.accuracy else None,
        accuracy_ok=res.accuracy.ok if res.accuracy else None,
        grad_max_abs_err={
            n: a.max_abs_err for n, a in res.grad_accuracy.items() if a.max_abs_err is not None
        },
        grad_non_finite={n: (a.nan_count, a.inf_count) for n, a in res.grad_accuracy.items() if a.non_finite},
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
        # an older run.json took it of a busy machine's peak: not sound, so not shown
        pct_of_peak=res.pct_of_peak if record.environment.sound_peak else None,
        trace=str(run_dir / res.trace) if res.trace else None,
        lean_trace=str(run_dir / res.lean_trace) if res.lean_trace else None,
        workload=ident.label,
    )
    row.own_steps, row.own_min_rounds = _own_measurement(res, record)
    row.run_steps, row.run_min_rounds = record.steps, record.min_rounds
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
