"""The device's synchronisation records (Kineto's cuda_sync events) in the idle analysis: which
stream or event a wait was on decides whether it waited on recorded work. Small synthetic
traces, each with the case where a finding must fire and one where it must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attnprof.analysis import analyze
from test_analysis_truth import ev, launch, run

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"


def _k(ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return ev(GEMM, "kernel", ts, dur, tid=stream, pid=0, correlation=corr, device=0, stream=stream)


def _sync(
    name: str, ts: float, corr: int, stream: int, wait_on: int = -1, record: int = -1
) -> dict[str, Any]:
    """A cuda_sync record as Kineto writes it: on the device's lane of `stream`, with the
    correlation of the runtime call that made it."""
    args = {"correlation": corr, "device": 0, "stream": stream}
    if name in ("Stream Wait Event", "Event Sync"):
        args |= {"wait_on_stream": wait_on, "wait_on_cuda_event_record_corr_id": record}
    return {
        "ph": "X",
        "cat": "cuda_sync",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": 1,
        "args": args,
    }


def _held_stream(records: bool, producer_until: float | None = None) -> list[dict[str, Any]]:
    """Stream 7 runs a kernel, waits on an event of stream 20 (recorded by cudaEventRecord,
    correlation 4), and its next kernel, queued at 145 us, starts at 2000 us. With
    producer_until, stream 20 ran recorded work before the record until then."""
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 2200),
        launch(10, 1),
        _k(20, 100, 1),
        ev("cudaEventRecord", "cuda_runtime", 125, 2, correlation=4),
        ev("cudaStreamWaitEvent", "cuda_runtime", 130, 5, correlation=5),
        launch(140, 6),
        _k(2000, 100, 6),
    ]
    if producer_until is not None:
        events += [launch(100, 3), _k(150, producer_until - 150, 3, stream=20)]
    if records:
        events.append(_sync("Stream Wait Event", 130, 5, 7, wait_on=20, record=4))
    return events


def test_a_stream_held_by_a_wait_on_unrecorded_work_is_said_to_be_that(tmp_path: Path) -> None:
    a = run(tmp_path, _held_stream(records=True))
    f = a.finding("GPU_STREAM_WAIT_UNRECORDED")
    assert f is not None and f.severity == "info" and "stream 20" in f.message
    assert f.evidence["cause_us_per_instance"] == 1855  # queued at 145 us, started at 2000 us
    assert f.evidence["waited_on_streams_us"] == {"stream 20": 1855}
    assert "GPU_IDLE_UNRECORDED" not in a.codes  # not "nothing recorded" any more


def test_without_the_records_the_same_gap_is_not_called_a_stream_wait(tmp_path: Path) -> None:
    a = run(tmp_path, _held_stream(records=False))
    assert a.finding("GPU_STREAM_WAIT_UNRECORDED") is None
    assert a.finding("GPU_IDLE_UNRECORDED") is not None


def test_a_wait_on_recorded_work_holds_nothing(tmp_path: Path) -> None:
    # stream 20's recorded kernel runs until 1950 us: the wait held stream 7 for that work
    a = run(tmp_path, _held_stream(records=True, producer_until=1950))
    assert a.finding("GPU_STREAM_WAIT_UNRECORDED") is None
    assert a.regions[0].idle.host_during_idle_us_per_instance["stream_wait_unrecorded"] == 0


def test_two_waits_before_one_op_are_judged_together(tmp_path: Path) -> None:
    """Stream 7 waits on stream 20 (nothing recorded) and on stream 21, whose recorded kernel
    runs until 1950 us; its next op starts at 2000 us: the recorded work held it, not
    unrecorded work (judged alone, the first wait would claim 1950 to 2000 us)."""
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 2200),
        launch(10, 1),
        _k(20, 100, 1),
        launch(100, 2),
        _k(150, 1800, 2, stream=21),
        ev("cudaEventRecord", "cuda_runtime", 125, 1, correlation=3),  # on stream 21
        ev("cudaEventRecord", "cuda_runtime", 126, 1, correlation=4),  # on stream 20
        ev("cudaStreamWaitEvent", "cuda_runtime", 130, 2, correlation=5),
        ev("cudaStreamWaitEvent", "cuda_runtime", 133, 2, correlation=6),
        _sync("Stream Wait Event", 130, 5, 7, wait_on=20, record=4),
        _sync("Stream Wait Event", 133, 6, 7, wait_on=21, record=3),
        launch(140, 7),
        _k(2000, 100, 7),
    ]
    a = run(tmp_path, events)
    assert a.regions[0].idle.host_during_idle_us_per_instance["stream_wait_unrecorded"] == 0
    alone = [e for e in events if e.get("args", {}).get("correlation") != 6]
    held = run(tmp_path, alone).regions[0].idle.host_during_idle_us_per_instance
    assert held["stream_wait_unrecorded"] == 55  # the idle parts of the hold: 145-150 and 1950-2000 us


def test_a_wait_that_does_not_say_on_what_claims_nothing(tmp_path: Path) -> None:
    events = [*_held_stream(records=False), _sync("Stream Wait Event", 130, 5, 7)]  # -1, -1
    a = run(tmp_path, events)
    assert a.finding("GPU_STREAM_WAIT_UNRECORDED") is None
    assert a.regions[0].idle.host_during_idle_us_per_instance["stream_wait_unrecorded"] == 0


def _event_sync(wait_on: int | None) -> list[dict[str, Any]]:
    """The host waits in cudaEventSynchronize (200 to 2000 us) while the device idles from 400
    to 1900 us; stream 8 runs an unrelated kernel until 1990 us, just before the call returns.
    The record says which stream's event the call waited on (None: no record)."""
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 2100),
        launch(10, 1),
        _k(210, 190, 1),  # stream 7: its work ends at 400 us
        launch(20, 2),
        _k(1900, 90, 2, stream=8),
        ev("cudaEventRecord", "cuda_runtime", 30, 2, correlation=3),
        ev("cudaEventSynchronize", "cuda_runtime", 200, 1800, correlation=9),
    ]
    if wait_on is not None:
        events.append(_sync("Event Sync", 200, 9, wait_on, wait_on=wait_on, record=3))
    return events


def test_a_sync_on_a_stream_whose_work_ended_long_before_waited_on_unrecorded_work(tmp_path: Path) -> None:
    a = run(tmp_path, _event_sync(wait_on=7))
    f = a.finding("GPU_WAIT_UNRECORDED_WORK")
    assert f is not None and f.evidence["sync_records"] is True and "cuda_sync record" in f.message
    assert a.finding("GPU_IDLE_SYNC") is None


def test_a_sync_on_the_stream_that_ran_until_it_returned_is_a_sync(tmp_path: Path) -> None:
    # the same call waiting on stream 8's event: its recorded work ran until just before
    a = run(tmp_path, _event_sync(wait_on=8))
    assert a.finding("GPU_WAIT_UNRECORDED_WORK") is None
    assert a.finding("GPU_IDLE_SYNC") is not None
    # without a record the device-wide rule decides: stream 8 was busy until 1990 us
    plain = run(tmp_path, _event_sync(wait_on=None))
    assert plain.finding("GPU_WAIT_UNRECORDED_WORK") is None and plain.finding("GPU_IDLE_SYNC") is not None


@pytest.mark.gpu
def test_a_real_cuda_trace_records_the_waits_the_analysis_reads(tmp_path: Path) -> None:
    """On a GPU: a side stream's GEMM that the default stream waits on, profiled with
    enable_cuda_sync_events. The loader keeps the Stream Wait Event with the stream it waited on,
    and since the waited-on work is recorded, nothing is a wait on unrecorded work."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from attnprof.trace.load import load_trace
    from attnprof.trace.model import Kind

    x = torch.randn(2048, 2048, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with (
        profile(activities=activities, experimental_config=config) as prof,
        torch.profiler.record_function("step"),
    ):
        with torch.cuda.stream(side):
            y = x @ x
        torch.cuda.current_stream().wait_stream(side)
        (y @ y).sum().item()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    t = load_trace(path)
    waits = [r for r in t.rows(Kind.SYNC).tolist() if t.names[int(t.name[r])] == "Stream Wait Event"]
    assert waits, sorted({t.names[int(t.name[r])] for r in t.rows(Kind.SYNC).tolist()})
    assert any(t.sync_waits[r][0] >= 0 and t.sync_waits[r][1] >= 0 for r in waits)
    a = analyze(path, region="step")
    assert a.regions[0].idle.host_during_idle_us_per_instance["stream_wait_unrecorded"] == 0
    assert a.finding("GPU_STREAM_WAIT_UNRECORDED") is None
