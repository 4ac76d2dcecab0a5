"""Exposed communication (issue 18): the communication time that no compute on any stream
hides, per trace (share.communication), per region and per rank; small synthetic traces built
here as JSON, plus the shared two-rank DDP traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.ranks.folder import analyze_folder
from attnprof.analysis.records.result import TraceAnalysis
from test_analysis_truth import ev, kernel, launch, run

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "ampere_sgemm_128x64_nn"


def _on_stream(k: dict[str, Any], tid: int) -> dict[str, Any]:
    k["tid"] = tid
    return k


def _ddp_step(compute: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """One step: an all-reduce of 100 us on its own stream (tid 20), compute kernels beside it."""
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 400),
        launch(1, 1),
        _on_stream(kernel(NCCL, 100, 100, 1), 20),
    ]
    for i, (ts, dur) in enumerate(compute):
        events += [launch(2 + i, 10 + i), kernel(GEMM, ts, dur, 10 + i)]
    return events


def test_communication_half_hidden_by_compute_on_another_stream(tmp_path: Path) -> None:
    a = run(tmp_path, _ddp_step([(80, 40), (150, 10)]))  # overlaps 100-120 and 150-160
    c = a.share.communication
    assert c.time_us == 100 and c.exposed_us == 70 and c.hidden_pct == 30
    r = a.regions[0].communication
    assert r is not None and r.exposed_us_per_instance == 70 and r.hidden_pct == 30


def test_communication_with_no_compute_beside_is_all_exposed(tmp_path: Path) -> None:
    a = run(tmp_path, _ddp_step([(10, 50), (250, 50)]))  # before and after: nothing overlaps
    c = a.share.communication
    assert c.exposed_us == 100 and c.hidden_pct == 0


def test_memcpy_does_not_hide_communication(tmp_path: Path) -> None:
    events = _ddp_step([])
    events += [
        ev("cudaMemcpyAsync", "cuda_runtime", 3, 5, correlation=30),
        ev("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 100, 100, tid=7, pid=0, correlation=30, device=0),
    ]
    assert run(tmp_path, events).share.communication.hidden_pct == 0


def test_no_communication_gives_nulls_and_no_mention(tmp_path: Path) -> None:
    events = [ev("ProfilerStep#1", "user_annotation", 0, 400), launch(1, 1), kernel(GEMM, 10, 50, 1)]
    a = run(tmp_path, events)
    c = a.share.communication
    assert c.exposed_us is None and c.hidden_pct is None and a.regions[0].communication is None
    assert c.time_us == 0


def test_first_line_shows_exposed_beside_the_share(tmp_path: Path) -> None:
    from rich.console import Console

    from attnprof.report.analysis_view import render_analysis

    a = run(tmp_path, _ddp_step([(80, 40), (150, 10)]))
    console = Console(width=200, record=True)
    render_analysis(a, console)
    first = console.export_text().splitlines()[1]
    assert "comm 67% (70 µs exposed, 30% hidden)" in first, first


def test_first_line_without_communication_says_no_exposed(tmp_path: Path) -> None:
    from rich.console import Console

    from attnprof.report.analysis_view import render_analysis

    events = [ev("ProfilerStep#1", "user_annotation", 0, 400), launch(1, 1), kernel(GEMM, 10, 50, 1)]
    console = Console(width=200, record=True)
    render_analysis(run(tmp_path, events), console)
    assert "exposed" not in console.export_text()


def test_shared_ddp_traces_report_exposed_communication_per_trace_and_rank(tmp_path: Path) -> None:
    prefix = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-"
    a = analyze(trace(prefix + "0"))
    assert isinstance(a, TraceAnalysis)
    c = a.share.communication
    # HTA's get_comm_comp_overlap definition applied to the same ops gives 14.95% (docs/analysis.md)
    assert c.hidden_pct == 14.95 and c.exposed_us is not None and 0 < c.exposed_us < c.time_us
    for r in "01":  # the folder view reads the two ranks as they are, linked, not copied
        (tmp_path / trace(prefix + r).name).symlink_to(trace(prefix + r))
    (folder,) = analyze_folder(tmp_path, workers=1)
    ranks = {r.rank: r for r in folder.cross_rank.ranks}
    assert set(ranks) == {"0", "1"} and all(0 < r.comm_exposed_us < r.comm_union_us for r in ranks.values())
    assert round(ranks["0"].comm_exposed_us) == round(c.exposed_us)
