"""Which accelerator a trace comes from, and the gaps in what it recorded of it.

The accelerator ("cuda", "rocm", "xpu", "mtia", "other"; None without device activity) is read
from what the trace holds, in this order:

- MTIA: mtia_runtime / mtia_ccp_events categories;
- XPU: xpu_runtime / xpu_driver categories;
- ROCm: hip* runtime calls, or a device named AMD / Radeon / Instinct in deviceProperties;
- CUDA: cuda* / cu* runtime or driver calls, or an NVIDIA / Tesla / Quadro / GeForce device;
- other: privateuse1 runtime calls or device events of a category no rule above names, or
  kernels with nothing saying whose they are.

GPU-specific analysis keys off it: theoretical occupancy and the tensor-core advice are for CUDA
devices only (a ROCm deviceProperties entry reports gfx9.x as "compute capability 9.x", which is
not sm90), and the CUDA-core GEMM rule knows which tensor-core dtypes each CUDA generation has.

Gaps reported as warnings: launches whose device op is missing (the profiler's device buffer
overflowed, or the trace was cut), no device ops at all in a trace that launched work, device ops
that start before their launch (host and device clocks disagree), and device events of categories
the loader dropped.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from attnprof.analysis.attribution.classify import Classification
from attnprof.analysis.attribution.links import LAUNCH_CALL, Links
from attnprof.analysis.attribution.occupancy import DeviceLimits, device_limits
from attnprof.analysis.records.result import Device, Gaps
from attnprof.analysis.records.trace_records import NO_CATEGORY
from attnprof.trace.model import Kind, Trace, unique

__all__ = [
    "ROCM_LOW_PRECISION",
    "TENSOR_CORE_DTYPES",
    "accelerator",
    "device_info",
    "gap_warnings",
    "is_launch",
    "low_precision_claim",
    "low_precision_units",
    "not_read",
]

# calls that put work on the device: kernel launches, graph launches, async copies and sets
_LAUNCH = LAUNCH_CALL
_KERNEL_LAUNCH = re.compile(r"LaunchKernel|KernelLaunch|GraphLaunch|ModuleLaunch|cuLaunch|EnqueueKernel")
_AMD = re.compile(r"(?i)\bAMD\b|Radeon|Instinct|\bMI\d{3}")
_NVIDIA = re.compile(r"(?i)NVIDIA|Tesla|Quadro|GeForce|\bRTX\b|\b[AHBL]\d{2,3}\b|GH200|GB200")

# tensor-core input dtypes per CUDA compute capability (major, minor): Volta has fp16 only,
# Turing adds int8/int4, Ampere tf32 and bf16, Ada and Hopper fp8, Blackwell fp4
TENSOR_CORE_DTYPES: tuple[tuple[tuple[int, int], frozenset[str]], ...] = (
    ((10, 0), frozenset({"fp16", "bf16", "tf32", "int8", "fp8", "fp4"})),
    ((8, 9), frozenset({"fp16", "bf16", "tf32", "int8", "fp8"})),
    ((8, 0), frozenset({"fp16", "bf16", "tf32", "int8"})),
    ((7, 5), frozenset({"fp16", "int8"})),
    ((7, 0), frozenset({"fp16"})),
)


def is_launch(name: str) -> bool:
    return bool(_LAUNCH.search(name))


def _launch_names(trace: Trace) -> list[str]:
    rows = trace.rows(Kind.RUNTIME, Kind.DRIVER)
    return [trace.names[int(i)] for i in unique(trace.name[rows])]


def accelerator(trace: Trace, props: dict[str, Any] | None) -> str | None:
    cats = {c.lower() for c in trace.categories}
    has_device = bool(np.isin(trace.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.DEVICE]).any())
    apis = _launch_names(trace)
    if any(c.startswith("mtia") for c in cats):
        return "mtia"
    if "xpu_runtime" in cats or "xpu_driver" in cats:
        return "xpu"
    name = str(props.get("name", "")) if props else ""
    if any(a.startswith("hip") for a in apis) or _AMD.search(name):
        return "rocm"
    if any(a.startswith("cu") for a in apis) or _NVIDIA.search(name):
        return "cuda"
    if any(c.startswith("privateuse1") for c in cats) or (trace.kind == Kind.DEVICE).any():
        return "other"
    return "other" if has_device or apis else None


def device_info(trace: Trace, links: Links) -> tuple[Device, DeviceLimits | None]:
    """The device record of the analysis and, for CUDA devices
    with a compute capability, the per-SM limits for theoretical occupancy."""
    props = trace.device_properties
    kdev = trace.device[trace.device >= 0]
    dev_id = int(np.bincount(kdev).argmax()) if kdev.size else 0
    entry = next((p for p in props if p.get("id") == dev_id), props[0] if props else None)
    acc = accelerator(trace, entry)
    has_gpu_events = bool(links.gpu_rows.size) or bool((trace.kind == Kind.RUNTIME).any())
    if entry is not None or has_gpu_events:
        kind = "gpu"
    elif trace.metadata.get("deviceProperties_present") or (trace.kind == Kind.CPU_OP).any():
        kind = "cpu"
    else:
        kind = "unknown"
    cc = None
    if (
        entry is not None
        and isinstance(entry.get("computeMajor"), int)
        and isinstance(entry.get("computeMinor"), int)
    ):
        cc = f"{entry['computeMajor']}.{entry['computeMinor']}"
    # occupancy limits are NVIDIA's: a ROCm "9.4" is gfx942, not sm94
    limits = device_limits(entry) if entry is not None and acc == "cuda" else None
    device = Device(
        kind=kind,
        accelerator=acc,
        name=entry.get("name") if entry is not None else None,
        compute_capability=cc,
        num_sms=entry.get("numSms") if entry is not None else None,
        total_memory_bytes=entry.get("totalGlobalMem") if entry is not None else None,
        count=len(props),
        id=dev_id if entry is not None else None,
        arch_limits_source=limits.source if limits is not None else None,
        tensor_core_dtypes=tensor_core_dtypes(acc, cc),
        not_read=not_read(trace) or None,
    )
    return device, limits


def not_read(trace: Trace) -> dict[str, int]:
    """Device-side events of categories the loader does not read, by category (trace/unread.py):
    the device line and DEVICE_EVENTS_NOT_ANALYSED name them, so that a trace whose device work
    is all of such categories (a CUPTI range profiler's) is not called CPU-only."""
    return {u.category or NO_CATEGORY: u.device_side for u in trace.unread if u.device_side}


# fp8 / fp4 matrix units of AMD Instinct GPUs by the gfx version deviceProperties reports as
# "compute capability" (ROCm: major.minor of gfxMmN): CDNA3 (gfx94x, MI300) takes fp8 but not
# fp4, CDNA4 (gfx95x, MI350) both; CDNA1/2 (gfx908/gfx90a report 9.0) neither. An MXFP4
# weight GEMM on an MI300X dequantises to bf16: its name says fp4, its math does not.
ROCM_LOW_PRECISION: tuple[tuple[tuple[int, int], frozenset[str]], ...] = (
    ((9, 5), frozenset({"fp8", "fp4"})),
    ((9, 4), frozenset({"fp8"})),
    ((9, 0), frozenset()),
)


def low_precision_units(acc: str | None, cc: str | None) -> frozenset[str] | None:
    """Which of fp8 / fp4 the device's matrix units take; None when the trace does not say
    (no compute capability, or an accelerator without a table)."""
    if cc is None:
        return None
    try:
        major, minor = (int(x) for x in cc.split("."))
    except ValueError:
        return None
    if acc == "cuda":
        dtypes = tensor_core_dtypes(acc, cc)
        return None if dtypes is None else frozenset(dtypes) & {"fp8", "fp4"}
    if acc == "rocm" and major == 9:
        for (ma, mi), units in ROCM_LOW_PRECISION:
            if (major, minor) >= (ma, mi):
                return units
    return None


def low_precision_claim(c: Classification, device: Device) -> tuple[str, bool | None]:
    """The family and tensor-core use of an fp8 / fp4 GEMM, as far as this device supports the
    name's claim: a name says what its data are, the device what its matrix units can multiply.
    Where the device has no such units (an MXFP4 GEMM on an MI300X runs its math in bf16), or
    the trace does not say which device it ran on, tensor-core use is unknown, not claimed."""
    if c.category != "gemm" or c.precision not in ("fp8", "fp4") or not c.tensor_cores:
        return c.family, c.tensor_cores
    units = low_precision_units(device.accelerator, device.compute_capability)
    if units is None:
        return f"{c.precision} GEMM (matrix units unknown: the trace names no device)", None
    if c.precision not in units:
        return f"{c.precision} data GEMM (no {c.precision} matrix units on this device: wider math)", None
    return c.family, c.tensor_cores


def tensor_core_dtypes(acc: str | None, cc: str | None) -> list[str] | None:
    """Input dtypes this device's tensor cores take; None when unknown (not CUDA, or no cc)."""
    if acc != "cuda" or cc is None:
        return None
    try:
        major, minor = (int(x) for x in cc.split("."))
    except ValueError:
        return None
    for (ma, mi), dtypes in TENSOR_CORE_DTYPES:
        if (major, minor) >= (ma, mi):
            return sorted(dtypes)
    return []  # before Volta: no tensor cores


def gap_warnings(trace: Trace, links: Links) -> tuple[list[str], Gaps]:
    """Warnings for what the trace failed to record, and the figures behind them."""
    out: list[str] = []
    facts = Gaps()
    rows = trace.rows(Kind.RUNTIME, Kind.DRIVER)
    if rows.size:
        # once per unique name, not per event (a large trace has ~10^5 launches, ~10^2 names)
        launch_name = np.fromiter(
            (bool(_KERNEL_LAUNCH.search(n)) for n in trace.names), bool, len(trace.names)
        )
        is_k = launch_name[trace.name[rows]]
        klaunch = rows[is_k]
        linked = np.zeros(trace.n_events, bool)
        linked[links.launch[links.launch >= 0]] = True
        missing = int((~linked[klaunch]).sum())
        facts.kernel_launches = int(klaunch.size)
        facts.launches_without_device_op = missing
        if klaunch.size and links.gpu_rows.size == 0:
            out.append(
                f"{klaunch.size} kernel launches but no device ops at all: device activity was not "
                "recorded (profile with the device activity, e.g. ProfilerActivity.CUDA), so device "
                "time, categories and kernel findings are unknown"
            )
        elif missing and missing / klaunch.size >= 0.01:
            out.append(
                f"{missing} of {klaunch.size} kernel launches ({100 * missing / klaunch.size:.1f}%) have "
                "no device op in the trace (the profiler's device buffer overflowed, or the trace was "
                "cut): device totals and regions miss that work"
            )
    elif links.gpu_rows.size == 0 and not_read(trace):
        pass  # device work of categories not read: DEVICE_EVENTS_NOT_ANALYSED says so, not "CPU-only"
    elif links.gpu_rows.size == 0 and trace.device_properties:
        # deviceProperties lists a GPU, yet nothing ran on it: not a CPU-only trace
        n_cpu = int((trace.kind == Kind.CPU_OP).sum())
        out.append(
            f"the trace lists {len(trace.device_properties)} GPU(s) in deviceProperties but holds no "
            f"launches and no device ops ({n_cpu} CPU ops): device activity was not recorded (profile "
            "with ProfilerActivity.CUDA, and a step that runs on the GPU), so device time, categories "
            "and kernel findings are unknown"
        )
    elif links.gpu_rows.size == 0 and (trace.kind == Kind.CPU_OP).any():
        out.append("no device ops and no launches: a CPU-only trace (device analysis does not apply)")
    # device ops that no launch put there (graph kernels have their graph launch)
    unlaunched = int((links.launch < 0).sum())
    if unlaunched and not rows.size:
        out.append(
            f"no launch events: the trace holds {unlaunched} device ops and no runtime calls (a "
            "device-only trace, or the CPU activity was not recorded), so their CPU ops, launch APIs "
            "and the host's idle causes are unknown; regions own device ops by time"
        )
    elif unlaunched and unlaunched / links.gpu_rows.size >= 0.01:
        out.append(
            f"{unlaunched} of {links.gpu_rows.size} device ops "
            f"({100 * unlaunched / links.gpu_rows.size:.1f}%) have no launch event (lost by the "
            "profiler, or replayed from a graph whose launch was not recorded): their CPU ops are "
            "unknown; regions own them by time (attribution rules gpu_user_annotation, window)"
        )
    if links.by_external:
        facts.linked_by_external_id = links.by_external
    # clock skew: a device op that starts before the call that launched it
    has = links.launch >= 0
    if has.any():
        early = trace.ts[links.gpu_rows[has]] - trace.ts[links.launch[has]]
        skew = early < -1.0  # 1 us of rounding is ordinary
        facts.device_ops_before_launch = int(skew.sum())
        if skew.any():
            out.append(
                f"{int(skew.sum())} device ops start before their launch call (by up to "
                f"{-float(early.min()):.0f} us): host and device clocks disagree, so idle and gap "
                "times are approximate"
            )
    dropped = {k: v for k, v in trace.dropped.items() if k.split("/")[0].lower() not in _ORDINARY_DROPS}
    if dropped:
        facts.dropped_categories = dropped
    # every other category the loader dropped, with its count and why that is no gap in the
    # analysis (metadata and process labels aside): nothing is dropped silently
    skipped = {
        k: v
        for k, v in trace.dropped.items()
        if k not in dropped and k.split("/")[-1] not in ("M",) and k.split("/")[0] not in ("-", "Trace")
    }
    if skipped:
        facts.not_analysed = skipped
        listed = ", ".join(
            f"{k.split('/')[0]} {v:,}" + (f" ({_WHY[k.split('/')[0]]})" if k.split("/")[0] in _WHY else "")
            for k, v in sorted(skipped.items(), key=lambda kv: -kv[1])
        )
        out.append(f"events not analysed (trace.gaps.not_analysed): {listed}")
    return out, facts


# what each skipped category holds, and where the analysis reads the same fact instead
_WHY = {
    "cpu_instant_event": "memory and marker instants",
    "cpu_instant": "memory and marker instants",
    "overhead": "profiler overhead",
    "cuda_profiler_range": "profiler ranges",
}


# categories the analysis does not need (python stacks, instants, metadata): not a gap
_ORDINARY_DROPS = {
    "python_function",
    "cpu_instant_event",
    "trace",
    "-",
    "",
    "overhead",
    "cuda_profiler_range",
    "cpu_instant",
    "python",
}
