"""The analysis result: TraceAnalysis and Finding, and their JSON form ("attnprof.analysis/1").

TraceAnalysis.to_dict() returns exactly what `attnprof analyze --json` prints for one trace. Keys
only grow within the schema version; renaming one bumps it. The tables (kernels, categories,
regions, launch APIs, findings) are lists of plain dicts, so that compare and report code reads
them without importing this package's internals; DataFrame accessors build pandas frames lazily.

Top-level keys:

    schema       "attnprof.analysis/1"
    source       the trace file name; path: the path given
    share        where the device time went, attention first: {device_time_us, attention
                  {time_us, pct, fused_us, unfused_us, fwd_us, bwd_us, unfused_bwd_us}, gemm, conv, communication,
                  memory, other (each {time_us, pct}), basis}; pct null without device time
    device       {kind: "gpu"|"cpu"|"unknown", accelerator: "cuda"|"rocm"|"xpu"|"mtia"|"other"|
                  null, name, compute_capability ("9.0", as deviceProperties says; on ROCm the gfx
                  version) or null, num_sms, total_memory_bytes, count, id, arch_limits_source
                  (CUDA only), tensor_core_dtypes (CUDA with a compute capability) or null}
    trace        {events, kept_events, dropped {category/phase: count}, schema_version, rank,
                  has_flows, has_device_properties, gaps {kernel_launches,
                  launches_without_device_op, device_ops_before_launch, dropped_categories}}
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
                  warps_per_sm, limiter, registers, threads_per_block, shared_mem_bytes} | null}]
                 the top N by time (N = --top; 0 = all)
    memory_ops   [{name, category, count, time_us}]
    launch_apis  [{api, gpu_ops, kernels}]
    regions      [{name, selector, instances, gpu_ops_per_instance, cpu_ops_per_instance,
                  gpu_time_us_per_instance, gpu_span_us_per_instance,
                  gpu_busy_union_us_per_instance, cpu_time_us_per_instance, threads ("own"|"all"),
                  attribution {rules {rule: gpu ops per instance}, threads [{thread "pid/tid",
                  gpu_ops_per_instance}]}, backward {linked_by, gpu_ops_per_instance,
                  gpu_time_us_per_instance}, idle {window_us_per_instance, busy_us_per_instance,
                  idle_us_per_instance, idle_pct, host_during_idle_us_per_instance {sync,
                  host_compute, launching, nothing_recorded},
                  before_first_launch_us_per_instance}, unplaced_gpu_ops, gpu_ops (first instance, in order: [{name, category, start_us
                  (from the instance's first GPU op), time_us}]),
                  categories_per_instance {category: count}, top_cpu_ops [{name, per_instance}],
                  per_instance [{start_us, cpu_time_us, cpu_ops, gpu_ops, gpu_time_us, gpu_span_us,
                  gpu_busy_union_us, idle {window_us, busy_us, idle_us, idle_pct,
                  host_during_idle_us, before_first_launch_us}}],
                  cpu_ops (first instance, in order of start, an op before the ops inside it, at
                  most 500: [{name, start_us (from the instance's start), dur_us, self_us, depth
                  (0 = not inside another op of the instance)}]),
                  cpu_ops_by_name (every instance, by self time: [{name, per_instance (count),
                  self_us_per_instance}])}]
                 self time (self_us): an op's duration less that of the ops directly inside it
    roofline     null, or {basis, workload, flops_useful, flops_executed, bytes_min, time_us,
                  achieved_tflops, achieved_tbps, peak_tflops, peak_tbps, peak_source,
                  pct_of_peak_flops, pct_of_peak_bandwidth, note}
    findings     [{code, severity ("info"|"warning"|"error"), message, evidence {...}}]
    repairs      [str]: what the loader repaired in invalid JSON
    warnings     [str]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SCHEMA", "SEVERITIES", "Finding", "TraceAnalysis"]

SCHEMA = "attnprof.analysis/1"
SEVERITIES = ("info", "warning", "error")


@dataclass(frozen=True)
class Finding:
    """One observation with a stable code (docs/findings.md) and the facts behind it."""

    code: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "evidence": self.evidence,
        }


@dataclass
class TraceAnalysis:
    source: str
    path: str
    device: dict[str, Any]
    trace: dict[str, Any]
    totals: dict[str, Any]
    categories: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    memory_ops: list[dict[str, Any]]
    launch_apis: list[dict[str, Any]]
    regions: list[dict[str, Any]]
    roofline: dict[str, Any] | None
    findings: list[Finding]
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    share: dict[str, Any] = field(default_factory=dict)
    schema: str = SCHEMA

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "source": self.source,
            "path": self.path,
            "share": self.share,
            "device": self.device,
            "trace": self.trace,
            "totals": self.totals,
            "categories": self.categories,
            "kernels": self.kernels,
            "memory_ops": self.memory_ops,
            "launch_apis": self.launch_apis,
            "regions": self.regions,
            "roofline": self.roofline,
            "findings": [f.to_dict() for f in self.findings],
            "repairs": self.repairs,
            "warnings": self.warnings,
        }

    # -- DataFrames (pandas imported only here) ----------------------------------------------
    def kernels_df(self) -> pd.DataFrame:
        import pandas as pd

        rows = []
        for k in self.kernels:
            row = {key: v for key, v in k.items() if key not in ("occupancy", "launch_apis")}
            occ = k.get("occupancy") or {}
            row["achieved_occupancy_pct"] = occ.get("achieved_pct")
            row["theoretical_occupancy_pct"] = occ.get("theoretical_pct")
            row["occupancy_limiter"] = occ.get("limiter")
            row["launch_apis"] = ",".join(k.get("launch_apis", {}))
            rows.append(row)
        return pd.DataFrame(rows)

    def categories_df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.categories, columns=["category", "count", "time_us", "pct_time"])

    def regions_df(self) -> pd.DataFrame:
        import pandas as pd

        flat = (
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
            row = {k: v for k, v in r.items() if k not in flat}
            idle = r.get("idle") or {}
            row["idle_pct"] = idle.get("idle_pct")
            row["idle_us_per_instance"] = idle.get("idle_us_per_instance")
            rows.append(row)
        return pd.DataFrame(rows)

    def launch_apis_df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.launch_apis, columns=["api", "gpu_ops", "kernels"])

    def findings_df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            [f.to_dict() for f in self.findings], columns=["code", "severity", "message", "evidence"]
        )
