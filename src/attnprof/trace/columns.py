"""Events into columns: the builder that turns each chunk of decoded events into numpy columns.

Strings (names, lanes, categories) are interned to small integers in order of first appearance,
so that the ids do not depend on how the events were cut into chunks or blocks; a builder that
decoded a later part of the file (the forked decoder's) is appended with its strings re-interned
(Builder.extend), giving the same columns as one pass.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Any

import numpy as np

from attnprof.trace.comms import Comms
from attnprof.trace.decode import LENIENT, Doc, Event, raw_floats
from attnprof.trace.inputs import Inputs, among, dims_product, pick
from attnprof.trace.interning import PairTable, intern
from attnprof.trace.limits import MAX_DUR_US, MAX_NAME
from attnprof.trace.model import KEEP_ALL, Keep, Kind, RowMap, Trace, unique
from attnprof.trace.unread import Pid, UnreadCounter, device_named

__all__ = ["Builder", "cap"]

# (lower-cased category) -> kind, for complete ("X") events
_X_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    # other accelerators' host runtimes (Kineto's ActivityType names)
    "xpu_runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "driver": Kind.DRIVER,
    "xpu_driver": Kind.DRIVER,
    "privateuse1_driver": Kind.DRIVER,
    # device-side events of other accelerators (MTIA compute, DMA and sync events); kept with
    # their category so that no device work is silently dropped
    "mtia_ccp_events": Kind.DEVICE,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    # with_stack=True's Python frames: the idle analysis says which Python code held the host
    "python_function": Kind.PYTHON,
    # CUPTI's synchronisation records (which stream or event a sync call or a stream wait was
    # on): the idle analysis reads them to tell a wait on unrecorded work
    "cuda_sync": Kind.SYNC,
}
# kept kinds whose events run on the device: their pids are device pids (Builder._device_pids)
_KERNEL = int(Kind.KERNEL)  # a plain int for numpy comparisons (inputs.py says why)
_DEVICE_SIDE = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.DEVICE, Kind.GPU_ANNOTATION)
# launch flows (CPU launch -> GPU op), and fwdbwd flows (forward op -> its backward op), told
# apart by Trace.flow_fwdbwd
_FLOW_CATS = {"ac2g", "async", "async_cpu_to_gpu", "fwdbwd"}
# a complete event without a category: PyTorch 1.x's autograd-profiler export (before Kineto)
# writes its ops so, on a "CPU functions" pid, and each op's CUDA-event range on a "CUDA
# functions" pid. Which of the two an event is depends on its pid, so the pair's kind is only a
# mark (Builder.add decides per event): a CPU op, or dropped and counted as device work not read
# (an op's CUDA range is not a kernel: it spans every kernel of the op, nested ops' ranges overlap)
_UNCATEGORISED = -3
_PID = attrgetter("pid")
# categories the analysis does not read; anything else is reported as unknown
_IGNORED_CATS = {
    "cpu_instant_event",
    "trace",
    "",
    "user_annotation",
    "gpu_user_annotation",
    "overhead",
    "cuda_profiler_range",
    "cpu_instant",
    "python",
    # PyTorch 1.x's arrows from an op to its CUDA range, which is not read (_UNCATEGORISED)
    "cpu_to_cuda",
}
# a column's parts are merged into one array once they hold this many bytes (Builder._put):
# above glibc's mmap threshold (128 KB), so that a segment freed at the end leaves no hole
_SEGMENT = 1 << 20

_TS = attrgetter("ts")
_CAT = attrgetter("cat")
_PH = attrgetter("ph")
_LANE = attrgetter("pid", "tid")
_NAME = attrgetter("name")
_DUR = attrgetter("dur")
_ARGS_OF = attrgetter("args")
_CORR = attrgetter("correlation")
_EXT = attrgetter("external_id")
_EXT_LEGACY = attrgetter("external_id_legacy")
_SEQ = attrgetter("seq")
_INT_OR_NONE = frozenset({int, type(None)})  # a bool's type is bool: not an id


# the id columns, narrowed together (Builder._id_dtype)
_ID_COLUMNS = ("corr", "ext", "seq", "flow_id")


def _int_col(args: list[Any], field: attrgetter[Any]) -> np.ndarray:
    """One integer id field of every args (-1 = missing) in one C loop, no list in between;
    beyond +-2**62 -1, as _ids does."""
    try:
        arr = np.fromiter(map(field, args), np.int64, len(args))
    except OverflowError:
        return _ids([None if v == -1 else v for v in map(field, args)])
    return np.where((arr < -(2**62)) | (arr > 2**62), -1, arr)


def _whole_or_none(v: Any) -> int | None:
    """An integer argument as JSON gives one (not a bool), else None (not recorded)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _ids(values: list[int | None]) -> np.ndarray:
    """Integer ids with None -> -1, through float64 (exact below 2**53, which ids are)."""
    arr = np.array(values, dtype=np.float64) if values else np.zeros(0)
    bad = np.isnan(arr) | (arr < -(2.0**62)) | (arr > 2.0**62)
    return np.where(bad, -1, arr).astype(np.int64)


def _floats(values: list[float | None]) -> np.ndarray:
    return np.array(values, dtype=np.float64) if values else np.zeros(0)


def _whole_ids(values: list[Any]) -> np.ndarray:
    """_ids of arguments typed Any, each an integer as JSON gives one (not a bool) or not
    recorded: the types checked in one C loop where every one is an int or None (the usual
    case), 0.55x the time of a check per value."""
    if set(map(type, values)) <= _INT_OR_NONE:
        return _ids(values)
    return _ids([_whole_or_none(v) for v in values])


def _prods(dims: list[Any]) -> np.ndarray:
    """dims_product over many; vectorised when every entry is a plain [x, y, z] (the usual case)."""
    try:
        arr = np.array(dims, dtype=np.int64)
        if arr.ndim == 2 and arr.shape[1] == 3:
            bad = (arr <= 0).any(axis=1) | (arr >= 2**31).any(axis=1)
            return np.where(bad, -1, arr.prod(axis=1))
    except (ValueError, TypeError, OverflowError):
        pass
    return np.array([dims_product(d) for d in dims], np.int64)


def cap(text: str) -> str:
    """A category (or another string shown as it is) cut to MAX_NAME characters, as names are."""
    return text if len(text) <= MAX_NAME else text[:MAX_NAME]


def _capped(counts: Counter[str]) -> dict[str, int]:
    """counts by key cut with cap (keys that become equal are summed), sorted by key."""
    out: Counter[str] = Counter()
    for k, v in counts.items():
        out[cap(k)] += v
    return dict(sorted(out.items()))


def _hex(v: int | str | None) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return None


_ID = attrgetter("id")


def _flow_ids(fl: list[Event]) -> np.ndarray:
    """Flow ids: plain integers in one C loop (the usual case), else one by one (hex strings)."""
    ids = list(map(_ID, fl))
    if not ids or set(map(type, ids)) == {int}:  # one C loop (bool is not int here)
        try:
            arr = np.array(ids, np.int64) if ids else np.zeros(0, np.int64)
            return np.where((arr < -(2**62)) | (arr > 2**62), -1, arr)  # as _ids does
        except OverflowError:
            pass
    return _ids([_hex(i) for i in ids])


class Builder:
    """Columns accumulated chunk by chunk; strings interned across chunks."""

    def __init__(self, keep: Keep = KEEP_ALL) -> None:
        self.keep = keep
        self.names: dict[str, int] = {}
        self.lanes: dict[tuple[int | str, int | str], int] = {}
        # (cat, ph) -> pair id, in order of first appearance; per pair: its cat id, its kind
        # (-1 dropped, -2 flow) and whether it starts a flow. One lookup per event gives all
        # three (the pairs are few: a few dozen in a trace). Its first values are the categories
        self.pairs = PairTable()
        self.cats = self.pairs.first
        self.pair_cat = np.zeros(0, np.int64)
        self.pair_kind = np.zeros(0, np.int64)
        self.pair_start = np.zeros(0, bool)
        self.dropped: Counter[str] = Counter()
        self.unknown: set[str] = set()
        self.cols: dict[str, list[np.ndarray]] = {}
        # per column: how many parts at the end of its list are not merged yet, and their bytes
        self.fresh: dict[str, tuple[int, int]] = {}
        # what the loader keeps of recorded op inputs and launch calls' kernels
        self.inputs = Inputs(keep.inputs)
        self.comms = Comms()  # collectives' recorded args (trace/comms.py)
        self.unread = UnreadCounter()  # the dropped events, by category and pid (trace/unread.py)
        self.n_rows = 0
        self.n_seen = 0
        self.bad_durs = 0
        self.bad_dur_example = 0.0
        self.uncategorised_ops = 0  # complete events without a category read as CPU ops
        # some field had an unexpected type and was cleaned (decode_lenient, raw_floats): the
        # trace's warnings say so once (LENIENT)
        self.lenient = False

    def _put(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            parts = self.cols.setdefault(k, [])
            parts.append(v)
            n, nbytes = self.fresh.get(k, (0, 0))
            n, nbytes = n + 1, nbytes + v.nbytes
            if nbytes >= _SEGMENT:
                # one block's parts are a few KB each: merged into a segment of about _SEGMENT
                # bytes (its own mapping, returned to the system when freed), their heap space is
                # reused by the next block's. Kept apart until the end, the parts of every block
                # filled the heap, which stayed resident beside the concatenated columns (about
                # 2x the columns in peak RSS, measured on the 1.2 GB benchmark trace)
                parts[-n:] = [np.concatenate(parts[-n:])]
                n, nbytes = 0, 0
            self.fresh[k] = (n, nbytes)

    def compact(self) -> None:
        """Each column's parts merged into one array, for a builder about to be sent whole to
        another process (stream.py's forked decoder): pickling costs per array, and a column of
        a block's parts is about a hundred of them (on the 48 MB benchmark trace: 11 ms to dump
        the forked decoder's part, 7 to load it, against 3.4 and 1.3 once merged)."""
        for parts in self.cols.values():
            if len(parts) > 1:
                parts[:] = [np.concatenate(parts)]
        self.fresh.clear()

    def _floats(self, raws: Any) -> np.ndarray:
        values, cleaned = raw_floats(raws)
        self.lenient |= cleaned
        return values

    def _kind_of(self, cat: str, ph: str) -> int:
        low = cat.lower()
        if low == "python_function" and not self.keep.frames:
            return -1  # not asked for: dropped, and counted as dropped (Trace.dropped)
        if ph == "X" and low in _X_KINDS:
            return int(_X_KINDS[low])
        if ph in ("s", "f", "t") and low in _FLOW_CATS:
            return -2
        if ph == "X" and cat == "":
            return _UNCATEGORISED
        if low not in _IGNORED_CATS and not (ph in ("M", "i", "I") and low == ""):
            self.unknown.add(cat)
        return -1

    def _uncategorised(self, events: list[Event], ev_kind: np.ndarray) -> None:
        """Decide, in place, the kind of each complete event without a category by its pid: a CPU
        op, or on a device-named pid ("CUDA functions") dropped as device work not read."""
        rows = np.flatnonzero(ev_kind == _UNCATEGORISED)
        if not rows.size:
            return
        on_device = np.fromiter(map(device_named, map(_PID, pick(events, rows))), bool, rows.size)
        ev_kind[rows] = np.where(on_device, -1, int(Kind.CPU_OP))
        self.uncategorised_ops += int(rows.size - on_device.sum())
        if on_device.any():
            self.dropped["-/X"] += int(on_device.sum())

    def add(self, events: list[Event]) -> None:
        n_all = len(events)
        self.n_seen += n_all
        if not n_all:
            return
        cats, pairs = self.cats, self.pairs.ids
        known = len(pairs)
        pair_ids = self.pairs.add(_CAT, _PH, events)
        if len(pairs) > known:  # new pairs, in order of first appearance
            new = list(pairs)[known:]
            self.pair_cat = np.append(self.pair_cat, [cats[c] for c, _ in new])
            self.pair_kind = np.append(self.pair_kind, [self._kind_of(c, ph) for c, ph in new])
            self.pair_start = np.append(self.pair_start, [ph == "s" for _, ph in new])
        cat_ids = self.pair_cat[pair_ids]
        ev_kind = self.pair_kind[pair_ids]
        if (self.pair_kind == _UNCATEGORISED).any():
            self._uncategorised(events, ev_kind)
        keep = np.flatnonzero(ev_kind >= 0)
        flows = np.flatnonzero(ev_kind == -2)
        if keep.size + flows.size < n_all:
            counts = np.bincount(pair_ids, minlength=len(pairs))
            for (cat, ph), j in pairs.items():
                if self.pair_kind[j] == -1 and counts[j]:
                    self.dropped[f"{cat or '-'}/{ph or '-'}"] += int(counts[j])
            drop = np.flatnonzero(ev_kind == -1)
            self.unread.add(pick(events, drop), pair_ids[drop], list(pairs))

        kept = pick(events, keep)
        n = len(kept)
        names, lanes = self.names, self.lanes
        # lanes of kept and flow events interned together, in file order: ids must not depend
        # on where the chunks were cut (streamed, parallel and whole-file loads agree)
        used = np.flatnonzero(ev_kind != -1)
        used_ev = pick(events, used)
        lane_ids = intern(lanes, _LANE, used_ev)
        is_flow = ev_kind[used] == -2
        del used_ev
        args = list(map(_ARGS_OF, kept))
        ext = _int_col(args, _EXT)
        ext_legacy = _int_col(args, _EXT_LEGACY)
        kind = ev_kind[keep].astype(np.int8)
        name_col = intern(names, _NAME, kept).astype(np.int32)
        dur = np.fromiter(map(_DUR, kept), np.float64, n)
        bad = ~((dur >= 0.0) & (dur <= MAX_DUR_US))
        if bad.any():
            if not self.bad_durs:
                self.bad_dur_example = float(dur[bad][0])
            self.bad_durs += int(bad.sum())
            dur = np.where(bad, 0.0, dur)
        self._put(
            kind=kind,
            name=name_col,
            lane=lane_ids[~is_flow].astype(np.int32),
            ts=self._floats(map(_TS, kept)),
            dur=dur,
            corr=_int_col(args, _CORR),
            ext=np.where(ext >= 0, ext, ext_legacy),
            seq=_int_col(args, _SEQ),
            cat=cat_ids[keep].astype(np.int32),
        )

        krows = np.flatnonzero(kind == _KERNEL)
        kargs = pick(args, krows)
        self._put(
            kernel_rows=krows.astype(np.int64) + self.n_rows,
            registers=_ids([a.registers for a in kargs]),
            shared_mem=_ids([a.shared_memory for a in kargs]),
            block_threads=_prods([a.block for a in kargs]),
            grid_blocks=_prods([a.grid for a in kargs]),
            achieved=_floats([a.achieved for a in kargs]),
            device=_ids([a.device for a in kargs]),
            graph_id=_whole_ids([a.graph_id for a in kargs]),
            graph_node=_whole_ids([a.graph_node for a in kargs]),
        )

        in_rows, in_sig = self.inputs.add(args, kind, name_col, names, self.n_rows)
        self.comms.add(args, kind, name_col, names, krows, kargs, self.n_rows)
        self._put(input_rows=in_rows, input_sig=in_sig)

        fl = pick(events, flows)
        nf = len(fl)
        fwdbwd = [c for k, c in cats.items() if k.lower() == "fwdbwd"]
        self._put(
            flow_start=self.pair_start[pair_ids[flows]],
            flow_fwdbwd=among(cat_ids[flows], fwdbwd, len(cats)) if fwdbwd else np.zeros(nf, bool),
            flow_id=_flow_ids(fl),
            flow_lane=lane_ids[is_flow].astype(np.int32),
            flow_ts=self._floats(map(_TS, fl)),
        )
        self.n_rows += n

    def extend(self, other: Builder) -> None:
        """Append the columns another builder made of the events that follow this one's, with
        its strings re-interned here (new ones in its order: the same ids a single pass gives)."""

        def remap(table: dict[Any, int], theirs: dict[Any, int]) -> np.ndarray:
            m = np.empty(len(theirs), np.int64)
            for k, i in theirs.items():
                m[i] = table.setdefault(k, len(table))
            return m

        maps = {
            "name": remap(self.names, other.names),
            "lane": remap(self.lanes, other.lanes),
            "cat": remap(self.cats, other.cats),
        }
        maps["flow_lane"] = maps["lane"]
        maps["input_sig"] = self.inputs.extend(other.inputs, self.n_rows)
        self.comms.extend(other.comms, self.n_rows)
        self.fresh.clear()  # parts appended from here on are the other's segments, none merged
        # the other's parts are taken as they are appended: a part remapped here (names, lanes,
        # categories, row numbers) is a new array, and its original goes at once, not with the
        # other builder (about a fifth of the columns at the peak of a forked load)
        while other.cols:
            key, parts = other.cols.popitem()
            while parts:
                arr = parts.pop(0)
                if key in maps:
                    arr = maps[key][arr].astype(arr.dtype)
                elif key in ("kernel_rows", "input_rows"):
                    arr = arr + self.n_rows
                self.cols.setdefault(key, []).append(arr)
        self.dropped.update(other.dropped)
        self.unread.extend(other.unread)
        self.unknown |= other.unknown
        if other.bad_durs and not self.bad_durs:
            self.bad_dur_example = other.bad_dur_example
        self.bad_durs += other.bad_durs
        self.uncategorised_ops += other.uncategorised_ops
        self.lenient |= other.lenient
        self.n_rows += other.n_rows
        self.n_seen += other.n_seen

    def _col(self, key: str, dtype: type) -> np.ndarray:
        # the chunks' parts are let go column by column: the trace's columns never exist twice
        # (about 0.25x the raw JSON less at the peak of a load)
        parts = self.cols.pop(key, None)
        # cast while concatenating: an id column narrowed to int32 never exists as int64 whole
        return np.concatenate(parts, dtype=dtype, casting="same_kind") if parts else np.zeros(0, dtype)

    def _fits32(self, key: str) -> type:
        """int32 where every value of a kernel column fits in it, else int64: registers, shared
        memory, block and grid sizes, device and graph ids are small numbers (half the bytes),
        compared and indexed but never multiplied in place."""
        lo, hi = self._span((key,))
        return np.int32 if lo >= np.iinfo(np.int32).min and hi <= np.iinfo(np.int32).max else np.int64

    def _span(self, keys: tuple[str, ...]) -> tuple[int, int]:
        lo = hi = -1
        for key in keys:
            for part in self.cols.get(key, ()):
                if part.size:
                    lo, hi = min(lo, int(part.min())), max(hi, int(part.max()))
        return lo, hi

    def _id_dtype(self) -> type:
        """int32 where every id of the trace (correlation, External id, sequence number, flow id;
        -1 missing) fits in it, else int64. One width for all four: they are compared with each
        other (a device op's correlation with its launch's, a flow's id stands in for a missing
        correlation), and a copy of one column is filled from another (analysis/attribution/links.py)."""
        lo, hi = self._span(_ID_COLUMNS)
        return np.int32 if lo >= -1 and hi <= np.iinfo(np.int32).max else np.int64

    def finish(self, doc: Doc, source: str) -> Trace:
        ids = self._id_dtype()
        props_in = doc.deviceProperties if isinstance(doc.deviceProperties, list) else []
        meta: dict[str, Any] = {}
        for key in ("schemaVersion", "distributedInfo", "cuda_runtime_version", "cupti_version", "trace_id"):
            v = getattr(doc, key)
            if v is not None:
                meta[key] = v
        meta["deviceProperties_present"] = doc.deviceProperties is not None
        meta["events_total"] = self.n_seen
        meta["bad_durations"] = self.bad_durs  # the sanitation record repeats the count
        if self.uncategorised_ops:
            meta["uncategorised_ops"] = self.uncategorised_ops  # LEGACY_TRACE_FORMAT says so
        warnings = []
        if self.n_seen == 0:
            warnings.append(
                "the trace holds no events (an empty traceEvents list, or an empty array): nothing to "
                "analyse; was the profiler stopped before its first step, or the trace written "
                "before the profiler finished?"
            )
        elif self.n_rows == 0:
            warnings.append(
                f"none of its {self.n_seen:,} event(s) is a CPU op, runtime call, kernel, memory "
                "copy or annotation: there is nothing to analyse (was only metadata, or only "
                "Python frames, recorded?)"
            )
        names = list(self.names)
        long_names = [i for i, n in enumerate(names) if len(n) > MAX_NAME]
        for i in long_names:
            names[i] = names[i][:MAX_NAME]
        if long_names:
            warnings.append(
                f"{len(long_names)} event name(s) longer than {MAX_NAME:,} characters (the longest: "
                f"{max(len(n) for n in self.names):,}) were cut to their first {MAX_NAME:,}"
            )
        if self.unknown:
            # a category is named in the warning by its first 80 characters
            listed = ", ".join(sorted(repr(c if len(c) <= 80 else c[:80] + "...") for c in self.unknown)[:8])
            warnings.append(f"events of unknown categories were ignored: {listed}")
        if self.bad_durs:
            warnings.append(
                f"{self.bad_durs} event(s) had a negative or impossible duration (the first: "
                f"{self.bad_dur_example:g} us; longer than a day counts as impossible): they are "
                "counted with 0 us"
            )
        if self.lenient:
            warnings.append(LENIENT)
        trace = Trace(
            source=source,
            names=names,
            lanes=[(cap(str(p)), cap(str(t))) for p, t in self.lanes],
            kind=self._col("kind", np.int8),
            name=self._col("name", np.int32),
            ts=self._col("ts", np.float64),
            dur=self._col("dur", np.float64),
            lane=self._col("lane", np.int32),
            corr=self._col("corr", ids),
            ext=self._col("ext", ids),
            seq=self._col("seq", ids),
            cat=self._col("cat", np.int32),
            categories=[cap(c) for c in self.cats],
            kernel_rows=self._col("kernel_rows", np.int64),
            registers=self._col("registers", self._fits32("registers")),
            shared_mem=self._col("shared_mem", self._fits32("shared_mem")),
            block_threads=self._col("block_threads", self._fits32("block_threads")),
            grid_blocks=self._col("grid_blocks", self._fits32("grid_blocks")),
            achieved=self._col("achieved", np.float64),
            graph_id=self._col("graph_id", self._fits32("graph_id")),
            graph_node=self._col("graph_node", self._fits32("graph_node")),
            device=self._col("device", self._fits32("device")),
            flow_start=self._col("flow_start", np.bool_),
            flow_fwdbwd=self._col("flow_fwdbwd", np.bool_),
            flow_id=self._col("flow_id", ids),
            flow_lane=self._col("flow_lane", np.int32),
            flow_ts=self._col("flow_ts", np.float64),
            conversions=self.inputs.conversions,
            shapes=self.inputs.shapes(),
            launch_kernels=self.inputs.launch_kernels,
            comms=self.comms.rows,
            sync_waits=self.inputs.sync_waits,
            inputs=RowMap(
                self._col("input_rows", np.int64), self._col("input_sig", np.int32), list(self.inputs.sigs)
            ),
            device_properties=[p for p in props_in if isinstance(p, dict)],
            metadata=meta,
            dropped=_capped(self.dropped),
            warnings=warnings,
        )
        trace.unread = self.unread.finish(self._device_pids(trace))
        return trace

    def _device_pids(self, trace: Trace) -> set[Pid]:
        """The pids holding kept device ops (kernels, copies, sets, other accelerators' device
        events, GPU annotations): where a dropped event is device work (trace/unread.py)."""
        on_device = np.isin(trace.kind, [*_DEVICE_SIDE])
        lanes = list(self.lanes)
        return {lanes[i][0] for i in unique(trace.lane[on_device]).tolist()}
