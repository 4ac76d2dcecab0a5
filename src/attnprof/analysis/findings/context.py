"""What the finding rules read of one analysed trace (attnprof.analysis.findings.rules).

The pipeline builds one Context per trace and hands it to the rules; it lives in a module of its
own so that the rules and the pipeline both import it and neither imports the other at module
level (the pipeline calls the rules; the rules never call the pipeline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.classify import CATEGORIES, Classification
from attnprof.analysis.attribution.cpu_ops import CpuEvidence, UnfusedChains, count_gemm_softmax_gemm
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.regions import Region
from attnprof.analysis.records.perf_records import OpPerf
from attnprof.analysis.records.result import Device, Gaps, KernelStat, RegionStat, Roofline, Totals
from attnprof.analysis.timeline.idle import HostActivity, IdleBreakdown
from attnprof.trace.model import Trace
from attnprof.workload import Workload

__all__ = ["Context", "gpu_unfused_count"]


@dataclass
class Context:
    """What the finding rules read (attnprof.analysis.findings.rules)."""

    trace: Trace
    links: Links
    gpu_cat: npt.NDArray[np.int16]  # category index (CATEGORIES) per GPU op
    gpu_class: list[Classification]  # per unique GPU-op name, indexed by gpu_name_idx
    gpu_name_idx: npt.NDArray[np.int64]
    gpu_unique_names: list[str]
    region: Region
    region_stat: RegionStat  # the region as the analysis reports it
    cpu: CpuEvidence
    device: Device
    kernels: list[KernelStat]  # all kernels, by time (before --top)
    totals: Totals
    roofline: Roofline | None
    workload: Workload | None
    idle: list[IdleBreakdown]  # per region instance; one for the whole trace
    host: HostActivity
    gap_facts: Gaps
    unfused: UnfusedChains  # the region's GEMM -> softmax -> GEMM chains
    # the per-op performance model (analysis/perf/perf_model.py): its rows, by time
    ops: list[OpPerf] = field(default_factory=list)

    @cached_property
    def backward_name(self) -> npt.NDArray[np.bool_]:
        """Per unique GPU-op name: a backward kernel's (softmax_warp_backward is no forward
        chain's softmax)."""
        return np.array([c.direction in ("bwd", "bwd-aux") for c in self.gpu_class], bool)


def gpu_unfused_count(ctx: Context, seqs: Sequence[np.ndarray]) -> int:
    """GEMM -> softmax -> GEMM within 6 ops each way, summed over sequences of GPU ops (indices,
    each in time order: a region's instances), in one pass."""
    sizes = np.fromiter(map(len, seqs), np.int64, len(seqs))
    starts = np.cumsum(sizes) - sizes
    idx = np.concatenate(seqs).astype(np.int64) if len(seqs) else np.zeros(0, np.int64)
    cats = ctx.gpu_cat[idx]
    # a backward softmax kernel (softmax_warp_backward) is no forward chain's softmax
    bwd = ctx.backward_name[ctx.gpu_name_idx[idx]]
    return count_gemm_softmax_gemm(
        cats == CATEGORIES.index("gemm"),
        (cats == CATEGORIES.index("softmax")) & ~bwd,
        window=6,
        starts=starts,
    )
