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

import functools
import os
import re
from pathlib import Path
from typing import NamedTuple

from attnprof.errors import UserError

__all__ = [
    "PEAKS",
    "SPEC_SOURCE",
    "Peak",
    "auto_device",
    "peak_for",
    "resolve_device",
    "spec_device",
    "visible_gpus",
]


class Peak(NamedTuple):
    """One device's dense peaks: TFLOP/s per dtype and HBM TB/s, with where they come from.

    dtypes: bf16, fp16, fp8 (and fp4 where the part has it) are dense tensor-core / matrix-core
    figures (half the sparsity figures spec sheets print first); tf32 the dense tensor-core
    figure; fp32 the CUDA-core / vector figure (an fp32 GEMM without TF32, and every
    elementwise op, runs there); fp64 the vector figure. A dtype the sheet does not give is
    absent: no figure is claimed for it.
    """

    key: str  # the model's name as a device name spells it; matched by tokens (_tokens)
    flops: dict[str, float]
    tbps: float
    source: str


_DS = "datasheet, dense (half the sparsity figure)"
# GeForce cards: FP16/BF16 tensor with FP32 accumulate (what PyTorch's GEMMs use), dense
_GF = "architecture whitepaper, FP16/BF16 tensor TFLOPS with FP32 accumulate, dense"
PEAKS: tuple[Peak, ...] = (
    # NVIDIA Volta .. Blackwell (datacenter)
    Peak("V100 SXM2", {"fp16": 125.0, "fp32": 15.7, "fp64": 7.8}, 0.9, f"NVIDIA Tesla V100 {_DS}"),
    Peak("V100 PCIe", {"fp16": 112.0, "fp32": 14.0, "fp64": 7.0}, 0.9, f"NVIDIA Tesla V100 {_DS}"),
    Peak("V100S", {"fp16": 130.0, "fp32": 16.4, "fp64": 8.2}, 1.134, f"NVIDIA Tesla V100S {_DS}"),
    Peak("T4", {"fp16": 65.0, "fp32": 8.1}, 0.32, f"NVIDIA T4 {_DS}"),
    Peak(
        "A100 40GB",
        {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 9.7},
        1.555,
        f"NVIDIA A100 {_DS}",
    ),
    Peak(
        "A100 SXM4 80GB",
        {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 9.7},
        2.039,
        f"NVIDIA A100 {_DS}",
    ),
    Peak(
        "A100 80GB PCIe",
        {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 9.7},
        1.935,
        f"NVIDIA A100 {_DS}",
    ),
    # an A100 whose name gives neither form factor nor memory: the 80 GB PCIe figure, the lowest
    # bandwidth of the 80 GB parts, as before
    Peak(
        "A100",
        {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 9.7},
        2.0,
        f"NVIDIA A100 {_DS}",
    ),
    Peak("A10", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}, 0.6, f"NVIDIA A10 {_DS}"),
    Peak(
        "A30",
        {"bf16": 165.0, "fp16": 165.0, "tf32": 82.0, "fp32": 10.3, "fp64": 5.2},
        0.933,
        f"NVIDIA A30 {_DS}",
    ),
    Peak("A40", {"bf16": 149.7, "fp16": 149.7, "tf32": 74.8, "fp32": 37.4}, 0.696, f"NVIDIA A40 {_DS}"),
    Peak(
        "L4",
        {"bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "tf32": 60.0, "fp32": 30.3},
        0.3,
        f"NVIDIA L4 {_DS}",
    ),
    Peak(
        "L40",
        {"bf16": 181.0, "fp16": 181.0, "fp8": 362.0, "tf32": 90.5, "fp32": 90.5},
        0.864,
        f"NVIDIA L40 {_DS}",
    ),
    Peak(
        "L40S",
        {"bf16": 362.0, "fp16": 362.0, "fp8": 733.0, "tf32": 183.0, "fp32": 91.6},
        0.864,
        f"NVIDIA L40S {_DS}",
    ),
    Peak(
        "H100",
        {"bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "tf32": 494.5, "fp32": 67.0, "fp64": 34.0},
        3.35,
        f"NVIDIA H100 SXM5 {_DS}",
    ),
    Peak(
        "H100 PCIe",
        {"bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "tf32": 378.0, "fp32": 51.0, "fp64": 26.0},
        2.0,
        f"NVIDIA H100 PCIe {_DS}",
    ),
    Peak(
        "H100 NVL",
        {"bf16": 835.0, "fp16": 835.0, "fp8": 1670.0, "tf32": 417.5, "fp32": 60.0, "fp64": 30.0},
        3.9,
        f"NVIDIA H100 NVL {_DS}",
    ),
    Peak(
        "H200",
        {"bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "tf32": 494.5, "fp32": 67.0, "fp64": 34.0},
        4.8,
        f"NVIDIA H200 SXM {_DS}",
    ),
    Peak(
        "H200 NVL",
        {"bf16": 835.0, "fp16": 835.0, "fp8": 1670.0, "tf32": 417.5, "fp32": 60.0, "fp64": 30.0},
        4.8,
        f"NVIDIA H200 NVL {_DS}",
    ),
    Peak(
        "GH200",
        {"bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "tf32": 494.5, "fp32": 67.0, "fp64": 34.0},
        4.0,
        f"NVIDIA GH200 Grace Hopper {_DS} (96 GB HBM3 part)",
    ),
    Peak(
        "B200",
        {
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "fp4": 9000.0,
            "tf32": 1100.0,
            "fp32": 75.0,
            "fp64": 37.0,
        },
        8.0,
        f"NVIDIA HGX B200 {_DS}, per GPU",
    ),
    Peak(
        "GB200",
        {
            "bf16": 2500.0,
            "fp16": 2500.0,
            "fp8": 5000.0,
            "fp4": 10000.0,
            "tf32": 1250.0,
            "fp32": 80.0,
            "fp64": 40.0,
        },
        8.0,
        f"NVIDIA GB200 NVL72 {_DS}, per GPU",
    ),
    Peak(
        "B300",
        {"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 13500.0, "tf32": 1100.0, "fp32": 75.0},
        8.0,
        f"NVIDIA HGX B300 {_DS}, per GPU",
    ),
    # NVIDIA GeForce (consumer)
    Peak(
        "RTX 3080",
        {"bf16": 59.5, "fp16": 59.5, "tf32": 29.8, "fp32": 29.8},
        0.76,
        f"NVIDIA Ampere GA102 {_GF}",
    ),
    Peak(
        "RTX 3090",
        {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6},
        0.936,
        f"NVIDIA Ampere GA102 {_GF}",
    ),
    Peak(
        "RTX 4080",
        {"bf16": 97.5, "fp16": 97.5, "fp8": 194.9, "tf32": 48.7, "fp32": 48.7},
        0.717,
        f"NVIDIA Ada Lovelace {_GF}",
    ),
    Peak(
        "RTX 4090",
        {"bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "tf32": 82.6, "fp32": 82.6},
        1.008,
        f"NVIDIA Ada Lovelace {_GF}",
    ),
    Peak(
        "RTX 5090",
        {"bf16": 209.5, "fp16": 209.5, "fp8": 419.0, "tf32": 104.8, "fp32": 104.8},
        1.792,
        f"NVIDIA RTX Blackwell {_GF}",
    ),
    # AMD Instinct. PyTorch sees each of an MI250X's two GCDs as one device: per-GCD figures
    Peak(
        "MI210",
        {"bf16": 181.0, "fp16": 181.0, "fp32": 22.6, "fp64": 22.6},
        1.6,
        "AMD Instinct MI210 datasheet",
    ),
    Peak(
        "MI250X",
        {"bf16": 191.5, "fp16": 191.5, "fp32": 23.9, "fp64": 23.9},
        1.6,
        "AMD Instinct MI250X datasheet, per GCD (half the module figure)",
    ),
    # ROCm names both parts "AMD Instinct MI250X/MI250": that name matches both keys, so it
    # names neither, and no peak is claimed for it
    Peak(
        "MI250",
        {"bf16": 181.0, "fp16": 181.0, "fp32": 22.6, "fp64": 22.6},
        1.6,
        "AMD Instinct MI250 datasheet, per GCD (half the module figure)",
    ),
    Peak(
        "MI300X",
        {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp32": 163.4, "fp64": 81.7},
        5.3,
        "AMD Instinct MI300X datasheet, dense",
    ),
    Peak(
        "MI325X",
        {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp32": 163.4, "fp64": 81.7},
        6.0,
        "AMD Instinct MI325X datasheet, dense",
    ),
    Peak(
        "MI355X",
        {"bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2, "fp4": 10066.3, "fp32": 157.3, "fp64": 78.6},
        8.0,
        "AMD Instinct MI355X datasheet, dense",
    ),
)
SPEC_SOURCE = "dense spec sheet figures (flash-attention benchmark_attn.py convention; DOMAIN.md section 6)"
_BY_KEY = {p.key: p for p in PEAKS}

# device nodes a GPU torch can use shows up as: NVIDIA's, WSL2's (/dev/dxg), ROCm's (/dev/kfd)
_GPU_NODES = ("nvidia[0-9]*", "dxg", "kfd")


def _tokens(name: str) -> frozenset[str]:
    """A device name's words, upper-case: "NVIDIA A100-SXM4-80GB" -> {NVIDIA, A100, SXM4, 80GB}."""
    return frozenset(re.split(r"[\s\-_/(),]+", name.upper())) - {""}


# every key's words, once (spec_device runs per op of a trace through peak_for)
_KEY_WORDS: dict[str, frozenset[str]] = {}


@functools.lru_cache(maxsize=64)
def spec_device(device_name: str | None) -> str | None:
    """The PEAKS key a device name names, or None.

    Every word of the key must be a word of the name, and the key with the most words wins:
    "NVIDIA H200 NVL" is the H200 NVL, not the H200; "NVIDIA GH200 480GB" is no H200 at all. Two
    keys of equal length that both match (AMD's "MI250X/MI250") name no single part: None, and
    no peak is claimed.
    """
    if not device_name:
        return None
    if not _KEY_WORDS:
        _KEY_WORDS.update({p.key: _tokens(p.key) for p in PEAKS})
    words = _tokens(device_name)
    hits = [p.key for p in PEAKS if _KEY_WORDS[p.key] <= words]
    if not hits:
        return None
    best = max(len(_KEY_WORDS[k]) for k in hits)
    top = [k for k in hits if len(_KEY_WORDS[k]) == best]
    return top[0] if len(top) == 1 else None


def peak_for(device_name: str | None, dtype: str) -> tuple[float | None, float | None, str | None]:
    """(dense TFLOP/s in `dtype`, HBM TB/s, source) for a GPU the table names; all None for an
    unknown device or a CPU (no spec peak is claimed for either)."""
    key = spec_device(device_name)
    if key is None:
        return None, None, None
    p = _BY_KEY[key]
    return p.flops.get(dtype), p.tbps, f"{key}: {p.source}"


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
