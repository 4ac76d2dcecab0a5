"""Typed records: what a run produces and what everything downstream reads.

All records are msgspec Structs so they encode to JSON (run.json, the SQLite store, --json)
and decode back with validation. Keys only grow within one schema version.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from attnprof.errors import UserError

__all__ = [
    "RUN_SCHEMA",
    "Accuracy",
    "Environment",
    "MachineLoad",
    "MemoryResult",
    "ProfileSummary",
    "ResumeState",
    "RunRecord",
    "RunResult",
    "Status",
    "TimingSummary",
    "WorkloadRecord",
    "decode_run",
    "encode_json",
    "is_incorrect",
    "variant_label",
]

RUN_SCHEMA = "attnprof.run/1"

Status = Literal["ok", "unsupported", "refused", "oom", "error", "skipped", "crashed", "timeout"]


def variant_label(variant: str, mode: str) -> str:
    """A variant's unique name in a run or a store: the compiled twin of `naive` is `naive:compile`."""
    return f"{variant}:compile" if mode == "compile" else variant


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
    reasons: list[str] = []


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


class Accuracy(msgspec.Struct, kw_only=True):
    """Output against an fp64 reference computed once per workload."""

    max_abs_err: float
    max_rel_err: float
    nan_count: int
    inf_count: int
    tolerance: float  # atol of harness.accuracy.tolerance(dtype)
    ok: bool  # every value finite and |out - ref| <= atol + rtol * |ref| everywhere
    rtol: float = 0.0
    worst_over_tolerance: float | None = None  # max of |out - ref| / (atol + rtol |ref|); > 1 fails

    def failure(self, dtype: str) -> str:
        """Why the result is incorrect, in one English line (reports translate it by its parts)."""
        if self.nan_count or self.inf_count:
            return f"incorrect output: {self.nan_count} NaN and {self.inf_count} inf values"
        return (
            f"incorrect output: max abs error {self.max_abs_err:.2g} exceeds the {dtype} tolerance "
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
    """What the profiled steps showed, per forward (per attn_fwd instance)."""

    forwards: int
    cpu_ops_per_forward: float
    gpu_ops_per_forward: float
    cpu_time_us_per_forward: float
    gpu_time_us_per_forward: float
    top_ops: list[str] = []


class RunResult(msgspec.Struct, kw_only=True):
    variant: str
    status: Status
    timing: TimingSummary | None = None
    mode: Literal["eager", "compile"] = "eager"
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

    def __post_init__(self) -> None:
        if not self.label:
            self.label = variant_label(self.variant, self.mode)


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
    peak_source: str | None = None


class ResumeState(msgspec.Struct, kw_only=True):
    """What an interrupted run had left to do, for `attnprof run --resume DIR`."""

    pending: list[str]  # variants to run: built-in labels, or the user's module:function / file.py:function
    options: dict[str, Any]  # the run's RunOptions, to finish it as it started


class RunRecord(msgspec.Struct, kw_only=True):
    schema: str
    created: str
    environment: Environment
    workload: WorkloadRecord
    results: list[RunResult]
    causal_alignment: str = "top-left"
    steps: tuple[int, int, int] = (1, 1, 3)
    # interrupted (SIGINT/SIGTERM): `results` holds what finished, `resume` what did not
    interrupted: bool = False
    resume: ResumeState | None = None


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
