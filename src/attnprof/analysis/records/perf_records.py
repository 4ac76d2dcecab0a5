"""The per-op performance model's records: `ops` and `perf_model` of attnprof.analysis/1.

Computed by analysis/perf/perf_model.py; TraceAnalysis carries them (analysis/records/result.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["OpPerf", "OpTime", "PerfModel", "Unmodelled"]


class OpPerf(msgspec.Struct, kw_only=True):
    """One (op name, input dims, input types): its calls, what each costs and how fast it ran."""

    name: str
    input_dims: list[Any]
    input_types: list[Any]
    count: int  # calls with device work (GPU trace) or all calls (CPU-only trace)
    device_time_us: float | None  # summed over calls: the GPU ops each call launched
    cpu_time_us: float | None  # summed over calls, on a CPU-only trace (the op's own duration)
    flops: float | None  # per call; None: not measured (flops_basis says why)
    bytes: float | None  # per call; None: not measured (an input's element size unknown)
    tflops: float | None  # achieved, median over calls
    tbps: float | None
    intensity: float | None  # FLOPs per byte; None for an op that moves no bytes
    bound: str | None  # "compute" or "memory" against the roofs; None when a roof is unknown
    pct_of_bound: float | None  # achieved as % of the bound's roof (may exceed 100: flagged)
    formula: str  # which model counted it (op_model.py)
    family: str  # gemm, attention, conv, norm, softmax, elementwise, reduction, embedding, copy
    dtype: str  # whose peak bounds it
    peak_tflops: float | None = None  # the roofs this op is judged against
    peak_tbps: float | None = None
    pct_time: float | None = None  # share of the device (or CPU) time the model reads
    nested: bool = False  # inside another modelled op: its time is also that op's
    decode: bool = False  # decode-shaped attention: judged by bytes
    # how the FLOPs are known: "exact"; "dense upper bound" (FlexAttention whose BlockMask
    # sparsity is not recorded: every pair counted); "computed blocks" (the run recorded it);
    # "not measured" (flops None: a varlen op whose cu_seqlens values are not recorded)
    flops_basis: str = "exact"
    # how the FLOPs were counted (op_args.flops_convention): "dense", "causal pairs S(S+1)/2"
    # (TraceLens: S²/2), "window pairs", "per element", "dense upper bound"
    flops_convention: str | None = None


class OpTime(msgspec.Struct, kw_only=True):
    name: str
    time_us: float


class Unmodelled(msgspec.Struct, kw_only=True):
    """Device (or CPU) time the model does not cover, and why."""

    time_us: float
    pct: float | None
    no_op_us: float  # GPU ops no cpu_op launched (no launch event, or outside every op)
    no_shapes_us: float  # launched by ops recorded without input shapes
    not_modelled_us: float  # launched by ops with shapes but no formula (their names below)
    top_not_modelled: list[OpTime] = []  # the ops with no formula, the most time first


class PerfModel(msgspec.Struct, kw_only=True):
    """The whole trace through the per-op model (outermost modelled ops only: a kernel counts once)."""

    basis: str
    device: str | None
    model_flops: float
    modelled_time_us: float
    total_time_us: float  # device work (sum of GPU-op durations), or CPU time of a CPU-only trace
    busy_time_us: float  # union of device-op intervals (CPU: of top-level cpu ops)
    achieved_tflops: float | None  # model_flops over busy_time_us
    dtype: str | None  # the dtype of most matrix FLOPs
    peak_tflops: float | None
    peak_tbps: float | None
    peak_source: str | None
    # where the peak comes from: "spec" (the table's part peak_device), "flag" (--peak),
    # "measured" (the harness's GEMM on this CPU); None without a peak
    peak_kind: str | None
    peak_device: str | None
    mfu_pct: float | None  # achieved_tflops against peak_tflops of that dtype
    compute_bound_pct: float | None
    memory_bound_pct: float | None
    bound_unknown_pct: float | None  # modelled, but a roof is unknown
    unmodelled: Unmodelled
    shapes_recorded: bool  # whether any op carried Input Dims (record_shapes=True)
    note: str = ""
    # modelled ops whose FLOPs are not measured (op_varlen.py): their time, and its share of
    # total_time_us; model_flops leaves them out
    not_measured_time_us: float = 0.0
    not_measured_pct: float | None = None
    # the part of model_flops that is a dense upper bound (op_flex.py): achieved_tflops and
    # mfu_pct are upper bounds when it is above 0
    upper_bound_flops: float = 0.0
