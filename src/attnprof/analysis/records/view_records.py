"""The device-time views of a TraceAnalysis ("attnprof.analysis/1", documented in result.py):
graph replays (analysis/replay/replay.py), torch.compile's code (analysis/replay/compiled.py) and serving
phases (analysis/breakdown/phases.py). Field order is JSON key order."""

from __future__ import annotations

import msgspec

__all__ = [
    "Compiled",
    "CompiledGraph",
    "CompiledKernel",
    "GraphReplays",
    "Phase",
    "PhaseOp",
    "Phases",
    "ReplayedKernel",
    "StepBatch",
]


class ReplayedKernel(msgspec.Struct, kw_only=True):
    """A replayed kernel and the captured CPU op that launched it (one row per kernel and op)."""

    name: str  # shortened
    op: str
    frame: str | None  # the innermost user Python frame around the op (attnprof.analysis.attribution.frames)
    module: str | None  # the innermost nn.Module frame around it
    count: int
    time_us: float


class GraphReplays(msgspec.Struct, kw_only=True):
    """Device ops replayed by CUDA/HIP graph launches, and how many of them know the CPU op that
    launched them at capture (attnprof.analysis.replay.replay, with a capture trace)."""

    replayed_ops: int = 0
    replayed_us: float = 0.0  # their summed durations (device waits left out, as in share)
    attributed_ops: int = 0  # linked to their captured CPU op
    unattributed_us: float = 0.0  # replayed device time with the graph launch as its only source
    unattributed_pct: float | None = None  # of share.device_time_us; null without device time
    capture: str | None = None  # the capture trace's file name; null: none given
    graphs_captured: int = 0
    graph_launches: int = 0
    replays_matched: int = 0
    replays_unmatched: int = 0
    config_differs: int = 0  # matched ops whose grid or block differs from the capture's
    imported_rows: int = 0  # CPU ops and ranges appended from the capture trace
    matched_by: str = ""
    kernels: list[ReplayedKernel] = []  # the top 20 by time, with their captured op
    # replays matched through the graph id of an earlier matched replay of the same graph
    replays_by_graph_id: int = 0
    # distinct graphs the replayed kernels belong to, by their recorded graph ids; null: none
    # records one
    graphs_replayed: int | None = None


class CompiledGraph(msgspec.Struct, kw_only=True):
    name: str  # the range's name: "CompiledFxGraph <hash>", "Torch-Compiled Region: 0/0"
    device_ops: int
    time_us: float
    pct: float | None  # of share.device_time_us


class CompiledKernel(msgspec.Struct, kw_only=True):
    name: str  # shortened
    kind: str | None  # inductor's: pointwise, reduction, persistent reduction, template, foreach
    fused_ops: list[str] | None  # the aten ops its name lists; null: not an inductor name
    graph: str | None  # the compiled range of its first launch; null: compiled by name only
    frame: str | None = None  # of its first launch (attnprof.analysis.attribution.frames)
    module: str | None = None
    count: int
    time_us: float
    by: str  # "range", "name" (an inductor name outside every compiled range), or both


class Compiled(msgspec.Struct, kw_only=True):
    """Device time in torch.compile's generated code (attnprof.analysis.replay.compiled)."""

    time_us: float = 0.0
    pct: float | None = None  # of share.device_time_us
    name_only_us: float = 0.0  # inductor kernels outside every compiled range, counted by name
    ranges: int = 0  # compiled range instances holding device work
    graphs: list[CompiledGraph] = []
    kernels: list[CompiledKernel] = []  # the top 20 by time


class StepBatch(msgspec.Struct, kw_only=True):
    """A serving step's batch as its range name records it (vLLM's execute_... ranges); null
    where the name does not say."""

    tokens: int | None = None
    prefill_requests: int | None = None
    prefill_query_tokens: int | None = None
    prefill_kv_tokens: int | None = None
    decode_requests: int | None = None
    decode_query_tokens: int | None = None
    decode_kv_tokens: int | None = None


class PhaseOp(msgspec.Struct, kw_only=True):
    op: str  # the launching CPU op
    device_ops: int
    device_us: float


class Phase(msgspec.Struct, kw_only=True):
    phase: str  # prefill, decode, mixed (both in one step: not split)
    steps: int  # step ranges of this phase (0 when found by kernel family)
    device_ops: int
    device_us: float
    pct: float | None  # of the device time
    attention_us: float
    attention_pct: float | None  # of this phase's device time
    ops: list[PhaseOp] = []  # the launching CPU ops with the most device time
    batches: list[StepBatch] = []  # per step, where its range name records the batch
    # the per-op model (attnprof.analysis.perf.op_model) over the ops that launched this phase's work
    modelled_us: float = 0.0  # device time of ops the model has a formula and shapes for
    model_flops: float = 0.0
    model_bytes: float = 0.0
    achieved_tflops: float | None = None  # model_flops over modelled_us
    achieved_tbps: float | None = None
    attention_modelled_us: float = 0.0
    attention_tbps: float | None = None  # attention's bytes over its time: decode is judged by it
    attention_bw_pct: float | None = None  # of the device's HBM peak, where one is known


class Phases(msgspec.Struct, kw_only=True):
    """Prefill / decode split of a serving trace (attnprof.analysis.breakdown.phases); empty when the
    trace names no phase and its attention kernels are of one phase or none."""

    source: str = ""  # "step ranges", or "attention kernel families (other ops: unknown)"
    phases: list[Phase] = []
    unknown_us: float = 0.0  # device time in no phase
    unknown_pct: float | None = None
