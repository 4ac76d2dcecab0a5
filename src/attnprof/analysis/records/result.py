"""The analysis result: TraceAnalysis and Finding, and their JSON form ("attnprof.analysis/1").

Every part is a msgspec Struct whose fields are declared in the order of its JSON keys, so that
TraceAnalysis.to_dict() (msgspec.to_builtins, nothing hand-written) returns exactly what
`attnprof analyze --json` prints for one trace, nulls included. Keys only grow within the schema
version; renaming one bumps it. Producers (attnprof.analysis.pipeline and its helpers) build these
records; consumers (findings, compare, report) read their attributes. The parts are declared in
trace_records.py (the whole trace's), region_records.py (a region's) and view_records.py (graph
replays, compiled code, phases), and re-exported here: this module is the one import of the
contract. The same JSON decodes back into a TraceAnalysis with decode_analysis(). DataFrame
accessors build pandas frames lazily.

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
                  so; null otherwise), attention_side {time_us, pct, kinds {kind: us}, rules
                  {rule: us}} (memory work for attention: fills, memsets, memcpys, casts, copies
                  an attention op runs, KV-cache writes; not in attention, memory or other; null
                  for a trace without device time)}; pct null without device time
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
                  clipped_us}], bad_durations} (attnprof.analysis.timeline.sanitize)}
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
                  attention_rules {rule: launches} | null, attention_side_rules {rule: launches}
                  | null}]
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
                  launches, and those given their captured CPU op (attnprof.analysis.replay.replay)
    compiled     {time_us, pct, name_only_us, ranges, graphs [{name, device_ops, time_us, pct}],
                  kernels [{name, kind, fused_ops, graph, frame, module, count, time_us, by}]}: device time in
                  torch.compile's code (attnprof.analysis.replay.compiled)
    phases       {source, phases [{phase, steps, device_ops, device_us, pct, attention_us,
                  attention_pct, ops [{op, device_ops, device_us}], batches [{tokens,
                  prefill_requests, prefill_query_tokens, prefill_kv_tokens, decode_requests,
                  decode_query_tokens, decode_kv_tokens}]}], unknown_us, unknown_pct}: prefill /
                  decode / mixed steps of a serving trace (attnprof.analysis.breakdown.phases)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.analysis.records.perf_records import OpPerf, PerfModel
from attnprof.analysis.records.region_records import (
    Attribution,
    Backward,
    CpuOp,
    CpuOpByName,
    InstanceIdle,
    InstanceStat,
    RegionComm,
    RegionGpuOp,
    RegionIdle,
    RegionStat,
    ThreadOps,
    TopCpuOp,
)
from attnprof.analysis.records.trace_records import (
    AttentionShare,
    AttentionSideShare,
    CategoryStat,
    CommShare,
    Device,
    Gaps,
    KernelStat,
    LaunchApi,
    MemoryOp,
    Occupancy,
    Overrun,
    Sanitation,
    Share,
    TimeShare,
    Totals,
    TraceInfo,
)
from attnprof.analysis.records.view_records import (
    Compiled,
    CompiledGraph,
    CompiledKernel,
    GraphReplays,
    Phase,
    PhaseOp,
    Phases,
    ReplayedKernel,
    StepBatch,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SCHEMA",
    "SEVERITIES",
    "AttentionShare",
    "AttentionSideShare",
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
    # the per-op performance model (analysis/perf/perf_model.py): one entry per (op, input dims,
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
                if key not in ("occupancy", "launch_apis", "attention_rules", "attention_side_rules")
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
