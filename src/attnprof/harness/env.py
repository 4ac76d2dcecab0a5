"""The environment a run happened in, and the peak it is measured against."""

from __future__ import annotations

import os
import platform
import socket
import time
from functools import cache

from attnprof.records import Environment

__all__ = ["cpu_model", "environment", "peak_for"]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str) -> Environment:
    import torch

    from attnprof import __version__

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
    )
    if device.startswith("cuda"):
        idx = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(idx)
        env.device_name = props.name
        env.compute_capability = f"{props.major}.{props.minor}"
        env.cuda_version = str(torch.version.cuda) if torch.version.cuda else None
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        env.cudnn_version = str(cudnn) if cudnn else None
        env.gpu_memory_bytes = int(props.total_memory)
    return env


@cache
def _measured_gemm_tflops(device: str, dtype: str, n: int) -> float:
    import torch

    from attnprof.workload import Workload

    tdt = Workload(dtype=dtype, device="cpu").torch_dtype
    a = torch.randn(n, n, device=device).to(tdt)
    b = torch.randn(n, n, device=device).to(tdt)
    best = float("inf")
    cuda = device.startswith("cuda")
    for _ in range(5):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.matmul(a, b)
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e12


def peak_for(env: Environment, dtype: str) -> tuple[float, str]:
    """Peak TFLOP/s for this device and dtype, and where the figure comes from.

    GPUs in analysis.roofline.PEAKS use the dense bf16/fp16 spec figure for half precision. Everything else
    (CPUs, fp32, unknown GPUs) is measured here with a square GEMM in the run's dtype, best of 5:
    a peak we can actually reach, never a sparse or marketing figure.
    """
    if env.device.startswith("cuda") and dtype in ("bf16", "fp16"):
        # the analyser's table of dense spec peaks: one table for runs and for any trace
        from attnprof.analysis.roofline import peak_for as spec_peak

        tflops, _tbps, source = spec_peak(env.device_name, dtype)
        if tflops is not None:
            return tflops, f"{source} ({dtype})"
    n = 4096 if env.device.startswith("cuda") else 1024
    threads = os.environ.get("OMP_NUM_THREADS")
    what = f"measured: {n}x{n} {dtype} matmul, best of 5" + (f", {threads} threads" if threads else "")
    return _measured_gemm_tflops(env.device, dtype, n), what
