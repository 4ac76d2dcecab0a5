"""Idle time given to what the host was doing (issue 18): each runtime call in a kind (ordered
data, CUDA and HIP names), Python frames, data loading, waits on work the trace does not
contain. One small synthetic trace per class, built here as JSON; each finding has a case where
it must fire and one where it must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnprof.analysis.findings.idle_findings import IDLE_CODES
from attnprof.analysis.timeline import idle
from attnprof.analysis.timeline.runtime_calls import RUNTIME_KINDS, runtime_kind
from attnprof.trace.load import load_trace
from test_analysis_truth import ev, kernel, launch, run

GEMM = "ampere_sgemm_128x64_nn"


@pytest.mark.parametrize(
    ("kind", "example"), [(kind, ex) for kind, _, examples in RUNTIME_KINDS for ex in examples]
)
def test_each_runtime_call_example_is_decided_by_its_own_rule(kind: str, example: str) -> None:
    # first match wins: an example decided by an earlier rule would come out as that rule's kind
    assert runtime_kind(example) == kind


def test_a_call_no_rule_names_is_other() -> None:
    assert runtime_kind("cudaSomethingNew") == "other"
    assert runtime_kind("cudaMemcpyAsync") == "launching"  # async unless its copy says pageable


def _step(host: list[dict[str, Any]], device: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [ev("ProfilerStep#1", "user_annotation", 0, 2000), *host, *device]


def _idle_codes(codes: list[str]) -> set[str]:
    return set(codes) & set(IDLE_CODES)


def _memcpy(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return ev(name, "gpu_memcpy", ts, dur, tid=7, pid=0, correlation=corr, device=0)


def _d2h(kind: str) -> list[dict[str, Any]]:
    """A kernel, then a cudaMemcpyAsync of 1.3 ms whose copy runs only at its end."""
    return _step(
        [launch(0, 1), ev("cudaMemcpyAsync", "cuda_runtime", 20, 1300, correlation=2)],
        [kernel(GEMM, 10, 200, 1), _memcpy(f"Memcpy DtoH (Device -> {kind})", 1250, 60, 2)],
    )


def test_async_copy_to_pageable_memory_is_a_blocking_copy(tmp_path: Path) -> None:
    a = run(tmp_path, _d2h("Pageable"))
    f = a.finding("GPU_IDLE_BLOCKING_COPY")
    assert f is not None and "cudaMemcpyAsync" in f.message and "pageable" in f.message
    assert "GPU_IDLE_SLOW_LAUNCH" not in a.codes and "LAUNCH_BOUND" not in a.codes
    assert a.regions[0].idle.host_during_idle_us_per_instance["blocking_copy"] > 900


def _d2h_after(kind: str) -> list[dict[str, Any]]:
    """A kernel, then a cudaMemcpyAsync of 1.3 ms that returns before its copy runs (async)."""
    return _step(
        [launch(0, 1), ev("cudaMemcpyAsync", "cuda_runtime", 20, 1300, correlation=2)],
        [kernel(GEMM, 10, 200, 1), _memcpy(f"Memcpy DtoH (Device -> {kind})", 1400, 60, 2)],
    )


def test_async_copy_to_pinned_memory_is_not_a_blocking_copy(tmp_path: Path) -> None:
    a = run(tmp_path, _d2h_after("Pinned"))
    assert "GPU_IDLE_BLOCKING_COPY" not in a.codes
    assert "GPU_IDLE_SLOW_LAUNCH" in a.codes  # a 1.3 ms launch call: what the trace shows


@pytest.mark.parametrize("name", ["Memcpy DtoH", "Memcpy DtoH (Device -> Pinned)"])
def test_an_async_copy_that_returned_after_its_copy_blocked_by_its_timing(tmp_path: Path, name: str) -> None:
    # the copy's name does not say pageable (older CUPTI names no memory kind at all), but the
    # 1.3 ms call returned only once its copy had ended: it waited for it, as cudaMemcpy does
    a = run(
        tmp_path,
        _step(
            [launch(0, 1), ev("cudaMemcpyAsync", "cuda_runtime", 20, 1300, correlation=2)],
            [kernel(GEMM, 10, 200, 1), _memcpy(name, 1250, 60, 2)],
        ),
    )
    f = a.finding("GPU_IDLE_BLOCKING_COPY")
    assert f is not None and f.evidence["copies_by_timing"] == 1
    assert "returned only once the copies they launched had ended" in f.message
    assert "pageable" not in f.message.replace("does not record the host memory kind", "")
    assert "GPU_IDLE_SLOW_LAUNCH" not in a.codes


def test_hip_memcpy_with_stream_is_a_blocking_copy(tmp_path: Path) -> None:
    events = _step(
        [
            ev("hipLaunchKernel", "cuda_runtime", 0, 5, correlation=1),
            ev("hipMemcpyWithStream", "cuda_runtime", 20, 1300),
        ],
        [kernel("Cijk_Ailk_Bljk_HHS_BH_MT128x128", 10, 200, 1)],
    )
    assert "GPU_IDLE_BLOCKING_COPY" in run(tmp_path, events, props=None).codes


@pytest.mark.parametrize("call", ["cudaFree", "cudaMalloc", "hipFree", "cudaHostAlloc"])
def test_allocator_calls_are_not_launching(tmp_path: Path, call: str) -> None:
    events = _step(
        [launch(0, 1), ev(call, "cuda_runtime", 300, 1400), launch(1750, 2)],
        [kernel(GEMM, 10, 250, 1), kernel(GEMM, 1760, 200, 2)],
    )
    a = run(tmp_path, events)
    f = a.finding("GPU_IDLE_ALLOCATOR")
    assert f is not None and call in f.message
    assert not {"LAUNCH_BOUND", "GPU_IDLE_UNRECORDED", "GPU_IDLE_HOST_COMPUTE"} & set(a.codes)


def test_a_short_allocation_beside_a_busy_device_is_no_finding(tmp_path: Path) -> None:
    events = _step([launch(0, 1), ev("cudaMalloc", "cuda_runtime", 300, 10)], [kernel(GEMM, 10, 1985, 1)])
    assert not _idle_codes(run(tmp_path, events).codes)


@pytest.mark.parametrize("call", ["cudaStreamCreateWithFlags", "cuModuleLoadData", "hipEventDestroy"])
def test_initialisation_calls_are_init(tmp_path: Path, call: str) -> None:
    events = _step(
        [launch(0, 1), ev(call, "cuda_runtime", 300, 1400), launch(1750, 2)],
        [kernel(GEMM, 10, 250, 1), kernel(GEMM, 1760, 200, 2)],
    )
    a = run(tmp_path, events)
    f = a.finding("GPU_IDLE_INIT")
    assert f is not None and call in f.message and "LAUNCH_BOUND" not in a.codes


def test_a_slow_occupancy_query_is_set_up_not_a_slow_launch(tmp_path: Path) -> None:
    events = _step(
        [launch(0, 1), ev("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cuda_runtime", 300, 1400)],
        [kernel(GEMM, 10, 250, 1), kernel(GEMM, 1760, 200, 1)],
    )
    a = run(tmp_path, events)
    assert "GPU_IDLE_INIT" in a.codes and "GPU_IDLE_SLOW_LAUNCH" not in a.codes


def test_a_long_stream_wait_call_is_named_as_such(tmp_path: Path) -> None:
    events = _step(
        [launch(0, 1), ev("cudaStreamWaitEvent", "cuda_runtime", 300, 1400), launch(1750, 2)],
        [kernel(GEMM, 10, 250, 1), kernel(GEMM, 1760, 200, 2)],
    )
    a = run(tmp_path, events)
    f = a.finding("GPU_IDLE_STREAM_WAIT")
    assert f is not None and f.severity == "info" and "GPU_IDLE_SYNC" not in a.codes


def test_stream_wait_beside_a_busy_device_is_no_finding(tmp_path: Path) -> None:
    events = _step(
        [launch(0, 1), ev("cudaStreamWaitEvent", "cuda_runtime", 300, 5)], [kernel(GEMM, 10, 1985, 1)]
    )
    assert not _idle_codes(run(tmp_path, events).codes)


def _py(name: str, ts: float, dur: float) -> dict[str, Any]:
    return ev(name, "python_function", ts, dur)


def _python_step(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _step([launch(1800, 1), *frames], [kernel(GEMM, 1810, 150, 1)])


def test_idle_covered_by_python_frames_is_the_python_code(tmp_path: Path) -> None:
    frames = [
        _py("train.py(10): step", 0, 1990),
        _py("tokenizer.py(88): encode", 20, 1700),
        _py("<built-in method join of str object>", 100, 50),
    ]
    a = run(tmp_path, _python_step(frames))
    f = a.finding("GPU_IDLE_PYTHON")
    assert f is not None
    # the innermost frame holds most of the idle time, not the step that encloses everything
    names = list(f.evidence["python_frames_us"])
    assert names[0] == "tokenizer.py(88): encode" and "GPU_IDLE_UNRECORDED" not in a.codes
    assert not any("with_stack" in x.message for x in a.findings)


def test_python_frames_elsewhere_leave_the_idle_time_unrecorded_without_with_stack_advice(
    tmp_path: Path,
) -> None:
    a = run(tmp_path, _python_step([_py("train.py(10): log", 1900, 50)]))
    f = a.finding("GPU_IDLE_UNRECORDED")
    assert f is not None and "GPU_IDLE_PYTHON" not in a.codes
    assert "with_stack=True or" not in f.message and "outside them" in f.message


def test_without_python_frames_the_advice_is_with_stack(tmp_path: Path) -> None:
    f = run(tmp_path, _python_step([])).finding("GPU_IDLE_UNRECORDED")
    assert f is not None and "with_stack=True" in f.message


DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@pytest.mark.parametrize("cat", ["cpu_op", "user_annotation"])
def test_a_dataloader_range_is_data_loading_with_the_ops_inside(tmp_path: Path, cat: str) -> None:
    host = [ev(DATALOADER, cat, 10, 1700), ev("aten::div", "cpu_op", 50, 1500)]
    a = run(tmp_path, _step([*host, launch(1800, 1)], [kernel(GEMM, 1810, 150, 1)]))
    f = a.finding("GPU_IDLE_DATA_LOADING")
    assert f is not None and DATALOADER in f.message and "GPU_IDLE_HOST_COMPUTE" not in a.codes


def test_a_dataloader_range_says_it_was_known_by_its_name(tmp_path: Path) -> None:
    host = [ev(DATALOADER, "user_annotation", 10, 1700)]
    f = run(tmp_path, _step([*host, launch(1800, 1)], [kernel(GEMM, 1810, 150, 1)])).finding(
        "GPU_IDLE_DATA_LOADING"
    )
    assert (
        f is not None and f.evidence["data_loading_by"] == "range_names" and "range names only" in f.message
    )


TORCH_NEXT = "torch/utils/data/dataloader.py(733): __next__"


def test_python_frames_of_torch_data_are_data_loading_by_provenance(tmp_path: Path) -> None:
    # a DataLoader iterated with with_stack=True and no record_function range: its frames say so
    frames = [
        _py("train.py(40): <module>", 0, 1990),
        _py(TORCH_NEXT, 10, 1700),
        _py("torch/utils/data/_utils/collate.py(171): default_collate", 100, 1500),
    ]
    a = run(tmp_path, _python_step(frames))
    f = a.finding("GPU_IDLE_DATA_LOADING")
    assert f is not None and f.evidence["data_loading_by"] == "python_frames"
    assert "Python frames in torch/utils/data" in f.message and "GPU_IDLE_PYTHON" not in a.codes
    assert (
        f.evidence["data_loading_by_us"]["python_frames"]
        > 0
        == f.evidence["data_loading_by_us"]["range_names"]
    )


def test_frames_outside_torch_data_are_not_data_loading(tmp_path: Path) -> None:
    frames = [
        _py("train.py(40): <module>", 0, 1990),
        _py("torch/utils/checkpoint.py(480): checkpoint", 10, 1700),
    ]
    a = run(tmp_path, _python_step(frames))
    assert "GPU_IDLE_DATA_LOADING" not in a.codes and "GPU_IDLE_PYTHON" in a.codes


def test_host_compute_outside_a_dataloader_is_not_data_loading(tmp_path: Path) -> None:
    host = [ev("aten::div", "cpu_op", 50, 1500)]
    a = run(tmp_path, _step([*host, launch(1800, 1)], [kernel(GEMM, 1810, 150, 1)]))
    assert "GPU_IDLE_HOST_COMPUTE" in a.codes and "GPU_IDLE_DATA_LOADING" not in a.codes


def test_every_idle_cause_key_is_in_the_json(tmp_path: Path) -> None:
    from attnprof.analysis.timeline.idle import CAUSES

    a = run(tmp_path, _python_step([]))
    assert list(a.regions[0].idle.host_during_idle_us_per_instance) == list(CAUSES)
    assert list(a.regions[0].per_instance[0].idle.host_during_idle_us) == list(CAUSES)


def test_a_helper_threads_python_frames_are_not_the_hosts_work(tmp_path: Path) -> None:
    # tqdm's monitor thread waits in threading.wait through the whole step, on a thread that
    # runs no op: the main thread's idle time is not its Python code
    helper = ev("threading.py(359): wait", "python_function", 0, 1990, tid=9)
    a = run(tmp_path, _python_step([helper]))
    assert "GPU_IDLE_PYTHON" not in a.codes
    f = a.finding("GPU_IDLE_UNRECORDED")
    assert f is not None and "with_stack=True or" not in f.message  # the trace has frames


def test_row_indices_past_int32_give_the_same_analysis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the idle stage keeps its rows as int32 below 2**31 events (half the memory); a trace past
    # that takes the int64 path, which must decide every cause alike: forced here by the limit
    host = [
        _py("train.py(40): <module>", 0, 1990),
        _py(TORCH_NEXT, 10, 900),
        ev(DATALOADER, "user_annotation", 5, 950),
        ev("aten::div", "cpu_op", 50, 800),
        launch(1000, 1),
        ev("cudaMemcpyAsync", "cuda_runtime", 1020, 900, correlation=2),
    ]
    device = [kernel(GEMM, 1010, 20, 1), _memcpy("Memcpy DtoH (Device -> Pageable)", 1850, 60, 2)]
    narrow = run(tmp_path, _step(host, device))
    assert idle._row_type(load_trace(tmp_path / "t.json")) is np.int32
    monkeypatch.setattr(idle, "_INT32_ROWS", 0)
    assert idle._row_type(load_trace(tmp_path / "t.json")) is np.int64
    wide = run(tmp_path, _step(host, device))
    assert wide.to_dict() == narrow.to_dict()
    assert {"GPU_IDLE_DATA_LOADING", "GPU_IDLE_BLOCKING_COPY"} <= set(wide.codes), wide.codes
