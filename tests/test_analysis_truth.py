"""What analyze says must hold up on real workloads (issue 8): work on other threads, backward,
other accelerators, attention only by dataflow, why the device idles, advice the hardware can take.
Small synthetic traces built here as JSON, plus the shared real traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _paths import TRACES, trace
from attnprof.analysis import analyze
from attnprof.analysis.records.result import Backward, ThreadOps, TraceAnalysis

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108}
V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80}
MI300 = {"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4}


def ev(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(
    ts: float, corr: int, tid: int = 1, dur: float = 5, name: str = "cudaLaunchKernel"
) -> dict[str, Any]:
    return ev(name, "cuda_runtime", ts, dur, tid=tid, correlation=corr)


def kernel(name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return ev(name, "kernel", ts, dur, tid=7, pid=0, correlation=corr, device=0, **args)


def run(
    tmp_path: Path, events: list[dict[str, Any]], props: dict[str, Any] | None = A100, **kw: Any
) -> TraceAnalysis:
    p = tmp_path / "t.json"
    doc: dict[str, Any] = {"traceEvents": events}
    if props is not None:
        doc["deviceProperties"] = [props]
    p.write_text(json.dumps(doc))
    a = analyze(p, **kw)
    assert isinstance(a, TraceAnalysis)
    return a


# -- regions across threads ------------------------------------------------------------------


def _backward_chunk(op: str) -> list[dict[str, Any]]:
    return [
        ev("attn(B)", "user_annotation", 0, 1000),
        ev(op, "cpu_op", 100, 200, tid=2),
        launch(150, 5, tid=2),
        kernel("ampere_sgemm_128x64_nn", 400, 50, 5),
    ]


def test_backward_kernels_from_the_autograd_thread_belong_to_the_region(tmp_path: Path) -> None:
    a = run(tmp_path, _backward_chunk("autograd::engine::evaluate_function: MmBackward0"), region="attn(B)")
    r = a.regions[0]
    assert r.gpu_ops_per_instance == 1
    assert r.attribution.rules == {"autograd thread": 1}
    assert r.attribution.threads == [ThreadOps(thread="1/2", gpu_ops_per_instance=1)]


def test_other_threads_only_with_threads_all(tmp_path: Path) -> None:
    events = _backward_chunk("aten::mm")  # not a backward op: another thread's own work
    assert run(tmp_path, events, region="attn(B)").regions[0].gpu_ops_per_instance == 0
    r = run(tmp_path, events, region="attn(B)", threads="all").regions[0]
    assert r.gpu_ops_per_instance == 1 and r.attribution.rules == {"other thread": 1}


def test_shared_backward_thread_trace_counts_its_kernel() -> None:
    path = TRACES / "facebookresearch__HolisticTraceAnalysis__tests__data__call_stack__backward_thread.json"
    step = analyze(path)
    assert step.regions[0].name == "ProfilerStep#*" and step.regions[0].gpu_ops_per_instance == 1
    bwd = analyze(path, region="## backward ##").regions[0]
    assert bwd.gpu_ops_per_instance == 1 and bwd.attribution.rules == {"autograd thread": 1}


@pytest.mark.parametrize("link", ["fwdbwd", "seq"])
def test_forward_region_reports_its_linked_backward(tmp_path: Path, link: str) -> None:
    events = [
        ev("attn_fwd", "user_annotation", 0, 100),
        ev("aten::mm", "cpu_op", 10, 50, **({"Sequence number": 42} if link == "seq" else {})),
        launch(20, 1),
        kernel("ampere_sgemm_128x64_nn", 30, 40, 1),
        ev(
            "autograd::engine::evaluate_function: MmBackward0",
            "cpu_op",
            500,
            100,
            tid=2,
            **({"Sequence number": 42} if link == "seq" else {}),
        ),
        launch(550, 2, tid=2),
        kernel("ampere_sgemm_128x64_nt", 600, 80, 2),
    ]
    if link == "fwdbwd":
        events += [
            {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 1, "ts": 10},
            {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 2, "ts": 500, "bp": "e"},
        ]
    r = run(tmp_path, events).regions[0]
    assert r.gpu_ops_per_instance == 1  # the forward region stays the forward
    assert r.backward == Backward(
        linked_by="fwdbwd flows" if link == "fwdbwd" else "sequence numbers",
        gpu_ops_per_instance=1,
        gpu_time_us_per_instance=80.0,
    )


# -- other accelerators ------------------------------------------------------------------------


def test_mtia_like_trace_has_device_ops_and_no_cpu_only_claim(tmp_path: Path) -> None:
    events = [
        ev("forward", "user_annotation", 0, 1000),
        ev("runFunction", "mtia_runtime", 10, 5, correlation=9),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 1, "ts": 10},
        ev("pe_exe", "mtia_ccp_events", 50, 300, pid=17, tid=3),
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 17, "tid": 3, "ts": 50, "bp": "e"},
        ev("dma_request", "mtia_ccp_events", 400, 20, pid=17, tid=4),
        ev("event_wait", "mtia_ccp_events", 0, 900, pid=17, tid=5),
    ]
    a = run(tmp_path, events, props={"id": 17, "name": "ARTEMIS"})
    d = a.to_dict()
    assert d["device"]["accelerator"] == "mtia"
    assert d["totals"]["other_device_ops"] == 3 and d["totals"]["kernels"] == 0
    cats = {c["category"]: c["count"] for c in d["categories"]}
    assert cats == {"other": 1, "memcpy": 1, "sync": 1}
    assert d["totals"]["device_busy_us"] == 320.0  # the wait is not busy time
    assert not any("unknown categories" in w for w in d["warnings"])
    assert d["share"]["device_time_us"] == 320.0


def test_shared_mtia_trace_is_an_mtia_device() -> None:
    d = analyze(trace("facebookresearch__HolisticTraceAnalysis__tests__data__mtia_inference")).to_dict()
    assert d["device"]["accelerator"] == "mtia"
    assert d["totals"]["other_device_ops"] == 1313
    assert d["regions"][0]["gpu_ops_per_instance"] > 0


def test_rocm_trace_gets_no_nvidia_occupancy_or_tensor_core_advice(tmp_path: Path) -> None:
    events = [launch(0, 1, name="hipLaunchKernel"), kernel("sgemm_fp32_kernel", 10, 100, 1)]
    a = run(tmp_path, events, props=MI300, top=0)
    assert a.device.accelerator == "rocm" and a.device.arch_limits_source is None
    assert a.finding("CUDA_CORE_GEMM") is None
    assert a.kernels[0].occupancy is None or a.kernels[0].occupancy.theoretical_pct is None


@pytest.mark.parametrize(
    "prefix", ["AMD-AGI__TraceLens__tests__traces__mi300__resnet", "AMD-AGI__TraceLens__tests__traces__mi210"]
)
def test_shared_rocm_traces_are_rocm(prefix: str) -> None:
    d = analyze(trace(prefix)).to_dict()
    assert d["device"]["accelerator"] == "rocm" and d["device"]["arch_limits_source"] is None


# -- gaps --------------------------------------------------------------------------------------


def test_launches_without_kernels_are_warned_with_their_share(tmp_path: Path) -> None:
    events = [launch(i * 10, i) for i in range(10)] + [kernel("ampere_sgemm_128x64_nn", 5, 2, 0)]
    a = run(tmp_path, events)
    assert any("9 of 10 kernel launches (90.0%) have no device op" in w for w in a.warnings)
    ok = run(tmp_path, [launch(0, 1), kernel("ampere_sgemm_128x64_nn", 5, 2, 1)])
    assert not any("have no device op" in w for w in ok.warnings)


def test_no_device_ops_at_all_is_said(tmp_path: Path) -> None:
    a = run(tmp_path, [ev("aten::add", "cpu_op", 0, 10)], props=None)
    assert any("CPU-only trace" in w for w in a.warnings)
    a = run(tmp_path, [launch(0, 1)])
    assert any("no device ops at all" in w for w in a.warnings)


# -- attention only by dataflow ----------------------------------------------------------------


def _chain(first: list[list[int]], soft: list[int], second: list[list[int]]) -> list[dict[str, Any]]:
    return [
        ev("attn", "user_annotation", 0, 100),
        ev("aten::bmm", "cpu_op", 10, 10, **{"Input Dims": first}),
        ev("aten::softmax", "cpu_op", 30, 10, **{"Input Dims": [soft, []]}),
        ev("aten::bmm", "cpu_op", 50, 10, **{"Input Dims": second}),
    ]


def test_attention_chain_with_shapes_is_confirmed(tmp_path: Path) -> None:
    a = run(
        tmp_path,
        _chain([[8, 128, 64], [8, 64, 128]], [8, 128, 128], [[8, 128, 128], [8, 128, 64]]),
        region="attn",
    )
    f = a.finding("UNFUSED_ATTENTION")
    assert f is not None and f.severity == "warning" and f.evidence["confidence"] == "confirmed"
    assert f.evidence["shape_chains"][0]["scores_shape"] == [8, 128, 128]


def test_moe_routing_softmax_is_not_attention(tmp_path: Path) -> None:
    # router: mm [tokens, hidden] x [hidden, experts] -> softmax over [tokens, experts] -> expert bmm
    events = _chain([[512, 256], [256, 8]], [512, 8], [[8, 64, 256], [8, 256, 1024]])
    events[1]["name"] = "aten::mm"
    a = run(tmp_path, events, region="attn")
    assert a.finding("UNFUSED_ATTENTION") is None


def test_without_shapes_the_chain_is_only_possible(tmp_path: Path) -> None:
    events = _chain([], [], [])
    for e in events:
        e["args"].pop("Input Dims", None)
    f = run(tmp_path, events, region="attn").finding("UNFUSED_ATTENTION")
    assert f is not None and f.severity == "info" and f.evidence["confidence"] == "possible"
    assert "record_shapes=True" in f.message


def test_shared_moe_trace_counts_attention_softmaxes_not_router_softmaxes() -> None:
    # a Switch Transformer: 10 attention softmaxes over [8, 8, 1024, 1024] scores feed a GEMM with
    # the values; the 10 router softmaxes over [8, 1024, 4] (4 experts) and the output softmax
    # do not, and are not counted
    a = analyze(trace("CodingPlatelets__SwitchTransformers"))
    f = a.finding("UNFUSED_ATTENTION")
    assert f is not None and f.evidence["confidence"] == "confirmed"
    assert (f.evidence["occurrences"], f.evidence["rejected_by_shapes"]) == (10, 11)
    assert f.evidence["shape_chains"][0]["scores_shape"] == [8, 8, 1024, 1024]
    att = a.share.attention
    assert att.fused_us == 0 and att.unfused_us > 0 and att.time_us == att.unfused_us


# -- why the device idles ----------------------------------------------------------------------


def _step(host: list[dict[str, Any]], kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [ev("ProfilerStep#1", "user_annotation", 0, 2000), *host, *kernels]


def test_sync_wait_is_gpu_idle_sync(tmp_path: Path) -> None:
    # a loop that synchronizes after every kernel: each sync returns 15 us after its kernel ends
    # (the work it waits on is in the trace), and the next launch comes only then
    host, kernels = [], []
    for i in range(40):
        t = 50 * i
        host += [launch(t, i), ev("cudaStreamSynchronize", "cuda_runtime", t + 15, 30)]
        kernels.append(kernel("ampere_sgemm_128x64_nn", t + 10, 20, i))
    a = run(tmp_path, _step(host, kernels))
    assert "GPU_IDLE_SYNC" in a.codes and "GPU_WAIT_UNRECORDED_WORK" not in a.codes


def test_a_sync_that_outlasts_every_recorded_op_waits_on_unrecorded_work(tmp_path: Path) -> None:
    events = _step(
        [launch(0, 1), ev("cudaStreamSynchronize", "cuda_runtime", 60, 1900)],
        [kernel("ampere_sgemm_128x64_nn", 10, 40, 1)],
    )
    a = run(tmp_path, events)
    f = a.finding("GPU_WAIT_UNRECORDED_WORK")
    assert f is not None and "GPU_IDLE_SYNC" not in a.codes and "cudaStreamSynchronize" in f.message
    assert "work the trace does not contain" in f.message


def test_host_compute_without_launches_is_gpu_idle_host_compute(tmp_path: Path) -> None:
    events = _step(
        [launch(0, 1), ev("aten::randn", "cpu_op", 60, 1900)], [kernel("ampere_sgemm_128x64_nn", 10, 40, 1)]
    )
    a = run(tmp_path, events)
    f = a.finding("GPU_IDLE_HOST_COMPUTE")
    assert f is not None and "aten::randn" in f.message and "LAUNCH_BOUND" not in a.codes


def test_many_small_launches_are_launch_bound(tmp_path: Path) -> None:
    host, kernels = [], []
    for i in range(90):
        t = 10 + 22 * i
        host += [ev("aten::add", "cpu_op", t, 20), launch(t + 5, i, dur=10)]
        kernels.append(kernel("vectorized_elementwise_kernel<add>", t + 16, 2, i))
    a = run(tmp_path, _step(host, kernels))
    assert "LAUNCH_BOUND" in a.codes and "GPU_IDLE_SLOW_LAUNCH" not in a.codes


def test_one_slow_first_launch_is_not_launch_overhead(tmp_path: Path) -> None:
    events = _step([launch(0, 1, dur=1900)], [kernel("ampere_sgemm_128x64_nn", 1910, 40, 1)])
    codes = run(tmp_path, events).codes
    assert "GPU_IDLE_SLOW_LAUNCH" in codes and "LAUNCH_BOUND" not in codes


def test_nothing_recorded_is_said_as_such(tmp_path: Path) -> None:
    events = _step([launch(1900, 1)], [kernel("ampere_sgemm_128x64_nn", 1910, 40, 1)])
    a = run(tmp_path, events)
    idle = [c for c in a.codes if c.startswith("GPU_IDLE") or c == "LAUNCH_BOUND"]
    assert idle == ["GPU_IDLE_UNRECORDED"]


def test_busy_device_has_no_idle_finding(tmp_path: Path) -> None:
    events = _step([launch(0, 1)], [kernel("ampere_sgemm_128x64_nn", 10, 1990, 1)])
    a = run(tmp_path, events)
    assert not {"GPU_IDLE_SYNC", "GPU_IDLE_HOST_COMPUTE", "LAUNCH_BOUND", "GPU_IDLE_UNRECORDED"} & set(
        a.codes
    )
    assert a.regions[0].idle.idle_pct < 1


def test_busy_union_counts_overlapping_streams_once(tmp_path: Path) -> None:
    k2 = kernel("ampere_sgemm_128x64_nt", 50, 100, 2)
    k2["tid"] = 8
    events = _step([launch(0, 1), launch(5, 2)], [kernel("ampere_sgemm_128x64_nn", 10, 100, 1), k2])
    r = run(tmp_path, events).regions[0]
    assert r.gpu_time_us_per_instance == 200 and r.gpu_busy_union_us_per_instance == 140


# -- advice the hardware can take ---------------------------------------------------------------


def _fp32_gemm(props: dict[str, Any]) -> list[dict[str, Any]]:
    return [launch(0, 1), kernel("volta_sgemm_128x64_nn", 10, 100, 1)]


def test_v100_fp32_gemm_advice_is_fp16_not_tf32(tmp_path: Path) -> None:
    f = run(tmp_path, _fp32_gemm(V100), props=V100).finding("CUDA_CORE_GEMM")
    assert f is not None and "fp16 only (no TF32, no bf16)" in f.message and "allow_tf32" not in f.message


def test_a100_fp32_gemm_advice_is_tf32(tmp_path: Path) -> None:
    f = run(tmp_path, _fp32_gemm(A100)).finding("CUDA_CORE_GEMM")
    assert f is not None and "allow_tf32" in f.message and "16-bit" not in f.message


def test_pascal_has_no_tensor_core_advice(tmp_path: Path) -> None:
    p100 = {**V100, "name": "Tesla P100", "computeMajor": 6}
    assert run(tmp_path, _fp32_gemm(p100), props=p100).finding("CUDA_CORE_GEMM") is None


def _upcast(ts: float, inside_sdpa: bool) -> list[dict[str, Any]]:
    conv = ev(
        "aten::_to_copy",
        "cpu_op",
        ts + 2,
        3,
        **{"Input type": ["c10::BFloat16"], "Concrete Inputs": ["", "6"]},
    )
    if not inside_sdpa:
        return [conv]
    return [ev("aten::scaled_dot_product_attention", "cpu_op", ts, 10), conv]


def test_fp32_upcast_in_a_model_step_only_inside_attention(tmp_path: Path) -> None:
    norms = [ev("ProfilerStep#1", "user_annotation", 0, 1000)] + [
        e for i in range(4) for e in _upcast(10 + 20 * i, False)
    ]
    assert run(tmp_path, norms).finding("FP32_UPCAST") is None  # RMSNorm's .to(float32) is not a finding
    sdpa = [ev("ProfilerStep#1", "user_annotation", 0, 1000)] + [
        e for i in range(2) for e in _upcast(10 + 20 * i, True)
    ]
    f = run(tmp_path, sdpa).finding("FP32_UPCAST")
    assert f is not None and f.evidence["upcasts_in_sdpa_per_instance"] == 2
    assert "CUDA cores" not in f.message  # no fp32 CUDA-core GEMM in this trace


def test_nested_triu_is_one_mask_build(tmp_path: Path) -> None:
    events = []
    for i in range(2):
        t = 100 * i
        events += [
            ev("attn_fwd", "user_annotation", t, 50),
            ev("aten::triu", "cpu_op", t + 5, 20),
            ev("aten::triu", "cpu_op", t + 6, 10),
        ]
    f = run(tmp_path, events, props=None).finding("MASK_REBUILT_EACH_CALL")
    assert f is not None and f.evidence["cpu_ops_per_instance"] == {"aten::triu": 1}


# -- the attention share ------------------------------------------------------------------------


def test_attention_share_is_first_in_json_and_splits_forward_and_backward(tmp_path: Path) -> None:
    events = [
        launch(0, 1),
        kernel("void pytorch_flash::flash_fwd_kernel<T>(Flash_fwd_params)", 10, 30, 1),
        launch(1, 2),
        kernel(
            "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<T>(Flash_bwd_params)", 50, 60, 2
        ),
        launch(2, 3),
        kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 120, 10, 3),
    ]
    d = run(tmp_path, events).to_dict()
    assert list(d)[:4] == ["schema", "source", "path", "share"]
    att = d["share"]["attention"]
    assert (att["fused_us"], att["fwd_us"], att["bwd_us"], att["pct"]) == (90.0, 30.0, 60.0, 90.0)
    assert d["share"]["gemm"] == {"time_us": 10.0, "pct": 10.0}


# -- every code: a real trace where it fires and one where it must not ---------------------------

H100 = "AMD-AGI__TraceLens__tests__traces__h100"
MOE = "CodingPlatelets__SwitchTransformers"
QWEN = "AMD-AGI__TraceLens__tests__traces__mi300__Qwen"
# code -> (a shared trace where it fires, one where it must not)
FIRE_AND_NOT = {
    "NO_GPU_ACTIVITY": ("HazyResearch__zoology", H100),
    "FUSED_ATTENTION": (H100, MOE),
    "UNFUSED_ATTENTION": ("harryjmoss__particle_transformer", H100),
    "CUDA_CORE_GEMM": (MOE, H100),
    "MASK_REBUILT_EACH_CALL": (MOE, H100),
    "TRANSPOSES_BEFORE_KERNEL": (H100, MOE),
    "OUT_OF_PLACE_COPY": (MOE, H100),
    "LOW_OCCUPANCY_BY_DESIGN": (H100, "AMD-AGI__TraceLens__tests__traces__mi210"),
    "OCCUPANCY_NOT_MEASURED": (H100, "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"),
    "GPU_IDLE_DATA_LOADING": ("pytorch__kineto__tb_plugin__samples__resnet50", H100),
    "GPU_IDLE_PYTHON": (H100, "pytorch__kineto__tb_plugin__samples__resnet50"),
    "LAUNCH_BOUND": (H100, "pytorch__kineto__tb_plugin__samples__resnet50"),
    "GPU_IDLE_SLOW_LAUNCH": ("tugot17__tokenomics", H100),
    # the H100 trace has Python frames: its idle time is the Python code's, not unrecorded
    "GPU_IDLE_UNRECORDED": (
        "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0",
        H100,
    ),
    "CUDA_GRAPH": ("ranonrkm__TriForce", H100),
    "UNATTRIBUTED_GPU_OPS": (QWEN, H100),
}
# the false alarms: a bf16 model whose upcasts are RMSNorm's is not FP32_UPCAST, and
# waits in no synchronize call
MUST_NOT = {
    "FP32_UPCAST": QWEN,
    "GPU_IDLE_SYNC": H100,
    "SAFE_SOFTMAX": H100,
    "TRACE_REPAIRED": H100,
    # resnet50's step idles in its DataLoader's __next__: data loading, not host compute
    "GPU_IDLE_HOST_COMPUTE": "pytorch__kineto__tb_plugin__samples__resnet50",
}

_CACHE: dict[str, TraceAnalysis] = {}


def _shared(prefix: str) -> TraceAnalysis:
    if prefix not in _CACHE:
        a = analyze(trace(prefix))
        assert isinstance(a, TraceAnalysis)
        _CACHE[prefix] = a
    return _CACHE[prefix]


@pytest.mark.parametrize("code", sorted(FIRE_AND_NOT))
def test_code_fires_on_one_real_trace_and_not_on_another(code: str) -> None:
    fires, quiet = FIRE_AND_NOT[code]
    assert code in _shared(fires).codes
    assert code not in _shared(quiet).codes


@pytest.mark.parametrize("code", sorted(MUST_NOT))
def test_code_does_not_fire_where_the_trace_refutes_it(code: str) -> None:
    assert code not in _shared(MUST_NOT[code]).codes


def test_every_code_is_covered_by_a_fire_and_a_quiet_test() -> None:
    from attnprof.analysis import CODES

    # the rest fire on synthetic or live traces (above; test_analyze_traces.py: TRACE_REPAIRED,
    # SAFE_SOFTMAX, ABOVE_PEAK fires and stays quiet there) and stay quiet in MUST_NOT
    elsewhere = {"TRACE_REPAIRED", "SAFE_SOFTMAX", "ABOVE_PEAK", "FP32_UPCAST", "GPU_IDLE_SYNC"}
    # the idle causes no shared trace shows fire and stay quiet in tests/test_idle_causes.py
    elsewhere |= {
        "GPU_IDLE_HOST_COMPUTE",
        "GPU_IDLE_BLOCKING_COPY",
        "GPU_IDLE_ALLOCATOR",
        "GPU_IDLE_INIT",
        "GPU_IDLE_STREAM_WAIT",
        "GPU_WAIT_UNRECORDED_WORK",
    }
    # a stream held by a wait on unrecorded work: fires and stays quiet in tests/test_stream_waits.py
    elsewhere |= {"GPU_STREAM_WAIT_UNRECORDED"}
    # the per-op model's fire and stay quiet in tests/test_perf_model.py
    elsewhere |= {"MEMORY_BOUND_GEMM", "ATTENTION_BELOW_ROOF", "DECODE_BELOW_BANDWIDTH", "OP_ABOVE_ROOF"}
    # what the trace file holds that no analysis reads: fires and stays quiet in
    # tests/test_unusual_traces.py (no shared trace holds such events)
    elsewhere |= {"DEVICE_EVENTS_NOT_ANALYSED", "LEGACY_TRACE_FORMAT"}
    assert set(CODES) == set(FIRE_AND_NOT) | elsewhere


def test_unfused_backward_is_counted_in_the_share(tmp_path: Path) -> None:
    events = _chain([[8, 128, 64], [8, 64, 128]], [8, 128, 128], [[8, 128, 128], [8, 128, 64]])
    events[2]["args"]["Sequence number"] = 5
    events += [
        launch(31, 1),
        kernel("void (anonymous namespace)::softmax_warp_forward<float, float, float, 7>(...)", 35, 10, 1),
        ev(
            "autograd::engine::evaluate_function: SoftmaxBackward0",
            "cpu_op",
            200,
            50,
            tid=2,
            **{"Sequence number": 5},
        ),
        launch(210, 2, tid=2),
        kernel("void (anonymous namespace)::softmax_warp_backward<float, float, float, 7>(...)", 220, 20, 2),
    ]
    att = run(tmp_path, events, region="attn").share.attention
    assert (att.unfused_us, att.fwd_us, att.bwd_us, att.unfused_bwd_us) == (
        30.0,
        10.0,
        20.0,
        20.0,
    )


def test_xpu_trace_is_an_xpu_device_with_its_kernels(tmp_path: Path) -> None:
    events = [
        ev("urEnqueueKernelLaunch", "xpu_runtime", 0, 5, correlation=1),
        kernel("gemm_kernel_sgemm_fp32", 10, 100, 1),
    ]
    a = run(tmp_path, events, props={"id": 0, "name": "Intel(R) Data Center GPU Max 1550"}, top=0)
    assert a.device.accelerator == "xpu" and a.device.arch_limits_source is None
    assert a.totals.kernels == 1 and a.kernels[0].launch_apis == {"urEnqueueKernelLaunch": 1}
    assert a.finding("CUDA_CORE_GEMM") is None


def test_upcast_inside_an_unfused_attention_chain_is_attentions(tmp_path: Path) -> None:
    chain = _chain([[8, 128, 64], [8, 64, 128]], [8, 128, 128], [[8, 128, 128], [8, 128, 64]])
    chain[0] = ev("ProfilerStep#1", "user_annotation", 0, 100)
    upcast = ev(
        "aten::_to_copy", "cpu_op", 22, 3, **{"Input type": ["c10::Half"], "Concrete Inputs": ["", "6"]}
    )
    f = run(tmp_path, [*chain, upcast]).finding("FP32_UPCAST")
    assert f is not None and f.evidence["upcasts_in_unfused_attention_per_instance"] == 1
    # the same upcast outside the chain (after the second GEMM: a norm's) is not a finding
    upcast["ts"] = 80
    assert run(tmp_path, [*chain, upcast]).finding("FP32_UPCAST") is None


def test_layer_norm_upcasts_of_an_fp16_model_are_not_fp32_upcast() -> None:
    # particle_transformer under fp16 autocast: its 32 upcasts are all inside aten::layer_norm
    assert "FP32_UPCAST" not in analyze(trace("harryjmoss__particle_transformer")).codes


def test_idle_before_the_first_launch_of_a_step_is_named(tmp_path: Path) -> None:
    events = _step(
        [ev("aten::randn", "cpu_op", 0, 1500), launch(1600, 1)],
        [kernel("ampere_sgemm_128x64_nn", 1610, 40, 1)],
    )
    a = run(tmp_path, events)
    idle = a.regions[0].idle
    assert idle.before_first_launch_us_per_instance == 1600.0
    f = a.finding("GPU_IDLE_HOST_COMPUTE")
    assert f is not None and "1.6 ms per instance of the idle time is before the first launch" in f.message
