"""Collectives across ranks: each communication kernel of one rank beside the same collective on
the other ranks of its process group, how far apart they started, which rank arrived last, the
bandwidth where sizes are recorded, and the ranks that are last again and again (stragglers).

Alignment, by what the trace records (each collective says which one it used, `basis`):

- `process_group_seq`: PyTorch's c10d records each collective's process group ("Process Group
  Name") and, from PyTorch 2.6 or so, its sequence number in that group ("Seq"), on
  record_param_comms and (copied by Kineto) on the collective's kernel. The same (group, seq)
  on two ranks is the same collective, even when their profiling windows began at different
  collectives.
- `process_group_order`: the group without a sequence number: the k-th collective of a kind
  ("Collective name") in a group on one rank is the k-th on the others (NCCL requires every rank
  of a group to issue its collectives in one order).
- `kernel_name_order`: nothing recorded (older PyTorch, or kernels whose args were not kept): the
  k-th communication kernel of a name on one rank is the k-th of that name on the others. Two
  groups that run the same kernel name interleaved may be paired wrongly: the basis says so.

A collective's args come from its kernel, else from the record_param_comms its launch ran in (the
CPU op the kernel links to, attnprof.analysis.attribution.links, or one inside that op). The ranks of a group
are the folder's ranks that have collectives in it; a collective that not every one of them has
is left out and counted (`left_out`). Where c10d recorded the group's members ("Process Group
Ranks", its global ranks, else Kineto's distributedInfo pg_config) or only its size ("Group size"), and the ranks given are fewer (a
folder with some ranks' traces), the rank that arrived last may be one not given: such a
collective's last rank and wait are those of the ranks given only (`missing_ranks`), and it does
not count toward stragglers (`partial`). The members name which ranks are missing (`missing`)
where the folder's ranks are global ranks (distributedInfo's, or the file names' numbers) that
the list holds; a list that the profiler cut short (it ends in "...") or that names none of the
ranks given is not used, and only the size counts.

Who arrived last, without trusting the clocks: a collective's kernels end together on every rank
(none can finish before the last one joins), so the rank whose kernel is the shortest is the one
that arrived last, and each other rank waited (its duration less the shortest) inside its
kernel. `wait_us` is the longest such wait, which holds across hosts whose clocks differ;
`skew_us` (max - min start) needs the ranks' clocks to agree and is given as recorded. Where every
rank's kernel ran equally long (to the ns) no rank waited: the collective names no last rank
(`last_rank` None), and it does not count toward stragglers (`ties`).

Bandwidth (attnprof.analysis.ranks.bus_bandwidth): the message's bytes over the shortest kernel (the
last rank's, which holds no waiting: the transfer itself), algbw and busbw as nccl-tests reports
them; null with the reason's code (`bandwidth_why`) where the size, element type, group size or
factor is not known.

A straggler is a rank last in at least STRAGGLER_SHARE of the aligned collectives it took part
in, at least STRAGGLER_MIN of them, and at least twice as often as chance makes it (1 / the
collective's ranks, averaged: with two ranks, last in every one). Its evidence is how many
collectives it was last in, of how many, the share chance gives, and the total time the other
ranks waited for it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from attnprof.analysis.ranks.bus_bandwidth import WHY, bus_factor, kind_of, message_bytes

if TYPE_CHECKING:
    from attnprof.trace.model import CommArgs, Trace

__all__ = [
    "BASES",
    "Collective",
    "CollectiveView",
    "KindBandwidth",
    "RankCollectives",
    "Straggler",
    "collective_ops",
    "cross_rank_collectives",
]

STRAGGLER_SHARE = 0.5  # last in at least half of the aligned collectives it took part in
STRAGGLER_MIN = 3
_LISTED = 20  # collectives listed (by wait), of the aligned ones
# the alignment bases, best first, and the English the JSON's `basis` says
BASES = {
    "process_group_seq": "process group and sequence number",
    "process_group_order": "process group and launch order (no sequence number recorded)",
    "kernel_name_order": "kernel name and launch order (no process group recorded)",
}


class RankCollectives(msgspec.Struct, kw_only=True, array_like=True):
    """One rank's communication kernels in launch order: names interned, start and duration, and
    per kernel what c10d recorded about its collective (-1: not recorded; an empty list: nothing
    recorded for any)."""

    rank: str
    names: list[str]
    name: list[int]
    start_us: list[float]
    dur_us: list[float]
    groups: list[str] = msgspec.field(default_factory=list)  # process group names, interned
    group: list[int] = msgspec.field(default_factory=list)  # index into groups
    kinds: list[str] = msgspec.field(default_factory=list)  # "Collective name"s, interned
    kind: list[int] = msgspec.field(default_factory=list)
    seq: list[int] = msgspec.field(default_factory=list)
    group_size: list[int] = msgspec.field(default_factory=list)
    # per group (as groups): its members' global ranks as c10d recorded them ("Process Group
    # Ranks", else distributedInfo's pg_config); empty where not recorded, cut short or not ranks
    members: list[list[int]] = msgspec.field(default_factory=list)
    # the message's bytes (nccl-tests' size); -1 sizes not recorded, -2 element type unknown
    nbytes: list[int] = msgspec.field(default_factory=list)


class Collective(msgspec.Struct, kw_only=True):
    name: str
    occurrence: int  # the k-th collective of its key (basis) on every rank (from 0)
    skew_us: float  # latest start - earliest start, as the ranks' clocks recorded them
    wait_us: float  # longest kernel - shortest: how long the earliest rank waited
    # the shortest kernel: the rank the others waited for; None on a tie (every rank's kernel
    # equally long: no rank waited, so none arrived last measurably)
    last_rank: str | None
    first_rank: str | None  # the longest kernel: the rank that waited longest; None on a tie
    bus_bandwidth_gbps: float | None = None  # busbw (GB/s), as algbw_gbps x the bus factor
    basis: str = "kernel_name_order"  # a key of BASES
    group: str | None = None  # process group name, where recorded
    seq: int | None = None  # sequence number in the group, where recorded
    kind: str | None = None  # PyTorch's collective name (allreduce, ...), where recorded
    ranks: int = 0  # ranks that took part
    # ranks of the group (by its recorded members, else its size) that the traces given do not
    # show in it: the true last rank may be one of them, so last_rank and wait_us are of the
    # ranks given only
    missing_ranks: int = 0
    missing: list[str] = msgspec.field(default_factory=list)  # which, where the group's members are recorded
    time_us: float = 0.0  # the shortest kernel: the transfer without waiting
    bytes: int | None = None
    algbw_gbps: float | None = None  # bytes / time_us
    bandwidth_why: str | None = None  # why the bandwidth is null: a key of bus_bandwidth.WHY


class KindBandwidth(msgspec.Struct, kw_only=True):
    """The aligned collectives of one kind and group whose bandwidth is known, together."""

    group: str | None
    kind: str
    count: int
    bytes: int
    time_us: float  # summed shortest kernels
    algbw_gbps: float  # bytes / time_us
    busbw_gbps: float
    busbw_min_gbps: float  # the slowest and fastest single collective
    busbw_max_gbps: float


class Straggler(msgspec.Struct, kw_only=True):
    rank: str
    last_in: int  # collectives in which this rank arrived last
    of: int  # aligned collectives it took part in
    share_pct: float
    waited_for_us: float  # the other ranks' longest wait summed over those collectives
    chance_pct: float = 0.0  # the share of them chance alone makes it last in


class CollectiveView(msgspec.Struct, kw_only=True):
    basis: str  # how the collectives were aligned, in words (all of them, or the mix)
    aligned: int  # collectives every rank of their group has
    left_out: int  # communication kernels that not every rank of their group has
    max_skew_us: float
    total_wait_us: float  # the longest wait summed over the aligned collectives
    last_counts: dict[str, int]  # per rank: collectives it arrived last in
    stragglers: list[Straggler]
    collectives: list[Collective]  # the _LISTED with the longest wait, in launch order
    bus_bandwidth: str = ""  # how the bandwidth is measured, and how many have none and why
    bases: dict[str, int] = msgspec.field(default_factory=dict)  # basis -> aligned collectives
    bandwidth: list[KindBandwidth] = msgspec.field(default_factory=list)
    no_bandwidth: dict[str, int] = msgspec.field(default_factory=dict)  # why -> collectives
    # aligned collectives of groups with ranks not given (Collective.missing_ranks): not counted
    # in last_counts or toward stragglers
    partial: int = 0
    # aligned collectives of complete groups in which no rank waited (Collective.last_rank None):
    # not counted in last_counts or toward stragglers either
    ties: int = 0
    missing_ranks: int = 0  # the most ranks missing from one of them
    missing: list[str] = msgspec.field(default_factory=list)  # the ranks named missing, where recorded


# -- one rank ---------------------------------------------------------------------------------------


def _param_comms_of(trace: Trace, rows: Sequence[int]) -> dict[int, CommArgs]:
    """For kernels without a collective's args: those of the record_param_comms their launch ran
    in (the launching CPU op itself, or the first one inside it on its thread)."""
    import numpy as np

    from attnprof.analysis.attribution.links import link
    from attnprof.trace.model import Kind

    # a wait's record_param_comms carries no size: never a collective's args
    pc_rows = np.array(
        sorted(r for r in trace.comms if trace.kind[r] == Kind.CPU_OP and trace.comms[r].kind != "wait"),
        np.int64,
    )
    if pc_rows.size == 0:
        return {}
    links = link(trace)
    pos = np.searchsorted(links.gpu_rows, np.asarray(rows, np.int64))
    out: dict[int, CommArgs] = {}
    for row, p in zip(rows, pos.tolist(), strict=True):
        if p >= links.gpu_rows.size or links.gpu_rows[p] != row:
            continue
        op = int(links.cpu_op[p])
        if op < 0:
            continue
        if op in trace.comms:
            out[row] = trace.comms[op]
            continue
        t0, t1, lane = trace.ts[op], trace.ts[op] + trace.dur[op], trace.lane[op]
        inside = pc_rows[
            (trace.ts[pc_rows] >= t0) & (trace.ts[pc_rows] <= t1) & (trace.lane[pc_rows] == lane)
        ]
        if inside.size:
            out[row] = trace.comms[int(inside[0])]
    return out


def collective_ops(trace: Trace, rank: str, comm_rows: Sequence[int]) -> RankCollectives:
    """The rank's communication kernels (rows of trace, any order) in launch order, with their
    collectives' recorded args."""
    import numpy as np

    rows = np.asarray(comm_rows, np.int64)
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    ids, inv = np.unique(trace.name[rows], return_inverse=True)
    out = RankCollectives(
        rank=rank,
        names=[trace.names[int(i)] for i in ids.tolist()],
        name=inv.reshape(-1).tolist(),
        start_us=trace.ts[rows].tolist(),
        dur_us=trace.dur[rows].tolist(),
    )
    listed = rows.tolist()
    meta = {r: trace.comms[r] for r in listed if r in trace.comms}
    if trace.comms and len(meta) < len(listed):
        meta.update(_param_comms_of(trace, [r for r in listed if r not in meta]))
    if not meta:
        return out
    groups: dict[str, int] = {}
    kinds: dict[str, int] = {}
    members: list[list[int]] = []
    configured = _pg_config(trace)
    for r in listed:
        m = meta.get(r)
        if m is None:
            out.group.append(-1)
            out.kind.append(-1)
            out.seq.append(-1)
            out.group_size.append(-1)
            out.nbytes.append(-1)
            continue
        if m.group is not None and m.group not in groups:
            members.append(list(_members(m.group_ranks) or configured.get(m.group, ())))
        out.group.append(groups.setdefault(m.group, len(groups)) if m.group is not None else -1)
        out.kind.append(kinds.setdefault(m.kind, len(kinds)) if m.kind is not None else -1)
        out.seq.append(m.seq if m.seq is not None else -1)
        out.group_size.append(m.group_size if m.group_size is not None else -1)
        b = message_bytes(m.in_nelems, m.out_nelems, m.dtype)
        out.nbytes.append(b if isinstance(b, int) else (-1 if b == "no_sizes" else -2))
    out.groups, out.kinds, out.members = list(groups), list(kinds), members
    return out


def _pg_config(trace: Trace) -> dict[str, tuple[int, ...]]:
    """Each process group's members as Kineto wrote them in distributedInfo's pg_config (name,
    ranks), for collectives whose record_param_comms did not record them."""
    info = trace.metadata.get("distributedInfo")
    config = info.get("pg_config") if isinstance(info, dict) else None
    out: dict[str, tuple[int, ...]] = {}
    for pg in config if isinstance(config, list) else ():
        if not isinstance(pg, dict) or not isinstance(pg.get("ranks"), list):
            continue
        ranks = _distinct_ranks(pg["ranks"])
        if ranks:
            out[str(pg.get("pg_name"))] = ranks
    return out


def _distinct_ranks(ranks: list[object]) -> tuple[int, ...]:
    """ranks as a tuple where they are distinct non-negative integers, else ()."""
    out = tuple(r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and r >= 0)
    return out if len(out) == len(ranks) and len(set(out)) == len(out) else ()


def _members(text: str | None) -> tuple[int, ...]:
    """A group's global ranks from c10d's "Process Group Ranks" ("[0, 1, 2, 3]"); () where it is
    not recorded, empty (c10d writes "[]" for some default groups), cut short by the profiler
    ("[0, 1, ..., 29, ...]") or not a list of ranks."""
    if not text or not text.startswith("[") or not text.endswith("]") or "..." in text:
        return ()
    try:
        return _distinct_ranks([int(x) for x in text[1:-1].split(",") if x.strip()])
    except ValueError:
        return ()


# -- across ranks -----------------------------------------------------------------------------------


class _Op(msgspec.Struct, array_like=True):
    name: str
    start: float
    dur: float
    group: str | None
    kind: str | None
    seq: int
    size: int
    nbytes: int


def _ops(parts: list[RankCollectives]) -> list[_Op]:
    """Several files of one rank, one after the other (their file order)."""
    out = []
    for p in parts:
        n = len(p.name)
        has = len(p.group) == n
        for i in range(n):
            out.append(
                _Op(
                    p.names[p.name[i]],
                    p.start_us[i],
                    p.dur_us[i],
                    p.groups[p.group[i]] if has and p.group[i] >= 0 else None,
                    p.kinds[p.kind[i]] if has and p.kind[i] >= 0 else None,
                    p.seq[i] if has else -1,
                    p.group_size[i] if has else -1,
                    p.nbytes[i] if has else -1,
                )
            )
    return out


def _is_p2p(kind: str | None) -> bool:
    return kind is not None and kind_of(kind) in ("send", "recv")


def _key(op: _Op) -> tuple[str, tuple[object, ...]]:
    """(basis, key): the best the op's recorded args allow (the module doc)."""
    if op.group is not None and op.seq >= 0:
        # c10d numbers point-to-point ops (send, recv) apart from collectives: the same Seq in a
        # group may be one of each
        return "process_group_seq", (op.group, op.seq, _is_p2p(op.kind))
    if op.group is not None:
        return "process_group_order", (op.group, op.kind or op.name)
    return "kernel_name_order", (op.name,)


def _bandwidth(c: Collective, kind: str | None, nbytes: int, size: int) -> None:
    """Fill c's bytes, algbw and busbw, or say why they are unknown."""
    if nbytes == -1 or kind is None:
        c.bandwidth_why = "no_sizes"
        return
    if nbytes < 0:
        c.bandwidth_why = "no_dtype"
        return
    c.bytes = nbytes
    if c.time_us <= 0:
        c.bandwidth_why = "no_time"
        return
    c.algbw_gbps = round(nbytes / (c.time_us * 1e3), 3)
    if size < 1:
        c.bandwidth_why = "no_group_size"
        return
    f = bus_factor(kind, size)
    if f is None:
        c.bandwidth_why = "no_factor"
        return
    c.bus_bandwidth_gbps = round(c.algbw_gbps * f, 3)


def cross_rank_collectives(
    per_rank: Sequence[RankCollectives], order: Sequence[str]
) -> CollectiveView | None:
    """The ranks' collectives aligned (see the module doc); None with fewer than two ranks that
    have communication kernels."""
    by_rank: dict[str, list[RankCollectives]] = {}
    for p in per_rank:
        by_rank.setdefault(p.rank, []).append(p)
    ranks = [r for r in order if r in by_rank]
    # per rank: key -> its ops of that key, in launch order
    seqs: dict[str, dict[tuple[str, tuple[object, ...]], list[_Op]]] = {}
    for r in ranks:
        d: dict[tuple[str, tuple[object, ...]], list[_Op]] = {}
        for op in _ops(by_rank[r]):
            d.setdefault(_key(op), []).append(op)
        seqs[r] = d
    if sum(1 for r in ranks if seqs[r]) < 2:
        return None
    # a group's ranks: those that have a collective in it (the kernel-name basis is one group)
    members: dict[object, list[str]] = {}
    for r in ranks:
        for basis, key in {k: None for k in seqs[r]}:
            scope = key[0] if basis != "kernel_name_order" else None
            m = members.setdefault(scope, [])
            if not m or m[-1] != r:
                m.append(r)
    absent = _absent_members(per_rank, members)
    keys = sorted({k for d in seqs.values() for k in d}, key=repr)
    aligned: list[tuple[float, Collective]] = []  # (earliest start, collective)
    left_out = 0
    last_counts = dict.fromkeys(ranks, 0)
    waited_for = dict.fromkeys(ranks, 0.0)
    took_part = dict.fromkeys(ranks, 0)
    chance = dict.fromkeys(ranks, 0.0)
    for full in keys:
        basis, key = full
        scope = key[0] if basis != "kernel_name_order" else None
        group = members[scope]
        counts = [len(seqs[r].get(full, [])) for r in group]
        common = min(counts) if len(group) >= 2 else 0
        left_out += sum(counts) - common * len(group)
        for k in range(common):
            ops = {r: seqs[r][full][k] for r in group}
            last = min(group, key=lambda r: (ops[r].dur, -ops[r].start))
            first = max(group, key=lambda r: (ops[r].dur, -ops[r].start))
            wait = ops[first].dur - ops[last].dur
            named = absent.get(scope)
            missing = (
                len(named) if named is not None else max(0, max(o.size for o in ops.values()) - len(group))
            )
            tie = round(wait, 3) <= 0.0
            # who was last is known only when every rank of the group is here, and someone waited
            if not missing and not tie:
                last_counts[last] += 1
                waited_for[last] += wait
                for r in group:
                    took_part[r] += 1
                    chance[r] += 1.0 / len(group)
            starts = [o.start for o in ops.values()]
            lo = min(starts)
            ref = ops[last]
            c = Collective(
                name=ref.name,
                occurrence=k,
                skew_us=round(max(starts) - lo, 3),
                wait_us=round(wait, 3),
                last_rank=None if tie else last,
                first_rank=None if tie else first,
                basis=basis,
                group=ref.group,
                seq=ref.seq if ref.seq >= 0 else None,
                kind=ref.kind,
                ranks=len(group),
                missing_ranks=missing,
                missing=list(named or ()),
                time_us=round(ref.dur, 3),
            )
            _bandwidth(c, ref.kind, ref.nbytes, ref.size)
            aligned.append((lo, c))
    n = len(aligned)
    stragglers = []
    for r, cnt in sorted(last_counts.items(), key=lambda kv: -kv[1]):
        of = took_part[r]
        expected = chance[r] / of if of else 1.0
        if of and cnt >= STRAGGLER_MIN and cnt >= max(STRAGGLER_SHARE, min(1.0, 2 * expected)) * of:
            stragglers.append(
                Straggler(
                    rank=r,
                    last_in=cnt,
                    of=of,
                    share_pct=round(100.0 * cnt / of, 2),
                    waited_for_us=round(waited_for[r], 3),
                    chance_pct=round(100.0 * expected, 2),
                )
            )
    aligned.sort(key=lambda x: x[0])
    colls = [c for _, c in aligned]
    listed = sorted(range(n), key=lambda i: -colls[i].wait_us)[:_LISTED]
    bases: dict[str, int] = {}
    for c in colls:
        bases[c.basis] = bases.get(c.basis, 0) + 1
    bases = {b: bases[b] for b in BASES if b in bases}
    no_bw: dict[str, int] = {}
    for c in colls:
        if c.bandwidth_why is not None:
            no_bw[c.bandwidth_why] = no_bw.get(c.bandwidth_why, 0) + 1
    return CollectiveView(
        basis="; ".join(f"{BASES[b]}: {m}" for b, m in bases.items())
        if len(bases) > 1
        else BASES[next(iter(bases), "kernel_name_order")],
        aligned=n,
        left_out=left_out,
        max_skew_us=max((c.skew_us for c in colls), default=0.0),
        total_wait_us=round(sum(c.wait_us for c in colls), 3),
        last_counts=last_counts,
        stragglers=stragglers,
        collectives=[colls[i] for i in sorted(listed)],
        bus_bandwidth=_bandwidth_note(n, no_bw),
        bases=bases,
        bandwidth=_by_kind(colls),
        no_bandwidth=no_bw,
        partial=sum(1 for c in colls if c.missing_ranks),
        ties=sum(1 for c in colls if not c.missing_ranks and c.last_rank is None),
        missing_ranks=max((c.missing_ranks for c in colls), default=0),
        missing=sorted({r for c in colls for r in c.missing}, key=int),
    )


def _absent_members(
    per_rank: Sequence[RankCollectives], members: dict[object, list[str]]
) -> dict[object, list[str]]:
    """Per process group whose members c10d recorded: its members whose traces were not given
    (or have no collective in it), as rank names. Only where every rank given that has the
    group's collectives is a global rank the list holds, and every rank recorded the same list:
    otherwise the folder's rank names are not the list's ranks (or the name is two groups')."""
    recorded: dict[object, set[tuple[int, ...]]] = {}
    for p in per_rank:
        for g, m in zip(p.groups, p.members, strict=False):
            if m:
                recorded.setdefault(g, set()).add(tuple(m))
    out: dict[object, list[str]] = {}
    for scope, lists in recorded.items():
        given = members.get(scope, [])
        if len(lists) != 1 or not given or not all(r.isdigit() for r in given):
            continue
        (listed,) = lists
        ids = {int(r) for r in given}
        if ids <= set(listed):
            out[scope] = [str(x) for x in sorted(listed) if x not in ids]
    return out


def _bandwidth_note(n: int, no_bw: dict[str, int]) -> str:
    head = (
        "busbw = algbw x the nccl-tests bus factor of the kind and group size; algbw = message "
        "bytes / the shortest kernel of the collective"
    )
    if not no_bw:
        return head
    why = "; ".join(f"{m} of {n}: {WHY[w]}" for w, m in no_bw.items())
    return f"{head}; not measured for {sum(no_bw.values())} of {n} ({why})"


def _by_kind(colls: list[Collective]) -> list[KindBandwidth]:
    """Per (group, kind), the collectives whose bus bandwidth is known, by total time."""
    acc: dict[tuple[str | None, str], list[Collective]] = {}
    for c in colls:
        if c.bus_bandwidth_gbps is not None and c.kind is not None:
            acc.setdefault((c.group, kind_of(c.kind)), []).append(c)
    out = []
    for (group, kind), cs in acc.items():
        nbytes = sum(c.bytes or 0 for c in cs)
        time_us = sum(c.time_us for c in cs)
        busbws = [c.bus_bandwidth_gbps or 0.0 for c in cs]
        factor = statistics.fmean((c.bus_bandwidth_gbps or 0.0) / c.algbw_gbps for c in cs if c.algbw_gbps)
        algbw = nbytes / (time_us * 1e3)
        out.append(
            KindBandwidth(
                group=group,
                kind=kind,
                count=len(cs),
                bytes=nbytes,
                time_us=round(time_us, 3),
                algbw_gbps=round(algbw, 3),
                busbw_gbps=round(algbw * factor, 3),
                busbw_min_gbps=min(busbws),
                busbw_max_gbps=max(busbws),
            )
        )
    out.sort(key=lambda b: -b.time_us)
    return out
