"""The environment a run happened in, and the peak it is measured against."""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any

import msgspec

from attnprof.device import SPEC_SOURCE, peak_for, spec_device
from attnprof.errors import UserError
from attnprof.harness.load import LoadMeter
from attnprof.outputs import write_atomic
from attnprof.records import Environment, PeakProvenance

__all__ = ["cache_path", "cpu_model", "environment", "measured_peak", "peak_text", "run_peak"]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# /proc/cpuinfo flags that give a CPU native matmul in a 16-bit dtype (oneDNN uses them); without
# one, bf16/fp16 matmuls are emulated through fp32 conversions: 45x slower than fp32 measured for
# a [8,512,64] x [8,64,512] bf16 bmm on an AVX2 EPYC (217 ms against 4.9 ms)
_NATIVE_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags (Linux /proc/cpuinfo), or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def cpu_dtype_note(device: str, dtype: str, flags: set[str] | None = None) -> str | None:
    """A line for a 16-bit dtype on a CPU whose flags (default: this machine's) show no native
    matmul for it, else None (also where the flags cannot be read: no guess)."""
    flags = cpu_flags() if flags is None else flags
    native = _NATIVE_FLAGS.get(dtype)
    if not device.startswith("cpu") or native is None or flags is None or flags & set(native):
        return None
    return (
        f"{dtype} on this CPU: its flags have neither {' nor '.join(native)}, so {dtype} matmuls are "
        f"emulated and run many times slower than fp32 (fp32 is this CPU's fast path)"
    )


def environment(device: str) -> Environment:
    import torch

    from attnprof._version import __version__

    env = Environment(
        attnprof_version=__version__,
        torch_version=str(torch.__version__),
        python=platform.python_version(),
        platform=platform.platform(),
        host=socket.gethostname(),
        device=device,
        device_name=cpu_model(),
        cpu_model=cpu_model(),
        threads=torch.get_num_threads(),
        float32_matmul_precision=str(torch.get_float32_matmul_precision()),
    )
    if device.startswith("cuda"):
        # fp32 GEMMs (sdpa-math's upcast, fp32 runs) take TF32 tensor cores when these allow it
        env.cuda_matmul_allow_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        env.cudnn_allow_tf32 = bool(torch.backends.cudnn.allow_tf32)
        idx = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(idx)
        env.device_name = props.name
        env.compute_capability = f"{props.major}.{props.minor}"
        env.cuda_version = str(torch.version.cuda) if torch.version.cuda else None
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        env.cudnn_version = str(cudnn) if cudnn else None
        env.gpu_memory_bytes = int(props.total_memory)
    return env


# CPU peak: square GEMMs of growing size in the run's dtype and thread count, best of _REPEATS
# each after one warm-up call, the largest TFLOP/s winning (small GEMMs underrate a many-core
# CPU; 1024 alone did). Sizes grow up to 4096 while one call stays under _CALL_LIMIT_S, so a slow
# dtype (bf16 without native support: ~0.5 GFLOP/s on a 2-core VM) cannot take minutes.
# A 16-bit dtype's peak on CPU is the better of its own GEMM and fp32's: a kernel may compute in
# fp32 from 16-bit inputs (SDPA's flash path does), and a peak below what a kernel reaches is no peak.
_CPU_SIZES = (512, 1024, 2048, 4096)
_CALL_LIMIT_S = 0.3
_REPEATS = 3
_SIZE_BUDGET_S = 0.4  # per size: more calls than _REPEATS while they fit
_CACHE_SCHEMA = "attnprof.peaks/1"


def cache_path() -> Path:
    """Where measured peaks are kept per machine: $ATTNPROF_CACHE_DIR, else $XDG_CACHE_HOME/attnprof,
    else ~/.cache/attnprof; the file is peaks.json."""
    root = os.environ.get("ATTNPROF_CACHE_DIR")
    if root:
        return Path(root) / "peaks.json"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "attnprof" / "peaks.json"


def _gemm_tflops(device: str, dtype: str, n: int, repeats: int) -> tuple[float, float]:
    """(best TFLOP/s, best seconds) of an n x n x n matmul in `dtype`: at least `repeats` calls,
    and more while they add up to under _SIZE_BUDGET_S. On a shared machine a short call can land
    in a quiet moment that a long one never gets, so the best of many is the figure to trust."""
    import torch

    from attnprof.workload import Workload

    tdt = Workload(dtype=dtype, device="cpu").torch_dtype
    a = torch.randn(n, n, device=device).to(tdt)
    b = torch.randn(n, n, device=device).to(tdt)
    cuda = device.startswith("cuda")
    best = float("inf")
    spent = 0.0
    i = 0
    while i <= repeats or spent < _SIZE_BUDGET_S:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.matmul(a, b)
        if cuda:
            torch.cuda.synchronize()
        took = time.perf_counter() - t0
        if i:  # the first call is a warm-up (packing buffers, thread pool start)
            best = min(best, took)
            spent += took
        i += 1
    return 2.0 * n**3 / best / 1e12, best


def _cache_key(env: Environment, dtype: str, threads: int) -> str:
    return "|".join((env.host, env.device, env.device_name, dtype, f"{threads} threads", env.torch_version))


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _CACHE_SCHEMA:
        return {}
    peaks = data.get("peaks")
    return peaks if isinstance(peaks, dict) else {}


def _save_cache(path: Path, peaks: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # atomic: two runs writing at once leave one whole file
        write_atomic(path, json.dumps({"schema": _CACHE_SCHEMA, "peaks": peaks}, indent=2))
    except (OSError, UserError):
        pass  # a read-only home: measure again next time


def peak_text(prov: PeakProvenance) -> str:
    """The provenance in English: environment.peak_source (reports render the record itself
    through their catalogs, report/peak_view.py)."""
    if prov.kind == "spec":
        return f"{prov.spec_device}: {SPEC_SOURCE} ({prov.dtype})"
    what = (
        f"measured: best square GEMM of {', '.join(prov.tried)} (best: {prov.best_at}), best of >= "
        f"{prov.repeats} calls ({prov.budget_s:g} s) each, {prov.threads} threads, on {prov.host} "
        f"{prov.measured_at} UTC"
    )
    if prov.cached_in:
        return f"{what}; cached in {prov.cached_in}"
    return f"{what}; not cached: {'; '.join(prov.not_cached)}" if prov.not_cached else what


def _cached(hit: object) -> tuple[float, PeakProvenance] | None:
    """A cache entry with its provenance as data; an entry an older attnprof wrote (its English
    "what" alone) counts as none, so the peak is measured once more and kept with it."""
    if not isinstance(hit, dict) or not isinstance(hit.get("tflops"), (int, float)):
        return None
    try:
        return float(hit["tflops"]), msgspec.convert(hit["provenance"], PeakProvenance)
    except (KeyError, msgspec.ValidationError):
        return None


def measured_peak(env: Environment, dtype: str, *, refresh: bool = False) -> tuple[float, PeakProvenance]:
    """The best GEMM TFLOP/s this machine reaches in `dtype` with the current thread count, and
    its provenance. Cached per (host, device, dtype, threads, torch) in cache_path(); a cached
    figure is used as is unless `refresh`, and a new measurement only ever raises it (a busy
    moment measures low, never high)."""
    import torch

    threads = torch.get_num_threads()
    path = cache_path()
    key = _cache_key(env, dtype, threads)
    peaks = _load_cache(path)
    hit = _cached(peaks.get(key))
    if hit is not None and not refresh:
        return hit[0], msgspec.structs.replace(
            hit[1], cached_in=str(path), not_cached=[], not_cached_codes=[]
        )
    cuda = env.device.startswith("cuda")
    sizes = (4096,) if cuda else _CPU_SIZES
    dtypes = (dtype,) if cuda or dtype in ("fp32", "fp64") else (dtype, "fp32")
    best, best_at, tried = 0.0, "", []
    meter = LoadMeter().start()
    for dt in dtypes:
        for n in sizes:
            tflops, seconds = _gemm_tflops(env.device, dt, n, _REPEATS)
            tried.append(f"{dt} {n}")
            if tflops > best:
                best, best_at = tflops, f"{dt} n = {n}"
            if seconds > _CALL_LIMIT_S:
                break
    prov = PeakProvenance(
        kind="measured",
        dtype=dtype,
        tried=tried,
        best_at=best_at,
        repeats=_REPEATS,
        budget_s=_SIZE_BUDGET_S,
        threads=threads,
        host=env.host,
        measured_at=time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    )
    load = meter.stop(None)
    # a cached figure stands against a lower one and against any measured on a busy machine
    if hit is not None and (hit[0] >= best or load.unreliable):
        return hit[0], msgspec.structs.replace(hit[1], cached_in=str(path), not_cached=[])
    if load.unreliable:  # a busy machine measures low: use it for this run, but do not keep it
        return best, msgspec.structs.replace(
            prov, cached_in=None, not_cached=list(load.reasons), not_cached_codes=list(load.reason_codes)
        )
    peaks[key] = {"tflops": best, "what": peak_text(prov), "provenance": msgspec.to_builtins(prov)}
    _save_cache(path, peaks)
    return best, msgspec.structs.replace(prov, cached_in=str(path))


def run_peak(env: Environment, dtype: str) -> tuple[float, PeakProvenance]:
    """Peak TFLOP/s for this device and dtype, and where the figure comes from.

    GPUs in attnprof.device.PEAKS use the dense bf16/fp16 spec figure for half precision. Everything else
    (CPUs, fp32, unknown GPUs) is measured by measured_peak: square GEMMs in the run's dtype and
    thread count, a peak we can actually reach, never a sparse or marketing figure.
    """
    if env.device.startswith("cuda") and dtype in ("bf16", "fp16"):
        # the table of dense spec peaks: one table for runs and for any trace
        tflops, _tbps, _source = peak_for(env.device_name, dtype)
        spec = spec_device(env.device_name)
        if tflops is not None and spec is not None:
            return tflops, PeakProvenance(kind="spec", dtype=dtype, spec_device=spec)
    return measured_peak(env, dtype)
