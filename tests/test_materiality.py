"""Findings that hold up (issue 18): a warning only when what it names costs at least the
materiality share, evidence that counts only the ops named, advice that fits the op, stability
upcasts told from fp32 math, the costliest unfused chain quoted, and order-only chains that are
the forward's. Small synthetic traces built here as JSON, each finding with a case where it must
fire and one where it must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnprof.analysis.findings.materiality import MATERIAL_SHARE
from test_analysis_truth import ev, kernel, launch, run

TC_GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"


def _busy(ms: float, corr: int = 900) -> list[dict[str, Any]]:
    """Tensor-core GEMM work that gives the step its device time."""
    return [launch(1, corr), kernel(TC_GEMM, 2000, ms * 1000, corr)]


def _step(events: list[dict[str, Any]], dur: float = 20000) -> list[dict[str, Any]]:
    return [ev("ProfilerStep#1", "user_annotation", 0, dur), *events]


def _masked_fill_copy(copy_us: float, op: str = "aten::masked_fill") -> list[dict[str, Any]]:
    return [
        ev(op, "cpu_op", 100, 40),
        ev("aten::clone", "cpu_op", 105, 30),
        ev("cudaMemcpyAsync", "cuda_runtime", 110, 5, correlation=50),
        ev(
            "Memcpy DtoD (Device -> Device)",
            "gpu_memcpy",
            200,
            copy_us,
            tid=7,
            pid=0,
            correlation=50,
            device=0,
        ),
    ]


def test_a_5_us_copy_is_info_not_a_warning(tmp_path: Path) -> None:
    f = run(tmp_path, _step([*_masked_fill_copy(5), *_busy(10)])).finding("OUT_OF_PLACE_COPY")
    assert f is not None and f.severity == "info"
    assert f.evidence["cost_us"] == 5 and f.evidence["cost_pct"] < 100 * MATERIAL_SHARE
    assert "below the 1%" in f.message


def test_a_costly_copy_is_a_warning(tmp_path: Path) -> None:
    f = run(tmp_path, _step([*_masked_fill_copy(1500), *_busy(10)])).finding("OUT_OF_PLACE_COPY")
    assert f is not None and f.severity == "warning" and "below" not in f.message


def test_unrelated_clones_and_copies_are_not_evidence(tmp_path: Path) -> None:
    unrelated = [
        ev("aten::contiguous", "cpu_op", 300, 40),
        ev("aten::clone", "cpu_op", 305, 30),
        ev("cudaMemcpyAsync", "cuda_runtime", 310, 5, correlation=60),
        ev("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 400, 900, tid=7, pid=0, correlation=60, device=0),
    ]
    a = run(tmp_path, _step([*_masked_fill_copy(5), *unrelated, *_busy(10)]))
    f = a.finding("OUT_OF_PLACE_COPY")
    assert f is not None and f.evidence["clones_per_instance"] == 1 and f.evidence["cost_us"] == 5
    assert f.evidence["memcpy_dtod_per_instance"] == 1 and f.severity == "info"


def test_unrelated_clones_alone_are_no_finding(tmp_path: Path) -> None:
    events = [ev("aten::contiguous", "cpu_op", 300, 40), ev("aten::clone", "cpu_op", 305, 30), *_busy(10)]
    assert run(tmp_path, _step(events)).finding("OUT_OF_PLACE_COPY") is None


def test_advice_names_the_ops_own_in_place_variant(tmp_path: Path) -> None:
    f = run(tmp_path, _step([*_masked_fill_copy(1500, "aten::index_put"), *_busy(10)])).finding(
        "OUT_OF_PLACE_COPY"
    )
    assert f is not None and "variant (index_put_)" in f.message and "masked_fill" not in f.message


def _sgemm(us: float) -> list[dict[str, Any]]:
    return [launch(5, 70), kernel("ampere_sgemm_128x64_nn", 100, us, 70)]


def test_a_single_short_cuda_core_gemm_is_info(tmp_path: Path) -> None:
    f = run(tmp_path, _step([*_sgemm(3.5), *_busy(10)])).finding("CUDA_CORE_GEMM")
    assert f is not None and f.severity == "info" and f.evidence["cost_basis"] == "trace device time"


def test_cuda_core_gemms_that_cost_are_a_warning(tmp_path: Path) -> None:
    f = run(tmp_path, _step([*_sgemm(1500), *_busy(10)])).finding("CUDA_CORE_GEMM")
    assert f is not None and f.severity == "warning"


def _conv(ts: float, src: str, tgt: str) -> dict[str, Any]:
    return ev("aten::_to_copy", "cpu_op", ts, 3, **{"Input type": [src], "Concrete Inputs": ["", tgt]})


def _t5_attention(stability: bool, kernel_us: float | None = None) -> list[dict[str, Any]]:
    """T5's attention: bmm -> softmax in fp32 -> downcast -> bmm; without the downcast, the second
    bmm runs in fp32. With kernel_us, the second bmm launches a GEMM of that duration beside a 10 ms
    one before the chain (the region's other device time)."""
    chain = [
        ev("attn", "user_annotation", 0, 100),
        ev("aten::bmm", "cpu_op", 10, 10, **{"Input Dims": [[8, 128, 64], [8, 64, 128]]}),
        _conv(22, "c10::BFloat16", "6"),
        ev("aten::softmax", "cpu_op", 30, 10, **{"Input Dims": [[8, 128, 128], []]}),
        ev("aten::bmm", "cpu_op", 50, 10, **{"Input Dims": [[8, 128, 128], [8, 128, 64]]}),
    ]
    if stability:
        chain.insert(4, _conv(42, "float", "15"))
    if kernel_us is not None:
        chain += [launch(12, 801), kernel(TC_GEMM, 200, 10_000, 801)]
        chain += [launch(52, 802), kernel("ampere_sgemm_128x64_nn", 20_000, kernel_us, 802)]
    return chain


def test_a_stability_upcast_is_not_fp32_math(tmp_path: Path) -> None:
    f = run(tmp_path, _t5_attention(stability=True), region="attn").finding("FP32_UPCAST")
    assert f is not None and f.severity == "info" and "stability" in f.message
    assert f.evidence["upcasts_per_instance"] == 0 and f.evidence["stability_upcasts_per_instance"] == 1


def test_an_upcast_whose_math_stays_in_fp32_is_a_warning(tmp_path: Path) -> None:
    f = run(tmp_path, _t5_attention(stability=False, kernel_us=2000), region="attn").finding("FP32_UPCAST")
    assert f is not None and f.severity == "warning" and "runs in fp32" in f.message
    assert f.evidence["upcasts_per_instance"] == 1 and f.evidence["stability_upcasts_per_instance"] == 0
    # the share it concerns is measured and said: the fp32 bmm's 2 ms of the region's 12 ms
    assert f.evidence["cost_measured"] is True and f.evidence["cost_us"] == 2000
    assert (
        f.evidence["cost_pct"] == round(100 * 2000 / 12_000, 3)
        and "17% of the region device time" in f.message
    )


def test_a_cheap_fp32_upcast_is_info(tmp_path: Path) -> None:
    f = run(tmp_path, _t5_attention(stability=False, kernel_us=50), region="attn").finding("FP32_UPCAST")
    assert f is not None and f.severity == "info" and "below the 1%" in f.message
    assert f.evidence["cost_measured"] is True and f.evidence["cost_pct"] < 100 * MATERIAL_SHARE


def test_an_upcast_whose_cost_is_not_recorded_claims_no_materiality(tmp_path: Path) -> None:
    # a GPU trace whose region holds no device op: the fp32 math's cost cannot be taken
    f = run(tmp_path, _t5_attention(stability=False), region="attn").finding("FP32_UPCAST")
    assert f is not None and f.severity == "info" and "not measured" in f.message
    assert f.evidence["cost_measured"] is False and f.evidence["cost_pct"] is None


def test_conversions_without_dtypes_are_not_measured_upcasts(tmp_path: Path) -> None:
    plain = [ev("aten::_to_copy", "cpu_op", 20 + 10 * i, 3) for i in range(3)]
    events = [ev("attn", "user_annotation", 0, 100), *plain]
    f = run(tmp_path, events, region="attn").finding("FP32_UPCAST")
    assert f is not None and f.severity == "info" and f.evidence["dtypes_recorded"] is False
    assert f.evidence["cost_measured"] is False and "not measured" in f.message
    # two conversions per call are not even a possible upcast of q, k and v
    assert run(tmp_path, events[:3], region="attn").finding("FP32_UPCAST") is None


def _chain_at(t0: float, b: int, s: int, corr: int, kernel_us: float) -> list[dict[str, Any]]:
    """GEMM -> softmax -> GEMM over [b, s, s] scores, each op launching one kernel of kernel_us."""
    out = []
    for j, (name, dims) in enumerate(
        (
            ("aten::bmm", [[b, s, 64], [b, 64, s]]),
            ("aten::softmax", [[b, s, s], []]),
            ("aten::bmm", [[b, s, s], [b, s, 64]]),
        )
    ):
        ts = t0 + 20 * j
        c = corr + j
        k = "softmax_warp_forward" if "softmax" in name else TC_GEMM
        out += [
            ev(name, "cpu_op", ts, 10, **{"Input Dims": dims}),
            launch(ts + 2, c),
            kernel(k, 5000 + t0 * 100 + j * kernel_us, kernel_us, c),
        ]
    return out


def test_the_message_quotes_the_costliest_chain(tmp_path: Path) -> None:
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 1000),
        *_chain_at(10, 3136, 8, 10, 2),  # many tiny chains' worth: cheap
        *_chain_at(200, 8, 1024, 20, 3000),  # the costly one
    ]
    f = run(tmp_path, events).finding("UNFUSED_ATTENTION")
    assert f is not None and "[8, 1024, 1024]" in f.message and "[3136, 8, 8]" not in f.message
    chains = f.evidence["shape_chains"]
    assert chains[0]["scores_shape"] == [8, 1024, 1024] and chains[0]["time_us"] > chains[1]["time_us"]
    assert "kernel time" in f.message


def _mlp(backward: bool) -> list[dict[str, Any]]:
    """An MLP classifier: mm -> softmax, then a mm: the backward pass's (MmBackward0), or the
    forward's. No shapes: only the order could say attention."""
    after = ev("aten::mm", "cpu_op", 60, 10)
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 200),
        ev("aten::mm", "cpu_op", 10, 10),
        ev("aten::softmax", "cpu_op", 30, 10),
    ]
    if backward:
        events.append(ev("autograd::engine::evaluate_function: MmBackward0", "cpu_op", 55, 30))
    return [*events, after]


def test_a_softmax_followed_by_a_backward_mm_is_no_unfused_attention(tmp_path: Path) -> None:
    assert run(tmp_path, _mlp(backward=True)).finding("UNFUSED_ATTENTION") is None


def test_a_softmax_between_two_forward_gemms_is_possible_attention(tmp_path: Path) -> None:
    f = run(tmp_path, _mlp(backward=False)).finding("UNFUSED_ATTENTION")
    assert f is not None and f.evidence["confidence"] == "possible" and f.severity == "info"


def test_a_mm_inside_a_flow_linked_backward_op_is_no_chain(tmp_path: Path) -> None:
    # the backward node's name says nothing; the fwdbwd flow from the forward mm says backward
    events = [
        ev("ProfilerStep#1", "user_annotation", 0, 200),
        ev("aten::mm", "cpu_op", 10, 10),
        ev("aten::softmax", "cpu_op", 30, 10),
        ev("autograd_node_7", "cpu_op", 55, 30),
        ev("aten::mm", "cpu_op", 60, 10),
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 55, "bp": "e"},
    ]
    assert run(tmp_path, events).finding("UNFUSED_ATTENTION") is None
    events = events[:5]  # without the flow, the order says possible attention
    assert run(tmp_path, events).finding("UNFUSED_ATTENTION") is not None


def _kernels_only(softmax: str) -> list[dict[str, Any]]:
    names = ["ampere_sgemm_128x64_nn", softmax, "ampere_sgemm_128x64_nt"]
    return [kernel(n, 10 + 20 * i, 10, i) for i, n in enumerate(names)]


def test_kernel_order_with_a_backward_softmax_is_no_chain(tmp_path: Path) -> None:
    bwd = "void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, false, false>(float*)"
    assert run(tmp_path, _kernels_only(bwd)).finding("UNFUSED_ATTENTION") is None
    fwd = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*)"
    assert run(tmp_path, _kernels_only(fwd)).finding("UNFUSED_ATTENTION") is not None
