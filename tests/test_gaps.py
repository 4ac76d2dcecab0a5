"""Every gap in what a trace recorded is said (issue 18): a GPU trace with nothing on the GPU,
categories the loader skipped (with counts), launches and device ops linked through the External
id when the correlation is missing, device ops without launches, and regions owning unlinked
device ops inside their window (rule "window")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_analysis_truth import ev, kernel, launch, run

GEMM = "ampere_sgemm_128x64_tn"


def _has(a: Any, words: str) -> bool:
    return any(words in w for w in a.warnings)


def test_a_gpu_trace_with_nothing_on_the_gpu_is_said_not_called_cpu_only(tmp_path: Path) -> None:
    a = run(tmp_path, [ev("aten::add", "cpu_op", 0, 10)])  # deviceProperties lists an A100
    assert _has(a, "lists 1 GPU(s) in deviceProperties but holds no launches and no device ops (1 CPU ops)")
    assert not _has(a, "CPU-only")
    empty = run(tmp_path, [])
    assert _has(empty, "holds no launches and no device ops (0 CPU ops)")


def test_a_cpu_trace_is_not_told_its_gpu_was_not_recorded(tmp_path: Path) -> None:
    a = run(tmp_path, [ev("aten::add", "cpu_op", 0, 10)], props=None)
    assert _has(a, "CPU-only trace") and not _has(a, "deviceProperties")


def test_skipped_categories_are_listed_with_their_counts(tmp_path: Path) -> None:
    ranges = [
        {"ph": "X", "cat": "cuda_profiler_range", "name": "r", "pid": 0, "tid": 7, "ts": 100 + i, "dur": 1}
        for i in range(3)
    ]
    a = run(tmp_path, [launch(0, 1), kernel(GEMM, 10, 50, 1), *ranges])
    assert _has(a, "events not analysed (trace.gaps.not_analysed): cuda_profiler_range 3 (profiler ranges)")
    assert a.trace.gaps.not_analysed == {"cuda_profiler_range/X": 3}
    # cuda_sync records are read (the idle analysis: which stream a wait was on), not skipped
    syncs = [{**r, "cat": "cuda_sync", "name": "Stream Sync", "args": {"stream": 7}} for r in ranges]
    read = run(tmp_path, [launch(0, 1), kernel(GEMM, 10, 50, 1), *syncs])
    assert not _has(read, "events not analysed") and read.trace.gaps.not_analysed is None
    quiet = run(tmp_path, [launch(0, 1), kernel(GEMM, 10, 50, 1)])
    assert not _has(quiet, "events not analysed") and quiet.trace.gaps.not_analysed is None


def test_a_launch_and_a_kernel_sharing_an_external_id_are_linked(tmp_path: Path) -> None:
    events = [
        ev("aten::mm", "cpu_op", 0, 30, **{"External id": 42}),
        ev("cudaLaunchKernel", "cuda_runtime", 5, 5, correlation=7, **{"External id": 42}),
        ev(GEMM, "kernel", 20, 50, tid=7, pid=0, device=0, **{"External id": 42}),  # no correlation
    ]
    a = run(tmp_path, events)
    assert a.trace.gaps.linked_by_external_id == 1
    assert a.trace.gaps.launches_without_device_op == 0 and a.totals.unlaunched_gpu_ops == 0
    assert not _has(a, "have no device op") and not _has(a, "no launch event")
    assert a.kernels[0].launch_apis == {"cudaLaunchKernel": 1}


def test_different_external_ids_stay_unlinked_and_both_gaps_are_said(tmp_path: Path) -> None:
    events = [
        ev("cudaLaunchKernel", "cuda_runtime", 5, 5, correlation=7, **{"External id": 41}),
        ev(GEMM, "kernel", 20, 50, tid=7, pid=0, device=0, **{"External id": 42}),
    ]
    a = run(tmp_path, events)
    assert a.trace.gaps.linked_by_external_id is None
    assert _has(a, "1 of 1 kernel launches (100.0%) have no device op")
    assert _has(a, "1 of 1 device ops (100.0%) have no launch event")


def test_a_device_only_trace_says_it_has_no_launches(tmp_path: Path) -> None:
    a = run(tmp_path, [kernel(GEMM, 10, 50, -1), kernel(GEMM, 70, 50, -1)])
    assert _has(a, "no launch events: the trace holds 2 device ops and no runtime calls")


def test_all_launched_says_nothing_about_launches(tmp_path: Path) -> None:
    a = run(tmp_path, [launch(0, 1), kernel(GEMM, 10, 50, 1)])
    assert not _has(a, "launch event")


def _step_with_orphans() -> list[dict[str, Any]]:
    return [
        ev("ProfilerStep#1", "user_annotation", 0, 1000),
        ev("aten::mm", "cpu_op", 10, 20),
        launch(15, 1),
        kernel(GEMM, 100, 50, 1),
        kernel("graph_replayed_kernel", 400, 300, -1),  # inside the step: no launch links it
        kernel("graph_replayed_kernel", 1500, 300, -1),  # after the step: no region holds it
    ]


def test_a_step_owns_the_unlinked_device_ops_in_its_window(tmp_path: Path) -> None:
    r = run(tmp_path, _step_with_orphans()).regions[0]
    assert r.attribution.rules == {"thread": 1, "window": 1}
    assert r.gpu_ops_per_instance == 2 and r.gpu_time_us_per_instance == 350
    assert r.unplaced_gpu_ops == 1


def test_a_gpu_range_places_an_orphan_before_the_window_does(tmp_path: Path) -> None:
    events = _step_with_orphans()
    events.append(ev("ProfilerStep#1", "gpu_user_annotation", 390, 400, tid=7, pid=0))
    r = run(tmp_path, events).regions[0]
    assert r.attribution.rules == {"thread": 1, "gpu_user_annotation": 1}
