"""Collectives aligned across ranks (attnprof.analysis.collectives), on synthetic rank folders
built here: a planted straggler must be found with its evidence, and none named where ranks
arrive in turn."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from attnprof.analysis.collectives import STRAGGLER_SHARE
from attnprof.analysis.ranks import analyze_folder

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
