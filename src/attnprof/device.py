"""Which device to run on, and the peak a device is measured against: one place for both.

- resolve_device: the --device value ("auto", "cpu", "cuda", "cuda:N") of every command and of a
  sweep's grid, checked and resolved here and nowhere else. A Ray sweep resolves "auto" against
  its cluster's resources instead (sweep/ray_exec.py): the jobs run there, not on this machine.
- peak_for: the dense spec figure (TFLOP/s per dtype, HBM TB/s) for a GPU name, with where the
  figure comes from. The analysis uses it for every GPU trace; the harness uses it for a CUDA run
  in half precision and measures a GEMM otherwise (harness/env.py run_peak). CPUs have no spec
  peak.

torch is imported only inside the functions that ask it about the hardware, never at module
level: the analysis (which never imports torch) reads the peak table from here.
"""

from __future__ import annotations

import os
from pathlib import Path

from attnprof.errors import UserError

__all__ = ["PEAKS", "SPEC_SOURCE", "auto_device", "peak_for", "resolve_device", "spec_device", "visible_gpus"]

# device-name substring -> {dtype: dense TFLOP/s}, HBM TB/s; first match wins (GH200 before H200)
PEAKS: tuple[tuple[str, dict[str, float], float], ...] = (
    ("GH200", {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0}, 4.0),
    ("H200", {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0}, 4.8),
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "fp32": 51.0}, 2.0),
    ("H100", {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0}, 3.35),
    ("B200", {"bf16": 2250.0, "fp16": 2250.0}, 8.0),
    ("A100-SXM4-40GB", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}, 1.555),
    ("A100-PCIE-40GB", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}, 1.555),
    ("A100", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}, 2.0),
)
SPEC_SOURCE = "dense spec sheet figures (flash-attention benchmark_attn.py convention; DOMAIN.md section 6)"

# device nodes a GPU torch can use shows up as: NVIDIA's, WSL2's (/dev/dxg), ROCm's (/dev/kfd)
_GPU_NODES = ("nvidia[0-9]*", "dxg", "kfd")


def spec_device(device_name: str | None) -> str | None:
    """The PEAKS key a device name holds (the first that matches), or None."""
    return next((key for key, _, _ in PEAKS if device_name and key in device_name), None)


def peak_for(device_name: str | None, dtype: str) -> tuple[float | None, float | None, str | None]:
    """(dense TFLOP/s in `dtype`, HBM TB/s, source) for a GPU whose name holds a PEAKS key; all
    None for an unknown device or a CPU (no spec peak is claimed for either)."""
    key = spec_device(device_name)
    for k, flops, tbps in PEAKS:
        if k == key:
            return flops.get(dtype), tbps, f"{key}: {SPEC_SOURCE}"
    return None, None, None


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES entries."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        # device_count() asks NVML and does not create a CUDA context in this (parent) process
        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # pragma: no cover - broken driver: report no GPU
        return []


def auto_device() -> str:
    """cuda when this machine has a GPU that torch can use, else cpu.

    Without a GPU device node there is no GPU, and torch is not imported here just to learn that
    (a sweep's parent process never needs torch).
    """
    dev = Path("/dev")
    if not any(any(dev.glob(node)) for node in _GPU_NODES) and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return "cpu"
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - a broken CUDA install: fall back to the CPU
        return "cpu"


def resolve_device(device: str, *, flag: str = "--device", probe: bool = True) -> str:
    """ "auto" -> cpu or cuda (auto_device); "cpu", "cuda" and "cuda:N" as given, lower-cased.

    probe=True (a command that runs here) also asks torch that the GPU is there, and says what
    to do when it is not; probe=False (a sweep's grid, whose executor finds the GPUs) checks the
    spelling only. `flag` names the setting in the messages (--device, or a grid's device)."""
    dev = device.strip().lower()
    if dev == "auto":
        return auto_device()
    if dev == "cpu":
        return "cpu"
    if not (dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UserError(f"unknown {flag} {device!r}: use auto, cpu, cuda or cuda:N")
    if not probe:
        return dev
    import torch

    if not torch.cuda.is_available():
        build = (
            "a CPU-only build" if "+cpu" in torch.__version__ or not torch.version.cuda else "a CUDA build"
        )
        raise UserError(
            f"{flag} {device}: no CUDA GPU is visible to torch {torch.__version__} ({build}); use {flag} cpu"
        )
    count = torch.cuda.device_count()
    if ":" in dev and int(dev[5:]) >= count:
        raise UserError(f"{flag} {device}: this machine has {count} GPU(s), cuda:0 to cuda:{count - 1}")
    return dev
