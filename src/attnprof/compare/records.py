"""The records of a comparison: one Row per variant or trace, the Comparison, its Sources, and
the kernel-level Diff of two rows (compare/diff.py builds it). Data only: compare/build.py fills
the rows, compare/checks.py adds the run-level findings, compare/compare.py orchestrates.

Inputs are run directories (every variant in their run.json) and trace files, mixed. Each becomes
one Row that joins what the harness measured (clean timing, memory, accuracy) with what the
trace analysis found (ops per forward, categories, families, occupancy, findings).

The analysis is consumed through its typed record (attnprof.analysis.records.result.TraceAnalysis, the
`attnprof.analysis/1` JSON contract's own types, DESIGN.md) and never the analyser's internals, so
either side can change its implementation freely. Every number in a Row states where it came from:

- median_ms / iqr_ms: the harness's clean timing (no profiler), median and interquartile range of
  its raw samples (one sample = one forward call); None for a bare trace, which has no clean timing.
- speedup: the baseline's ranked median / this one's (> 1 means faster than the baseline; which
  timing ranks, the claim and its 95% interval or range: compare/rank.py).
- *_per_forward: trace-derived, per instance of the analysed region (attn_fwd in a run's traces;
  ProfilerStep or the whole trace for foreign traces). Profiler overhead is included in these times.
- ops, *_category_time_us, timeline, ops_time_us_per_forward, cause_shares: the times reports
  split into shares, from the trace `time_source` names. A run profiles each variant twice: the
  lean pass (no shapes, memory or stacks; the profiler stretches each op less) gives these when
  its trace was kept (RunResult.lean_trace), the rich pass otherwise (older run directories).
  build.py's _apply_times is the one place that reads them. Everything else (op counts per forward, memcpy,
  findings and their evidence, families, occupancy) comes from the rich pass's trace, which
  records shapes, dtypes and memory.
- tensor_core_share: tensor-core GEMM time / all GEMM time whose tensor-core use is known.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from attnprof.analysis.records.perf_records import OpPerf, PerfModel
from attnprof.analysis.records.result import Finding
from attnprof.records import (
    ReasonCode,
    RunRecord,
)
from attnprof.run_context import RunContext

__all__ = [
    "COMPARE_SCHEMA",
    "DEFAULT_BASELINE",
    "FEWER_OPS",
    "INCORRECT",
    "TRACE_SUFFIXES",
    "Cause",
    "Comparison",
    "Diff",
    "FamilyDiff",
    "KernelChange",
    "OpStat",
    "Row",
    "Source",
    "TimelineOp",
    "Why",
]


class KernelChange(msgspec.Struct, kw_only=True):
    name: str
    short: str = ""
    change: Literal["added", "removed", "changed", "same"]
    count_a: float
    count_b: float
    time_a_us: float
    time_b_us: float
    # the op's share of its side's traced time (both from the same kind of time, each side's
    # time-source trace): what a CPU op's "changed" is decided by
    share_a: float | None = None
    share_b: float | None = None

    @property
    def delta_us(self) -> float:
        return self.time_b_us - self.time_a_us


class FamilyDiff(msgspec.Struct, kw_only=True):
    family: str
    category: str
    count_a: float
    count_b: float
    time_a_us: float
    time_b_us: float
    kernels: list[KernelChange]

    @property
    def delta_us(self) -> float:
        return self.time_b_us - self.time_a_us


class Diff(msgspec.Struct, kw_only=True):
    """B against A, per forward. lane is "gpu" (kernels, memcpy, memset) or "cpu" (aten ops, used
    when neither side has GPU ops, as on a CPU run).

    basis says what the times are. "clean": a CPU diff of two rows with clean timing: each side's
    clean median split by its ops' shares of its traced time, so the times add up to the clean
    medians and the deltas to the clean gap (the profiler inflates CPU op times, by a different
    factor per variant: traced deltas of several ms stood beside a clean gap of 0.5 ms).
    "traced": the trace's own times (GPU kernels, timed by the device; or a side without a clean
    median)."""

    a: str
    b: str
    lane: str
    ops_a: float
    ops_b: float
    time_a_us: float
    time_b_us: float
    added: int
    removed: int
    changed: int
    families: list[FamilyDiff]
    basis: Literal["clean", "traced"] = "traced"


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


# the cause code of "fewer ops per forward" (sized from the ops themselves, not from a finding)
FEWER_OPS = "fewer_ops"


class Cause(msgspec.Struct, frozen=True):
    """One cause that could explain a speed gap, and what it accounts for: `ms` is the part of
    the clean time gap it explains (compare/causes.py `cause_ms`), None when the trace holds no
    time for it (a CUDA graph, views on a GPU): such a cause is never named. `code` is a finding
    code (analysis/findings/codes.py) or FEWER_OPS."""

    code: str
    ms: float | None = None


class Why(msgspec.Struct, frozen=True, kw_only=True):
    """Why the faster of a row and its baseline beats the slower (compare/causes.py `explain`):
    the variant the causes speak of (`subject`, and whether it is the faster side), the causes
    large enough to name (`named`: each accounts for causes.CAUSE_SHARE of the gap or more) or,
    when none is, the sized causes that are too small (`small`; `largest_ms` the most any of
    them accounts for). `gap_ms`: the clean time gap they are sized against. `ops_fast`,
    `ops_slow`: the ops per forward a FEWER_OPS cause quotes."""

    fast: str
    slow: str
    subject: str
    subject_is_fast: bool
    named: list[Cause] = []
    small: list[Cause] = []
    largest_ms: float = 0.0
    gap_ms: float = 0.0
    ops_fast: float | None = None
    ops_slow: float | None = None


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
    # why the faster of this row and its baseline beats the other (compare/causes.py): None when
    # no record says why, when the run was busy, or for a claim about another timing than the
    # forward (the causes are sized from the forward's trace)
    why: Why | None = None
    # what this row was measured with where it differs from its run's default (RunRecord.steps,
    # min_rounds): the profiler schedule (wait, warmup, active) and the least number of timing
    # rounds; None where it is the run's default or not recorded (build.py `_own_measurement`)
    own_steps: tuple[int, int, int] | None = None
    own_min_rounds: int | None = None
    # its run's defaults those differ from (None for a bare trace, or a record without them)
    run_steps: tuple[int, int, int] | None = None
    run_min_rounds: int | None = None
    paired_rounds: bool = False  # samples interleaved round by round with its run's other variants
    unreliable: bool = False  # the machine was busy while this row was timed (load_reasons says how)
    load_reasons: list[str] = []
    load_reason_codes: list[ReasonCode] = []  # the same as data (MachineLoad.reason_codes)
    forwards: int | None = None
    gpu_time_us_per_forward: float | None = None
    cpu_time_us_per_forward: float | None = None
    gpu_ops_per_forward: float | None = None
    cpu_ops_per_forward: float | None = None
    memcpy_per_forward: float | None = None
    # device kernels of category attention per forward (fused attention kernels): the blog's "one
    # kernel" of a fused backend, whatever else (a memset, a cuDNN helper) a library version adds
    attention_kernels_per_forward: float | None = None
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
    # the gradients holding NaN or inf (no max error then): name -> (NaN count, inf count)
    grad_non_finite: dict[str, tuple[int, int]] = {}
    failed_gradients: list[str] = []
    nan_count: int | None = None
    inf_count: int | None = None
    atol: float | None = None  # the accuracy tolerance it was held to: atol + rtol * |reference|
    rtol: float | None = None
    tflops_useful: float | None = None
    # % of the run's peak, 0-100 like every field named pct (run.json's, the analysis's)
    pct_of_peak: float | None = None
    findings: list[Finding] = []  # the analyser's, then compare's own (INCORRECT_OUTPUT, ABOVE_PEAK, ...)
    # the per-op performance model of the row's trace (analysis/perf/perf_model.py)
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
