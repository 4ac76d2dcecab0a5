"""Attention share on stacks beyond aten (issue 28): vendor attention kernels by name, and the
memory work an attention op runs kept out of attention ("attention-side memory"), each where it
must fire and where it must not, on small synthetic traces written in tmp_path."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from _paths import TRACES
from attnprof.analysis import analyze
from attnprof.analysis.attribution.attention_side import KERNEL_KINDS, OP_KINDS
from attnprof.analysis.attribution.classify import first_match
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.report.analysis_view import render_analysis
from attnprof.report.i18n import Translator
from test_analysis_truth import ev, kernel, launch, run

AITER = "aiter::fmha_fwd_hd128_bf16_rtz"
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::BFloat16>, at::detail::Array<char*, 1>)"
)
CACHE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"
GEMM = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_APM1"
PAGED = "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, 16, 128, 256, 1>(...)"
VLLM_ATTN = "vllm::unified_attention_with_output"


def _kernel(a: TraceAnalysis, name: str) -> Any:
    return next(k for k in a.kernels if k.name == name)


def test_aiter_kernel_launched_by_sdpa_is_attention_by_its_launching_op(tmp_path: Path) -> None:
    events = [
        ev("aten::scaled_dot_product_attention", "cpu_op", 100, 50),
        launch(110, 1),
        kernel(AITER, 200, 40, 1),
    ]
    a = run(tmp_path, events)
    att = a.share.attention
    assert att.time_us == 40 and att.fused_us == 40 and att.rules == {"launching op": 40}
    k = _kernel(a, AITER)
    assert k.category == "attention" and k.direction == "fwd"
    assert k.attention_rules == {"launching op": 1} and k.attention_side_rules is None
    assert {c.category: c.count for c in a.categories} == {"attention": 1}


def test_aiter_kernel_without_a_launching_op_is_attention_by_name_and_says_so(tmp_path: Path) -> None:
    a = run(tmp_path, [kernel(AITER, 200, 40, -1)])
    att = a.share.attention
    assert att.time_us == 40 and att.rules == {"kernel name": 40}
    assert att.name_only_us == 40 and att.name_only_kernels == [AITER]
    assert _kernel(a, AITER).attention_rules == {"kernel name": 1}


def _vllm_step(*inner: tuple[str, str, int]) -> list[dict[str, Any]]:
    """vllm::unified_attention_with_output holding, per (op, kernel, dur), an op launching a kernel."""
    events = [ev(VLLM_ATTN, "cpu_op", 100, 400)]
    for i, (op, kname, dur) in enumerate(inner, start=1):
        start = 100 + 60 * i
        events += [
            ev(op, "cpu_op", start, 30),
            launch(start + 5, i),
            kernel(kname, 1000 + 200 * i, dur, i),
        ]
    return events


def test_fill_inside_vllm_attention_is_attention_side_memory_not_attention(tmp_path: Path) -> None:
    """The issue's trace: FillFunctor kernels inside vllm::unified_attention_with_output were
    "attention 38.4%" by rule enclosing op; the KV-cache write beside them was "copy"."""
    a = run(
        tmp_path,
        _vllm_step(
            ("aten::fill_", FILL, 30),
            ("_C_cache_ops::reshape_and_cache_flash", CACHE, 10),
            ("vllm::x", PAGED, 60),
        ),
    )
    att, side = a.share.attention, a.share.attention_side
    assert side is not None
    assert att.time_us == 60 and att.fused_us == 60 and att.provenance_us == 0
    assert att.rules == {"enclosing op": 60}
    assert side.time_us == 40 and side.kinds == {"cache write": 10, "fill": 30}
    assert side.rules == {"enclosing op": 40}
    assert _kernel(a, FILL).attention_rules is None
    assert _kernel(a, FILL).attention_side_rules == {"enclosing op": 1}
    assert _kernel(a, CACHE).attention_side_rules == {"enclosing op": 1}
    # the parts still sum to the device time: the side memory is in neither memory nor other
    sh = a.share
    assert sh.memory.time_us == 0 and sh.other.time_us == 0
    assert att.time_us + side.time_us == sh.device_time_us
    # the kernel categories (the acceptance counts) are the names' still
    assert _kernel(a, FILL).category == "elementwise" and _kernel(a, CACHE).category == "copy"


def test_a_memset_launched_by_an_attention_op_is_attention_side_memory(tmp_path: Path) -> None:
    events = [
        ev("aten::_efficient_attention_backward", "cpu_op", 100, 50),
        launch(110, 1, name="cudaMemsetAsync"),
        {**ev("Memset (Device)", "gpu_memset", 200, 5, tid=7, pid=0, correlation=1, device=0)},
    ]
    a = run(tmp_path, events)
    assert a.share.attention.time_us == 0
    assert a.share.attention_side is not None
    assert a.share.attention_side.kinds == {"memset": 5} and a.share.attention_side.rules == {
        "launching op": 5
    }


def test_a_cast_inside_an_attention_op_is_a_cast(tmp_path: Path) -> None:
    """aten::_to_copy launches through aten::copy_: the enclosing op says it is a cast."""
    copy = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>(...)"
    events = [
        ev("aten::scaled_dot_product_attention", "cpu_op", 100, 200),
        ev("aten::_to_copy", "cpu_op", 110, 50),
        ev("aten::copy_", "cpu_op", 115, 40),
        launch(120, 1),
        kernel(copy, 400, 20, 1),
    ]
    a = run(tmp_path, events)
    assert a.share.attention.time_us == 0
    assert a.share.attention_side is not None and a.share.attention_side.kinds == {"cast": 20}


def test_gemm_and_softmax_under_an_attention_op_stay_attention(tmp_path: Path) -> None:
    """Must not move: the compute an attention op runs (its score GEMM, softmax) is attention."""
    softmax = (
        "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, float, float, 8, false, false>(...)"
    )
    a = run(tmp_path, _vllm_step(("aten::bmm", GEMM, 50), ("aten::_softmax", softmax, 20)))
    att = a.share.attention
    assert att.time_us == 70 and att.rules == {"enclosing op": 70}
    assert a.share.attention_side is not None and a.share.attention_side.time_us == 0
    assert _kernel(a, GEMM).attention_rules == {"enclosing op": 1}
    assert _kernel(a, GEMM).attention_side_rules is None


def test_a_fill_outside_attention_is_neither(tmp_path: Path) -> None:
    """Must not fire: memory work no attention op runs is plain memory or other, as before."""
    events = [ev("aten::fill_", "cpu_op", 100, 30), launch(105, 1), kernel(FILL, 200, 30, 1)]
    a = run(tmp_path, events)
    assert a.share.attention.time_us == 0
    assert a.share.attention_side is not None and a.share.attention_side.time_us == 0
    assert a.share.other.time_us == 30
    assert _kernel(a, FILL).attention_side_rules is None


def test_a_kv_cache_write_beside_the_attention_op_is_attention_side_memory(tmp_path: Path) -> None:
    """vLLM writes the KV cache from vllm::unified_kv_cache_update, beside (not inside) the
    attention op; without any op the kernel's own name says it. A plain copy stays memory."""
    copy = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>(...)"
    events = [
        ev("vllm::unified_kv_cache_update", "cpu_op", 100, 50),
        ev("_C_cache_ops::reshape_and_cache_flash", "cpu_op", 105, 40),
        launch(110, 1),
        kernel(CACHE, 200, 10, 1),
        kernel(CACHE, 300, 7, -1),  # a graph replay's kernel: no launch, no op
        ev("aten::copy_", "cpu_op", 400, 30),
        launch(405, 2),
        kernel(copy, 500, 20, 2),
    ]
    a = run(tmp_path, events)
    side = a.share.attention_side
    assert side is not None
    assert side.time_us == 17 and side.kinds == {"cache write": 17} and side.rules == {"kv-cache write": 17}
    assert a.share.attention.time_us == 0 and a.share.memory.time_us == 20
    assert _kernel(a, CACHE).attention_side_rules == {"kv-cache write": 2}
    assert _kernel(a, copy).attention_side_rules is None


def test_the_issue_vllm_capture_trace_holds_no_attention_but_fills_and_cache_writes() -> None:
    """The real vLLM capture trace (MI300X) of the issue: its "attention 38.4%" was 24 fills
    inside vllm::unified_attention_with_output; its 24 reshape_and_cache_flash were "copy"."""
    found = sorted(
        (TRACES / "graph_pairs" / "vllm_prefilldecode_piecewise" / "capture_traces").glob("*.json.gz")
    )
    assert len(found) == 1
    a = analyze(found[0], top=0)
    assert isinstance(a, TraceAnalysis)
    sh = a.share
    assert sh.attention.time_us == 0 and sh.attention.rules == {}
    side = sh.attention_side
    assert side is not None and side.pct == pytest.approx(88.1, abs=0.5)
    assert set(side.kinds) == {"fill", "cache write"}
    assert side.rules == {"enclosing op": side.kinds["fill"], "kv-cache write": side.kinds["cache write"]}
    fill = next(k for k in a.kernels if "FillFunctor" in k.name)
    cache = next(k for k in a.kernels if "reshape_and_cache_flash" in k.name)
    assert fill.attention_side_rules == {"enclosing op": 24} and fill.attention_rules is None
    assert cache.attention_side_rules == {"kv-cache write": 24}


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (CACHE, "cache write"),
        (
            "void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)",
            "cache write",
        ),
        ("void flashinfer::AppendPagedKVCacheKernel<128u, 8u, __nv_bfloat16>(...)", "cache write"),
        (FILL, "fill"),
        ("__amd_rocclr_fillBufferAligned", "fill"),
        ("__amd_rocclr_copyBuffer", "memcpy"),
        # mask building is compute, not a fill
        ("void at::native::(anonymous namespace)::masked_fill_kernel<float>(...)", None),
        (GEMM, None),
    ],
)
def test_kernel_kinds(name: str, kind: str | None) -> None:
    assert first_match(KERNEL_KINDS, name) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("_C_cache_ops::reshape_and_cache_flash", "cache write"),
        ("_C_cache_ops::concat_and_cache_mla", "cache write"),
        ("vllm::unified_kv_cache_update", "cache write"),
        ("aten::zero_", "fill"),
        ("aten::fill_", "fill"),
        ("aten::_to_copy", "cast"),
        ("aten::copy_", "copy"),
        ("aten::contiguous", "copy"),
        ("aten::bmm", None),
        ("aten::masked_fill_", None),
    ],
)
def test_op_kinds(name: str, kind: str | None) -> None:
    assert first_match(OP_KINDS, name) == kind


@pytest.mark.parametrize("lang", ["en", "id", "th"])
def test_text_view_has_its_own_attention_side_line(tmp_path: Path, lang: str) -> None:
    a = run(tmp_path, _vllm_step(("aten::fill_", FILL, 30), ("vllm::x", PAGED, 70)))
    buf = io.StringIO()
    t = Translator(lang)
    render_analysis(a, Console(file=buf, width=1000, color_system=None), t)
    out = buf.getvalue()
    line = next(x for x in out.splitlines() if x.startswith(t("av.part.attention_side") + ":"))
    pct = "30,0%" if lang == "id" else "30.0%"  # Indonesian writes a decimal comma (units.number_locale)
    assert pct in line and t("av.side_kind.fill") in line and f"enclosing op {pct}" in line
    if lang == "en":
        assert line.startswith("attention-side memory: fills 30.0%")


def test_no_attention_side_line_without_side_memory(tmp_path: Path) -> None:
    a = run(tmp_path, _vllm_step(("vllm::x", PAGED, 70)))
    buf = io.StringIO()
    render_analysis(a, Console(file=buf, width=200, color_system=None))
    assert "attention-side" not in buf.getvalue()
