"""Collectives across ranks: each communication kernel of one rank set beside the same collective
on the other ranks, how far apart they started, which rank arrived last, and the ranks that are
last again and again (stragglers).

Alignment: the k-th communication kernel of a name on one rank is the k-th of that name on every
other rank (the order each rank launched them in: NCCL requires every rank of a group to issue
its collectives in one order). Process groups and sequence numbers are not read from the trace
yet, so two groups that run the same kernel name interleaved are aligned by order only (`basis`
says so); collectives that not every rank has are left out and counted.

Who arrived last, without trusting the clocks: a collective's kernels end together on every rank
(none can finish before the last one joins), so the rank whose kernel is the shortest is the one
that arrived last, and each other rank waited (its duration less the shortest) inside its
kernel. `wait_us` is the longest such wait, which holds across hosts whose clocks differ;
`skew_us` (max - min start) needs the ranks' clocks to agree and is given as recorded.

A straggler is a rank last in at least STRAGGLER_SHARE of the aligned collectives and at least
STRAGGLER_MIN of them: by chance each rank is last in 1 / ranks of them. Its evidence is how
many collectives it was last in, and the total time the other ranks waited for it.

Bus bandwidth needs each collective's message size, which the loader does not read: it is
reported as not measured (null), never estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from attnprof.trace.model import Trace

__all__ = ["CollectiveView", "RankCollectives", "collective_ops", "cross_rank_collectives"]

STRAGGLER_SHARE = 0.5  # last in at least half of the aligned collectives
STRAGGLER_MIN = 3
_LISTED = 20  # collectives listed (by wait), of the aligned ones


class RankCollectives(msgspec.Struct, kw_only=True, array_like=True):
    """One rank's communication kernels in launch order: names interned, start and duration."""

    rank: str
    names: list[str]
    name: list[int]
    start_us: list[float]
    dur_us: list[float]


class Collective(msgspec.Struct, kw_only=True):
    name: str
    occurrence: int  # the k-th collective of this name on every rank (from 0)
    skew_us: float  # latest start - earliest start, as the ranks' clocks recorded them
    wait_us: float  # longest kernel - shortest: how long the earliest rank waited
    last_rank: str  # the shortest kernel: the rank the others waited for
    first_rank: str
    bus_bandwidth_gbps: float | None = None  # needs message sizes: not measured


class Straggler(msgspec.Struct, kw_only=True):
    rank: str
    last_in: int  # collectives in which this rank arrived last
    of: int  # aligned collectives
    share_pct: float
    waited_for_us: float  # the other ranks' longest wait summed over those collectives


class CollectiveView(msgspec.Struct, kw_only=True):
    basis: str
    aligned: int  # collectives every rank has
    left_out: int  # communication kernels that not every rank has (by name and order)
    max_skew_us: float
    total_wait_us: float  # the longest wait summed over the aligned collectives
    last_counts: dict[str, int]  # per rank: collectives it arrived last in
    stragglers: list[Straggler]
    collectives: list[Collective]  # the _LISTED with the longest wait, in launch order
    bus_bandwidth: str = "not measured: the collectives' message sizes are not read from the trace"


def collective_ops(trace: Trace, rank: str, comm_rows: Sequence[int]) -> RankCollectives:
    """The rank's communication kernels (rows of trace, any order) in launch order."""
    import numpy as np

    rows = np.asarray(comm_rows, np.int64)
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    ids, inv = np.unique(trace.name[rows], return_inverse=True)
    return RankCollectives(
        rank=rank,
        names=[trace.names[int(i)] for i in ids.tolist()],
        name=inv.reshape(-1).tolist(),
        start_us=trace.ts[rows].tolist(),
        dur_us=trace.dur[rows].tolist(),
    )


def _merge(parts: list[RankCollectives]) -> RankCollectives:
    """Several files of one rank, one after the other (their file order)."""
    names: dict[str, int] = {}
    out = RankCollectives(rank=parts[0].rank, names=[], name=[], start_us=[], dur_us=[])
    for p in parts:
        remap = [names.setdefault(n, len(names)) for n in p.names]
        out.name.extend(remap[i] for i in p.name)
        out.start_us.extend(p.start_us)
        out.dur_us.extend(p.dur_us)
    out.names = list(names)
    return out


def cross_rank_collectives(
    per_rank: Sequence[RankCollectives], order: Sequence[str]
) -> CollectiveView | None:
    """The ranks' collectives aligned (see the module doc); None with fewer than two ranks that
    have communication kernels."""
    by_rank: dict[str, list[RankCollectives]] = {}
    for p in per_rank:
        by_rank.setdefault(p.rank, []).append(p)
    ranks = [r for r in order if r in by_rank]
    merged = {r: _merge(by_rank[r]) for r in ranks}
    # per rank: name -> its (start, dur) in launch order
    seqs: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r, m in merged.items():
        d: dict[str, list[tuple[float, float]]] = {}
        for i, s, t in zip(m.name, m.start_us, m.dur_us, strict=True):
            d.setdefault(m.names[i], []).append((s, t))
        seqs[r] = d
    if sum(1 for r in ranks if seqs[r]) < 2:
        return None
    names = sorted({n for d in seqs.values() for n in d})
    aligned: list[tuple[float, Collective]] = []  # (earliest start, collective)
    left_out = 0
    last_counts = dict.fromkeys(ranks, 0)
    waited_for = dict.fromkeys(ranks, 0.0)
    for name in names:
        counts = [len(seqs[r].get(name, [])) for r in ranks]
        common = min(counts)
        left_out += sum(counts) - common * len(ranks)
        for k in range(common):
            starts = {r: seqs[r][name][k][0] for r in ranks}
            durs = {r: seqs[r][name][k][1] for r in ranks}
            last = min(ranks, key=lambda r: (durs[r], -starts[r]))
            first = max(ranks, key=lambda r: (durs[r], -starts[r]))
            wait = durs[first] - durs[last]
            last_counts[last] += 1
            waited_for[last] += wait
            lo = min(starts.values())
            aligned.append(
                (
                    lo,
                    Collective(
                        name=name,
                        occurrence=k,
                        skew_us=round(max(starts.values()) - lo, 3),
                        wait_us=round(wait, 3),
                        last_rank=last,
                        first_rank=first,
                    ),
                )
            )
    n = len(aligned)
    stragglers = [
        Straggler(
            rank=r,
            last_in=c,
            of=n,
            share_pct=round(100.0 * c / n, 2),
            waited_for_us=round(waited_for[r], 3),
        )
        for r, c in sorted(last_counts.items(), key=lambda kv: -kv[1])
        if n and c >= STRAGGLER_MIN and c >= STRAGGLER_SHARE * n
    ]
    aligned.sort(key=lambda x: x[0])
    listed = sorted(range(n), key=lambda i: -aligned[i][1].wait_us)[:_LISTED]
    return CollectiveView(
        basis="the k-th communication kernel of a name on each rank (launch order); process "
        "groups and sequence numbers are not read",
        aligned=n,
        left_out=left_out,
        max_skew_us=max((c.skew_us for _, c in aligned), default=0.0),
        total_wait_us=round(sum(c.wait_us for _, c in aligned), 3),
        last_counts=last_counts,
        stragglers=stragglers,
        collectives=[aligned[i][1] for i in sorted(listed)],
    )
