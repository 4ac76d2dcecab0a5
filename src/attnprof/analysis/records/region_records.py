"""A region's parts of a TraceAnalysis ("attnprof.analysis/1", documented in result.py): its
statistics per instance, attribution, backward, idle time, ops and communication. Field order is
JSON key order."""

from __future__ import annotations

import msgspec

__all__ = [
    "Attribution",
    "Backward",
    "CpuOp",
    "CpuOpByName",
    "InstanceIdle",
    "InstanceStat",
    "RegionComm",
    "RegionGpuOp",
    "RegionIdle",
    "RegionStat",
    "ThreadOps",
    "TopCpuOp",
]


class ThreadOps(msgspec.Struct, kw_only=True):
    thread: str  # "pid/tid"
    gpu_ops_per_instance: float


class Attribution(msgspec.Struct, kw_only=True):
    rules: dict[str, float]  # attnprof.analysis.attribution.regions.RULE_NAMES -> GPU ops per instance
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
    host_during_idle_us_per_instance: dict[str, float]  # attnprof.analysis.timeline.idle.CAUSES -> us


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
