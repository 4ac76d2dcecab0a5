"""SDPA's dispatch as attnprof asks it (issue 21): the probe's tensors look to PyTorch's checks
as the real ones do (last stride 1, mask included) and cost no memory; a CausalBias
(causal_lower_right, decode with several queries) is decided as CausalBias._dispatch decides it;
PyTorch's reasons, TORCH_WARN lines on stderr, are caught from file descriptor 2."""

from __future__ import annotations

import os

import pytest
import torch

from attnprof.variants import sdpa
from attnprof.variants.native_warnings import call_capturing, capture_native_warnings, parse_warnings
from attnprof.variants.registry import get_variant
from attnprof.workload import Workload

DECODE = Workload(batch=2, heads=2, seq=4, kv_seq=64, head_dim=16, phase="decode")


@pytest.mark.parametrize(
    ("mask", "shape"),
    [("sliding=4", (16, 16)), ("padding=9,16", (2, 1, 1, 16)), ("alibi", (1, 2, 16, 16))],
)
def test_the_probe_mask_has_the_real_masks_last_stride(mask: str, shape: tuple[int, ...]) -> None:
    w = Workload(batch=2, heads=2, seq=16, head_dim=16, mask=mask)
    _q, _k, _v, probe, is_causal = sdpa._probe(w)
    real = sdpa.attn_mask(w, w.make_inputs())
    assert probe is not None and tuple(probe.shape) == shape == tuple(real.shape)
    # efficient and cuDNN require attn_mask.stride(-1) == 1 (sdp_utils_cpp.h); the real mask has it
    assert probe.stride(-1) == 1 == real.stride(-1)
    assert probe.dtype == real.dtype and not is_causal


def test_the_probe_allocates_nothing_of_the_inputs_size() -> None:
    w = Workload(batch=4, heads=16, seq=8192, head_dim=128, dtype="bf16", mask="sliding=128")
    q, k, v, mask, _ = sdpa._probe(w)
    assert tuple(q.shape) == (4, 16, 8192, 128) and q.stride(-1) == 1
    for t in (q, k, v):
        assert t.untyped_storage().nbytes() == 128 * 2  # one row, not 512 MiB
    assert mask is not None and mask.untyped_storage().nbytes() == 8192


def test_the_lower_right_probe_of_a_causal_bias_is_the_mask_it_materialises() -> None:
    _q, _k, _v, mask, is_causal = sdpa._probe(DECODE)
    assert mask is not None and tuple(mask.shape) == (4, 64) and mask.stride(-1) == 1 and not is_causal
    # CausalBias checks flash and efficient first on the inputs without a mask
    assert sdpa._probe(DECODE, with_mask=False)[3] is None


def test_causal_bias_on_cpu_materialises_and_counts_dense_flops() -> None:
    assert sdpa.mask_form(DECODE)[0] == "lower_right"
    for backend in ("auto", "flash", "math"):
        assert sdpa.lower_right_path(DECODE, backend) == "materialised"
    built = get_variant("sdpa-flash").build(DECODE, DECODE.make_inputs())
    assert built.flops_executed == DECODE.flops_dense()  # every block of the dense mask
    assert built.mask_path is not None and "materialises" in built.mask_path
    # PyTorch agrees: the real call builds the lower-right mask (tril) on the CPU
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        built.call()
    names = {e.name for e in prof.events()}
    assert "aten::tril" in names and "aten::_scaled_dot_product_flash_attention_for_cpu" in names


def test_is_causal_prefill_keeps_causal_flops() -> None:
    w = Workload(batch=1, heads=2, seq=32, head_dim=16)
    built = get_variant("sdpa-flash").build(w, w.make_inputs())
    assert built.flops_executed is None and built.mask_path == "is_causal=True"
    assert sdpa.pytorch_choice(w) == "flash"


def test_a_reason_printed_by_torch_warn_is_caught_from_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    # aten::add.out through torch.ops warns through c10's handler, as the pybind-bound SDPA
    # checks do: a "[W ... Resize.cpp:NN] Warning: ..." line on fd 2, never a Python warning
    a, out = torch.ones(4), torch.empty(3)
    value, msgs = call_capturing(torch.ops.aten.add.out, a, a, out=out)
    assert tuple(value.shape) == (4,)
    assert len(msgs) == 1 and msgs[0].startswith("An output with one or more elements was resized")
    assert "(function" not in msgs[0] and not msgs[0].startswith("Warning")
    err = capfd.readouterr().err
    assert "[W" not in err and "resized" not in err


def test_other_stderr_output_passes_through(capfd: pytest.CaptureFixture[str]) -> None:
    with capture_native_warnings() as found:
        os.write(2, b"a line of someone else's\n")
        torch.ones(4) + 1  # warns nothing
    assert found == []
    assert "a line of someone else's" in capfd.readouterr().err


def test_parse_warnings_reads_c10s_formats() -> None:
    text = (
        "[W1201 20:04:38.463544973 sdp_utils.cpp:617] Warning: Flash Attention does not support "
        "non-null attn_mask. (function check_for_attn_mask)\n"
        "unrelated\n"
        "[W sdp_utils_cpp.h:498] Warning: All fused kernels require the last dimension of the input "
        "to have stride 1. Got Query.stride(-1): 1, Key.stride(-1): 1, Value.stride(-1): 1, "
        "Attn_mask.stride(-1): 0 instead. (function check_last_dim_stride_equals_1_dense)\n"
        "[W1201 20:04:38.5 12345 torch/csrc/x.cpp:1] Warning: two\nlines (function f)\n"
    )
    found, rest = parse_warnings(text)
    assert [s for s, _ in found] == ["sdp_utils.cpp", "sdp_utils_cpp.h", "x.cpp"]
    assert found[0][1] == "Flash Attention does not support non-null attn_mask."
    assert found[1][1].endswith("Attn_mask.stride(-1): 0 instead.")
    assert found[2][1] == "two lines"
    assert rest == "unrelated"


@pytest.mark.parametrize("profile", [True, False])
def test_plain_sdpa_records_the_backend_that_ran(tmp_path, profile: bool) -> None:  # type: ignore[no-untyped-def]
    """Plain `sdpa` runs whatever PyTorch's dispatch picks (flash on CPU; flash, cuDNN or
    efficient on CUDA by build and GPU): profiled, the backend is read from the aten op that ran;
    without a profile it is the dispatch's own pick, never blank. A pinned one keeps its pin."""
    from attnprof.harness.run import RunOptions, run

    w = Workload(batch=1, heads=2, seq=32, head_dim=16)
    opts = RunOptions(profile=profile, time_budget_s=0.02, min_samples=3, warmup_s=0.0)
    record = run(w, ["sdpa", "sdpa-math"], out=tmp_path / "r", options=opts)
    by = {r.label: r for r in record.results}
    assert (by["sdpa"].status, by["sdpa"].backend, by["sdpa"].pytorch_choice) == ("ok", "flash", "flash")
    assert by["sdpa-math"].backend == "math"
    assert (by["sdpa"].profile is not None) == profile
