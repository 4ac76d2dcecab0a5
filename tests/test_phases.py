"""Inference phases (attnprof.analysis.breakdown.phases): serving steps named by their ranges (vLLM's
execute_... ranges, prefill / decode record_function names), attention kernel families where no
range says, a mixed step left unsplit, and traces where no phase must be claimed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _paths import TRACES, trace
from attnprof.analysis import analyze
from attnprof.analysis.breakdown.phases import phase_of_kernel, phase_of_range
from attnprof.analysis.records.result import StepBatch, TraceAnalysis

VLLM = TRACES / "graph_pairs" / "vllm_prefilldecode_piecewise"


def ev(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def step(
    name: str | None, t0: float, kernels: list[tuple[str, str, float]], corr0: int
) -> list[dict[str, Any]]:
    """A step range (None: no range) whose ops each launch one kernel: (op, kernel, duration)."""
    out = [ev(name, "user_annotation", t0, 1000)] if name else []
    t = t0 + 10
    for i, (op, kernel, dur) in enumerate(kernels):
        c = corr0 + i
        out.append(ev(op, "cpu_op", t, 20, **{"External id": c}))
        out.append(ev("cudaLaunchKernel", "cuda_runtime", t + 5, 5, correlation=c, **{"External id": c}))
        out.append(ev(kernel, "kernel", t + 50, dur, pid=0, tid=7, correlation=c, device=0))
        t += 100
    return out


PREFILL_OPS = [
    ("aten::mm", "ampere_bf16_gemm", 30.0),
    ("vllm::unified_attention", "flash_fwd_varlen_kernel", 20.0),
]
DECODE_OPS = [
    ("aten::mm", "ampere_bf16_gemm", 10.0),
    ("vllm::unified_attention", "paged_attention_v2_kernel", 30.0),
]


def run(tmp: Path, events: list[dict[str, Any]]) -> TraceAnalysis:
    p = tmp / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    a = analyze(p)
    assert isinstance(a, TraceAnalysis)
    return a


def test_vllm_step_names_give_phase_and_batch() -> None:
    name = (
        "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)"
    )
    assert phase_of_range(name) == (
        "mixed",
        StepBatch(
            tokens=8192,
            prefill_requests=9,
            prefill_query_tokens=8155,
            prefill_kv_tokens=8430,
            decode_requests=37,
            decode_query_tokens=37,
            decode_kv_tokens=34489,
        ),
    )
    only_decode = phase_of_range("execute_64_context_0()_generation_64(sq64sk9000sqsq64sqsk9000)")
    assert only_decode is not None and only_decode[0] == "decode"
    assert phase_of_range("forward_extend") == ("prefill", None)
    assert phase_of_range("decode_step") == ("decode", None)
    for other in ("ProfilerStep#3", "attn_fwd", "prefill_and_decode"):
        assert phase_of_range(other) is None


def test_kernel_families() -> None:
    assert phase_of_kernel("paged_attention_ll4mi_QKV_mfma16_kernel") == "decode"
    assert phase_of_kernel("flash_fwd_splitkv_kernel") == "decode"
    assert phase_of_kernel("FmhaBatchPrefillWithPagedKVCacheKernel") == "prefill"
    assert phase_of_kernel("flash_fwd_varlen_kernel") == "prefill"
    assert phase_of_kernel("flash_fwd_kernel") is None


def test_mixed_prefill_and_decode_steps_are_split_by_their_ranges(tmp_path: Path) -> None:
    events = step("execute_512_context_2(sq512sk512sqsq131072sqsk131072)_generation_0()", 0, PREFILL_OPS, 1)
    events += step("execute_8_context_0()_generation_8(sq8sk4096sqsq8sqsk4096)", 2000, DECODE_OPS, 10)
    events += step("execute_8_context_0()_generation_8(sq8sk4100sqsq8sqsk4100)", 4000, DECODE_OPS, 20)
    a = run(tmp_path, events)
    ph = {p.phase: p for p in a.phases.phases}
    assert a.phases.source == "step ranges" and set(ph) == {"prefill", "decode"}
    pre, dec = ph["prefill"], ph["decode"]
    assert (pre.steps, pre.device_us, pre.attention_us, pre.attention_pct) == (1, 50.0, 20.0, 40.0)
    assert (dec.steps, dec.device_us, dec.attention_us, dec.attention_pct) == (2, 80.0, 60.0, 75.0)
    assert (pre.pct, dec.pct, a.phases.unknown_us) == (38.46, 61.54, 0.0)
    assert [(o.op, o.device_us) for o in dec.ops] == [("vllm::unified_attention", 60.0), ("aten::mm", 20.0)]
    assert [b.decode_kv_tokens for b in dec.batches] == [4096, 4100]


def test_without_ranges_attention_kernel_families_split_only_attention(tmp_path: Path) -> None:
    a = run(tmp_path, step(None, 0, PREFILL_OPS, 1) + step(None, 2000, DECODE_OPS, 10))
    ph = {p.phase: p for p in a.phases.phases}
    assert a.phases.source.startswith("attention kernel families")
    assert (ph["prefill"].device_us, ph["decode"].device_us) == (20.0, 30.0)
    assert a.phases.unknown_us == 40.0  # the GEMMs: no phase by family


def test_no_phase_is_claimed_for_one_family_or_a_training_trace(tmp_path: Path) -> None:
    assert run(tmp_path, step(None, 0, DECODE_OPS, 1)).phases.phases == []
    assert run(tmp_path, step("ProfilerStep#1", 0, PREFILL_OPS[:1], 1)).phases.phases == []
    # a CPU op named like a decode launcher is not a step range
    a = run(tmp_path, step(None, 0, [("aiter::paged_attention_decode", "some_kernel", 5.0)], 1))
    assert a.phases.phases == []
    b = analyze(trace("AMD-AGI__TraceLens__tests__traces__mi300__Qwen"))
    assert isinstance(b, TraceAnalysis) and b.phases.phases == []


@pytest.mark.parametrize("with_capture", [True, False])
def test_shared_vllm_step_is_one_mixed_step(with_capture: bool) -> None:
    exe = VLLM / "graph_execution.json.gz"
    cap = next((VLLM / "capture_traces").glob("graph_capture_rank_0.*.json.gz"))
    a = analyze(exe, capture=cap if with_capture else None)
    assert isinstance(a, TraceAnalysis)
    (p,) = a.phases.phases
    assert (p.phase, p.steps, p.pct) == ("mixed", 1, 100.0)
    (b,) = p.batches
    assert (b.prefill_requests, b.prefill_query_tokens, b.decode_requests, b.decode_kv_tokens) == (
        9,
        8155,
        37,
        34489,
    )
    ops = [o.op for o in p.ops]
    # with the capture the replayed kernels have their captured ops; without, only eager ones do
    assert ("vllm::moe_forward" in ops) is with_capture
    assert "vllm::unified_attention_with_output" in ops


def _sdpa(q_len: int, kv_len: int) -> dict[str, Any]:
    """Recorded inputs of one aten::_scaled_dot_product_flash_attention call, bf16, 8 heads of 64."""
    return {
        "Input Dims": [[1, 8, q_len, 64], [1, 8, kv_len, 64], [1, 8, kv_len, 64], [], [], []],
        "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", ""],
        "Concrete Inputs": ["", "", "", "0.0", "False", ""],
    }


def test_decode_attention_is_judged_by_bandwidth(tmp_path: Path) -> None:
    from attnprof.analysis.perf.op_model import decode_inputs, model_op

    h100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}
    events = step("execute_8_context_0()_generation_1(sq1sk4096sqsq1sqsk4096)", 0, [], 1)
    events += [
        ev(
            "aten::_scaled_dot_product_flash_attention",
            "cpu_op",
            10,
            20,
            **{"External id": 1},
            **_sdpa(1, 4096),
        ),
        ev("cudaLaunchKernel", "cuda_runtime", 15, 5, correlation=1, **{"External id": 1}),
        ev("flash_fwd_splitkv_kernel", "kernel", 60, 4.0, pid=0, tid=7, correlation=1, device=0),
    ]
    events += step(
        "execute_4096_context_1(sq4096sk4096sqsq16777216sqsk16777216)_generation_0()", 2000, PREFILL_OPS, 50
    )
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events, "deviceProperties": [h100]}))
    a = analyze(p)
    assert isinstance(a, TraceAnalysis)
    ph = {x.phase: x for x in a.phases.phases}
    dec, pre = ph["decode"], ph["prefill"]
    sig = _sdpa(1, 4096)
    cost = model_op(
        "aten::_scaled_dot_product_flash_attention",
        decode_inputs(
            tuple(json.dumps(sig[k]).encode() for k in ("Input Dims", "Input type", "Concrete Inputs"))
        ),  # type: ignore[arg-type]
    )
    assert cost is not None and cost.decode
    assert dec.attention_modelled_us == 4.0
    assert dec.attention_tbps == pytest.approx(cost.bytes / 4.0 / 1e6, rel=1e-3)
    assert dec.attention_bw_pct == pytest.approx(
        100 * dec.attention_tbps / 3.35, abs=0.1
    )  # H100 SXM: 3.35 TB/s
    # the prefill step's ops recorded no inputs: nothing modelled, no rate claimed
    assert (pre.modelled_us, pre.achieved_tflops, pre.attention_tbps) == (0.0, None, None)
