"""Compiled code (attnprof.analysis.replay.compiled): inductor kernel names and the ops they fuse, device
ops placed in their CompiledFxGraph range, the compiled share, and eager-chain findings that
fused kernels must not raise. Synthetic traces built here, the shared Triton trace and the
shared vLLM pair (whose compiled ranges come with its capture trace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _paths import TRACES, trace
from attnprof.analysis import analyze
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.analysis.replay.compiled import fused_ops

VLLM = TRACES / "graph_pairs" / "vllm_prefilldecode_piecewise"


@pytest.mark.parametrize(
    ("name", "kind", "ops"),
    [
        ("triton_poi_fused_add_mul_0", "pointwise", ["add", "mul"]),
        ("triton_red_fused__softmax_1", "reduction", ["_softmax"]),
        ("triton_per_fused_native_layer_norm_0", "persistent reduction", ["native_layer_norm"]),
        (
            "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0",
            "reduction",
            ["_to_copy", "add", "mean", "mul", "pow", "rsqrt"],
        ),
        ("triton_tem_fused_mm_0", "template", ["mm"]),
        ("triton_poi_fused_constant_pad_nd_moe_forward_0", "pointwise", ["constant_pad_nd", "moe_forward"]),
        ("triton_poi_fused__myop_bar_3", "pointwise", ["_myop", "bar"]),  # unknown pieces kept as ops
        ("cpp_fused_add_mul_0", "kernel", ["add", "mul"]),
        ("triton_poi_fused_0", "pointwise", []),  # no ops in the name: unknown, not none
    ],
)
def test_inductor_names_give_their_fused_ops(name: str, kind: str, ops: list[str]) -> None:
    assert fused_ops(name) == (kind, ops)


@pytest.mark.parametrize(
    "name",
    [
        "ampere_sgemm_128x64_nn",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1",
        "triton_kernel",
        "kernel_unified_attention_2d",
    ],
)
def test_other_kernels_are_not_inductor_kernels(name: str) -> None:
    assert fused_ops(name) is None


def ev(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def op_kernel(
    op: str, kernel: str, ts: float, corr: int, dims: Any = None, kdur: float = 10
) -> list[dict[str, Any]]:
    """A CPU op launching one kernel (as inductor's generated code records each kernel call)."""
    args: dict[str, Any] = {"External id": corr}
    if dims is not None:
        args["Input Dims"] = dims
    return [
        ev(op, "cpu_op", ts, 8, **args),
        ev("cudaLaunchKernel", "cuda_runtime", ts + 2, 4, correlation=corr, **{"External id": corr}),
        ev(
            kernel,
            "kernel",
            ts + 100,
            kdur,
            pid=0,
            tid=7,
            correlation=corr,
            device=0,
            **{"External id": corr},
        ),
    ]


def compiled_step() -> list[dict[str, Any]]:
    """attention as inductor runs it: extern GEMMs and a fused softmax inside a CompiledFxGraph
    range, then one eager kernel after the range, and one inductor kernel outside any range."""
    out = [
        ev("attn", "user_annotation", 0, 1000),
        ev("## Call CompiledFxGraph abc123 ##", "user_annotation", 5, 100),
    ]
    out += op_kernel("aten::bmm", "ampere_sgemm_128x64_nn", 10, 1, [[8, 128, 64], [8, 64, 128]])
    out += op_kernel(
        "triton_red_fused__softmax_mul_0", "triton_red_fused__softmax_mul_0", 30, 2, [[8, 128, 128]]
    )
    out += op_kernel("aten::bmm", "ampere_sgemm_128x64_nn", 50, 3, [[8, 128, 128], [8, 128, 64]])
    out += op_kernel("aten::add", "elementwise_add_kernel", 200, 4, kdur=20)  # eager, outside the range
    out += op_kernel(
        "triton_poi_fused_add_0", "triton_poi_fused_add_0", 300, 5, kdur=10
    )  # inductor, no range
    return out


def run(tmp: Path, events: list[dict[str, Any]], **kw: Any) -> TraceAnalysis:
    p = tmp / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    a = analyze(p, **kw)
    assert isinstance(a, TraceAnalysis)
    return a


def test_kernels_are_placed_in_their_compiled_range(tmp_path: Path) -> None:
    a = run(tmp_path, compiled_step(), region="attn")
    c = a.compiled
    assert a.share.device_time_us == 60.0
    # 3 kernels in the range (30 us) and the inductor kernel outside it by name (10 us)
    assert (c.time_us, c.pct, c.name_only_us, c.ranges) == (40.0, 66.67, 10.0, 1)
    (g,) = c.graphs
    assert (g.name, g.device_ops, g.time_us) == ("CompiledFxGraph abc123", 3, 30.0)
    by_name = {k.name: k for k in c.kernels}
    soft = by_name["triton_red_fused__softmax_mul_0"]
    assert (soft.kind, soft.fused_ops, soft.graph, soft.by) == (
        "reduction",
        ["_softmax", "mul"],
        g.name,
        "range",
    )
    assert by_name["ampere_sgemm_128x64_nn"].fused_ops is None  # an extern GEMM: compiled code, not fused
    assert by_name["triton_poi_fused_add_0"].by == "name"
    assert "elementwise_add_kernel" not in by_name


def test_a_fused_kernel_names_the_python_frame_around_it(tmp_path: Path) -> None:
    events = compiled_step()
    events += [
        ev("nn.Module: Attention_0", "python_function", 28, 12),
        ev("model.py(40): forward", "python_function", 29, 10),
        ev("torch/_inductor/runtime/triton_heuristics.py(1): run", "python_function", 29.5, 9),
    ]
    a = run(tmp_path, events, region="attn")
    soft = next(k for k in a.compiled.kernels if k.name == "triton_red_fused__softmax_mul_0")
    assert (soft.frame, soft.module) == ("model.py(40): forward", "nn.Module: Attention_0")
    gemm = next(k for k in a.compiled.kernels if k.name == "ampere_sgemm_128x64_nn")
    assert (gemm.frame, gemm.module) == (None, None)


def test_fused_kernels_raise_no_eager_chain_findings(tmp_path: Path) -> None:
    # the same GEMM -> softmax -> GEMM, compiled: the softmax is inside a fused kernel, no aten op
    compiled = run(tmp_path, compiled_step(), region="attn")
    assert compiled.finding("UNFUSED_ATTENTION") is None
    assert compiled.finding("FP32_UPCAST") is None and compiled.finding("OUT_OF_PLACE_COPY") is None
    # eager, the chain's softmax is an aten op and the chain is found
    eager = compiled_step()
    for e in eager:
        if e["name"] == "triton_red_fused__softmax_mul_0":
            e["name"] = "aten::softmax" if e["cat"] == "cpu_op" else "softmax_warp_forward"
            if e["cat"] == "cpu_op":
                e["args"]["Input Dims"] = [[8, 128, 128], []]
    a = run(tmp_path, eager, region="attn")
    assert a.finding("UNFUSED_ATTENTION") is not None


def test_an_eager_trace_has_no_compiled_code(tmp_path: Path) -> None:
    a = run(tmp_path, op_kernel("aten::add", "elementwise_add_kernel", 10, 1))
    assert (a.compiled.time_us, a.compiled.ranges, a.compiled.graphs, a.compiled.kernels) == (0.0, 0, [], [])


def test_shared_triton_trace_is_all_compiled() -> None:
    a = analyze(trace("facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"))
    assert isinstance(a, TraceAnalysis)
    c = a.compiled
    assert (c.pct, c.name_only_us, [g.name for g in c.graphs]) == (100.0, 0.0, ["Torch-Compiled Region: 0/0"])
    (k,) = c.kernels
    assert (k.name, k.fused_ops, k.by) == ("triton_poi_fused_add_cos_sin_0", ["add", "cos", "sin"], "range")


def test_shared_vllm_pair_compiled_ranges_come_with_the_capture() -> None:
    exe = VLLM / "graph_execution.json.gz"
    cap = next((VLLM / "capture_traces").glob("graph_capture_rank_0.*.json.gz"))
    with_cap, without = analyze(exe, capture=cap), analyze(exe)
    assert isinstance(with_cap, TraceAnalysis) and isinstance(without, TraceAnalysis)
    # the replayed pieces run inductor's graphs: 3 distinct graphs (the first piece, 23 layers, the last)
    assert len(with_cap.compiled.graphs) == 3 and with_cap.compiled.ranges == 25
    assert with_cap.compiled.pct == pytest.approx(96.0, abs=0.5) and with_cap.compiled.name_only_us == 0.0
    # without the capture, no range holds the replays: only inductor names say compiled
    assert without.compiled.ranges == 0 and without.compiled.time_us == without.compiled.name_only_us > 0
    assert without.compiled.pct == pytest.approx(1.3, abs=0.1)
