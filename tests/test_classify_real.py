"""The kernel-name rules against the REAL kernel names of the shared traces.

The rule table's own examples cannot catch a rule that takes a name it was not written for (a
"gemm" rule taking fbgemm_gpu's FP8 quantise kernels, a "conv" rule taking vLLM's _typeConvert):
here every kernel name recorded in ../shared/traces is classified, and each class of name must
land where it belongs. Each expectation first checks that the shared traces hold such a name, so
that it cannot pass vacuously.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

from _paths import TRACES
from attnprof.analysis.attribution.classify import classify
from attnprof.trace.load import load_trace
from attnprof.trace.model import Kind


@cache
def _real_names() -> dict[str, str]:
    """Kernel name -> the first shared trace it was recorded in."""
    out: dict[str, str] = {}
    for path in sorted(TRACES.glob("*.json*")):
        t = load_trace(path)
        rows = t.rows(Kind.KERNEL)
        for i in np.unique(t.name[rows]).tolist():
            out.setdefault(t.names[int(i)], path.name)
    return out


def _matching(pattern: str) -> list[str]:
    rx = re.compile(pattern)
    found = [n for n in _real_names() if rx.search(n)]
    assert found, f"no kernel name in {TRACES} matches {pattern!r}: the test would pass vacuously"
    return found


@pytest.mark.parametrize(
    ("pattern", "category"),
    [
        # MIOpen implicit-GEMM convolutions (forward, backward data, backward weight), MI210 + MI300
        (r"^igemm_(fwd|bwd|wrw)_gtcx2", "conv"),
        (r"^igemm_(fwd|bwd|wrw)_gtcx3", "conv"),
        # CK's convolution backward-weight GEMM and grouped convolution kernels
        (r"kernel_batched_gemm_xdlops_bwd_weight", "conv"),
        (r"kernel_grouped_conv_fwd", "conv"),
        # fbgemm's FP8 quantise / dequantise kernels: not GEMMs, not tensor cores
        (r"fbgemm_gpu\w*::\W*\w*(FP8|hfp8)|_FP8rowwise_to_float|_FP8_quantize|_FP8_qparam", "quantize"),
        # fused attention families recorded in the shared traces
        (r"pytorch_flash::flash_fwd_kernel", "attention"),
        (r"^flash_fwd_splitkv|void flash_fwd_splitkv", "attention"),
        (r"fmha_cutlassF", "attention"),
        (r"^attn_fwd$", "attention"),
        # look-alikes: cudnn's scale kernel and fbgemm's other kernels are not GEMMs
        (r"fbgemm_gpu::permute", "copy"),
    ],
)
def test_real_names_of_a_class_land_in_their_category(pattern: str, category: str) -> None:
    wrong = {n[:90]: classify(n).category for n in _matching(pattern) if classify(n).category != category}
    assert not wrong, wrong


def test_no_real_fbgemm_kernel_is_a_gemm_or_on_tensor_cores() -> None:
    for name in _matching(r"fbgemm"):
        c = classify(name)
        assert c.category != "gemm", name[:120]
        assert c.tensor_cores is not True, name[:120]


def test_no_real_convert_kernel_is_a_convolution() -> None:
    """A name that says convert (dtype conversions, vLLM's _typeConvert) is never conv: the
    shared traces' own conversion kernels, and the vLLM norm kernel the issue saw."""
    names = [n for n in _real_names() if re.search(r"(?i)convert", n)]
    names.append(
        "std::enable_if<(((8)>(0)))&&(vllm::_typeConvert<c10::BFloat16>::exists), void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, int)"
    )
    for name in names:
        assert classify(name).category != "conv", name[:120]
    assert classify(names[-1]).category == "norm"


def test_mangled_ck_names_are_not_read_as_int8() -> None:
    """'S8_' in an Itanium-mangled name is a substitution, not an int8 marker."""
    for name in _matching(r"^_ZN2ck"):
        assert classify(name).precision != "int8", name[:120]


def test_every_real_attention_kernel_is_a_known_family() -> None:
    """The attention rules take only names of attention kernels: each real name they take says
    flash, fmha, attn or attention (no look-alike reaches them)."""
    att = [n for n in _real_names() if classify(n).category == "attention"]
    assert att
    for name in att:
        assert re.search(r"(?i)flash|fmha|attn|attention", name), name[:120]
