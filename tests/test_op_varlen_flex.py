"""Varlen attention (FLOPs per sequence from cu_seqlens, "not measured" without their values) and
FlexAttention (a dense upper bound unless the run recorded its BlockMask's sparsity): by hand on
inputs as torch.profiler records them, on a real torch CPU recording, and through the summary."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from attnprof.analysis.perf.op_flex import computed_blocks
from attnprof.analysis.perf.op_model import OpCost, decode_inputs, model_op
from attnprof.analysis.pipeline import analyze_trace
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.formulas import attention_pairs
from attnprof.trace.load import load_trace
from test_perf_model import one_op_trace

BF, I32 = "c10::BFloat16", "int"


def cost(name: str, dims: list[Any], types: list[str], concrete: list[str]) -> OpCost | None:
    sig = (json.dumps(dims).encode(), json.dumps(types).encode(), json.dumps(concrete).encode())
    args = decode_inputs(sig)
    assert args is not None
    return model_op(name, args)


def fa_varlen(
    tq: int, tk: int, n: int, cu_q: str, cu_k: str, max_q: int, max_k: int, causal: bool
) -> OpCost | None:
    """flash_attn::_flash_attn_varlen_forward as record_shapes records it: q/k/v [tokens, 4, 64]
    bf16, cu_seqlens int32 tensors [n + 1] (values only where the test gives them), scalars."""
    dims = [[tq, 4, 64], [tk, 2, 64], [tk, 2, 64], [n + 1], [n + 1]] + [[]] * 13
    types = [BF, BF, BF, I32, I32] + ["Scalar"] * 7 + [""] * 6
    conc = ["", "", "", cu_q, cu_k, str(max_q), str(max_k), "0.", "0.125", str(causal), "-1", "-1"]
    return cost("flash_attn::_flash_attn_varlen_forward", dims, types, conc + [""] * 6)


def test_varlen_flops_sum_over_the_recorded_sequences_not_the_packed_total() -> None:
    # two sequences of 3 and 7 tokens, causal, q and k lengths equal: 3*4/2 + 7*8/2 = 34 pairs
    c = fa_varlen(10, 10, 2, "[0, 3, 10]", "[0, 3, 10]", 7, 7, True)
    assert c is not None and c.basis == "exact"
    assert c.flops == 2 * 4 * 34 * (64 + 64) and "2 sequences from recorded cu_seqlens" in c.formula
    # the packed total would be one 10x10 causal square: 55 pairs
    assert c.flops != 2 * 4 * attention_pairs(10, 10, causal="top-left") * 128
    # dense: 9 + 49 pairs; bytes: every packed token once, K and V with their 2 heads (GQA)
    d = fa_varlen(10, 10, 2, "[0, 3, 10]", "[0, 3, 10]", 7, 7, False)
    assert d is not None and d.flops == 2 * 4 * 58 * 128
    assert d.bytes == 2 * (10 * 4 * 64 + 2 * 10 * 2 * 64 + 10 * 4 * 64) and "GQA 4/2" in d.formula
    # Sq_i != Sk_i (chunked prefill): flash_attn's causal is bottom-right, per sequence
    e = fa_varlen(5, 9, 2, "[0, 2, 5]", "[0, 4, 9]", 3, 5, True)
    want = attention_pairs(2, 4, causal="bottom-right") + attention_pairs(3, 5, causal="bottom-right")
    assert want == 7 + 12 and e is not None and e.flops == 2 * 4 * want * 128


def test_varlen_without_recorded_values_is_not_measured_unless_the_shapes_fix_the_lengths() -> None:
    # what torch.profiler records: cu_seqlens' dims and dtype, no values; 2 sequences of at most
    # 7 in 10 tokens could be 3 + 7 or 5 + 5: FLOPs not measured, bytes still exact
    c = fa_varlen(10, 10, 2, "", "", 7, 7, True)
    assert c is not None and c.flops is None and c.basis == "not measured"
    assert "cu_seqlens values not recorded: FLOPs not measured" in c.formula and c.bytes > 0
    # one sequence (cu_seqlens of 2 entries): its lengths are the packed totals
    one = fa_varlen(10, 10, 1, "", "", 10, 10, True)
    assert one is not None and one.flops == 2 * 4 * 55 * 128
    # max_seqlen x count = total: every sequence is at the maximum
    full = fa_varlen(10, 10, 2, "", "", 5, 5, True)
    assert full is not None and full.flops == 2 * 4 * 2 * 15 * 128 and "at max_seqlen 5" in full.formula
    # recorded values that are not cumulative lengths are not read
    bad = fa_varlen(10, 10, 2, "[0, 7, 3]", "[0, 7, 3]", 7, 7, True)
    assert bad is not None and bad.flops is None


def test_varlen_backward_reads_its_own_positions() -> None:
    # _flash_attn_varlen_backward(dout, q, k, v, out, lse, dq, dk, dv, cu_q, cu_k, max_q, max_k,
    # dropout_p, softmax_scale, causal, window_size_left, window_size_right, ...)
    t = [10, 4, 64]
    dims = [t, t, [10, 2, 64], [10, 2, 64], t, [4, 10], t, [10, 2, 64], [10, 2, 64], [3], [3]] + [[]] * 11
    types = [BF] * 5 + ["float"] + [BF] * 3 + [I32, I32] + ["Scalar"] * 9 + [""] * 2
    conc = [""] * 9 + ["[0, 3, 10]", "[0, 3, 10]", "7", "7", "0.", "0.125", "True", "-1", "-1"] + [""] * 4
    c = cost("flash_attn::_flash_attn_varlen_backward", dims, types, conc)
    assert c is not None and c.flops == 2.5 * 2 * 4 * 34 * 128 and "bwd" in c.formula


def _torch_varlen_trace(tmp_path: Path) -> Path:
    """A real torch CPU recording of torch.nn.attention.varlen's op (torch_attn::_varlen_attn):
    the op has no CPU kernel and raises, but the profiler records the call with its inputs."""
    torch = pytest.importorskip("torch")
    varlen = pytest.importorskip("torch.nn.attention.varlen")
    from torch.profiler import profile

    q = torch.randn(10, 2, 8)
    with profile(record_shapes=True) as prof:
        for cu, longest in (([0, 5, 10], 5), ([0, 3, 10], 7)):
            seqs = torch.tensor(cu, dtype=torch.int32)
            # aten::_flash_attention_forward has no CPU kernel: the call raises, recorded
            with contextlib.suppress(NotImplementedError):
                varlen.varlen_attn(q, q, q, seqs, seqs, longest, longest, window_size=(-1, 0))
    out = tmp_path / "varlen.json"
    prof.export_chrome_trace(str(out))
    return out


def test_a_real_torch_recording_of_varlen_attention(tmp_path: Path) -> None:
    path = _torch_varlen_trace(tmp_path)
    a = analyze_trace(load_trace(path), path=str(path))
    rows = [o for o in a.ops if o.name == "torch_attn::_varlen_attn"]
    if not rows:
        pytest.skip("this torch does not record torch_attn::_varlen_attn")
    assert len(rows) == 2
    measured = [o for o in rows if o.flops is not None]
    unknown = [o for o in rows if o.flops is None]
    # 5 + 5 tokens at max 5: 2 causal squares of 5 (15 pairs each), 2 heads of 8
    assert len(measured) == 1 and measured[0].flops == 2 * 2 * 30 * 16 and measured[0].flops_basis == "exact"
    assert len(unknown) == 1 and unknown[0].flops_basis == "not measured" and unknown[0].tflops is None
    assert unknown[0].intensity is None and unknown[0].bound is None
    pm = a.perf_model
    assert pm is not None and pm.not_measured_time_us > 0 and "FLOPs not measured" in pm.note
    assert pm.model_flops == pytest.approx(2 * 2 * 30 * 16)


# -- FlexAttention ----------------------------------------------------------------------------
# FlexAttentionAutogradOp as torch 2.13 records it (q, k, v, the BlockMask as nothing, the scale)
FLEX_DIMS = [[1, 4, 256, 16], [1, 2, 256, 16], [1, 2, 256, 16], [], [], []]
FLEX_TYPES = [BF, BF, BF, "", "Scalar", ""]
FLEX_CONC = ["", "", "", "", "0.25", ""]


def test_flex_counts_every_pair_and_says_it_is_a_dense_upper_bound() -> None:
    c = cost("FlexAttentionAutogradOp", FLEX_DIMS, FLEX_TYPES, FLEX_CONC)
    assert c is not None and c.basis == "dense upper bound" and "dense upper bound" in c.formula
    assert c.flops == 2 * 1 * 4 * 256 * 256 * (16 + 16) and "GQA 4/2" in c.formula
    # a recorded sparsity counts only the computed blocks
    kept = computed_blocks(c, 0.75)
    assert kept.flops == c.flops * 0.25 and kept.basis == "computed blocks" and "25%" in kept.formula
    # not a flex cost, or a sparsity out of range: unchanged
    sdpa = cost(
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        FLEX_DIMS[:3] + [[]] * 2,
        [BF] * 3 + ["Scalar"] * 2,
        ["", "", "", "0.", "True"],
    )
    assert sdpa is not None and computed_blocks(sdpa, 0.5) == sdpa and computed_blocks(c, 1.5) == c


def _trace(tmp_path: Path, name: str, dims: list[Any], types: list[str], conc: list[str]) -> Path:
    """One op with recorded inputs launching one 100 us Triton template kernel on an H100."""
    return one_op_trace(tmp_path, name, dims, types, 100.0, conc, kernel="triton_tem_fused_0")


def test_the_summary_says_when_its_flops_are_an_upper_bound(tmp_path: Path) -> None:
    from attnprof.report.console import terminal_words
    from attnprof.report.perf_tables import ops_table, perf_lines

    p = _trace(tmp_path, "FlexAttentionAutogradOp", FLEX_DIMS, FLEX_TYPES, FLEX_CONC)
    a = analyze_trace(load_trace(p), path=str(p))
    assert isinstance(a, TraceAnalysis) and a.perf_model is not None
    pm = a.perf_model
    assert pm.upper_bound_flops == pm.model_flops > 0 and "upper bound" in pm.note
    words = terminal_words()
    assert any("dense upper bound" in line for line in perf_lines(pm, words))
    assert any("≤" in c for c in ops_table(a.ops, words).rows[0])
    # the run recorded the BlockMask: the computed blocks, and no upper-bound sentence
    b = analyze_trace(load_trace(p), path=str(p), block_sparsity=0.5)
    assert b.perf_model is not None and b.perf_model.upper_bound_flops == 0.0
    assert b.perf_model.model_flops == pm.model_flops / 2 and b.ops[0].flops_basis == "computed blocks"
    assert not any("upper bound" in line for line in perf_lines(b.perf_model, words))
    # an exact op: neither sentence
    sdpa = _trace(
        tmp_path,
        "aten::_scaled_dot_product_flash_attention",
        FLEX_DIMS[:3] + [[]] * 2,
        [BF] * 3 + ["Scalar"] * 2,
        ["", "", "", "0.", "True"],
    )
    c = analyze_trace(load_trace(sdpa), path=str(sdpa))
    assert c.perf_model is not None and c.perf_model.upper_bound_flops == 0.0
    assert c.perf_model.not_measured_time_us == 0.0 and c.ops[0].flops_basis == "exact"
