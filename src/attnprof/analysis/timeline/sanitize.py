"""Trace sanitation: device ops a stream cannot have run as recorded, found, counted and repaired.

One in-order stream runs one op after another, so on one device lane (pid, tid: a device and a
stream) an op should end before the next one starts. Real traces break that in two ways, and the
analysis must neither drop such ops silently (Perfetto) nor count them twice (TraceLens):

- **overlap**: an op starts before the op before it on its stream has ended, by more than
  ``OVERLAP_TOLERANCE_US`` (programmatic dependent launch's secondary kernels start early, and
  timestamps jitter). Both ops are kept; busy and idle time are unions, so the overlap counts
  once there; sums of durations (kernel time, categories, the share) count each op in full.
- **overrun**: an op ends after the next op on its stream has ended (it would have to contain
  that op whole: ROCm traces with a 1.6 s "FMHA bwd" under a few ms of kernels). For busy and
  idle time its end is clipped to the next op's start; the recorded duration stays in every sum
  of durations and in the evidence (``trace.sanitation.overrun_examples``: recorded and clipped).

Negative or impossible durations (over a day) are set to 0 us by the loader and warned there;
their count is repeated here. Clock skew (a device op starting before its launch call) is
counted by attnprof.analysis.attribution.devices.gap_warnings (``trace.gaps.device_ops_before_launch``).
Truncated device buffers are warned there too (launches without a device op).

Every repair is counted in a warning naming the figures that use the repaired value.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.links import Links
from attnprof.analysis.records.result import Overrun, Sanitation
from attnprof.trace.model import Trace, nesting_order, unique
from attnprof.units import fmt_us, short_name

__all__ = ["OVERLAP_TOLERANCE_US", "Sanitized", "sanitize"]

# overlaps below this are timestamp rounding between consecutive kernels (0.1 us seen on the
# shared vLLM trace), not two ops running at once
OVERLAP_TOLERANCE_US = 0.5
# an overrun must pass the next op's end by more than rounding
_OVERRUN_TOLERANCE_US = 1e-3
_EXAMPLES = 10


@dataclass
class Sanitized:
    # per GPU op (index into Links.gpu_rows): the end used for busy and idle time (us)
    busy_end: npt.NDArray[np.float64]
    record: Sanitation
    warnings: list[str]


def sanitize(trace: Trace, links: Links, busy_mask: npt.NDArray[np.bool_]) -> Sanitized:
    """Overlaps and overruns on each device lane among the ops that count as busy (waits, which
    are not device work, are left out), and the ends busy time uses."""
    g = links.gpu_rows
    busy_end = trace.ts[g] + trace.dur[g]  # the recorded ends; overruns are clipped below
    sel = np.flatnonzero(busy_mask)
    # by lane, then start, then the longer first (an op that contains others comes first)
    gs = g[sel]
    order = sel[nesting_order(trace.ts[gs], trace.dur[gs], trace.lane[gs])]
    del sel, gs
    # every array below is one per busy GPU op: each is freed once read for the last time
    # (this stage ran at about fifteen of them at once)
    lane = trace.lane[g[order]]
    s, e = trace.ts[g[order]], busy_end[order]
    same = np.zeros(order.size, bool)  # op k and op k - 1 are on one lane
    same[1:] = lane[1:] == lane[:-1]

    # overlaps: start before the furthest end so far on the lane
    prev_reach = np.full(order.size, -np.inf)
    prev_reach[1:] = _running_max_by_group(e, np.flatnonzero(~same))[:-1]
    prev_reach[1:][~same[1:]] = -np.inf
    ov = np.flatnonzero(prev_reach - s > OVERLAP_TOLERANCE_US)
    overlap_us = float(np.minimum(prev_reach[ov], e[ov]).sum() - s[ov].sum())
    del prev_reach

    # overruns: an op that ends after the next op on its lane has ended
    is_over = np.zeros(order.size, bool)
    is_over[:-1] = same[1:] & (e[:-1] > e[1:] + _OVERRUN_TOLERANCE_US)
    del same
    over = np.flatnonzero(is_over)
    del is_over
    clipped = np.maximum(s[over + 1], s[over])  # the next op's start (never before the op's own)
    busy_end[order[over]] = clipped
    excess = e[over] - clipped

    top = np.argsort(-excess, kind="stable")[:_EXAMPLES]  # the largest clips first
    examples = [
        Overrun(
            name=short_name(trace.names[int(trace.name[g[order[k]]])]),
            lane="/".join(trace.lanes[int(lane[k])]),
            start_us=round(float(s[k]), 3),
            recorded_us=round(float(e[k] - s[k]), 3),
            clipped_us=round(float(c - s[k]), 3),
        )
        for k, c in zip(over[top].tolist(), clipped[top].tolist(), strict=True)
    ]
    bad = int(trace.metadata.get("bad_durations", 0) or 0)
    record = Sanitation(
        overlap_tolerance_us=OVERLAP_TOLERANCE_US,
        overlaps=int(ov.size),
        overlap_us=round(overlap_us, 3),
        overlap_lanes=int(unique(lane[ov]).size),
        overruns=int(over.size),
        overrun_clipped_us=round(float(excess.sum()), 3),
        overrun_examples=examples,
        bad_durations=bad,
    )
    return Sanitized(busy_end, record, _warnings(record))


def _running_max_by_group(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """np.maximum.accumulate restarted at each of the given positions (one per lane: a trace has
    a few lanes, so the loop is short)."""
    out = values.astype(np.float64)  # a copy (astype's default): accumulated in place
    bounds = np.append(starts, values.size).tolist()
    for a, b in itertools.pairwise(bounds):
        np.maximum.accumulate(out[a:b], out=out[a:b])
    return out


def _warnings(r: Sanitation) -> list[str]:
    out = []
    if r.overlaps:
        out.append(
            f"{r.overlaps} device ops start before the op before them on their stream has ended "
            f"({fmt_us(r.overlap_us)} overlapped, on {r.overlap_lanes} streams; programmatic "
            "dependent launch, or the profiler's timestamps): both are kept; busy and idle time "
            "count the overlap once, sums of durations (kernel time, categories, share) count each op"
        )
    if r.overruns:
        ex = r.overrun_examples[0]
        out.append(
            f"{r.overruns} device ops end after the next op on their stream has ended (the longest: "
            f"{ex.name} recorded {fmt_us(ex.recorded_us)}, {fmt_us(ex.clipped_us)} to the next op's "
            f"start): busy and idle time clip them to the next op's start ({fmt_us(r.overrun_clipped_us)} "
            "less); kernel time, categories and the share keep the recorded durations "
            "(trace.sanitation.overrun_examples)"
        )
    return out
