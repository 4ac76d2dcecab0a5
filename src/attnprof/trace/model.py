"""The in-memory trace: columns of numpy arrays, names interned once.

A trace with a million events must not become a million Python dicts (HTA spends most of its load
time there), so every event the analysis needs is one row in a set of parallel arrays, and every
string is an index into a table of unique strings. Events the analysis never reads (Python stack
frames, memory instants, metadata) are counted and dropped at load time.

Row kinds (``Kind``) come from the event category, across PyTorch versions:

============== ========================================= ===================================
kind           modern category (2022-2026)               legacy category (~2021)
============== ========================================= ===================================
CPU_OP         cpu_op                                    Operator; none (PyTorch 1.x export)
ANNOTATION     user_annotation                           (Operator named ProfilerStep#N)
GPU_ANNOTATION gpu_user_annotation                       -
RUNTIME        cuda_runtime                              Runtime
DRIVER         cuda_driver                               -
KERNEL         kernel                                    Kernel
MEMCPY         gpu_memcpy                                Memcpy
MEMSET         gpu_memset                                Memset
DEVICE         mtia_ccp_events (other accelerators'      -
               device-side compute, DMA, sync events)
SYNC           cuda_sync (CUPTI synchronisation records) -
============== ========================================= ===================================

RUNTIME also covers xpu_runtime, mtia_runtime and privateuse1_runtime, DRIVER xpu_driver and
privateuse1_driver. Every kept row's category is in ``cat`` (index into ``categories``).

Missing integers are -1 and missing floats NaN: a kernel without a launch event, or without
occupancy arguments, is ordinary in real traces.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEVICE_KINDS",
    "GPU_KINDS",
    "KEEP_ALL",
    "CommArgs",
    "Keep",
    "Kind",
    "RowMap",
    "Trace",
    "Unread",
    "nesting_order",
    "row_columns",
    "top_sums",
    "unique",
]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int8]
# ids: int32 where every id of the trace fits, else int64 (trace/columns.py Builder._id_dtype)
Ids = npt.NDArray[np.int32] | npt.NDArray[np.int64]


class Kind(enum.IntEnum):
    CPU_OP = 0
    ANNOTATION = 1
    GPU_ANNOTATION = 2
    RUNTIME = 3
    DRIVER = 4
    KERNEL = 5
    MEMCPY = 6
    MEMSET = 7
    DEVICE = 8
    PYTHON = 9  # python_function frames (with_stack=True): what the host's Python was running
    # cuda_sync: CUPTI's record of a synchronisation (Stream Wait Event, Event Sync, Stream Sync,
    # Context Sync) on the lane of the stream it concerns; its correlation is the runtime call's
    SYNC = 10


GPU_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
# every device-side kind: CUDA/ROCm/XPU kernels, memcpys and memsets, and other accelerators' events
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.DEVICE)


V = TypeVar("V")


@dataclass(frozen=True)
class Keep:
    """What a load keeps beyond the events every analysis reads. The full analysis reads both
    (the idle analysis and the user frame read Python frames, the per-op model and the unfused
    chains the recorded inputs); a caller that reads neither (the harness's per-forward op
    counts) loads without them: with_stack traces hold more Python frames than ops."""

    frames: bool = True  # python_function events (Kind.PYTHON rows); else dropped and counted
    inputs: bool = True  # cpu ops' recorded inputs: Trace.inputs, shapes and conversions


KEEP_ALL = Keep()


@dataclass(frozen=True)
class CommArgs:
    """What PyTorch's c10d records about one collective (record_param_comms, whose args Kineto
    copies onto the collective's kernel): None where a field is not recorded. Sizes are element
    counts; dtype is c10's scalar type name (Float, BFloat16, ...)."""

    kind: str | None = None  # "Collective name": allreduce, allgather_into_tensor_coalesced, ...
    group: str | None = None  # "Process Group Name"
    group_desc: str | None = None  # "Process Group Description" (default_pg, ...)
    group_ranks: str | None = None  # "Process Group Ranks", as written ("[0, 1, 2, 3]")
    group_size: int | None = None  # "Group size"
    seq: int | None = None  # "Seq": the collective's sequence number in its process group
    in_nelems: int | None = None  # "In msg nelems"
    out_nelems: int | None = None  # "Out msg nelems"
    dtype: str | None = None


@dataclass(frozen=True)
class Unread:
    """The events of one category the loader does not read (trace/unread.py): how many, and how
    many of them are device work no analysis sees."""

    category: str  # as written; "" for events without a category
    count: int
    on_device_pid: int  # on a pid the trace shows is a device's (its device ops, a "GPU n" label)
    device_arg: int  # carrying args "device"
    # complete events ("X": work with a duration) on a device pid or with a device arg: device
    # work the analysis does not read (a CUPTI range profiler's cuda_profiler_range events)
    device_side: int


class RowMap(Mapping[int, V], Generic[V]):
    """row -> value for some rows, held as two arrays (the rows, ascending, and an index into the
    distinct values) instead of a dict: a dict entry per row cost about 100 bytes, 120 MB for the
    1.2M recorded ops of the 1.2 GB benchmark trace (docs/benchmarks.md). Reads as a dict does."""

    __slots__ = ("distinct", "idx", "rows")

    def __init__(self, rows: npt.NDArray[np.int64], idx: npt.NDArray[np.int32], distinct: list[V]) -> None:
        self.rows, self.idx, self.distinct = rows, idx, distinct

    def _pos(self, row: object) -> int:
        if not isinstance(row, int | np.integer):
            return -1
        pos = int(np.searchsorted(self.rows, row))
        return pos if pos < self.rows.size and self.rows[pos] == row else -1

    def __getitem__(self, row: int) -> V:
        pos = self._pos(row)
        if pos < 0:
            raise KeyError(row)
        return self.distinct[int(self.idx[pos])]

    def __contains__(self, row: object) -> bool:
        return self._pos(row) >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows.tolist())

    def __len__(self) -> int:
        return int(self.rows.size)

    def items(self) -> Any:
        distinct = self.distinct
        return zip(self.rows.tolist(), [distinct[i] for i in self.idx.tolist()], strict=True)


def value_ids(
    m: Mapping[int, V], rows: npt.NDArray[np.integer[Any]]
) -> tuple[npt.NDArray[np.int64], list[V]]:
    """Per row, an index into the returned distinct values (-1: the row has none), by one binary
    search over the map's columns (row_columns)."""
    keys, idx, values = row_columns(m)
    return ids_at(keys, idx, rows), values


def ids_at(keys: I64, idx: npt.NDArray[np.signedinteger[Any]], rows: npt.NDArray[np.integer[Any]]) -> I64:
    """Per row, idx at its place in keys (ascending), -1 where keys lacks it."""
    if not keys.size:
        return np.full(rows.size, -1, np.int64)
    pos = np.minimum(np.searchsorted(keys, rows), keys.size - 1)
    return np.where(keys[pos] == rows, idx[pos], -1).astype(np.int64)


def row_columns(m: Mapping[int, V]) -> tuple[I64, npt.NDArray[np.signedinteger[Any]], list[V]]:
    """(rows ascending, per row its value's index into the distinct values, the distinct values)
    of a row -> value map: a RowMap's own arrays as they are (its index int32: no int64 copy of
    the size of the recorded ops), or those of a dict (a capture trace's rows attached by
    attnprof.analysis.replay.replay), so that a caller reads all rows without a lookup each."""
    if isinstance(m, RowMap):
        return m.rows.astype(np.int64, copy=False), m.idx, m.distinct
    # in C, not a Python line per row: the keys sorted, the values taken in that order, each
    # numbered by its first appearance
    rows = np.fromiter(m.keys(), np.int64, count=len(m))
    order = np.argsort(rows, kind="stable")
    ordered = np.fromiter(m.values(), object, count=len(m))[order].tolist()
    try:
        ids = {v: i for i, v in enumerate(dict.fromkeys(ordered))}
    except TypeError:  # values that cannot be keys (shape lists): each row its own
        return rows[order], np.arange(len(ordered), dtype=np.int64), ordered
    return rows[order], np.fromiter(map(ids.__getitem__, ordered), np.int64, count=len(ordered)), list(ids)


@dataclass
class Trace:
    """One trace as columns. Row i of every event column describes the same event.

    Event columns (one row per kept event): kind, name (index into names), ts and dur (us),
    lane (index into lanes: one (pid, tid) pair), corr (CUDA correlation id), ext (External id),
    seq (autograd "Sequence number" of a cpu_op: a forward op and its backward op share it),
    cat (index into categories: the event's category as written).
    Kernel columns (one row per kernel, kernel_rows[j] is its event row): registers, shared_mem
    (bytes, static + dynamic), block_threads, grid_blocks, achieved (est. achieved occupancy %),
    device.
    Flow columns (ac2g / async / fwdbwd s and f events): flow_start (bool), flow_fwdbwd (bool: a
    forward -> backward flow, not a launch flow), flow_id, flow_lane, flow_ts.
    The four id columns (corr, ext, seq, flow_id) are int32 where every id of the trace fits in
    it, else all four int64: exact either way, and half the memory in the usual case; so is each
    integer kernel column, on its own.
    """

    source: str
    names: list[str]
    lanes: list[tuple[str, str]]
    kind: I8
    name: I32
    ts: F64
    dur: F64
    lane: I32
    corr: Ids
    ext: Ids
    seq: Ids
    cat: I32
    categories: list[str]
    kernel_rows: I64
    registers: Ids
    shared_mem: Ids
    block_threads: Ids
    grid_blocks: Ids
    achieved: F64
    device: Ids
    flow_start: npt.NDArray[np.bool_]
    flow_fwdbwd: npt.NDArray[np.bool_]
    flow_id: Ids
    flow_lane: I32
    flow_ts: F64
    # cpu-op row -> (first input's dtype, target dtype code) for dtype conversions (aten::to,
    # aten::_to_copy), when the trace was recorded with record_shapes
    conversions: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)
    # cpu-op row -> "Input Dims" (list of shapes) of GEMM and softmax ops, with record_shapes
    # (a RowMap from the loader: one list per distinct "Input Dims", shared by the ops that have it)
    shapes: Mapping[int, list[Any]] = field(default_factory=dict)
    # runtime/driver row -> (kernel name, grid blocks, block threads) where the launch call names
    # its kernel (ROCm's hip*LaunchKernel args "kernel"); -1 for a size not recorded
    launch_kernels: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    # kernel or record_param_comms cpu-op row -> its collective's recorded args (process group,
    # sequence number, sizes), for the rows that carry any (attnprof.analysis.ranks.collectives)
    comms: dict[int, CommArgs] = field(default_factory=dict)
    # cuda_sync row -> (wait_on_stream, wait_on_cuda_event_record_corr_id): the stream whose
    # event a stream wait or event sync waited on, and the correlation of the cudaEventRecord
    # that recorded it; -1 where not recorded
    sync_waits: dict[int, tuple[int, int]] = field(default_factory=dict)
    # kernel columns of graph replays (aligned with kernel_rows; -1 where not recorded): the
    # kernel's graph ("graph id") and node ("graph node id"), the same in every replay of it
    graph_id: Ids = field(default_factory=lambda: np.zeros(0, np.int64))
    graph_node: Ids = field(default_factory=lambda: np.zeros(0, np.int64))
    # per event row, a CPU op known by other means to have launched this device op (a graph
    # replay's kernel -> the op that launched it while the graph was captured,
    # attnprof.analysis.replay.replay); -1 where none. Empty (the usual case) when nothing supplies one.
    # attnprof.analysis.attribution.links.link reads it before the launch's own op.
    op_link: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    # rows from this index on were imported from another trace (a capture trace's CPU ops and
    # their ranges, on lanes of their own, on that trace's clock): they explain device ops but are
    # not this trace's own events (no region, count or time window includes them); -1: none
    imported_from: int = -1
    # cpu-op row -> its raw (Input Dims, Input type, Concrete Inputs) JSON, for every op recorded
    # with record_shapes (analysis/perf/perf_model.py decodes each distinct one once)
    inputs: Mapping[int, tuple[bytes, bytes, bytes]] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    # every category the loader did not read (metadata aside), device-side work first
    unread: list[Unread] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    raw_bytes: int = 0
    # tables derived from the names (ids of the names a rule looks for), made once per trace by
    # whoever needs them: keyed by what they are and by how many names there are, which an
    # import of another trace's events grows
    memo: dict[tuple[str, int], Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_events(self) -> int:
        return int(self.kind.shape[0])

    def own(self, rows: I64) -> I64:
        """The given rows less those imported from another trace (Trace.imported_from)."""
        return rows if self.imported_from < 0 else rows[rows < self.imported_from]

    def rows(self, *kinds: Kind) -> I64:
        """Rows of the given kinds, in file order (a new array, the caller's to change)."""
        mask = self.kind == kinds[0] if len(kinds) == 1 else np.isin(self.kind, [int(k) for k in kinds])
        # copy=False: flatnonzero's index is int64 already where intp is (no second n-sized copy)
        return np.flatnonzero(mask).astype(np.int64, copy=False)


def nesting_order(ts: np.ndarray, dur: np.ndarray, lane: np.ndarray | None = None) -> np.ndarray:
    """The order a walk of nested ranges needs: by lane (when given), by start, the longer first
    at one start, ties as given; the same as np.lexsort((-dur, ts)) or ((-dur, ts, lane)).

    Two stable sorts of keys that come nearly in order (a trace's events are written about in
    time order, which timsort takes in about linear time), then only the runs of equal starts
    sorted by duration. lexsort sorts every duration first, and durations come in no order: 12 ms
    against 1.9 over the 95k CPU ops of the 48 MB benchmark trace. The loader's times are finite
    numbers (no NaN, which compares unequal to itself)."""
    o = np.argsort(ts, kind="stable")
    if lane is not None:
        o = o[np.argsort(lane[o], kind="stable")]
    t = ts[o]
    same = t[1:] == t[:-1]
    if lane is not None:
        ln = lane[o]
        same &= ln[1:] == ln[:-1]
    if same.any():
        run = np.concatenate([[0], np.cumsum(~same)])  # per position, its run of equal keys
        tied = np.zeros(o.size, bool)
        tied[1:] = same
        tied[:-1] |= same
        p = np.flatnonzero(tied)
        o[p] = o[p[np.lexsort((-dur[o[p]], run[p]))]]
    return o


def unique(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """np.unique(values), sorted, without importing numpy.ma: numpy 2's plain np.unique asks
    np.ma whether the array is masked, and that import costs a small trace's whole analysis."""
    return np.unique(values, return_counts=True)[0]


def top_sums(
    keys: npt.NDArray[Any], weights: npt.NDArray[Any], k: int | None = None
) -> list[tuple[int, float]]:
    """The k keys (integers) of the largest summed weights, with their sums (all keys where k
    is None): what a dict adding the weights in order, sorted by sum (stable), gives, as
    Counter.most_common(k) does. Each key's weights are summed in order, so the sums are the
    same floats; between equal sums the key seen first comes first."""
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    totals = np.bincount(inv.reshape(-1), weights=weights, minlength=uniq.size)
    top = np.lexsort((first, -totals))[:k]
    return [(int(uniq[i]), float(totals[i])) for i in top.tolist()]
