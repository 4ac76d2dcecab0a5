"""CUDA device handling the harness shares: which GPU a run's work goes to, and whether a
failure left the device unusable.

cuda:N with N > 0: CUDA events, torch.cuda.synchronize() without a device, the caching
allocator's stats and PyTorch's SDPA checks (at::cuda::getCurrentDeviceProperties() in
aten/src/ATen/native/transformers/cuda/sdp_utils.cpp) all read the *current* device, which is
cuda:0 until someone sets it. `on_device` makes cuda:N current for the whole run, so every one of
them means the run's GPU.

A sticky CUDA error (an illegal address, a device-side assert, a launch failure) poisons the
process's CUDA context: every later CUDA call raises the same error, torch.cuda.empty_cache()
included. `release_memory` never raises, and `unusable` tells a caller (the sweep worker) that
the process must be replaced rather than given more work.
"""

from __future__ import annotations

import contextlib
from typing import Any

from attnprof.errors import first_line

__all__ = ["STICKY_ERRORS", "is_sticky", "on_device", "release_memory", "unusable"]

# words of the CUDA errors after which the context stays broken (cudaErrorIllegalAddress,
# cudaErrorAssert, cudaErrorLaunchFailure, ...; an out-of-memory error is not one of them)
STICKY_ERRORS = (
    "illegal memory access",
    "illegal address",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "an illegal instruction",
    "cuda error: unknown error",
    "cudaerrorlaunchfailure",
    "cublas_status_execution_failed",
    "cublas_status_internal_error",
)


def is_sticky(text: str) -> bool:
    """Whether an error's text names a CUDA error that leaves the context unusable."""
    low = text.lower()
    return any(s in low for s in STICKY_ERRORS)


def on_device(device: str) -> Any:
    """A context in which `device` (cuda:N) is the current CUDA device; a no-op for anything else
    (the CPU, or plain "cuda", which is the current device already)."""
    if not device.startswith("cuda:"):
        return contextlib.nullcontext()
    import torch

    return torch.cuda.device(torch.device(device))


def release_memory(device: str) -> str | None:
    """Hand the caching allocator's free blocks back after a failure; never raises. Returns the
    error it met (the context is then poisoned), or None."""
    if not device.startswith("cuda"):
        return None
    import torch

    try:
        with on_device(device):
            torch.cuda.empty_cache()
    except Exception as exc:  # a sticky error raises here again: report it, never mask the first
        return f"{type(exc).__name__}: {first_line(exc)}"
    return None


def unusable(device: str) -> bool:
    """Whether the CUDA context on `device` is broken: a synchronize that raises means every
    later call will. False on the CPU and where CUDA was never initialised."""
    if not device.startswith("cuda"):
        return False
    import torch

    if not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize(torch.device(device))
    except Exception:
        return True
    return False
