"""PyTorch's refusal reasons reach attnprof however the build sends them (issue 32): c10's lines
on fd 2, Python warnings, or both; a refusal with no words names the constraint attnprof checks
itself, never a bare "PyTorch's own check rejects this"."""

from __future__ import annotations

import ctypes
import ctypes.util
import warnings

import pytest
import torch

from attnprof.variants import sdpa
from attnprof.variants.native_warnings import call_capturing
from attnprof.workload import Workload

C10_LINE = b"[W1201 20:04:38.1 sdp_utils.cpp:617] Warning: from C (function check_x)\n"


def _libc_write(data: bytes) -> None:
    # a write(2) from C, as c10's default handler does it: below Python's sys.stderr
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    assert libc.write(2, data, len(data)) == len(data)


def test_a_python_warning_is_captured_as_a_reason() -> None:
    def check() -> bool:
        warnings.warn("Flash Attention does not support non-null attn_mask.", UserWarning, stacklevel=1)
        return False

    ok, msgs = call_capturing(check)
    assert ok is False and msgs == ["Flash Attention does not support non-null attn_mask."]


def test_a_c_level_write_to_fd2_is_captured(capfd: pytest.CaptureFixture[str]) -> None:
    ok, msgs = call_capturing(lambda: _libc_write(C10_LINE) or False)
    assert ok is False and msgs == ["from C"]
    assert "from C" not in capfd.readouterr().err


def test_both_routes_at_once_give_each_reason_once() -> None:
    def check() -> bool:
        _libc_write(C10_LINE)
        warnings.warn("from C", UserWarning, stacklevel=1)  # the same reason sent both ways
        warnings.warn("from Python", UserWarning, stacklevel=1)
        return False

    _, msgs = call_capturing(check)
    assert msgs == ["from C", "from Python"]


def test_a_real_torch_warn_becoming_a_python_warning_is_captured() -> None:
    # the out= resize TORCH_WARN through torch.add: its binding (HANDLE_TH_ERRORS) turns it into a
    # UserWarning, where torch.ops.aten.add.out sends it to fd 2 (tests/test_sdpa_dispatch.py)
    a, out = torch.ones(4), torch.empty(3)
    value, msgs = call_capturing(torch.add, a, a, out=out)
    assert tuple(value.shape) == (4,)
    assert len(msgs) == 1 and msgs[0].startswith("An output with one or more elements was resized")


def test_a_silent_refusal_names_the_failed_constraint() -> None:
    w = Workload(batch=1, heads=2, seq=32, head_dim=12, dtype="fp32", device="cpu")
    why = sdpa.silent_refusal("flash", w)
    assert "dtype fp32" in why and "head dim 12" in why and "device cpu" in why
    assert "rejects this" not in why


def test_a_silent_refusal_with_every_check_passing_says_unknown() -> None:
    w = Workload(batch=1, heads=2, seq=32, head_dim=64, dtype="bf16", device="cuda:0")
    why = sdpa.silent_refusal("efficient", w)
    assert why.endswith("cause unknown") and "dtype bf16" in why and "head dim 64" in why
    assert "fails:" not in why


@pytest.mark.gpu
def test_cudnn_refusal_for_fp32_on_cuda_names_dtype(capfd: pytest.CaptureFixture[str]) -> None:
    # the real CUDA path: PyTorch's own words (or attnprof's fallback) reach the reason, and no
    # [W ... sdp_utils] line reaches stderr
    w = Workload(batch=1, heads=2, seq=128, head_dim=64, dtype="fp32", device="cuda")
    why = sdpa._cuda_reason("cudnn", w)
    assert why is not None and ("dtype" in why.lower() or "float" in why.lower()), why
    assert "sdp_utils" not in capfd.readouterr().err


@pytest.mark.gpu
def test_flash_refusal_for_a_mask_on_cuda_is_captured(capfd: pytest.CaptureFixture[str]) -> None:
    w = Workload(batch=1, heads=2, seq=128, head_dim=64, dtype="bf16", device="cuda", mask="sliding=32")
    why = sdpa._cuda_reason("flash", w)
    assert why is not None and "mask" in why.lower(), why
    assert "sdp_utils" not in capfd.readouterr().err
