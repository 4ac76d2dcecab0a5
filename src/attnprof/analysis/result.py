"""The analysis result: TraceAnalysis and Finding, and their JSON form ("attnprof.analysis/1").

Every part is a msgspec Struct whose fields are declared in the order of its JSON keys, so that
TraceAnalysis.to_dict() (msgspec.to_builtins, nothing hand-written) returns exactly what
`attnprof analyze --json` prints for one trace, nulls included. Keys only grow within the schema
version; renaming one bumps it. Producers (attnprof.analysis.pipeline and its helpers) build these
records; consumers (findings, compare, report) read their attributes. The same JSON decodes back
into a TraceAnalysis with decode_analysis(). DataFrame accessors build pandas frames lazily.

Top-level keys:

    schema       "attnprof.analysis/1"
    source       the trace file name; path: the path given
    share        where the device time went, attention first: {device_time_us, attention
                  {time_us, pct, fused_us, unfused_us, fwd_us, bwd_us, unfused_bwd_us, provenance_us,
                  rules {rule: us}, name_only_us, name_only_kernels}, gemm, conv, communication,
                  memory, other (each {time_us, pct}; communication also {exposed_us, hidden_pct}:
                  the communication time no compute hides, and the share it hides, null without
                  communication), basis, cpu_self_time_us, norm, elementwise (the last three for
                  a trace without device time: then every part is CPU self time, and basis says
                  so; null otherwise)}; pct null without device time
    device       {kind: "gpu"|"cpu"|"unknown", accelerator: "cuda"|"rocm"|"xpu"|"mtia"|"other"|
                  null, name, compute_capability ("9.0", as deviceProperties says; on ROCm the gfx
                  version) or null, num_sms, total_memory_bytes, count, id, arch_limits_source
                  (CUDA only), tensor_core_dtypes (CUDA with a compute capability) or null}
    trace        {events, kept_events, dropped {category/phase: count}, schema_version, rank,
                  has_flows, has_device_properties, raw_json_bytes, gaps {kernel_launches,
                  launches_without_device_op, device_ops_before_launch, dropped_categories,
                  not_analysed, linked_by_external_id}
                  (each key only where the trace lets it be worked out), sanitation
                  {overlap_tolerance_us, overlaps, overlap_us, overlap_lanes, overruns,
                  overrun_clipped_us, overrun_examples [{name, lane, start_us, recorded_us,
                  clipped_us}], bad_durations} (attnprof.analysis.sanitize)}
    totals       {kernels, kernel_time_us, memcpy, memcpy_time_us, memset, memset_time_us,
                  cpu_ops, gpu_ops, unique_kernels, unlaunched_gpu_ops, graph_kernels,
                  other_device_ops, other_device_time_us (other accelerators' device events),
                  device_busy_us (union of device-op intervals), device_span_us}
    categories   [{category, count, time_us, pct_time}], by time, GPU ops only
    kernels      [{name, short_name, category, family, tensor_cores (bool|null), precision,
                  direction ("fwd"|"bwd"|"bwd-aux" for attention and softmax, else null),
                  count, time_us, mean_us, pct_time, launch_apis {api: count},
                  occupancy {achieved_pct (null when not measured), measured,
                  not_measured_reason, launches_not_measured, theoretical_pct, blocks_per_sm,
                  warps_per_sm, limiter, registers, threads_per_block, shared_mem_bytes} | null,
                  attention_rules {rule: launches} | null}]
                 the top N by time (N = --top; 0 = all)
    memory_ops   [{name, category, count, time_us}]
    launch_apis  [{api, gpu_ops, kernels}]
    regions      [{name, selector, instances, gpu_ops_per_instance, cpu_ops_per_instance,
                  gpu_time_us_per_instance, gpu_span_us_per_instance,
                  gpu_busy_union_us_per_instance, cpu_time_us_per_instance, threads ("own"|"all"),
                  attribution {rules {rule: gpu ops per instance}, threads [{thread "pid/tid",
                  gpu_ops_per_instance}]}, backward {linked_by, gpu_ops_per_instance,
                  gpu_time_us_per_instance}, idle {before_first_launch_us_per_instance,
                  window_us_per_instance, busy_us_per_instance, idle_us_per_instance, idle_pct,
                  host_during_idle_us_per_instance {sync, host_compute, launching,
                  nothing_recorded}}, unplaced_gpu_ops, gpu_ops (first instance, in order: [{name, category, start_us
                  (from the instance's first GPU op), time_us}]),
                  categories_per_instance {category: count}, top_cpu_ops [{name, per_instance}],
                  per_instance [{start_us, cpu_time_us, cpu_ops, gpu_ops, gpu_time_us, gpu_span_us,
                  gpu_busy_union_us, idle {window_us, busy_us, idle_us, idle_pct,
                  host_during_idle_us, before_first_launch_us}}],
                  cpu_ops (first instance, in order of start, an op before the ops inside it, at
                  most 500: [{name, start_us (from the instance's start), dur_us, self_us, depth
                  (0 = not inside another op of the instance)}]),
                  cpu_ops_by_name (every instance, by self time: [{name, per_instance (count),
                  self_us_per_instance}]), communication (null without communication ops:
                  {time_us_per_instance, exposed_us_per_instance, hidden_pct}),
                  replayed_instances (graph replays of a range the capture trace recorded:
                  no CPU ops or CPU time of their own)}]
                 self time (self_us): an op's duration less that of the ops directly inside it
    roofline     null, or {basis, region, workload, flops_useful, flops_executed, bytes_min, time_us,
                  achieved_tflops, achieved_tbps, peak_tflops, peak_tbps, peak_source,
                  pct_of_peak_flops, pct_of_peak_bandwidth, note}
    findings     [{code, severity ("info"|"warning"|"error"), message, evidence {...}}]
    repairs      [str]: what the loader repaired in invalid JSON
    warnings     [str]
    graphs       {replayed_ops, replayed_us, attributed_ops, unattributed_us, unattributed_pct,
                  capture, graphs_captured, graph_launches, replays_matched, replays_unmatched,
                  config_differs, imported_rows, matched_by, kernels [{name, op, frame, module,
                  count, time_us}]}: device ops replayed by graph
                  launches, and those given their captured CPU op (attnprof.analysis.replay)
    compiled     {time_us, pct, name_only_us, ranges, graphs [{name, device_ops, time_us, pct}],
                  kernels [{name, kind, fused_ops, graph, frame, module, count, time_us, by}]}: device time in
                  torch.compile's code (attnprof.analysis.compiled)
    phases       {source, phases [{phase, steps, device_ops, device_us, pct, attention_us,
                  attention_pct, ops [{op, device_ops, device_us}], batches [{tokens,
                  prefill_requests, prefill_query_tokens, prefill_kv_tokens, decode_requests,
                  decode_query_tokens, decode_kv_tokens}]}], unknown_us, unknown_pct}: prefill /
                  decode / mixed steps of a serving trace (attnprof.analysis.phases)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.analysis.perf_records import OpPerf, PerfModel

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SCHEMA",
    "SEVERITIES",
    "AttentionShare",
    "Attribution",
    "Backward",
    "CategoryStat",
    "CommShare",
    "Compiled",
    "CompiledGraph",
    "CompiledKernel",
    "CpuOp",
    "CpuOpByName",
    "Device",
    "Finding",
    "Gaps",
    "GraphReplays",
    "InstanceIdle",
    "InstanceStat",
    "KernelStat",
    "LaunchApi",
    "MemoryOp",
    "Occupancy",
    "Overrun",
    "Phase",
    "PhaseOp",
    "Phases",
    "RegionComm",
    "RegionGpuOp",
    "RegionIdle",
    "RegionStat",
    "ReplayedKernel",
    "Roofline",
    "Sanitation",
    "Share",
    "StepBatch",
    "ThreadOps",
    "TimeShare",
    "TopCpuOp",
    "Totals",
    "TraceAnalysis",
    "TraceInfo",
    "decode_analysis",
]

SCHEMA = "attnprof.analysis/1"
SEVERITIES = ("info", "warning", "error")

# Field order is JSON key order (msgspec.to_builtins keeps it) and every field is written, None as
# null (omit_defaults stays off), except in Gaps, whose keys the trace may not support at all.


class TimeShare(msgspec.Struct, kw_only=True):
    time_us: float
    pct: float | None  # of Share.device_time_us; None without device time


class CommShare(TimeShare, kw_only=True):
    """Communication's share, and how much of it compute hides (attnprof.analysis.overlap)."""

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
    # device time per rule that made it attention (attnprof.analysis.provenance.RULE_NAMES)
    rules: dict[str, float] = {}
    # attention by kernel name only: no launching op, range or chain says so (the caveat), and
    # the short names of those kernels, by time (at most 10)
    name_only_us: float = 0.0
    name_only_kernels: list[str] = []


class Share(msgspec.Struct, kw_only=True):
    """Where the device time went, attention first (attnprof.analysis.pipeline._share)."""

    device_time_us: float
    attention: AttentionShare
    gemm: TimeShare
    conv: TimeShare
    communication: CommShare
    memory: TimeShare
    other: TimeShare
    basis: str
    # a trace without device time is shared by CPU self time (attnprof.analysis.cpu_share), and
    # basis says so: its total, and the norm and elementwise groups a CPU model's time is in
    cpu_self_time_us: float | None = None
    norm: TimeShare | None = None
    elementwise: TimeShare | None = None


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


class Gaps(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the trace failed to record (attnprof.analysis.devices.gap_warnings). A key is absent,
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
    (attnprof.analysis.sanitize): its recorded duration and the one busy time uses."""

    name: str  # shortened kernel name
    lane: str  # "pid/tid": the device and stream
    start_us: float  # the trace's own timestamp
    recorded_us: float
    clipped_us: float  # to the next op's start: what busy and idle time count


class Sanitation(msgspec.Struct, kw_only=True):
    """What attnprof.analysis.sanitize found on the device streams and how it was repaired."""

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
    the launch resources of its most common configuration, attnprof.analysis.occupancy)."""

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
    # (attnprof.analysis.provenance.RULE_NAMES); None when none is
    attention_rules: dict[str, int] | None = None


class MemoryOp(msgspec.Struct, kw_only=True):
    name: str
    category: str
    count: int
    time_us: float


class LaunchApi(msgspec.Struct, kw_only=True):
    api: str
    gpu_ops: int
    kernels: int


class ThreadOps(msgspec.Struct, kw_only=True):
    thread: str  # "pid/tid"
    gpu_ops_per_instance: float


class Attribution(msgspec.Struct, kw_only=True):
    rules: dict[str, float]  # attnprof.analysis.regions.RULE_NAMES -> GPU ops per instance
    threads: list[ThreadOps]


class Backward(msgspec.Struct, kw_only=True):
    linked_by: str | None  # "fwdbwd flows", "sequence numbers" or None
    gpu_ops_per_instance: float
    gpu_time_us_per_instance: float


class RegionIdle(msgspec.Struct, kw_only=True):
    """The idle breakdown summed over instances, then per instance."""

    before_first_launch_us_per_instance: float | None
    window_us_per_instance: float
    busy_us_per_instance: float
    idle_us_per_instance: float
    idle_pct: float
    host_during_idle_us_per_instance: dict[str, float]  # attnprof.analysis.idle.CAUSES -> us


class InstanceIdle(msgspec.Struct, kw_only=True):
    window_us: float
    busy_us: float
    idle_us: float
    idle_pct: float
    host_during_idle_us: dict[str, float]
    before_first_launch_us: float | None


class InstanceStat(msgspec.Struct, kw_only=True):
    start_us: float
    cpu_time_us: float
    cpu_ops: int
    gpu_ops: int
    gpu_time_us: float
    gpu_span_us: float
    gpu_busy_union_us: float
    idle: InstanceIdle


class RegionGpuOp(msgspec.Struct, kw_only=True):
    name: str  # short name
    category: str
    start_us: float  # from the instance's first GPU op
    time_us: float


class TopCpuOp(msgspec.Struct, kw_only=True):
    name: str
    per_instance: float


class CpuOp(msgspec.Struct, kw_only=True):
    name: str
    start_us: float  # from the instance's start
    dur_us: float
    self_us: float  # dur_us less that of the ops directly inside it
    depth: int  # 0 = not inside another op of the instance


class CpuOpByName(msgspec.Struct, kw_only=True):
    name: str
    per_instance: float
    self_us_per_instance: float


class RegionComm(msgspec.Struct, kw_only=True):
    """The communication ops a region owns, per instance, and how much of them is exposed."""

    time_us_per_instance: float  # union of the region's communication ops
    exposed_us_per_instance: float  # of which no compute (any stream, any region) runs beside
    hidden_pct: float | None


class RegionStat(msgspec.Struct, kw_only=True):
    name: str
    selector: str  # "default", "exact", "regex", "ProfilerStep", "whole trace"
    instances: int
    gpu_ops_per_instance: float
    cpu_ops_per_instance: float
    gpu_time_us_per_instance: float
    gpu_span_us_per_instance: float
    gpu_busy_union_us_per_instance: float
    cpu_time_us_per_instance: float
    threads: str  # "own" or "all"
    attribution: Attribution
    backward: Backward
    idle: RegionIdle
    unplaced_gpu_ops: int
    gpu_ops: list[RegionGpuOp]  # the first instance's, in order
    categories_per_instance: dict[str, float]
    top_cpu_ops: list[TopCpuOp]
    per_instance: list[InstanceStat]  # the first 100
    cpu_ops: list[CpuOp]  # the first instance's, in order of start, at most 500
    cpu_ops_by_name: list[CpuOpByName]  # every instance, by self time
    communication: RegionComm | None = None  # None when the region owns no communication op
    # instances that are a graph replay of a range the capture trace recorded (region rule
    # "capture"): no CPU ops or CPU time of their own, the graph launch issued them all
    replayed_instances: int = 0


class Roofline(msgspec.Struct, kw_only=True):
    basis: str  # "gpu busy time per instance" or "cpu time per instance"
    region: str | None
    workload: str
    flops_useful: float
    flops_executed: float
    bytes_min: float
    time_us: float
    achieved_tflops: float | None = None
    achieved_tbps: float | None = None
    peak_tflops: float | None = None
    peak_tbps: float | None = None
    peak_source: str | None = None
    pct_of_peak_flops: float | None = None
    pct_of_peak_bandwidth: float | None = None
    note: str = ""


class Finding(msgspec.Struct, frozen=True):
    """One observation with a stable code (docs/findings.md) and the facts behind it."""

    code: str
    severity: str
    message: str
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def _pandas(accessor: str) -> Any:
    """pandas, or MissingExtra naming the [df] extra (the plain install has no pandas)."""
    from attnprof.extras import load

    return load("pandas", f"TraceAnalysis.{accessor}()")


class ReplayedKernel(msgspec.Struct, kw_only=True):
    """A replayed kernel and the captured CPU op that launched it (one row per kernel and op)."""

    name: str  # shortened
    op: str
    frame: str | None  # the innermost user Python frame around the op (attnprof.analysis.frames)
    module: str | None  # the innermost nn.Module frame around it
    count: int
    time_us: float


class GraphReplays(msgspec.Struct, kw_only=True):
    """Device ops replayed by CUDA/HIP graph launches, and how many of them know the CPU op that
    launched them at capture (attnprof.analysis.replay, with a capture trace)."""

    replayed_ops: int = 0
    replayed_us: float = 0.0  # their summed durations (device waits left out, as in share)
    attributed_ops: int = 0  # linked to their captured CPU op
    unattributed_us: float = 0.0  # replayed device time with the graph launch as its only source
    unattributed_pct: float | None = None  # of share.device_time_us; null without device time
    capture: str | None = None  # the capture trace's file name; null: none given
    graphs_captured: int = 0
    graph_launches: int = 0
    replays_matched: int = 0
    replays_unmatched: int = 0
    config_differs: int = 0  # matched ops whose grid or block differs from the capture's
    imported_rows: int = 0  # CPU ops and ranges appended from the capture trace
    matched_by: str = ""
    kernels: list[ReplayedKernel] = []  # the top 20 by time, with their captured op
    # replays matched through the graph id of an earlier matched replay of the same graph
    replays_by_graph_id: int = 0
    # distinct graphs the replayed kernels belong to, by their recorded graph ids; null: none
    # records one
    graphs_replayed: int | None = None


class CompiledGraph(msgspec.Struct, kw_only=True):
    name: str  # the range's name: "CompiledFxGraph <hash>", "Torch-Compiled Region: 0/0"
    device_ops: int
    time_us: float
    pct: float | None  # of share.device_time_us


class CompiledKernel(msgspec.Struct, kw_only=True):
    name: str  # shortened
    kind: str | None  # inductor's: pointwise, reduction, persistent reduction, template, foreach
    fused_ops: list[str] | None  # the aten ops its name lists; null: not an inductor name
    graph: str | None  # the compiled range of its first launch; null: compiled by name only
    frame: str | None = None  # of its first launch (attnprof.analysis.frames)
    module: str | None = None
    count: int
    time_us: float
    by: str  # "range", "name" (an inductor name outside every compiled range), or both


class Compiled(msgspec.Struct, kw_only=True):
    """Device time in torch.compile's generated code (attnprof.analysis.compiled)."""

    time_us: float = 0.0
    pct: float | None = None  # of share.device_time_us
    name_only_us: float = 0.0  # inductor kernels outside every compiled range, counted by name
    ranges: int = 0  # compiled range instances holding device work
    graphs: list[CompiledGraph] = []
    kernels: list[CompiledKernel] = []  # the top 20 by time


class StepBatch(msgspec.Struct, kw_only=True):
    """A serving step's batch as its range name records it (vLLM's execute_... ranges); null
    where the name does not say."""

    tokens: int | None = None
    prefill_requests: int | None = None
    prefill_query_tokens: int | None = None
    prefill_kv_tokens: int | None = None
    decode_requests: int | None = None
    decode_query_tokens: int | None = None
    decode_kv_tokens: int | None = None


class PhaseOp(msgspec.Struct, kw_only=True):
    op: str  # the launching CPU op
    device_ops: int
    device_us: float


class Phase(msgspec.Struct, kw_only=True):
    phase: str  # prefill, decode, mixed (both in one step: not split)
    steps: int  # step ranges of this phase (0 when found by kernel family)
    device_ops: int
    device_us: float
    pct: float | None  # of the device time
    attention_us: float
    attention_pct: float | None  # of this phase's device time
    ops: list[PhaseOp] = []  # the launching CPU ops with the most device time
    batches: list[StepBatch] = []  # per step, where its range name records the batch
    # the per-op model (attnprof.analysis.op_model) over the ops that launched this phase's work
    modelled_us: float = 0.0  # device time of ops the model has a formula and shapes for
    model_flops: float = 0.0
    model_bytes: float = 0.0
    achieved_tflops: float | None = None  # model_flops over modelled_us
    achieved_tbps: float | None = None
    attention_modelled_us: float = 0.0
    attention_tbps: float | None = None  # attention's bytes over its time: decode is judged by it
    attention_bw_pct: float | None = None  # of the device's HBM peak, where one is known


class Phases(msgspec.Struct, kw_only=True):
    """Prefill / decode split of a serving trace (attnprof.analysis.phases); empty when the
    trace names no phase and its attention kernels are of one phase or none."""

    source: str = ""  # "step ranges", or "attention kernel families (other ops: unknown)"
    phases: list[Phase] = []
    unknown_us: float = 0.0  # device time in no phase
    unknown_pct: float | None = None


class TraceAnalysis(msgspec.Struct, kw_only=True):
    schema: str = SCHEMA
    source: str
    path: str
    share: Share
    device: Device
    trace: TraceInfo
    totals: Totals
    categories: list[CategoryStat]  # by time, GPU ops only
    kernels: list[KernelStat]  # the top N by time (N = --top; 0 = all)
    memory_ops: list[MemoryOp]
    launch_apis: list[LaunchApi]
    regions: list[RegionStat]
    roofline: Roofline | None
    findings: list[Finding]
    repairs: list[str] = []  # what the loader repaired in invalid JSON
    warnings: list[str] = []
    graphs: GraphReplays = msgspec.field(default_factory=GraphReplays)
    compiled: Compiled = msgspec.field(default_factory=Compiled)
    # the per-op performance model (analysis/perf_model.py): one entry per (op, input dims,
    # input types), by time; and the whole trace through it
    ops: list[OpPerf] = []
    perf_model: PerfModel | None = None
    phases: Phases = msgspec.field(default_factory=Phases)

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict[str, Any]:
        """The "attnprof.analysis/1" JSON object, as builtins (what `analyze --json` prints)."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]

    # -- DataFrames (pandas imported only here: the [df] extra) ------------------------------
    def kernels_df(self) -> pd.DataFrame:
        pd = _pandas("kernels_df")

        rows = []
        for k in self.kernels:
            row = {
                key: v
                for key, v in msgspec.structs.asdict(k).items()
                if key not in ("occupancy", "launch_apis", "attention_rules")
            }
            occ = k.occupancy
            row["achieved_occupancy_pct"] = occ.achieved_pct if occ else None
            row["theoretical_occupancy_pct"] = occ.theoretical_pct if occ else None
            row["occupancy_limiter"] = occ.limiter if occ else None
            row["launch_apis"] = ",".join(k.launch_apis)
            rows.append(row)
        return pd.DataFrame(rows)

    def categories_df(self) -> pd.DataFrame:
        pd = _pandas("categories_df")

        return pd.DataFrame(
            msgspec.to_builtins(self.categories), columns=["category", "count", "time_us", "pct_time"]
        )

    def regions_df(self) -> pd.DataFrame:
        pd = _pandas("regions_df")

        nested = (
            "gpu_ops",
            "per_instance",
            "top_cpu_ops",
            "categories_per_instance",
            "cpu_ops",
            "cpu_ops_by_name",
            "attribution",
            "backward",
            "idle",
        )
        rows = []
        for r in self.regions:
            row = {k: v for k, v in msgspec.structs.asdict(r).items() if k not in nested}
            row["idle_pct"] = r.idle.idle_pct
            row["idle_us_per_instance"] = r.idle.idle_us_per_instance
            rows.append(row)
        return pd.DataFrame(rows)

    def launch_apis_df(self) -> pd.DataFrame:
        pd = _pandas("launch_apis_df")

        return pd.DataFrame(msgspec.to_builtins(self.launch_apis), columns=["api", "gpu_ops", "kernels"])

    def findings_df(self) -> pd.DataFrame:
        pd = _pandas("findings_df")

        return pd.DataFrame(
            msgspec.to_builtins(self.findings), columns=["code", "severity", "message", "evidence"]
        )


def decode_analysis(data: bytes | str) -> TraceAnalysis:
    """A TraceAnalysis from its JSON (one `attnprof analyze --json` object)."""
    return msgspec.json.decode(data, type=TraceAnalysis)
