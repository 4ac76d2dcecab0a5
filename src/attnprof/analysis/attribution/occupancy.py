"""Theoretical occupancy from a kernel's launch resources (DOMAIN.md section 5).

Theoretical occupancy = active warps per SM / max warps per SM. Active blocks per SM is the
minimum of four limits, each worked out the way NVIDIA's occupancy calculator does:

- registers: allocated per warp, rounded up to 256 registers; warps that fit = regs per SM //
  regs per warp; blocks = those warps // warps per block;
- shared memory: per block, rounded up to 128 bytes, plus 1 KB the runtime reserves per block on
  sm80 and later; blocks = shared memory per SM // that;
- threads (warps): blocks = max warps per SM // warps per block;
- the architecture's maximum blocks per SM.

The limiter reported is the limit that binds; on a tie the hardware limits (warps, then blocks)
are named before the kernel's own resources (registers, then shared memory), so a kernel at 100%
is never "limited by registers". Per-architecture limits come from ARCH below; a trace's deviceProperties, where
present, override warps, registers and shared memory per SM.

Worked examples (tests/test_occupancy.py): 255 registers x 128 threads on sm80 -> 8192 registers
per warp -> 8 warps fit -> 2 blocks of 4 warps -> 8 / 64 = 12.5%, limited by registers; 240 x 256
-> 7680 per warp -> 8 warps fit -> 1 block of 8 warps -> 12.5%, limited by registers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

__all__ = ["ARCH", "DeviceLimits", "TheoreticalOccupancy", "device_limits", "theoretical_occupancy"]


@dataclass(frozen=True)
class DeviceLimits:
    arch: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_mem_per_sm: int
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256
    shared_alloc_unit: int = 128
    reserved_shared_per_block: int = 1024
    source: str = "architecture table"


def _arch(name: str, warps: int, blocks: int, smem_kb: int, reserved: int = 1024) -> DeviceLimits:
    return DeviceLimits(name, warps, blocks, smem_kb * 1024, reserved_shared_per_block=reserved)


# (major, minor) -> limits; sm70/sm75 reserve no shared memory per block
ARCH: dict[tuple[int, int], DeviceLimits] = {
    (6, 0): _arch("sm60", 64, 32, 64, 0),
    (6, 1): _arch("sm61", 64, 32, 96, 0),
    (7, 0): _arch("sm70", 64, 32, 96, 0),
    (7, 5): _arch("sm75", 32, 16, 64, 0),
    (8, 0): _arch("sm80", 64, 32, 164),
    (8, 6): _arch("sm86", 48, 16, 100),
    (8, 7): _arch("sm87", 48, 16, 164),
    (8, 9): _arch("sm89", 48, 24, 100),
    (9, 0): _arch("sm90", 64, 32, 228),
    (10, 0): _arch("sm100", 64, 32, 228),
    (12, 0): _arch("sm120", 48, 32, 100),
}


@dataclass(frozen=True)
class TheoreticalOccupancy:
    """What the launch resources allow (the analysis reports it in attnprof.analysis.records.result.Occupancy)."""

    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # 0..1
    limiter: str  # "registers", "shared memory", "warps", "blocks", or "none" (does not fit)


def device_limits(props: dict[str, Any] | None, cc: tuple[int, int] | None = None) -> DeviceLimits | None:
    """Limits for a device: its deviceProperties entry when present, else the architecture table."""
    if props:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            cc = (int(props["computeMajor"]), int(props["computeMinor"]))
    if cc is None:
        return None
    base = ARCH.get(cc) or ARCH.get((cc[0], 0))
    if base is None:
        # unknown architecture: fall back to the most recent one of the same generation or older
        older = [k for k in ARCH if k <= cc]
        base = ARCH[max(older)] if older else None
    if base is None:
        return None
    if not props:
        return base

    def num(key: str, default: int) -> int:
        v = props.get(key)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else default

    warp = num("warpSize", 32)
    return DeviceLimits(
        arch=f"sm{cc[0]}{cc[1]}",
        max_warps_per_sm=num("maxThreadsPerMultiprocessor", base.max_warps_per_sm * warp) // warp,
        max_blocks_per_sm=base.max_blocks_per_sm,
        shared_mem_per_sm=num("sharedMemPerMultiprocessor", base.shared_mem_per_sm),
        regs_per_sm=num("regsPerMultiprocessor", base.regs_per_sm),
        reserved_shared_per_block=base.reserved_shared_per_block,
        source="deviceProperties",
    )


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(
    registers: int, threads_per_block: int, shared_mem: int, limits: DeviceLimits
) -> TheoreticalOccupancy | None:
    """Blocks and warps per SM a kernel can keep resident; None when the inputs are unusable."""
    if threads_per_block <= 0 or registers < 0 or shared_mem < 0:
        return None
    warps_per_block = -(-threads_per_block // 32)
    # insertion order is the tie-break order
    limits_by: dict[str, int] = {
        "warps": limits.max_warps_per_sm // warps_per_block,
        "blocks": limits.max_blocks_per_sm,
    }
    if registers > 0:
        regs_per_warp = _ceil(registers * 32, limits.reg_alloc_unit)
        limits_by["registers"] = (limits.regs_per_sm // regs_per_warp) // warps_per_block
    else:
        limits_by["registers"] = 1 << 30
    if shared_mem > 0:
        per_block = _ceil(shared_mem, limits.shared_alloc_unit) + limits.reserved_shared_per_block
        limits_by["shared memory"] = limits.shared_mem_per_sm // per_block
    else:
        limits_by["shared memory"] = 1 << 30
    blocks = min(limits_by.values())
    if blocks <= 0:
        return TheoreticalOccupancy(0, 0, 0.0, "none")
    limiter = next(k for k, v in limits_by.items() if v == blocks)
    warps = blocks * warps_per_block
    return TheoreticalOccupancy(blocks, warps, warps / limits.max_warps_per_sm, limiter)
