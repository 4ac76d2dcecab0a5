"""Typed records: what a run produces and what everything downstream reads.

All records are msgspec Structs so they encode to JSON (run.json, the SQLite store, --json)
and decode back with validation. Keys only grow within one schema version.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from attnprof.errors import UserError

__all__ = [
    "RAN_STATUSES",
    "RUN_SCHEMA",
    "Accuracy",
    "Environment",
    "LayerAttention",
    "MachineLoad",
    "MemoryResult",
    "Mode",
    "ModelInfo",
    "ModelResult",
    "ProfileSummary",
    "ReasonCode",
    "ResumeState",
    "RunRecord",
    "RunResult",
    "Status",
    "TimingSummary",
    "WorkloadRecord",
    "decode_run",
    "encode_json",
    "is_incorrect",
    "mode_of",
    "variant_label",
]

RUN_SCHEMA = "attnprof.run/1"

# ok: ran to the end. unsupported: the variant's own check (or the model's) rejects the workload.
# refused: its memory estimate is over the limit (`attnprof run`'s and the sweep's one gate; stores
# written before it also hold "skipped" for a sweep's refusal, read back as refused). oom, error:
# it failed while running. skipped: `attnprof model` left an implementation out of its default
# list (too slow here; it runs when asked for). crashed, timeout: a sweep's worker died or ran out
# of time. incorrect: ran to the end, but its output (or, with --backward, a gradient) failed the
# accuracy check; its times are kept, its throughput is not. Records written before this word hold
# "ok" with a failing accuracy: RunResult reads them back as "incorrect" (one vocabulary for
# run.json, compare and the store).
Status = Literal["ok", "incorrect", "unsupported", "refused", "oom", "error", "skipped", "crashed", "timeout"]

# the statuses of a variant that ran to the end (timed, correct or not)
RAN_STATUSES = frozenset({"ok", "incorrect"})


Mode = Literal["eager", "compile"]


def mode_of(compiled: bool) -> Mode:
    """A variant's mode from its compile flag: the one place the bool becomes the word."""
    return "compile" if compiled else "eager"


def variant_label(variant: str, mode: str) -> str:
    """A variant's unique name in a run or a store: the compiled twin of `naive` is `naive:compile`."""
    return f"{variant}:compile" if mode == "compile" else variant


class ReasonCode(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a variant did not run, as data: a code (its English template is
    attnprof.reasons.ENGLISH[code], its message id in the report catalogs `harness.<code>`) and
    the template's fields. `parts` are reasons of their own, rendered and joined into the
    template's {parts} field (the pieces of a memory estimate, a variant's reason inside a
    model's). Fields named *_bytes are byte counts, formatted where they are rendered."""

    code: str
    args: dict[str, str | int | float] = {}
    parts: list[ReasonCode] = []


class WorkloadRecord(msgspec.Struct, frozen=True, kw_only=True):
    batch: int
    heads: int
    kv_heads: int
    seq: int
    kv_seq: int
    head_dim: int
    dtype: str
    device: str
    causal: bool
    seed: int = 0
    # the --mask text ("" in records written before masks: causal or none, from `causal`)
    mask: str = ""
    backward: bool = False
    phase: str = "prefill"


class MachineLoad(msgspec.Struct, kw_only=True):
    """How busy the machine was over a clean-timing window (harness/load.py). unreliable: some
    signal passed its limit; reasons says which, in words."""

    wall_s: float
    cpus: int
    own_cpu_share: float
    other_cpu_share: float | None  # other processes' CPU time / capacity of our CPUs
    steal_share: float | None
    loadavg_1m: float | None
    max_spread: float | None  # largest IQR / median among the variants timed together
    unreliable: bool
    reasons: list[str] = []  # in English (run.json's readers); rendered from reason_codes
    # the same reasons as data (attnprof.reasons, codes load_*): what a report says them from;
    # empty in records written before them (report/reasons.py reads those by their English)
    reason_codes: list[ReasonCode] = []


class TimingSummary(msgspec.Struct, kw_only=True):
    """Clean timing of one forward call, without the profiler.

    median_ms and iqr_ms are derived from samples_ms (one sample = one forward call, or the mean
    of a small batch of calls when one call is shorter than the clock's resolution).
    """

    median_ms: float
    iqr_ms: float
    mean_ms: float
    min_ms: float
    n: int
    threads: int
    method: str
    noisy: bool
    samples_ms: list[float]
    # the machine's load over the window these samples were taken in (shared by the variants
    # timed together, whose i-th samples come from the same round)
    load: MachineLoad | None = None
    rounds_paired: bool = False  # samples interleaved with the other variants of the same run
    allocator: str | None = None  # the allocator state timed in (harness/allocator.py)
    minor_faults_per_call: float | None = None  # getrusage minor page faults per call (CPU)
    cold: ColdTiming | None = None  # the same calls in the cold allocator state (CPU, glibc)


class ColdTiming(msgspec.Struct, kw_only=True):
    """The same calls timed in the cold allocator state (harness/allocator.py): larger per-call
    buffers mapped and page-faulted afresh on every call, as in a fresh process. Interleaved like
    the warm samples, but in rounds of their own after them."""

    allocator: str
    median_ms: float
    iqr_ms: float
    n: int
    samples_ms: list[float]
    minor_faults_per_call: float | None = None


class Accuracy(msgspec.Struct, kw_only=True):
    """Output against an fp64 reference computed once per workload."""

    # None where the output holds NaN or inf: a maximum over its finite values alone would read
    # as a small error (an all-NaN output's is 0.0); nan_count and inf_count say what it holds
    max_abs_err: float | None
    max_rel_err: float | None
    nan_count: int
    inf_count: int
    tolerance: float  # atol of harness.accuracy.tolerance(dtype)
    ok: bool  # every value finite and |out - ref| <= atol + rtol * |ref| everywhere
    rtol: float = 0.0
    worst_over_tolerance: float | None = None  # max of |out - ref| / (atol + rtol |ref|); > 1 fails

    @property
    def non_finite(self) -> bool:
        return bool(self.nan_count or self.inf_count)

    def error_text(self) -> str:
        """The error cell: the counts of NaN and inf where there are any, else the max error."""
        if self.non_finite:
            bad = [f"{n} {what}" for n, what in ((self.nan_count, "NaN"), (self.inf_count, "inf")) if n]
            return f"non-finite ({', '.join(bad)})"
        return f"{self.max_abs_err or 0.0:.1e}"

    def rank_error(self) -> float:
        """For picking the worst of several checks: a non-finite one is worse than any number."""
        return float("inf") if self.non_finite or self.max_abs_err is None else self.max_abs_err

    def failure(self, dtype: str, *, what: str = "output") -> str:
        """Why the result is incorrect, in one English line (reports translate it by its parts).
        `what`: the output, or "gradient dq" with --backward."""
        if self.nan_count or self.inf_count:
            return f"incorrect {what}: {self.nan_count} NaN and {self.inf_count} inf values"
        return (
            f"incorrect {what}: max abs error {self.max_abs_err or 0.0:.2g} exceeds the {dtype} tolerance "
            f"(atol {self.tolerance:g} + rtol {self.rtol:g} x |reference|)"
        )


def is_incorrect(acc: Accuracy | None) -> bool:
    """Checked and failed. An unchecked result (accuracy None) is not called incorrect."""
    return acc is not None and not acc.ok


class MemoryResult(msgspec.Struct, kw_only=True):
    """Peak memory of one forward call above what was allocated before it."""

    peak_bytes: int | None
    method: str
    estimate_bytes: int


class ProfileSummary(msgspec.Struct, kw_only=True):
    """What the profiled steps showed, per forward (per attn_fwd instance) and, with backward,
    per backward (per attn_bwd instance)."""

    forwards: int
    cpu_ops_per_forward: float
    gpu_ops_per_forward: float
    cpu_time_us_per_forward: float
    gpu_time_us_per_forward: float
    top_ops: list[str] = []
    backwards: int = 0
    cpu_ops_per_backward: float | None = None
    gpu_ops_per_backward: float | None = None
    cpu_time_us_per_backward: float | None = None
    gpu_time_us_per_backward: float | None = None
    # per forward from a lean pass before the exported one (no shapes, memory or stacks): the
    # profiler's own cost without the rich pass's recording (harness/profile.py)
    lean_cpu_time_us_per_forward: float | None = None
    lean_gpu_time_us_per_forward: float | None = None


class LayerAttention(msgspec.Struct, kw_only=True):
    """One attention layer in a model run's profiled steps (attn_fwd/layer.N, attn_bwd/layer.N)."""

    layer: int
    fwd_us: float  # mean time per step inside attn_fwd/layer.N (profiler overhead included)
    bwd_us: float | None = None  # the same for attn_bwd/layer.N; None without a backward pass
    calls_per_step: float = 1.0


class ModelResult(msgspec.Struct, kw_only=True):
    """What `attnprof model` adds to a result: one attention implementation inside a model.

    Shares are of the profiled step time, from the exported trace: `attention_share` from the
    per-layer ranges, `analyser_share` from the ops the analyser recognises as attention
    (attnprof.analysis.breakdown.model_share); `share_noise` is the larger spread of either share across
    the profiled steps; `share_gap` is the smallest difference between the two shares in any one
    profiled step, and `shares_agree` is false when that gap is larger than the noise. The gap is
    taken per step because a rule that misses part of attention misses it in every step, while a
    stall of the machine lands in one step and on one side (a preempted op the analyser's span
    holds, or Python time inside a range).
    """

    implementation: str  # the attn_implementation the model ran with
    origin: Literal["transformers", "attnprof"]
    attention_share: float | None = None
    analyser_share: float | None = None
    share_noise: float | None = None
    share_gap: float | None = None
    shares_agree: bool | None = None
    step_us_profiled: float | None = None  # mean model_step time in the profiled steps
    attention_ms: float | None = None  # attention_share x the clean step time
    layers: list[LayerAttention] = []
    reference: str = "eager"  # what `accuracy` of this result compares against
    time_source: Literal["cpu", "gpu"] = "cpu"
    findings: list[str] = []  # "CODE: title" of the analyser's findings on this trace


class RunResult(msgspec.Struct, kw_only=True):
    variant: str
    status: Status
    timing: TimingSummary | None = None
    mode: Mode = "eager"
    description: str = ""
    layout: str = "BHSD"
    backend: str | None = None
    reason: str | None = None
    tag: str | None = None
    accuracy: Accuracy | None = None
    memory: MemoryResult | None = None
    profile: ProfileSummary | None = None
    trace: str | None = None
    table: str | None = None
    flops_useful: float = 0.0
    flops_executed: float = 0.0
    bytes_min: float = 0.0
    tflops_useful: float | None = None
    pct_of_peak: float | None = None
    label: str = ""
    estimate_bytes: int = 0
    warnings: list[str] = []
    model: ModelResult | None = None  # set by `attnprof model`
    # --backward: clean timing of the backward alone and of forward + backward as one call;
    # `timing` stays the forward's. FLOPs: backward = 2.5x the forward's (flop_convention).
    timing_bwd: TimingSummary | None = None
    timing_total: TimingSummary | None = None
    grad_accuracy: dict[str, Accuracy] = {}  # dq, dk, dv against the fp64 reference
    flops_useful_bwd: float = 0.0
    flops_executed_bwd: float = 0.0
    tflops_useful_bwd: float | None = None
    tflops_useful_total: float | None = None
    flop_convention: str | None = None
    # --mask: how this variant expressed it, and what that let the backends do
    mask_path: str | None = None
    block_sparsity: float | None = None  # flex: share of the BlockMask's blocks skipped
    pytorch_choice: str | None = None  # SDPA: the backend PyTorch's dispatch picks for this mask
    backend_rules: dict[str, str] = {}  # SDPA: per backend, accepts or refuses (and why)
    # `reason` as data, for a variant that did not run because it was rejected or refused; reports
    # say it in their language from it. None in records written before codes (and for failures).
    reason_code: ReasonCode | None = None
    # whether the variant builds the full B*H*Sq*Skv score matrix (and a dense mask), from the
    # variant's own definition (Variant.materialises); None: not recorded (run.json written
    # before this field, or a model run), which readers must treat as unknown
    materialises: bool | None = None
    # the lean profiler pass's trace (no shapes, memory or stacks), relative to the run directory
    # like `trace` (traces/<tag>.lean.json.gz): the times reports split into per-op and
    # per-category shares, timelines and diffs come from it. None: not kept (run.json written
    # before this field, or not profiled): reports then use `trace` and say so
    lean_trace: str | None = None
    # what this variant was actually measured with, where the harness can change it per variant
    # (a slow call: harness/prepare.py SLOW_STEPS, SLOW_MIN_SAMPLES): the profiler schedule (wait,
    # warmup, active) it was profiled with, and the least number of interleaved timing rounds it
    # was timed in. None: not profiled / not timed, or a record from before these fields (the
    # run's RunRecord.steps and min_rounds then stand for it)
    profile_steps: tuple[int, int, int] | None = None
    min_rounds: int | None = None

    def __post_init__(self) -> None:
        if not self.label:
            self.label = variant_label(self.variant, self.mode)
        # msgspec runs this on decode too: an older record's "ok" with a failing check is normalised
        # here, once, for every reader
        self.settle_status()

    def settle_status(self) -> None:
        """A result that ran to the end is `incorrect` when a check failed, `ok` otherwise."""
        if self.status in RAN_STATUSES:
            self.status = "incorrect" if self.incorrect else "ok"

    @property
    def ran(self) -> bool:
        """Ran to the end and was timed (or is being): correct or not."""
        return self.status in RAN_STATUSES

    def failed_gradients(self) -> list[str]:
        """The gradients (dq, dk, dv) whose check failed, with --backward; [] otherwise."""
        return [name for name, acc in self.grad_accuracy.items() if is_incorrect(acc)]

    @property
    def incorrect(self) -> bool:
        """Checked and failed: the output or, with --backward, any gradient. A wrong gradient is a
        wrong answer for training as surely as a wrong output is for inference."""
        return is_incorrect(self.accuracy) or bool(self.failed_gradients())


class PeakProvenance(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where the run's peak figure comes from, as data (environment.peak_provenance), so reports
    can say it in their language (environment.peak_source keeps the English).

    kind "spec": the dense spec-sheet figure of the GPU named `spec_device` (attnprof.device.PEAKS).
    kind "measured": the best square GEMM of the sizes `tried` ("fp32 2048"), best at `best_at`,
    each timed at least `repeats` times within `budget_s` seconds, with `threads` threads on
    `host` at `measured_at` (UTC); `cached_in`: the cache file it is kept in, else `not_cached`:
    why not (the load meter's reasons, harness/load.py). harness/env.py's peak_text writes it
    in English."""

    kind: Literal["spec", "measured"]
    dtype: str
    spec_device: str | None = None
    tried: list[str] = []
    best_at: str | None = None
    repeats: int | None = None
    budget_s: float | None = None
    threads: int | None = None
    host: str | None = None
    measured_at: str | None = None
    cached_in: str | None = None
    not_cached: list[str] = []
    not_cached_codes: list[ReasonCode] = []  # the same as data (MachineLoad.reason_codes)

    @property
    def busy(self) -> bool:
        """Measured while the machine was busy and not cached (harness/env.measured_peak uses a
        cached figure whenever one exists): a low figure, so no percentage of it is sound."""
        return self.kind == "measured" and not self.cached_in and bool(self.not_cached)


class Environment(msgspec.Struct, kw_only=True):
    attnprof_version: str
    torch_version: str
    python: str
    platform: str
    host: str
    device: str
    device_name: str
    cpu_model: str
    threads: int
    compute_capability: str | None = None
    cuda_version: str | None = None
    cudnn_version: str | None = None
    gpu_memory_bytes: int | None = None
    peak_tflops: float | None = None
    peak_source: str | None = None  # in English (kept for compatibility); peak_provenance as data
    # what the machine makes of this run's dtype, where it matters (harness/env.cpu_dtype_note)
    notes: list[str] = msgspec.field(default_factory=list)
    peak_provenance: PeakProvenance | None = None  # None: a run.json from before it was recorded
    # fp32 matmul precision, which fp32 results on a GPU depend on (TF32 tensor cores or not):
    # torch.get_float32_matmul_precision() ("highest", "high", "medium"), and on CUDA
    # torch.backends.cuda.matmul.allow_tf32 / torch.backends.cudnn.allow_tf32; None: not recorded
    float32_matmul_precision: str | None = None
    cuda_matmul_allow_tf32: bool | None = None
    cudnn_allow_tf32: bool | None = None

    @property
    def sound_peak(self) -> float | None:
        """The peak a % of peak may be taken of: None when it was measured on a busy machine (the
        figure stays recorded, with its provenance), so every view says "not computed" instead of
        printing a percentage of a low peak. The one home of that rule."""
        if self.peak_provenance is not None and self.peak_provenance.busy:
            return None
        return self.peak_tflops

    def busy_peak_note(self) -> str | None:
        """Why % of peak is not computed, in English (reports say it from the provenance)."""
        prov = self.peak_provenance
        if prov is None or not prov.busy:
            return None
        return (
            f"% of peak not computed: peak measured while the machine was busy: {'; '.join(prov.not_cached)}; "
            "rerun on a quiet machine"
        )


class ResumeState(msgspec.Struct, kw_only=True):
    """What an interrupted run had left to do, for `attnprof run --resume DIR`."""

    pending: list[str]  # variants to run: built-in labels, or the user's module:function / file.py:function
    options: dict[str, Any]  # the run's RunOptions, to finish it as it started


class ModelInfo(msgspec.Struct, kw_only=True):
    """The model of an `attnprof model` run. The run's `workload` is then the shape of one
    attention call inside it (per layer), and each result's timing is one whole model step."""

    name: str  # as given: a preset, a path or a Hub id
    source: Literal["preset", "config", "checkpoint", "hub"]
    kind: Literal["causal-lm", "encoder", "vision"]
    model_class: str
    model_type: str
    size: str | None = None  # preset size
    phase: Literal["prefill", "decode"] = "prefill"
    backward: bool = False
    batch: int = 1
    seq: int = 0  # tokens (or patches + 1) per sequence in the step's input
    layers: int = 0
    hidden: int = 0
    parameters: int = 0
    padding: list[int] = []  # real tokens per sequence, when the batch is padded (encoders)
    transformers_version: str = ""
    step: str = ""  # what one step runs, in words
    # from the clean timings: the fastest implementation, the next one, and how much slower it is
    fastest: str | None = None
    runner_up: str | None = None
    margin: float | None = None  # runner_up median / fastest median - 1
    # the 95% bootstrap interval of that margin (attnprof.analysis.stats), and whether it holds 0
    margin_low: float | None = None
    margin_high: float | None = None
    margin_within_noise: bool | None = None
    timing_note: str | None = None  # the load meter's reasons when the timing window was busy


class RunRecord(msgspec.Struct, kw_only=True):
    schema: str
    created: str
    environment: Environment
    workload: WorkloadRecord
    results: list[RunResult]
    causal_alignment: str = "top-left"
    steps: tuple[int, int, int] = (1, 1, 3)  # the run's default profiler schedule
    # the run's default least number of clean-timing rounds (RunOptions.min_samples); None in a
    # record from before it was recorded
    min_rounds: int | None = None
    # interrupted (SIGINT/SIGTERM): `results` holds what finished, `resume` what did not
    interrupted: bool = False
    resume: ResumeState | None = None
    model: ModelInfo | None = None  # set by `attnprof model`


def encode_json(obj: object, *, indent: int = 2) -> bytes:
    raw = msgspec.json.encode(obj)
    return msgspec.json.format(raw, indent=indent) if indent else raw


class _SchemaOnly(msgspec.Struct):
    schema: str = ""


def decode_run(data: bytes, *, source: str = "run.json") -> RunRecord:
    """A run record, refusing one written under another major schema version (a newer attnprof's
    attnprof.run/2 may mean other things by the same field names): UserError naming both."""
    head = msgspec.json.decode(data, type=_SchemaOnly)
    name, _, version = head.schema.partition("/")
    ours = RUN_SCHEMA.partition("/")[2].split(".")[0]
    if name != RUN_SCHEMA.partition("/")[0] or version.split(".")[0] != ours:
        raise UserError(
            f"{source}: schema {head.schema or '(none)'!r} is not {RUN_SCHEMA!r}, the run format this "
            f"attnprof reads; use the attnprof version that wrote it, or rerun"
        )
    return msgspec.json.decode(data, type=RunRecord)
