"""Theoretical occupancy against hand-worked examples (DOMAIN.md section 5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.attribution.occupancy import ARCH, device_limits, theoretical_occupancy
from attnprof.analysis.records.result import LaunchApi

SM80 = ARCH[(8, 0)]


def test_flash_255_registers_x_128_threads_on_sm80() -> None:
    # 255 regs * 32 threads = 8160 -> 8192 per warp (256-register units); 65536 / 8192 = 8 warps;
    # 128 threads = 4 warps per block -> 2 blocks, 8 warps, 8 / 64 = 12.5%
    occ = theoretical_occupancy(255, 128, 0, SM80)
    assert occ is not None
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy, occ.limiter) == (2, 8, 0.125, "registers")


def test_cudnn_240_registers_x_256_threads_on_sm80() -> None:
    # 240 * 32 = 7680 per warp; 65536 // 7680 = 8 warps; 8 warps per block -> 1 block, 12.5%
    occ = theoretical_occupancy(240, 256, 0, SM80)
    assert occ is not None
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy, occ.limiter) == (1, 8, 0.125, "registers")


def test_shared_memory_limit_counts_the_reserved_kilobyte() -> None:
    # 80 KB + 1 KB reserved per block: 164 KB // 81 KB = 2 blocks of 4 warps = 12.5%
    occ = theoretical_occupancy(32, 128, 80 * 1024, SM80)
    assert occ is not None
    assert (occ.blocks_per_sm, occ.limiter) == (2, "shared memory")
    # sm70 reserves nothing: 96 KB // 48 KB = 2 blocks
    occ70 = theoretical_occupancy(32, 128, 48 * 1024, ARCH[(7, 0)])
    assert occ70 is not None and occ70.blocks_per_sm == 2


def test_warp_and_block_limits() -> None:
    full = theoretical_occupancy(32, 1024, 0, SM80)  # 32 warps per block, 64 max -> 2 blocks, 100%
    assert full is not None and (full.occupancy, full.limiter) == (1.0, "warps")
    tiny = theoretical_occupancy(16, 32, 0, SM80)  # one-warp blocks: 32 blocks max -> 50%
    assert tiny is not None and (tiny.blocks_per_sm, tiny.occupancy, tiny.limiter) == (32, 0.5, "blocks")
    sm89 = theoretical_occupancy(16, 32, 0, ARCH[(8, 9)])  # 24 blocks, 48 warps -> 50%
    assert sm89 is not None and sm89.blocks_per_sm == 24


def test_kernel_that_does_not_fit_and_bad_input() -> None:
    none = theoretical_occupancy(255, 1024, 0, SM80)  # 32 warps x 8192 regs > 65536
    assert none is not None and (none.blocks_per_sm, none.limiter) == (0, "none")
    assert theoretical_occupancy(32, 0, 0, SM80) is None


def test_device_properties_override_the_table() -> None:
    props = {
        "computeMajor": 8,
        "computeMinor": 9,
        "maxThreadsPerMultiprocessor": 1536,
        "sharedMemPerMultiprocessor": 102400,
        "regsPerMultiprocessor": 65536,
    }
    lim = device_limits(props)
    assert lim is not None
    assert (lim.max_warps_per_sm, lim.shared_mem_per_sm, lim.max_blocks_per_sm, lim.source) == (
        48,
        102400,
        24,
        "deviceProperties",
    )
    assert device_limits(None, (8, 0)) == SM80
    assert device_limits(None, (42, 0)) is not None  # a future architecture falls back to the newest known


def test_flash_kernel_in_the_h100_trace_is_12_5_percent_by_design() -> None:
    a = analyze(trace("AMD-AGI__TraceLens__tests__traces__h100"), top=0)
    flash = next(k for k in a.kernels if k.family.startswith("PyTorch flash"))
    occ = flash.occupancy
    assert occ is not None
    assert (occ.registers, occ.threads_per_block) == (255, 128)
    assert occ.theoretical_pct == pytest.approx(12.5)
    assert occ.limiter == "registers"
    low = [f for f in a.findings if f.code == "LOW_OCCUPANCY_BY_DESIGN" and "flash" in f.evidence["kernel"]]
    assert low


def test_zero_with_more_than_48kb_shared_memory_is_not_measured() -> None:
    """Kineto reports 0 for kernels with more than 48 KB of shared memory, whatever the launch
    API: every 0 shown there is a gap, named as such, never a measurement."""
    a = analyze(trace("AMD-AGI__TraceLens__tests__traces__h100"), top=0)
    f = a.finding("OCCUPANCY_NOT_MEASURED")
    assert f is not None and "48 KB of shared memory" in f.message and "driver" not in f.message
    gapped = {k["kernel"] for k in f.evidence["kernels"]}
    for k in a.kernels:
        occ = k.occupancy
        if occ and k.name in gapped:
            assert occ.measured is False and occ.achieved_pct is None
            assert occ.shared_mem_bytes > 48 * 1024 and "48 KB" in occ.not_measured_reason
        elif occ and occ.measured:
            assert occ.achieved_pct is not None
    # cudaLaunchKernel launches with large shared memory are gaps too (not only driver launches)
    apis = {api for k in a.kernels if k.name in gapped for api in k.launch_apis}
    assert apis


def test_driver_launch_with_small_shared_memory_is_measured() -> None:
    a = analyze(trace("facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"), top=0)
    (k,) = a.kernels
    assert k.launch_apis == {"cuLaunchKernel": 1}
    assert k.occupancy.measured is True and k.occupancy.shared_mem_bytes <= 48 * 1024
    assert a.finding("OCCUPANCY_NOT_MEASURED") is None


def test_cudnn_sdpa_via_culaunchkernelex_reporting_zero_is_a_measurement_gap(tmp_path: Path) -> None:
    # the blog's cuDNN case, hand-built (no GPU here): driver launch, 0% reported, 240 x 256 on sm80
    a100 = {
        "id": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "computeMajor": 8,
        "computeMinor": 0,
        "numSms": 108,
        "maxThreadsPerMultiprocessor": 2048,
        "regsPerMultiprocessor": 65536,
        "sharedMemPerMultiprocessor": 167936,
        "warpSize": 32,
    }
    name = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0"
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "attn_fwd",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 300,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::_scaled_dot_product_cudnn_attention",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 200,
            "args": {"External id": 2},
        },
        {
            "ph": "X",
            "cat": "cuda_driver",
            "name": "cuLaunchKernelEx",
            "pid": 1,
            "tid": 1,
            "ts": 150,
            "dur": 20,
            "args": {"External id": 2, "correlation": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 400,
            "dur": 186,
            "args": {
                "External id": 2,
                "correlation": 7,
                "device": 0,
                "registers per thread": 240,
                "shared memory": 98304,
                "block": [256, 1, 1],
                "grid": [16, 8, 8],
                "est. achieved occupancy %": 0,
            },
        },
    ]
    p = tmp_path / "cudnn.json"
    p.write_text(json.dumps({"deviceProperties": [a100], "traceEvents": events}))
    a = analyze(p)
    (k,) = a.kernels
    assert (k.category, k.family, k.launch_apis) == (
        "attention",
        "cuDNN SDPA",
        {"cuLaunchKernelEx": 1},
    )
    assert k.occupancy.measured is False
    assert k.occupancy.theoretical_pct == pytest.approx(12.5)
    f = a.finding("OCCUPANCY_NOT_MEASURED")
    assert f is not None and f.evidence["kernels"][0]["shared_mem_bytes"] == 98304
    assert k.occupancy.limiter == "registers"
    assert a.regions[0].name == "attn_fwd" and a.regions[0].gpu_ops_per_instance == 1
    assert a.launch_apis == [LaunchApi(api="cuLaunchKernelEx", gpu_ops=1, kernels=1)]


def test_each_kernels_configuration_is_its_most_common_launch() -> None:
    # all names at once against the definition: per name, Counter over its launches in order
    from collections import Counter

    from attnprof.analysis.breakdown.kernel_tables import _configs

    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 60))
        k_inv = rng.integers(0, 5, n)
        reg = rng.choice([-1, 32, 64], n)  # -1: not recorded
        blk = rng.choice([0, 128, 256], n)  # 0: not recorded
        smem = rng.choice([-1, 0, 4096], n)
        want = {}
        for name in range(5):
            at = [i for i in range(n) if k_inv[i] == name and reg[i] >= 0 and blk[i] > 0]
            if at:
                cfg = Counter((int(reg[i]), int(blk[i]), max(int(smem[i]), 0)) for i in at)
                want[name] = cfg.most_common(1)[0][0]
        assert _configs(k_inv, reg, blk, smem) == want


def test_configurations_of_many_distinct_values_are_ranked_not_overflowed() -> None:
    # distinct values enough that the four columns' ranks multiplied would pass int64
    from collections import Counter

    from attnprof.analysis.breakdown.kernel_tables import _configs

    rng = np.random.default_rng(5)
    n = 70_000
    k_inv = rng.integers(0, 70_000, n)
    reg, blk, smem = (rng.integers(1, 2**40, n) for _ in range(3))
    reg[:10], blk[:10], smem[:10], k_inv[:10] = 7, 9, 11, 3  # one name with a repeated launch
    want: dict[int, tuple[int, int, int]] = {}
    by_name: dict[int, Counter[tuple[int, int, int]]] = {}
    for k, r, b, s in zip(k_inv.tolist(), reg.tolist(), blk.tolist(), smem.tolist(), strict=True):
        by_name.setdefault(k, Counter())[(r, b, max(s, 0))] += 1
    want = {k: c.most_common(1)[0][0] for k, c in by_name.items()}
    assert _configs(k_inv, reg, blk, smem) == want
