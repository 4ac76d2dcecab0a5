"""The whole trace's parts of a TraceAnalysis ("attnprof.analysis/1", documented in result.py):
where the device time went, the device, the trace's own facts and repairs, the totals, and the
category, kernel, memory-op and launch-API tables. Field order is JSON key order."""

from __future__ import annotations

import msgspec

__all__ = [
    "NO_CATEGORY",
    "AttentionShare",
    "AttentionSideShare",
    "CategoryStat",
    "CommShare",
    "Device",
    "Gaps",
    "KernelStat",
    "LaunchApi",
    "MemoryOp",
    "Occupancy",
    "Overrun",
    "Sanitation",
    "Share",
    "TimeShare",
    "Totals",
    "TraceInfo",
]

# Field order is JSON key order (msgspec.to_builtins keeps it) and every field is written, None as
# null (omit_defaults stays off), except in Gaps, whose keys the trace may not support at all.


class TimeShare(msgspec.Struct, kw_only=True):
    time_us: float
    pct: float | None  # of Share.device_time_us; None without device time


class CommShare(TimeShare, kw_only=True):
    """Communication's share, and how much of it compute hides (attnprof.analysis.timeline.overlap)."""

    exposed_us: float | None  # communication time with no compute on any stream; None without
    hidden_pct: float | None  # of the communication union that compute overlaps; None without


class AttentionShare(msgspec.Struct, kw_only=True):
    time_us: float  # fused + unfused + provenance
    pct: float | None
    fused_us: float  # kernels of the attention category (by name)
    unfused_us: float
    fwd_us: float
    bwd_us: float
    unfused_bwd_us: float
    # device ops that are attention by where they came from only (an attention op launched or
    # encloses them) and neither attention kernels by name nor in an unfused chain
    provenance_us: float = 0.0
    # device time per rule that made it attention (attnprof.analysis.attribution.provenance.RULE_NAMES)
    rules: dict[str, float] = {}
    # attention by kernel name only: no launching op, range or chain says so (the caveat), and
    # the short names of those kernels, by time (at most 10)
    name_only_us: float = 0.0
    name_only_kernels: list[str] = []


class AttentionSideShare(TimeShare, kw_only=True):
    """Memory work for attention (fills, memsets, memcpys, casts, copies an attention op runs,
    and KV-cache writes wherever they run: attnprof.analysis.attribution.attention_side): not
    attention; its own part of the share, beside attention."""

    # device time per kind (attention_side.SIDE_KINDS) and per rule that made it attention-side
    # (attnprof.analysis.attribution.provenance.RULE_NAMES: an attention op placed it, or
    # "kv-cache write")
    kinds: dict[str, float] = {}
    rules: dict[str, float] = {}


class Share(msgspec.Struct, kw_only=True):
    """Where the device time went, attention first (attnprof.analysis.breakdown.device_share)."""

    device_time_us: float
    attention: AttentionShare
    gemm: TimeShare
    conv: TimeShare
    communication: CommShare
    memory: TimeShare
    other: TimeShare
    basis: str
    # a trace without device time is shared by CPU self time (attnprof.analysis.breakdown.cpu_share), and
    # basis says so: its total, and the norm and elementwise groups a CPU model's time is in
    cpu_self_time_us: float | None = None
    norm: TimeShare | None = None
    elementwise: TimeShare | None = None
    # the attention-side memory work, not counted in attention, memory or other (the parts still
    # sum to the device time); None for a trace shared by CPU self time
    attention_side: AttentionSideShare | None = None


# the key Device.not_read gives device events written without a category (PyTorch 1.x's export)
NO_CATEGORY = "(no category)"


class Device(msgspec.Struct, kw_only=True):
    kind: str  # "gpu", "cpu" or "unknown"
    accelerator: str | None  # "cuda", "rocm", "xpu", "mtia", "other"; None without device activity
    name: str | None
    compute_capability: str | None
    num_sms: int | None
    total_memory_bytes: int | None
    count: int
    id: int | None
    arch_limits_source: str | None
    tensor_core_dtypes: list[str] | None
    # device work the trace holds and no analysis reads, by category ("(no category)" for events
    # without one; trace/unread.py): the device line says so instead of "CPU only"
    not_read: dict[str, int] | None = None


class Gaps(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the trace failed to record (attnprof.analysis.attribution.devices.gap_warnings). A key is absent,
    not null, where the trace gives nothing to count it from (no launches, no linked launch)."""

    kernel_launches: int | None = None
    launches_without_device_op: int | None = None
    device_ops_before_launch: int | None = None
    dropped_categories: dict[str, int] | None = None
    # events the loader skipped as not needed (cuda_sync, python_function, instants), by
    # "category/phase", so that nothing is dropped silently
    not_analysed: dict[str, int] | None = None
    linked_by_external_id: int | None = None  # device ops paired with their launch by External id


class Overrun(msgspec.Struct, kw_only=True):
    """One device op that ends after the next op on its stream has ended
    (attnprof.analysis.timeline.sanitize): its recorded duration and the one busy time uses."""

    name: str  # shortened kernel name
    lane: str  # "pid/tid": the device and stream
    start_us: float  # the trace's own timestamp
    recorded_us: float
    clipped_us: float  # to the next op's start: what busy and idle time count


class Sanitation(msgspec.Struct, kw_only=True):
    """What attnprof.analysis.timeline.sanitize found on the device streams and how it was repaired."""

    overlap_tolerance_us: float = 0.0
    overlaps: int = 0  # ops starting before the op before them on their stream ended
    overlap_us: float = 0.0  # the time overlapped (busy time counts it once)
    overlap_lanes: int = 0
    overruns: int = 0  # ops ending after the next op on their stream ended: clipped for busy
    overrun_clipped_us: float = 0.0  # recorded minus clipped, summed
    overrun_examples: list[Overrun] = []  # the largest, at most 10
    bad_durations: int = 0  # negative or over a day: set to 0 us by the loader


class TraceInfo(msgspec.Struct, kw_only=True):
    events: int
    kept_events: int
    dropped: dict[str, int]  # "category/phase" -> events the loader dropped
    schema_version: int | str | None  # the trace's schemaVersion, as written
    rank: int | None
    has_flows: bool
    has_device_properties: bool
    raw_json_bytes: int
    gaps: Gaps
    sanitation: Sanitation = msgspec.field(default_factory=Sanitation)


class Totals(msgspec.Struct, kw_only=True):
    kernels: int
    kernel_time_us: float
    memcpy: int
    memcpy_time_us: float
    memset: int
    memset_time_us: float
    cpu_ops: int
    gpu_ops: int
    unique_kernels: int
    unlaunched_gpu_ops: int
    graph_kernels: int
    other_device_ops: int  # other accelerators' device events (MTIA compute, DMA, waits)
    other_device_time_us: float
    device_busy_us: float  # the union of device-op intervals
    device_span_us: float


class CategoryStat(msgspec.Struct, kw_only=True):
    category: str
    count: int
    time_us: float
    pct_time: float


class Occupancy(msgspec.Struct, kw_only=True):
    """One kernel's occupancy: achieved (the profiler's, weighted by time) and theoretical (from
    the launch resources of its most common configuration, attnprof.analysis.attribution.occupancy)."""

    achieved_pct: float | None  # None when not measured
    measured: bool
    not_measured_reason: str | None
    launches_not_measured: int
    theoretical_pct: float | None
    blocks_per_sm: int | None
    warps_per_sm: int | None
    limiter: str | None
    registers: int | None
    threads_per_block: int | None
    shared_mem_bytes: int | None


class KernelStat(msgspec.Struct, kw_only=True):
    name: str
    short_name: str
    category: str
    family: str
    tensor_cores: bool | None
    precision: str | None
    direction: str | None  # "fwd", "bwd", "bwd-aux" for attention and softmax, else None
    count: int
    time_us: float
    mean_us: float
    pct_time: float
    launch_apis: dict[str, int]
    occupancy: Occupancy | None
    # launches of this kernel that are attention, per rule that made them so
    # (attnprof.analysis.attribution.provenance.RULE_NAMES); None when none is
    attention_rules: dict[str, int] | None = None
    # launches of this kernel that are attention-side memory (memory work an attention op runs,
    # or a KV-cache write), per rule that made them so; None when none is
    attention_side_rules: dict[str, int] | None = None


class MemoryOp(msgspec.Struct, kw_only=True):
    name: str
    category: str
    count: int
    time_us: float


class LaunchApi(msgspec.Struct, kw_only=True):
    api: str
    gpu_ops: int
    kernels: int
