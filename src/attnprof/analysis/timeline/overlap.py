"""Exposed communication: the communication time that no compute on any stream hides.

Communication kernels (category "communication": NCCL / RCCL, NVSHMEM, DeepEP, multimem, custom
all-reduce, attnprof.analysis.attribution.classify) run on their own streams; while compute runs beside them
their time costs nothing, so a share of device time says little about what they cost. Here:

- communication: the union of the communication ops' intervals (several streams count once);
- compute: the union of every other device op that does work: kernels of any category but
  communication, copy kernels included; memcpy, memset and device-side waits (category "sync")
  are not compute;
- exposed: communication minus compute, the time the device does nothing but communicate;
- hidden_pct: 100 * (communication - exposed) / communication, null without communication.

HTA's get_comm_comp_overlap reports the same ratio per rank (overlap / communication): see
docs/analysis.md for where the two differ (which kernels count as communication).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnprof.analysis.attribution.classify import CATEGORIES
from attnprof.analysis.timeline.intervals import Intervals, measure, subtract, union

__all__ = ["NOT_COMPUTE", "CommOverlap", "comm_overlap", "compute_union", "is_compute"]

# categories that are neither communication nor compute (attnprof.analysis.attribution.classify.CATEGORIES)
NOT_COMPUTE = ("communication", "memcpy", "memset", "sync")


@dataclass(frozen=True)
class CommOverlap:
    comm_us: float  # union of the communication ops
    exposed_us: float  # of which no compute op runs at the same time
    hidden_pct: float | None  # None without communication

    @property
    def hidden_us(self) -> float:
        return self.comm_us - self.exposed_us


def comm_overlap(comm_start: np.ndarray, comm_end: np.ndarray, compute: Intervals) -> CommOverlap:
    """Communication ops given by start/end (us) against the union of the compute ops
    (compute_union). The compute ops are all of the trace's, not only those of one region: a
    region's all-reduce is hidden by whatever kernel runs beside it."""
    if comm_start.size == 0:
        return CommOverlap(0.0, 0.0, None)
    comm = union(comm_start, comm_end)
    lo, hi = float(comm[0][0]), float(comm[1][-1])
    total = measure(comm)
    exposed = measure(subtract(comm, compute, lo, hi)) if compute[0].size else total
    hidden = round(100.0 * (total - exposed) / total, 2) if total > 0 else None
    return CommOverlap(total, exposed, hidden)


def is_compute(gpu_cat: np.ndarray) -> np.ndarray:
    """Per device op (category index into CATEGORIES), whether it is compute."""
    return ~np.isin(gpu_cat, [CATEGORIES.index(c) for c in NOT_COMPUTE])


def compute_union(start: np.ndarray, end: np.ndarray, gpu_cat: np.ndarray) -> Intervals:
    """The union of the device ops that compute (category not in NOT_COMPUTE)."""
    keep = is_compute(gpu_cat)
    return union(start[keep], end[keep])
