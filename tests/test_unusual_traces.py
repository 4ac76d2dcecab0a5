"""Traces that are not what they seem (issue 28): device work of a category no analysis reads (a
CUPTI range profiler's), a PyTorch 1.x autograd export without categories, a GPU trace in which
nothing was recorded. Each is written here as minimal trace JSON; the must-not-fire cases are a
normal GPU trace and a CPU-only one from the shared traces."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.report.analysis_view import _device_line, render_analysis
from attnprof.report.i18n import Translator
from attnprof.trace import forked, stream
from attnprof.trace.load import load_trace
from attnprof.trace.model import Unread

GPU_TRACE = "AMD-AGI__TraceLens__tests__traces__h100"  # kernels, launches, CPU ops, an H100
CPU_TRACE = "facebookresearch__HolisticTraceAnalysis__tests__data__cpu_only"  # no GPU listed
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}
EN = Translator("en")


def _write(tmp_path: Path, doc: Any, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def _analyze(path: Path) -> TraceAnalysis:
    a = analyze(path)
    assert isinstance(a, TraceAnalysis)
    return a


def _cpu_op(name: str, ts: float, dur: float = 8.0, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 4242,
        "tid": 4242,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _gpu_label(pid: int) -> dict[str, Any]:
    # Kineto labels every device pid so
    return {"name": "process_labels", "ph": "M", "pid": pid, "tid": 0, "args": {"labels": f"GPU {pid}"}}


def _ranges(n: int, **args: Any) -> list[dict[str, Any]]:
    """What Kineto's CuptiRangeProfiler writes: one complete event per kernel on the GPU's pid,
    named by the kernel, its metrics in args, the profiled span cut into equal parts."""
    return [
        {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": f"void gemm_kernel<{i % 3}>(Params)",
            "pid": 0,
            "tid": 0,
            "ts": 1000.0 + 10 * i,
            "dur": 10.0,
            "args": {"sm__inst_executed_pipe_tensor.sum": 5.0, **args},
        }
        for i in range(n)
    ]


# -- 1. device events no analysis reads --------------------------------------------------------


def _range_trace(tmp_path: Path, **args: Any) -> Path:
    events = [*_ranges(77, **args), *[_cpu_op("aten::mm", 10.0 * i) for i in range(20)]]
    return _write(tmp_path, {"traceEvents": [*events, _gpu_label(0)]})


def test_the_loader_counts_every_category_it_does_not_read_and_which_is_device_work(tmp_path: Path) -> None:
    events = [
        *_ranges(5),
        *_ranges(2, device=0),  # on a labelled device pid and with a device arg: counted once
        {**_ranges(1)[0], "pid": 9, "args": {"device": 1}},  # on a host pid, but says its device
        {**_ranges(1)[0], "pid": 4242},  # a host pid, no device arg: not device work
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 0, "tid": 0, "ts": 1, "s": "t"},
        _cpu_op("aten::mm", 0),
        _gpu_label(0),
    ]
    t = load_trace(_write(tmp_path, {"traceEvents": events}))
    assert t.unread == [
        Unread("cuda_profiler_range", count=9, on_device_pid=7, device_arg=3, device_side=8),
        # an instant on the device pid is no work with a duration
        Unread("cpu_instant_event", count=1, on_device_pid=1, device_arg=0, device_side=0),
    ]


def test_a_pid_holding_kernels_is_a_device_pid_without_a_label(tmp_path: Path) -> None:
    kernel = {**_ranges(1)[0], "cat": "kernel", "name": "k", "pid": 3, "tid": 7}
    t = load_trace(_write(tmp_path, {"traceEvents": [kernel, {**_ranges(1)[0], "pid": 3}]}))
    assert t.unread == [Unread("cuda_profiler_range", 1, on_device_pid=1, device_arg=0, device_side=1)]


def test_range_profiler_trace_fires_and_is_not_called_cpu_only(tmp_path: Path) -> None:
    a = _analyze(_range_trace(tmp_path))
    f = a.finding("DEVICE_EVENTS_NOT_ANALYSED")
    assert f is not None and f.severity == "warning"
    assert f.evidence["events"] == 77 and f.evidence["categories"] == {"cuda_profiler_range": 77}
    assert f.message.startswith(
        "77 device-side event(s) of categories no analysis reads (cuda_profiler_range x77)"
    )
    assert "the device time is unknown, not zero, and this is not a CPU-only trace" in f.message
    assert "CUPTI range profiler" in f.message
    assert a.device.not_read == {"cuda_profiler_range": 77}
    line = _device_line(a.device, EN)
    assert line == "device events not read (cuda_profiler_range 77): no device time measured"
    assert "CPU only" not in line
    assert not any("CPU-only" in w for w in a.warnings)
    for lang in ("id", "th"):  # the other languages word the line too
        assert "cuda_profiler_range 77" in _device_line(a.device, Translator(lang))


def test_device_events_beside_kernels_are_named_and_the_device_line_keeps_the_gpu(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": 0,
         "dur": 5, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": 7, "ts": 10, "dur": 50,
         "args": {"correlation": 1, "device": 0}},
        *_ranges(3),
    ]  # fmt: skip
    a = _analyze(_write(tmp_path, {"traceEvents": events, "deviceProperties": [H100]}))
    f = a.finding("DEVICE_EVENTS_NOT_ANALYSED")
    assert f is not None and f.evidence["message_key"] == "finding.DEVICE_EVENTS_NOT_ANALYSED"
    assert "leave them out" in f.message
    assert _device_line(a.device, EN) == (
        "NVIDIA H100 80GB HBM3, sm90, 132 SMs; device events not read: cuda_profiler_range 3"
    )


def test_no_device_events_not_analysed_on_a_normal_gpu_trace_or_a_cpu_trace() -> None:
    for prefix in (GPU_TRACE, CPU_TRACE):
        a = _analyze(trace(prefix))
        assert "DEVICE_EVENTS_NOT_ANALYSED" not in a.codes
        assert a.device.not_read is None
        assert all(u.device_side == 0 for u in load_trace(trace(prefix)).unread)
    assert _device_line(_analyze(trace(CPU_TRACE)).device, EN) == "CPU only (no device events)"


# -- 2. PyTorch 1.x's autograd-profiler export ------------------------------------------------


def _export_1x(path: Path, cuda: bool, groups: int = 6, wrapped: bool = False) -> Path:
    """What torch.autograd.profiler's export_chrome_trace wrote before Kineto (1.x), event by
    event as it wrote them: a bare array, no categories, ops on a "CPU functions" pid; with
    use_cuda, each op's CUDA-event range on "CUDA functions" and a cpu_to_cuda arrow to it.
    Per group (a thread's step): linear [t, addmm], softmax [_softmax], nested as an op's calls.
    wrapped: the same events in a {"traceEvents": [...]} object, which the loader streams."""
    ops = [("aten::linear", 0, 60), ("aten::t", 2, 5), ("aten::addmm", 10, 40), ("aten::softmax", 65, 20),
           ("aten::_softmax", 66, 18)]  # fmt: skip
    out, next_id = [], 0
    for g in range(groups):
        t0, tid = 1000.0 + 100 * g, (1, 7)[g % 2]
        for name, off, dur in ops:
            ts = t0 + off
            out.append(f'{{"name": "{name}", "ph": "X", "ts": {ts}, "dur": {dur}, "tid": {tid}, '
                       '"pid": "CPU functions", "args": {}}')  # fmt: skip
            if cuda and name in ("aten::addmm", "aten::_softmax"):
                for ph, pid, t, lane in (("s", "CPU functions", ts, tid), ("f", "CUDA functions", ts + 5, 0)):
                    out.append(f'{{"name": "{name}", "ph": "{ph}", "ts": {t}, "tid": {lane}, "pid": "{pid}", '
                               f'"id": {next_id}, "cat": "cpu_to_cuda", "args": {{}}}}')  # fmt: skip
                out.append(f'{{"name": "{name}", "ph": "X", "ts": {ts + 5}, "dur": {2 * dur}, "tid": 0, '
                           '"pid": "CUDA functions", "args": {}}')  # fmt: skip
                next_id += 1
    events = "[" + ", ".join(out) + "]"
    path.write_text(f'{{"traceEvents": {events}}}' if wrapped else events)
    return path


def test_a_pytorch_1x_export_is_read_as_cpu_ops_and_says_its_format(tmp_path: Path) -> None:
    a = _analyze(_export_1x(tmp_path / "cuda.json", cuda=True))
    assert a.totals.cpu_ops == 30 and a.totals.kernels == 0
    # self times by hand: linear 60 - t 5 - addmm 40 = 15, softmax 20 - _softmax 18 = 2, per group
    self_us = {o.name: o.self_us_per_instance for o in a.regions[0].cpu_ops_by_name}
    assert self_us == {"aten::addmm": 240, "aten::_softmax": 108, "aten::linear": 90, "aten::t": 30,
                       "aten::softmax": 12}  # fmt: skip
    f = a.finding("LEGACY_TRACE_FORMAT")
    assert f is not None and f.severity == "info"
    assert f.evidence["cpu_ops"] == 30 and f.evidence["device_ranges"] == 12
    assert f.message.startswith("30 timed event(s) carry no category, as PyTorch 1.x's autograd-profiler")
    assert '12 device range(s) on "CUDA functions"' in f.message and "not kernels" in f.message
    # the CUDA ranges are device work not read: the device time is unknown, never "CPU only"
    dev = a.finding("DEVICE_EVENTS_NOT_ANALYSED")
    assert dev is not None and dev.evidence["message_key"].endswith(".only")
    assert a.device.not_read == {"(no category)": 12}
    assert not any("nothing to analyse" in w or "unknown categories" in w for w in a.warnings)
    buf = io.StringIO()
    render_analysis(a, Console(file=buf, width=1000, color_system=None))
    text = buf.getvalue()
    assert "CPU self time 480 µs (device time not measured: the trace's device events are not read)" in text
    assert "no device time)" not in text
    for lang in ("id", "th"):
        t = Translator(lang)
        assert t("finding.LEGACY_TRACE_FORMAT.ranges", cpu_ops=30, device_ranges=12) != f.message


def test_a_1x_export_without_cuda_says_its_format_and_nothing_of_device_events(tmp_path: Path) -> None:
    a = _analyze(_export_1x(tmp_path / "cpu.json", cuda=False))
    f = a.finding("LEGACY_TRACE_FORMAT")
    assert f is not None and f.evidence == {**f.evidence, "cpu_ops": 30, "device_ranges": 0}
    assert "CUDA functions" not in f.message
    assert "DEVICE_EVENTS_NOT_ANALYSED" not in a.codes and a.device.not_read is None


def test_a_1x_export_loads_the_same_split_across_two_processes(tmp_path: Path) -> None:
    path = _export_1x(tmp_path / "big.json", cuda=True, groups=400, wrapped=True)
    small = stream.BLOCK
    try:
        stream.BLOCK = 8192  # many cuts
        one, two = forked.streamed(path, parallel=False), forked.streamed(path, parallel=True)
    finally:
        stream.BLOCK = small
    assert one is not None and two is not None
    assert one.metadata["uncategorised_ops"] == two.metadata["uncategorised_ops"] == 2000
    assert one.unread == two.unread and one.dropped == two.dropped


def test_no_legacy_format_note_on_traces_with_categories() -> None:
    for prefix in (GPU_TRACE, CPU_TRACE):
        a = _analyze(trace(prefix))
        assert "LEGACY_TRACE_FORMAT" not in a.codes
        assert "uncategorised_ops" not in load_trace(trace(prefix)).metadata


# -- 3. a GPU trace in which nothing was recorded ------------------------------------------------


def test_a_listed_gpu_with_nothing_recorded_warns_and_a_normal_or_cpu_trace_does_not(tmp_path: Path) -> None:
    span = {
        "ph": "X",
        "cat": "Trace",
        "name": "PyTorch Profiler (0)",
        "pid": "Spans",
        "tid": 1,
        "ts": 0,
        "dur": 9,
    }
    for extra in ({"deviceProperties": [H100]}, {"distributedInfo": {"backend": "nccl", "rank": 0}}):
        a = _analyze(_write(tmp_path, {"traceEvents": [span, _gpu_label(0)], **extra}))
        f = a.finding("NO_GPU_ACTIVITY")
        assert f is not None and f.evidence["message_key"] == "finding.NO_GPU_ACTIVITY.empty"
        assert "recorded nothing on it" in f.message and "ProfilerActivity.CUDA" in f.message
    # gloo is a CPU backend, and no deviceProperties: nothing listed, nothing said
    cpu = {"traceEvents": [span], "distributedInfo": {"backend": "gloo", "rank": 0}}
    assert "NO_GPU_ACTIVITY" not in _analyze(_write(tmp_path, cpu)).codes
    for prefix in (GPU_TRACE, CPU_TRACE):
        assert "NO_GPU_ACTIVITY" not in _analyze(trace(prefix)).codes
