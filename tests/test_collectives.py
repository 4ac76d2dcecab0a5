"""Collectives aligned across ranks (attnprof.analysis.ranks.collectives), on synthetic rank folders
built here: a planted straggler must be found with its evidence, and none named where ranks
arrive in turn."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import _paths
from attnprof.analysis.ranks.collectives import STRAGGLER_SHARE
from attnprof.analysis.ranks.folder import analyze_folder

ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "ampere_sgemm_128x64_nn"


def _rank_trace(path: Path, rank: int, world: int, arrivals: list[tuple[str, float, float]]) -> None:
    """arrivals: (kernel name, when this rank arrived, when the collective ended) in order."""
    events: list[dict[str, object]] = []
    for name, start, end in arrivals:
        events.append(
            {"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7, "ts": start - 50, "dur": 40}
        )
        events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 13, "ts": start, "dur": end - start}
        )
    doc = {"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}}
    path.write_text(json.dumps(doc))


def _folder(
    tmp: Path, world: int, n: int, straggler: int | None, seed: int = 7, clock_offsets: bool = False
) -> Path:
    rng = random.Random(seed)
    folder = tmp / f"w{world}"
    folder.mkdir()
    per_rank: dict[int, list[tuple[str, float, float]]] = {r: [] for r in range(world)}
    offsets = {r: (rng.uniform(-5000, 5000) if clock_offsets else 0.0) for r in range(world)}
    for k in range(n):
        name = ALLREDUCE if k % 3 else ALLGATHER
        base = 1000.0 * k
        arrive = {r: base + rng.uniform(0, 20) for r in range(world)}
        if straggler is not None:
            arrive[straggler] = base + 60 + rng.uniform(0, 20)
        end = max(arrive.values()) + 100.0  # every rank's kernel ends once the last one joined
        for r in range(world):
            per_rank[r].append((name, arrive[r] + offsets[r], end + offsets[r]))
    for r in range(world):
        _rank_trace(folder / f"rank-{r}.1.pt.trace.json", r, world, per_rank[r])
    return folder


def test_a_planted_straggler_is_found_with_its_evidence(tmp_path: Path) -> None:
    (run,) = analyze_folder(_folder(tmp_path, world=8, n=30, straggler=5), workers=1)
    view = run.cross_rank.collectives
    assert view is not None
    assert view.aligned == 30 and view.left_out == 0
    assert [s.rank for s in view.stragglers] == ["5"]
    s = view.stragglers[0]
    assert (s.last_in, s.of, s.share_pct) == (30, 30, 100.0)
    assert view.last_counts["5"] == 30 and sum(view.last_counts.values()) == 30
    # the others waited 40-80 us for it in each collective: its arrival 60-80 us, theirs 0-20 us
    assert 40 * 30 <= s.waited_for_us <= 80 * 30
    assert all(c.last_rank == "5" and 40 <= c.wait_us <= 80 for c in view.collectives)
    assert all(c.bus_bandwidth_gbps is None for c in view.collectives)
    assert "not measured" in view.bus_bandwidth


def test_the_straggler_is_found_when_the_clocks_disagree(tmp_path: Path) -> None:
    # hosts whose clocks differ by milliseconds: the start skew is meaningless, the durations not
    (run,) = analyze_folder(_folder(tmp_path, world=4, n=12, straggler=2, clock_offsets=True), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and [s.rank for s in view.stragglers] == ["2"]
    assert view.max_skew_us > 1000  # as recorded: the clocks', not the ranks', difference


def test_no_straggler_where_ranks_arrive_last_in_turn(tmp_path: Path) -> None:
    (run,) = analyze_folder(_folder(tmp_path, world=8, n=30, straggler=None), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.aligned == 30
    assert view.stragglers == []
    assert max(view.last_counts.values()) < STRAGGLER_SHARE * 30
    assert all(c.wait_us <= 20 for c in view.collectives)


def test_collectives_not_every_rank_has_are_left_out_and_counted(tmp_path: Path) -> None:
    folder = _folder(tmp_path, world=3, n=6, straggler=1)
    p = folder / "rank-0.1.pt.trace.json"
    doc = json.loads(p.read_text())
    extra = {"ph": "X", "cat": "kernel", "name": ALLREDUCE, "pid": 0, "tid": 13, "ts": 99999.0, "dur": 5}
    doc["traceEvents"].append(extra)
    p.write_text(json.dumps(doc))
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and (view.aligned, view.left_out) == (6, 1)


def test_no_view_without_communication_on_two_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    for r in range(2):
        events = [{"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7, "ts": 0, "dur": 10}]
        doc = {"traceEvents": events, "distributedInfo": {"rank": r}}
        (folder / f"rank-{r}.1.pt.trace.json").write_text(json.dumps(doc))
    (run,) = analyze_folder(folder, workers=1)
    assert run.cross_rank.collectives is None


@pytest.mark.parametrize("workers", [1, 2])
def test_the_view_is_in_the_folder_json(tmp_path: Path, workers: int) -> None:
    (run,) = analyze_folder(_folder(tmp_path, world=3, n=4, straggler=0), workers=workers)
    d = run.to_dict()["cross_rank"]["collectives"]
    assert d["stragglers"][0]["rank"] == "0" and d["aligned"] == 4


# -- alignment by what the trace records ----------------------------------------------------------


def _comm_kernel(
    name: str, start: float, end: float, *, group: str | None = None, seq: int | None = None, **args: object
) -> dict[str, object]:
    a: dict[str, object] = dict(args)
    if group is not None:
        a["Process Group Name"] = group
    if seq is not None:
        a["Seq"] = seq
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 13,
        "ts": start,
        "dur": end - start,
        "args": a,
    }


def _write(folder: Path, rank: int, world: int, events: list[dict[str, object]]) -> None:
    doc = {"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}}
    (folder / f"rank-{rank}.1.pt.trace.json").write_text(json.dumps(doc))


def test_process_group_and_seq_align_ranks_whose_windows_differ(tmp_path: Path) -> None:
    # rank 1's profiling window began one collective later: by order, its k-th all-reduce would
    # be paired with rank 0's k-th, 1 ms apart; by sequence number each is paired with its own,
    # 60 us apart. Rank 1 arrives last in every collective
    folder = tmp_path / "seq"
    folder.mkdir()
    nelems, world = 1 << 20, 2
    sizes = {
        "Collective name": "allreduce",
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "dtype": "Float",
        "Group size": world,
    }
    per_rank: dict[int, list[dict[str, object]]] = {0: [], 1: []}
    for s in range(6):
        base = 1000.0 * s
        end = base + 60 + 200  # the transfer takes 200 us once rank 1 joins
        per_rank[0].append(_comm_kernel(ALLREDUCE, base, end, group="0", seq=s, **sizes))
        if s > 0:
            per_rank[1].append(_comm_kernel(ALLREDUCE, base + 60, end, group="0", seq=s, **sizes))
    for r, events in per_rank.items():
        _write(folder, r, world, events)
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None
    assert view.bases == {"process_group_seq": 5} and view.basis == "process group and sequence number"
    assert (view.aligned, view.left_out) == (5, 1)
    assert all(c.basis == "process_group_seq" and c.group == "0" for c in view.collectives)
    assert [c.seq for c in view.collectives] == [1, 2, 3, 4, 5]
    assert all(c.last_rank == "1" and c.wait_us == pytest.approx(60) for c in view.collectives)
    assert all(c.skew_us == pytest.approx(60) for c in view.collectives)
    assert [s.rank for s in view.stragglers] == ["1"] and view.stragglers[0].chance_pct == 50.0
    # nccl-tests: algbw = bytes / time, busbw = algbw x 2 (n - 1) / n for an all-reduce
    c = view.collectives[0]
    assert c.bytes == 4 * nelems and c.time_us == pytest.approx(200)
    assert c.algbw_gbps == pytest.approx(4 * nelems / 200e3, abs=1e-3)
    assert c.bus_bandwidth_gbps == pytest.approx(c.algbw_gbps * 2 * (world - 1) / world, abs=1e-3)
    (kb,) = view.bandwidth
    assert (kb.kind, kb.count, kb.bytes) == ("allreduce", 5, 5 * 4 * nelems)
    assert view.no_bandwidth == {}


def test_by_order_the_same_windows_are_labelled_and_paired_by_position(tmp_path: Path) -> None:
    # the same ranks without process group or sequence number: kernel name and order, said so
    folder = tmp_path / "order"
    folder.mkdir()
    for r in (0, 1):
        events = [
            _comm_kernel(ALLREDUCE, 1000.0 * s + 60 * r, 1000.0 * s + 260)
            for s in range(6)
            if r == 0 or s > 0
        ]
        _write(folder, r, 2, events)
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.bases == {"kernel_name_order": 5}
    assert view.basis.startswith("kernel name and launch order")
    assert all(c.basis == "kernel_name_order" and c.group is None and c.seq is None for c in view.collectives)
    assert all(c.bus_bandwidth_gbps is None and c.bandwidth_why == "no_sizes" for c in view.collectives)
    # paired by position: rank 0's k-th with rank 1's k-th, a collective apart (what Seq avoids)
    assert all(c.skew_us == pytest.approx(1060) for c in view.collectives)
    assert view.no_bandwidth == {"no_sizes": 5} and "not measured for 5 of 5" in view.bus_bandwidth


def test_two_groups_with_one_kernel_name_are_aligned_within_each_group(tmp_path: Path) -> None:
    # ranks 0-1 and 2-3 are two process groups running the same kernel; in group "b" rank 3 is
    # always last, in group "a" the ranks take turns. Each collective counts only its group's ranks
    folder = tmp_path / "groups"
    folder.mkdir()
    world = 4
    events: dict[int, list[dict[str, object]]] = {r: [] for r in range(world)}
    for k in range(6):
        base = 1000.0 * k
        late_a = k % 2  # rank 0 or 1, in turn
        for r in (0, 1):
            start = base + (50 if r == late_a else 0)
            events[r].append(
                _comm_kernel(ALLREDUCE, start, base + 150, group="a", **{"Collective name": "allreduce"})
            )
        for r in (2, 3):
            start = base + (50 if r == 3 else 0)
            events[r].append(
                _comm_kernel(ALLREDUCE, start, base + 150, group="b", **{"Collective name": "allreduce"})
            )
    for r in range(world):
        _write(folder, r, world, events[r])
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.bases == {"process_group_order": 12} and view.left_out == 0
    assert all(c.ranks == 2 for c in view.collectives)
    assert [s.rank for s in view.stragglers] == ["3"]
    s = view.stragglers[0]
    assert (s.last_in, s.of, s.share_pct) == (6, 6, 100.0)
    # last in half of group a's six: what chance gives with two ranks, so neither is named
    assert view.last_counts["0"] == 3 and view.last_counts["1"] == 3


def test_a_kernel_without_args_takes_them_from_its_record_param_comms(tmp_path: Path) -> None:
    # older Kineto writes the args on record_param_comms only: the kernel's launch (same
    # correlation) runs inside it, and its External id names it
    folder = tmp_path / "linked"
    folder.mkdir()
    nelems = 1000
    for r in (0, 1):
        events: list[dict[str, object]] = []
        for k in range(4):
            base, ext, corr = 1000.0 * k, 10 + k, 100 + k
            args = {
                "External id": ext,
                "Collective name": "_allgather_base",
                "Process Group Name": "7",
                "In msg nelems": nelems,
                "Out msg nelems": 2 * nelems,
                "dtype": "BFloat16",
                "Group size": 2,
            }
            events += [
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "record_param_comms",
                    "pid": 1,
                    "tid": 1,
                    "ts": base,
                    "dur": 20,
                    "args": args,
                },
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": base + 5,
                    "dur": 5,
                    "args": {"External id": ext, "correlation": corr},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": ALLGATHER,
                    "pid": 0,
                    "tid": 13,
                    "ts": base + 30 + 40 * r,
                    "dur": 140 - 40 * r,
                    "args": {"correlation": corr},
                },
            ]
        _write(folder, r, 2, events)
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.bases == {"process_group_order": 4}
    c = view.collectives[0]
    assert (c.kind, c.group, c.bytes, c.time_us) == ("_allgather_base", "7", 2 * nelems * 2, 100.0)
    # an all-gather's bus factor is (n - 1) / n
    assert c.bus_bandwidth_gbps == pytest.approx(c.algbw_gbps / 2, abs=1e-3)


def test_the_real_rocm_trace_records_process_groups_and_sizes() -> None:
    from _paths import trace
    from attnprof.analysis.ranks.folder import rank_collectives
    from attnprof.trace.load import load_trace

    t = load_trace(trace("AMD-AGI__TraceLens__tests__traces__mi300__resnet_act_checkpoint"))
    rc = rank_collectives(t, "0")
    assert len(rc.name) == 17 and rc.groups == ["0"]
    assert sorted(rc.kinds) == ["allreduce", "broadcast"]
    # 12 kernels carry their args; 5 have no launch in the trace, so nothing to take them from
    assert sum(g == 0 for g in rc.group) == 12 and rc.group.count(-1) == 5
    # an all-reduce of 2,873,320 bf16 elements is the first one's message
    assert 2873320 * 2 in rc.nbytes and all(b >= 0 or b == -1 for b in rc.nbytes)
    assert all(s == -1 for s in rc.seq)  # this PyTorch recorded no "Seq"


@pytest.mark.parametrize(
    ("name", "kind", "factor"),
    [
        ("allreduce", "allreduce", 2 * 7 / 8),
        ("allreduce_coalesced", "allreduce", 2 * 7 / 8),
        ("_allgather_base", "allgather", 7 / 8),
        ("allgather_into_tensor_coalesced", "allgather", 7 / 8),
        ("_reduce_scatter_base", "reducescatter", 7 / 8),
        ("reduce_scatter_tensor_coalesced", "reducescatter", 7 / 8),
        ("all_to_all", "alltoall", 7 / 8),
        ("broadcast", "broadcast", 1.0),
        ("recv", "recv", 1.0),
        ("barrier", "barrier", None),
        ("gather", "gather", None),
    ],
)
def test_bus_factors_follow_nccl_tests(name: str, kind: str, factor: float | None) -> None:
    from attnprof.analysis.ranks.bus_bandwidth import bus_factor, kind_of

    assert kind_of(name) == kind
    assert bus_factor(name, 8) == (None if factor is None else pytest.approx(factor))


def test_message_bytes_need_sizes_and_a_known_element_type() -> None:
    from attnprof.analysis.ranks.bus_bandwidth import message_bytes

    assert message_bytes(10, 40, "Half") == 80  # the larger side, as nccl-tests counts it
    assert message_bytes(None, None, "Float") == "no_sizes"
    assert message_bytes(10, 10, "Quantum") == "no_dtype"


def test_a_send_and_a_collective_with_one_seq_are_not_paired(tmp_path: Path) -> None:
    # c10d counts point-to-point ops apart from collectives: seq 0 is both an all-reduce (every
    # rank) and rank 0's send to rank 1. Only the all-reduces are one collective across ranks;
    # the send/recv pair (launched first) is left out of the group's view, not paired with an
    # all-reduce
    folder = tmp_path / "p2p"
    folder.mkdir()
    for r in (0, 1, 2):
        events = [
            _comm_kernel(
                ALLREDUCE, 100.0 + 10 * r, 300.0, group="0", seq=0, **{"Collective name": "allreduce"}
            )
        ]
        if r in (0, 1):
            kind = "send" if r == 0 else "recv"
            events.append(
                _comm_kernel(
                    "ncclDevKernel_SendRecv", 20.0, 30.0, group="0", seq=0, **{"Collective name": kind}
                )
            )
        _write(folder, r, 3, events)
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.aligned == 1 and view.left_out == 2
    (c,) = view.collectives
    assert (c.kind, c.ranks, c.last_rank) == ("allreduce", 3, "2")


def _seq_folder(tmp: Path, given: list[int], group_size: int, late: int, n: int = 6) -> Path:
    """The ranks `given` of a group of `group_size` (as c10d records it), `late` arriving 60 us
    after the others in each of n all-reduces."""
    folder = tmp / f"g{group_size}_{len(given)}"
    folder.mkdir()
    for r in given:
        events = []
        for s in range(n):
            base = 1000.0 * s
            arrive = base + (60 if r == late else 0)
            events.append(
                _comm_kernel(ALLREDUCE, arrive, base + 260, group="0", seq=s, **{"Group size": group_size})
            )
        _write(folder, r, group_size, events)
    return folder


def test_a_group_larger_than_the_ranks_given_names_no_last_rank_as_a_straggler(tmp_path: Path) -> None:
    # four of an eight-rank group: rank 2 is last of these four, but one of the four not given
    # may have been later still, so who the others waited for is not known
    from attnprof.report.collectives_report import collectives_lines
    from attnprof.report.i18n import Translator

    (run,) = analyze_folder(_seq_folder(tmp_path, [0, 1, 2, 3], 8, late=2), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.aligned == 6
    assert (view.partial, view.missing_ranks) == (6, 4)
    assert all(c.missing_ranks == 4 and c.last_rank == "2" for c in view.collectives)
    assert view.stragglers == [] and set(view.last_counts.values()) == {0}
    lines = [str(c) for c in collectives_lines(view, Translator("en"))]
    assert any("6 of the 6 aligned" in x and "up to 4 rank(s) missing" in x for x in lines)
    assert not any(x.startswith("No straggler") for x in lines)


def test_every_rank_of_the_group_given_finds_the_last_one(tmp_path: Path) -> None:
    (run,) = analyze_folder(_seq_folder(tmp_path, [0, 1, 2, 3], 4, late=2), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and (view.partial, view.missing_ranks) == (0, 0)
    assert [s.rank for s in view.stragglers] == ["2"] and view.last_counts["2"] == 6


def _members_folder(tmp: Path, given: list[int], members: str, late: int, quiet: int | None = None) -> Path:
    """The ranks `given` of a group whose members c10d recorded as `members` (its "Process Group
    Ranks"), `late` arriving 60 us after the others in each of 6 all-reduces; rank `quiet`, if
    any, is given with a GEMM but no collective of the group."""
    folder = tmp / f"m{len(given)}_{abs(hash(members)) % 1000}_{quiet}"
    folder.mkdir()
    size = len(members.strip("[]").split(","))
    for r in given:
        events: list[dict[str, object]] = []
        for s in range(6):
            base = 1000.0 * s
            if r == quiet:
                events.append(
                    {"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7, "ts": base, "dur": 40}
                )
                continue
            arrive = base + (60 if r == late else 0)
            args = {"Group size": size, "Process Group Ranks": members}
            events.append(_comm_kernel(ALLREDUCE, arrive, base + 260, group="0", seq=s, **args))
        _write(folder, r, 8, events)
    return folder


def test_recorded_members_name_the_ranks_not_given(tmp_path: Path) -> None:
    from attnprof.report.collectives_report import collectives_lines
    from attnprof.report.i18n import Translator

    (run,) = analyze_folder(
        _members_folder(tmp_path, [0, 1, 2, 3], "[0, 1, 2, 3, 4, 5, 6, 7]", late=2), workers=1
    )
    view = run.cross_rank.collectives
    assert view is not None and (view.partial, view.missing_ranks) == (6, 4)
    assert view.missing == ["4", "5", "6", "7"]
    assert all(c.missing == ["4", "5", "6", "7"] for c in view.collectives)
    assert view.stragglers == []
    en = [str(c) for c in collectives_lines(view, Translator("en"))]
    assert any("6 of the 6 aligned" in x and "(4-7)" in x for x in en)
    assert not any("up to 4 rank(s) missing" in x for x in en)  # the sentence that only counts
    for lang in ("id", "th"):
        lines = [str(c) for c in collectives_lines(view, Translator(lang))]
        assert any("(4-7)" in x for x in lines), lang


def test_a_rank_given_without_the_groups_collectives_is_named_missing(tmp_path: Path) -> None:
    # rank 3's trace is given but holds none of the group's collectives: who was last is unknown
    (run,) = analyze_folder(
        _members_folder(tmp_path, [0, 1, 2, 3], "[0, 1, 2, 3]", late=2, quiet=3), workers=1
    )
    view = run.cross_rank.collectives
    assert view is not None and view.missing == ["3"] and view.partial == 6
    assert view.stragglers == []


def test_members_of_other_ranks_or_cut_short_are_not_used(tmp_path: Path) -> None:
    # the folder's ranks 0-3 are not in the list (rank names that are not these global ranks),
    # and a list the profiler cut short: only the recorded size counts, no rank is named
    for members in ("[8, 9, 10, 11, 12, 13, 14, 15]", "[0, 1, 2, 3, 4, 5, ...]"):
        (run,) = analyze_folder(_members_folder(tmp_path, [0, 1, 2, 3], members, late=2), workers=1)
        view = run.cross_rank.collectives
        assert view is not None and view.missing == [], members
        size = len(members.strip("[]").split(","))
        assert view.missing_ranks == size - 4 and view.partial == 6, members


def test_every_recorded_member_given_finds_the_straggler(tmp_path: Path) -> None:
    (run,) = analyze_folder(_members_folder(tmp_path, [0, 1, 2, 3], "[0, 1, 2, 3]", late=2), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and (view.partial, view.missing) == (0, [])
    assert [s.rank for s in view.stragglers] == ["2"]


def test_members_read_from_a_real_trace() -> None:
    # the shared ROCm ResNet trace records its 8-rank group's members on record_param_comms
    from attnprof.analysis.ranks.collectives import _members
    from attnprof.analysis.ranks.folder import rank_collectives
    from attnprof.trace.load import load_trace

    trace = load_trace(_paths.trace("AMD-AGI__TraceLens__tests__traces__mi300__resnet_act_checkpoint"))
    rc = rank_collectives(trace, "0")
    assert rc.groups == ["0"] and rc.members == [list(range(8))]
    assert _members("[]") == () and _members("[0, 1, ...]") == () and _members("[1, 1]") == ()
    assert _members("[3]") == (3,) and _members(None) == () and _members("0, 1") == ()


def test_rank_spans() -> None:
    from attnprof.report.collectives_report import rank_spans

    assert rank_spans(["12", "5", "4", "6", "7", "9"]) == "4-7, 9, 12"
    assert rank_spans(["0"]) == "0" and rank_spans([]) == ""


def test_collectives_no_rank_waited_in_name_no_last_rank(tmp_path: Path) -> None:
    # every rank's kernel runs equally long (copies of one trace, or one clock tick): nobody
    # waited, so naming the rank that "arrived last" (the first in order) would be invented
    from attnprof.report.collectives_report import collectives_lines, collectives_table
    from attnprof.report.i18n import Translator

    (run,) = analyze_folder(_seq_folder(tmp_path, [0, 1, 2, 3], 4, late=-1), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and (view.aligned, view.ties, view.partial) == (6, 6, 0)
    assert view.stragglers == [] and set(view.last_counts.values()) == {0}
    assert all(c.last_rank is None and c.first_rank is None and c.wait_us == 0 for c in view.collectives)
    lines = [str(c) for c in collectives_lines(view, Translator("en"))]
    assert any(x.startswith("6 of the 6 aligned collective(s) ran equally long") for x in lines)
    assert not any(x.startswith("No straggler") or x.startswith("Straggler") for x in lines)
    table = collectives_table(view, Translator("en"))
    assert all(row[4] == "-" for row in table.rows)


def test_one_rank_waiting_is_not_a_tie(tmp_path: Path) -> None:
    from attnprof.report.collectives_report import collectives_lines
    from attnprof.report.i18n import Translator

    (run,) = analyze_folder(_seq_folder(tmp_path, [0, 1, 2, 3], 4, late=1), workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.ties == 0
    assert all(c.last_rank == "1" and c.wait_us == 60 for c in view.collectives)
    assert [s.rank for s in view.stragglers] == ["1"]
    lines = [str(c) for c in collectives_lines(view, Translator("en"))]
    assert not any("ran equally long" in x for x in lines)


def test_members_from_distributed_info_pg_config(tmp_path: Path) -> None:
    # no "Process Group Ranks" on the collectives, but Kineto's distributedInfo lists the group
    folder = tmp_path / "pgc"
    folder.mkdir()
    for r in (0, 1):
        events = [
            _comm_kernel(
                ALLREDUCE, 1000.0 * s + 60 * r, 1000.0 * s + 260, group="0", seq=s, **{"Group size": 4}
            )
            for s in range(6)
        ]
        info = {
            "backend": "nccl",
            "rank": r,
            "world_size": 4,
            "pg_config": [{"pg_name": "0", "ranks": [0, 1, 2, 3]}],
        }
        (folder / f"rank-{r}.1.pt.trace.json").write_text(
            json.dumps({"traceEvents": events, "distributedInfo": info})
        )
    (run,) = analyze_folder(folder, workers=1)
    view = run.cross_rank.collectives
    assert view is not None and view.missing == ["2", "3"] and view.partial == 6
