"""Achieved FLOP/s and bandwidth against the device's peak, when the workload is known.

FLOPs and bytes come from attnprof.workload.Workload (DOMAIN.md section 6): useful FLOPs count
only unmasked query-key pairs under a causal mask; executed FLOPs are what the variant recorded
it computes in run.json (attnprof.run_context), else the full square for an implementation that
materialises the scores. The time is the region's mean per instance: GPU
busy time (sum of GPU-op durations) on GPU traces, the annotation's CPU duration on CPU traces,
so one region instance must be one forward call of the workload (as attn_fwd is).

Peaks are dense spec figures (never sparse), matched on the device name (attnprof.device); on CPU there is no spec
peak: the peak measured with a GEMM by the harness is used when run.json carries one, else none
is claimed. A result above 100% of peak is a measurement error (wrong peak, wrong workload, or
a time that misses work), and findings say so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.analysis.records.result import Roofline
from attnprof.device import peak_for
from attnprof.workload import Workload

if TYPE_CHECKING:
    from attnprof.analysis.records.result import Device, RegionStat

__all__ = ["roofline"]


def roofline(
    workload: Workload,
    *,
    device: Device,
    region: RegionStat,
    materialises: bool,
    flops_executed: float | None = None,
    cpu_peak_tflops: float | None = None,
    cpu_peak_source: str | None = None,
) -> Roofline:
    """flops_executed: the forward FLOPs the traced variant recorded it computes (run.json);
    without it, the full square when it materialises the scores, else the useful FLOPs."""
    gpu = device.kind == "gpu" and region.gpu_ops_per_instance > 0
    basis = "gpu busy time per instance" if gpu else "cpu time per instance"
    t_us = float(region.gpu_time_us_per_instance if gpu else region.cpu_time_us_per_instance)
    # a --backward run's regions: attn_bwd holds the backward (2.5x the forward's FLOPs,
    # FlashAttention's convention), attn_fwd the forward, any wider region (a profiler step) both
    from attnprof.formulas import BACKWARD_FLOP_FACTOR

    name = region.name or ""
    factor = 1.0
    if workload.backward and "attn_fwd" not in name:
        factor = BACKWARD_FLOP_FACTOR if "attn_bwd" in name else 1.0 + BACKWARD_FLOP_FACTOR
    flops = workload.flops_useful() * factor
    forward = flops_executed if flops_executed is not None else workload.flops_executed(materialises)
    executed = forward * factor
    nbytes = workload.bytes_min()
    out = Roofline(
        basis=basis,
        region=region.name,
        # the workload's shape and dtype; its device field is the harness's, not this trace's
        workload=workload.describe().replace(f" {workload.device} ", " "),
        flops_useful=flops,
        flops_executed=executed,
        bytes_min=nbytes,
        time_us=round(t_us, 3),
    )
    if t_us <= 0:
        out.note = "no time measured in the region"
        return out
    out.achieved_tflops = flops / (t_us * 1e-6) / 1e12
    out.achieved_tbps = nbytes / (t_us * 1e-6) / 1e12
    if gpu:
        peak, tbps, source = peak_for(device.name, workload.dtype)
    else:
        peak, tbps, source = cpu_peak_tflops, None, cpu_peak_source
    out.peak_tflops, out.peak_tbps, out.peak_source = peak, tbps, source
    if peak:
        out.pct_of_peak_flops = 100.0 * out.achieved_tflops / peak
    if tbps:
        out.pct_of_peak_bandwidth = 100.0 * out.achieved_tbps / tbps
    if peak is None:
        out.note = (
            "no peak is known for this CPU (the harness measures one with a GEMM; run.json has none)"
            if not gpu
            else f"no {workload.dtype} peak known for {device.name!r}"
        )
    return out
