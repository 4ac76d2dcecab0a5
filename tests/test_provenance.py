"""Attention by provenance first, kernel names second (issue 18): each rule of
attnprof.analysis.attribution.provenance.RULE_NAMES where it must fire and where it must not, on small
synthetic traces, plus the op-name table against real op names of each framework."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.attribution.classify import classify
from attnprof.analysis.attribution.links import link
from attnprof.analysis.attribution.provenance import (
    ATTENTION_OPS,
    RULE_NAMES,
    attention_provenance,
    is_attention_op,
)
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.trace.load import parse_trace
from attnprof.trace.model import Kind
from test_analysis_truth import _chain, ev, kernel, launch, run

# a kernel name no classifier rule knows: only where it came from can make it attention
ANON = "void my_serving_stack::kernel_v7<128, 16>(float*, float const*)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(...)"
GEMM = "ampere_sgemm_128x64_tn"
NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
PAGED = "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, 16, 128, 256, 1>(...)"


def _kernel_rules(a: TraceAnalysis, name: str) -> dict[str, int] | None:
    return next(k.attention_rules for k in a.kernels if k.name == name)


def _launched(op: str, kname: str, *, outer: str | None = None, cat: str = "cpu_op") -> list[dict[str, Any]]:
    """op launches kname (and a plain GEMM from aten::mm after it, the rest of the step)."""
    events = [
        ev(op, "cpu_op", 100, 50),
        launch(110, 1),
        kernel(kname, 200, 40, 1),
        ev("aten::mm", "cpu_op", 300, 20),
        launch(305, 2),
        kernel(GEMM, 400, 60, 2),
    ]
    if outer is not None:
        events.insert(0, ev(outer, cat, 50, 200))
    return events


def test_launching_op_makes_an_unknown_kernel_attention(tmp_path: Path) -> None:
    a = run(tmp_path, _launched("vllm::unified_attention_with_output", ANON))
    att = a.share.attention
    assert att.provenance_us == 40 and att.time_us == 40 and att.fused_us == 0
    assert att.rules == {"launching op": 40}
    assert _kernel_rules(a, ANON) == {"launching op": 1}
    assert _kernel_rules(a, GEMM) is None
    assert a.share.gemm.time_us == 60


def test_a_kernel_launched_by_a_plain_op_is_not_attention(tmp_path: Path) -> None:
    a = run(tmp_path, _launched("aten::add", ANON))
    assert a.share.attention.time_us == 0 and a.share.attention.rules == {}
    assert _kernel_rules(a, ANON) is None


def test_enclosing_sdpa_op_makes_its_math_attention(tmp_path: Path) -> None:
    a = run(tmp_path, _launched("aten::mul", ELEMENTWISE, outer="aten::scaled_dot_product_attention"))
    assert a.share.attention.rules == {"enclosing op": 40}
    assert _kernel_rules(a, ELEMENTWISE) == {"enclosing op": 1}


def test_enclosing_sdpa_op_makes_its_copies_attention_side_memory(tmp_path: Path) -> None:
    """Issue 28: a copy inside SDPA is memory work the attention op runs, not attention."""
    a = run(tmp_path, _launched("aten::copy_", ELEMENTWISE, outer="aten::scaled_dot_product_attention"))
    assert a.share.attention.rules == {} and a.share.attention.time_us == 0
    assert a.share.attention_side is not None
    assert a.share.attention_side.rules == {"enclosing op": 40}
    assert a.share.attention_side.kinds == {"copy": 40}
    assert _kernel_rules(a, ELEMENTWISE) is None


def test_a_range_that_says_attention_holds_its_unknown_kernels_only(tmp_path: Path) -> None:
    """An attention module's range claims the kernels no name rule places (a serving stack's own
    attention kernel), not its RoPE / norm elementwise kernels, projections or collectives."""
    events = [
        ev("LlamaAttention.forward", "user_annotation", 0, 1000),
        ev("my_stack::decode", "cpu_op", 50, 20),
        launch(55, 4),
        kernel(ANON, 150, 45, 4),
        ev("aten::add", "cpu_op", 100, 20),
        launch(105, 1),
        kernel(ELEMENTWISE, 200, 30, 1),
        ev("aten::linear", "cpu_op", 300, 40),
        ev("aten::addmm", "cpu_op", 305, 30),
        launch(310, 2),
        kernel(GEMM, 400, 60, 2),
        ev("c10d::allgather_", "cpu_op", 500, 20),
        launch(505, 3),
        kernel(NCCL, 600, 80, 3),
    ]
    a = run(tmp_path, events)
    assert a.share.attention.rules == {"named op or range": 45}
    assert _kernel_rules(a, ANON) == {"named op or range": 1}
    assert _kernel_rules(a, ELEMENTWISE) is None  # RoPE / residual add inside the module
    assert _kernel_rules(a, GEMM) is None  # the projection GEMM stays a GEMM
    assert _kernel_rules(a, NCCL) is None  # FSDP's gather inside the module stays communication
    assert a.share.gemm.time_us == 60 and a.share.communication.time_us == 80


def _framed(frame: str, kname: str) -> list[dict[str, Any]]:
    return [
        ev(frame, "python_function", 40, 200),
        ev("my_stack::decode", "cpu_op", 50, 20),
        launch(55, 1),
        kernel(kname, 150, 45, 1),
    ]


def test_a_python_module_frame_that_says_attention_holds_its_unknown_kernel(tmp_path: Path) -> None:
    a = run(tmp_path, _framed("nn.Module: Qwen2Attention_0", ANON))
    assert a.share.attention.rules == {"python frame or module": 45}
    assert run(tmp_path, _framed("nn.Module: Qwen2MLP_0", ANON)).share.attention.time_us == 0


def test_a_frame_confirms_a_named_kernel_without_the_caveat(tmp_path: Path) -> None:
    a = run(tmp_path, _framed("vllm/attention/backends/rocm_flash_attn.py(600): forward", PAGED))
    att = a.share.attention
    assert att.rules == {"python frame or module": 45} and att.name_only_us == 0


def test_a_range_with_another_name_holds_nothing(tmp_path: Path) -> None:
    a = run(tmp_path, _launched("aten::add", ANON, outer="LlamaMLP.forward", cat="user_annotation"))
    assert a.share.attention.time_us == 0


def test_unlaunched_kernel_inside_an_attention_gpu_range(tmp_path: Path) -> None:
    events = [
        ev("attention", "gpu_user_annotation", 90, 100, tid=7, pid=0),
        kernel(ANON, 100, 50, -1),
        kernel(ANON, 300, 50, -1),  # after the range: nothing says attention
    ]
    a = run(tmp_path, events)
    assert a.share.attention.rules == {"gpu range": 50}
    assert _kernel_rules(a, ANON) == {"gpu range": 1}


def test_a_graph_replayed_attention_kernel_is_attention_by_name_with_the_caveat(tmp_path: Path) -> None:
    a = run(tmp_path, [kernel(PAGED, 100, 50, -1), kernel(GEMM, 200, 50, -1)])
    att = a.share.attention
    assert att.rules == {"kernel name": 50} and att.name_only_us == 50
    assert att.name_only_kernels and "paged_attention_ll4mi" in att.name_only_kernels[0]


def test_a_named_kernel_with_an_attention_launching_op_carries_no_caveat(tmp_path: Path) -> None:
    a = run(tmp_path, _launched("vllm::unified_attention", PAGED))
    att = a.share.attention
    assert att.rules == {"launching op": 40} and att.name_only_us == 0 and att.name_only_kernels == []
    assert att.fused_us == 40 and att.provenance_us == 0  # a known kernel counts as fused once


def test_unfused_chain_kernels_are_attention_by_dataflow(tmp_path: Path) -> None:
    events = _chain([[8, 128, 64], [8, 64, 128]], [8, 128, 128], [[8, 128, 128], [8, 128, 64]])
    events[0]["name"] = "step"  # no range that says attention: only the dataflow can
    events += [
        launch(12, 1),
        kernel(GEMM, 100, 10, 1),
        launch(32, 2),
        kernel("softmax_warp_forward", 120, 5, 2),
    ]
    events += [launch(52, 3), kernel(GEMM, 130, 10, 3)]
    a = run(tmp_path, events, region="step")
    assert a.share.attention.rules == {"dataflow": 25}
    assert a.share.attention.unfused_us == 25


def test_backward_attention_op_time_is_backward(tmp_path: Path) -> None:
    a = run(
        tmp_path, _launched("aten::mul", ELEMENTWISE, outer="ScaledDotProductEfficientAttentionBackward0")
    )
    att = a.share.attention
    assert att.bwd_us == 40 and att.fwd_us == 0


def test_a_launching_op_supplied_by_another_module_gets_the_same_rule() -> None:
    """The interface for graph-replay attribution: a kernel without a launch whose CPU op another
    module found (Links.cpu_op set before analysis) is classified like a launched one."""
    doc = {
        "traceEvents": [
            ev("vllm::unified_attention", "cpu_op", 100, 50),
            kernel(ANON, 300, 40, -1),
        ]
    }
    trace = parse_trace(json.dumps(doc).encode())
    links = link(trace)
    assert links.cpu_op.tolist() == [-1]
    by_name = np.zeros(1, bool)
    none = np.zeros(0, np.int64)
    assert attention_provenance(trace, links, by_name, none, by_name).rule.tolist() == [-1]
    links.cpu_op[0] = int(trace.rows(Kind.CPU_OP)[0])
    assert RULE_NAMES[attention_provenance(trace, links, by_name, none, by_name).rule[0]] == "launching op"


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("aten::scaled_dot_product_attention", "aten SDPA"),
        ("aten::_scaled_dot_product_flash_attention", "aten SDPA"),
        ("aten::_efficient_attention_forward", "aten SDPA"),
        ("aten::_native_multi_head_attention", "aten SDPA"),
        (
            "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0",
            "aten SDPA backward",
        ),
        ("ScaledDotProductEfficientAttentionBackward0", "aten SDPA backward"),
        ("flash_attn::_flash_attn_forward", "flash_attn"),
        ("FlashAttnFunc", "flash_attn"),
        ("flashinfer::batch_decode_with_paged_kv_cache", "FlashInfer"),
        ("xformers::efficient_attention_forward_cutlass", "xformers"),
        ("vllm::unified_attention_with_output", "vLLM"),
        ("_C::paged_attention_v1", "vLLM"),
        ("sgl_kernel::merge_state_v2", "SGLang"),
        ("aiter::paged_attention_rocm", "aiter"),
        ("aiter::mha_fwd", "aiter"),
        ("torch._higher_order_ops.flex_attention", "flex attention"),
    ],
)
def test_attention_op_table_knows_each_framework(name: str, label: str) -> None:
    assert is_attention_op(name) == label


def test_every_attention_op_label_is_tested() -> None:
    tested = {p[1] for p in test_attention_op_table_knows_each_framework.pytestmark[0].args[1]}  # type: ignore[attr-defined]
    assert tested == {label for label, _ in ATTENTION_OPS}


@pytest.mark.parametrize(
    "name",
    [
        "flashinfer::rmsnorm",
        "flashinfer::top_k_sampling_from_probs",
        "vllm::rms_norm",
        "aten::linear",
        "aten::bmm",
        "sgl_kernel::silu_and_mul",
        "aiter::rmsnorm2d_fwd",
        "_C::rotary_embedding",
    ],
)
def test_other_ops_of_the_same_frameworks_are_not_attention_ops(name: str) -> None:
    assert is_attention_op(name) is None


def test_classifier_and_provenance_agree_on_a_real_sdpa_trace() -> None:
    """On the shared H100 BERT trace every fused attention kernel is launched by an SDPA op: the
    launching-op rule holds for all of them, and nothing is attention by name only."""
    a = analyze(trace("AMD-AGI__TraceLens__tests__traces__h100"))
    att = a.share.attention
    assert att.fused_us > 0 and att.rules.get("launching op") == att.fused_us and att.name_only_us == 0
    for k in a.kernels:
        if classify(k.name).category == "attention":
            assert k.attention_rules == {"launching op": k.count}
