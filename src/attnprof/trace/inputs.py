"""What the loader keeps of cpu ops' recorded inputs and of launch calls' kernels.

With record_shapes, every cpu op carries its inputs ("Input Dims", "Input type", "Concrete
Inputs"). They are kept raw by the decoder (msgspec.Raw: no list is built) and only these are
made of them: the dtype conversions (aten::to, aten::_to_copy) the precision findings read, the
input shapes of the GEMMs and softmaxes of an attention chain, and every op's inputs as a
signature id (the per-op performance model decodes each distinct signature once). ROCm's launch
calls name their kernel (args "kernel"): a graph capture records launches but no kernels, so its
replays are matched against these.
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import attrgetter, is_not, itemgetter
from typing import Any

import msgspec
import numpy as np

from attnprof.trace.decode import Args
from attnprof.trace.model import Kind, RowMap

__all__ = ["Inputs", "among", "dims_product", "pick"]

_CONVERSIONS = {"aten::to", "aten::_to_copy"}
# ops whose input shapes are kept (Trace.shapes): the GEMMs and softmaxes of an attention chain
_SHAPED = {
    "aten::bmm",
    "aten::matmul",
    "aten::mm",
    "aten::baddbmm",
    "aten::softmax",
    "aten::_softmax",
    "aten::_safe_softmax",
}


def dims_product(dims: Any) -> int:
    """Threads per block (or blocks per grid) from [x, y, z], also when written as a string."""
    if isinstance(dims, str):
        dims = [int(x) for x in re.findall(r"\d{1,9}", dims)[:3]]
    if not isinstance(dims, list) or not dims:
        return -1
    p = 1
    for d in dims[:3]:
        if not isinstance(d, int) or isinstance(d, bool) or not 0 < d < 2**31:
            return -1
        p *= d
    return p


_KERNEL = attrgetter("kernel")
_DIMS = attrgetter("input_dims")
_TRIPLE = attrgetter("input_dims", "input_type", "concrete")
_SEP = b"\x00"
# the kinds as plain ints for the per-chunk comparisons: numpy looks up __array_ufunc__ on an
# IntEnum member's class, which Python 3.11's EnumType answers in Python (3 us a comparison,
# 4x the comparison of a chunk's kinds itself)
_CPU_OP, _RUNTIME, _DRIVER, _SYNC = int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.DRIVER), int(Kind.SYNC)


def pick(items: list[Any], idx: np.ndarray) -> list[Any]:
    """items[i] for i in idx, the loop in C (itemgetter) rather than a list comprehension."""
    if idx.size == len(items):
        return items
    if idx.size <= 1:
        return [items[int(i)] for i in idx]
    return list(itemgetter(*idx.tolist())(items))


def among(col: np.ndarray, ids: list[int], n: int) -> np.ndarray:
    """Which entries of col (ids below n) are one of ids: a table lookup, cheaper per chunk than
    np.isin (whose Python-level set-up was 5% of the load)."""
    table = np.zeros(n, bool)
    table[ids] = True
    return table[col]


def _compact_sig(raw: tuple[bytes, bytes, bytes]) -> tuple[bytes, bytes, bytes]:
    """A recorded inputs triple without insignificant whitespace; a part that is not a list
    (null, an object: Kineto writes lists) as absent, as the lenient per-event decode of a damaged
    event leaves it (kept as it was if not JSON)."""
    out = []
    for part in raw:
        try:
            value = msgspec.json.decode(part) if part else None
        except msgspec.DecodeError:
            out.append(part)
            continue
        out.append(msgspec.json.encode(value) if isinstance(value, list) else b"")
    return (out[0], out[1], out[2])


def _raw_list(raw: msgspec.Raw) -> list[Any] | None:
    """A list kept raw in the args, decoded; None when missing, not a list or not JSON."""
    if not raw:
        return None
    try:
        v = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


def _whole(v: Any) -> bool:
    """An integer as JSON gives one (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


class Inputs:
    """Recorded inputs and launch kernels, accumulated chunk by chunk (rows are the trace's)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep  # the recorded inputs (conversions, shapes, signatures): Keep.inputs
        self.conversions: dict[int, tuple[str | None, str | None]] = {}
        # the shaped ops' rows and, per row, an index into the distinct decoded "Input Dims"
        # (one list per distinct text, not one per op: shapes() makes them a RowMap)
        self.shape_rows: list[int] = []
        self.shape_idx: list[int] = []
        self.dims: dict[bytes, int] = {}  # "Input Dims" as written -> index into dims_values
        self.dims_values: list[list[Any]] = []
        self.launch_kernels: dict[int, tuple[str, int, int]] = {}
        # cuda_sync row -> (wait_on_stream, wait_on_cuda_event_record_corr_id), -1 where missing
        self.sync_waits: dict[int, tuple[int, int]] = {}
        # rows with recorded inputs, and each one's signature id (into sigs, in order of first
        # appearance): columns, not a dict per row (RowMap)
        self.sigs: dict[tuple[bytes, bytes, bytes], int] = {}
        self._raw_sigs: dict[bytes, int] = {}  # as written (parts joined by _SEP) -> id in sigs

    def add(
        self, args: list[Args], kind: np.ndarray, name_col: np.ndarray, names: dict[str, int], offset: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Take what is kept of one chunk's kept events (args[i] is row offset + i); return the
        chunk's (rows with recorded inputs, their signature ids)."""
        conv_ids = [names[c] for c in _CONVERSIONS if c in names] if self.keep else []
        if conv_ids:
            for r in np.flatnonzero(among(name_col, conv_ids, len(names)) & (kind == _CPU_OP)).tolist():
                types, concrete = _raw_list(args[r].input_type), _raw_list(args[r].concrete)
                if types:
                    src = types[0] if isinstance(types[0], str) else None
                    tgt = None
                    if concrete and len(concrete) > 1 and isinstance(concrete[1], str):
                        tgt = concrete[1] or None
                    self.conversions[r + offset] = (src, tgt)

        shaped_ids = [names[c] for c in _SHAPED if c in names] if self.keep else []
        if shaped_ids:
            for r in np.flatnonzero(among(name_col, shaped_ids, len(names)) & (kind == _CPU_OP)).tolist():
                given = args[r].input_dims
                if given:
                    i = self._dims_index(bytes(given))
                    if i >= 0:
                        self.shape_rows.append(r + offset)
                        self.shape_idx.append(i)

        rt = np.flatnonzero((kind == _RUNTIME) | (kind == _DRIVER))
        if rt.size:
            rt_args = pick(args, rt)
            named = np.fromiter(map(is_not, map(_KERNEL, rt_args), repeat(None)), bool, len(rt_args))
            # kept as a string: interning it would make name ids depend on chunking
            for r in rt[named].tolist():
                a = args[r]
                assert a.kernel is not None
                self.launch_kernels[r + offset] = (a.kernel, dims_product(a.grid), dims_product(a.block))
        for r in np.flatnonzero(kind == _SYNC).tolist():
            ws, rc = args[r].wait_on_stream, args[r].wait_record
            self.sync_waits[r + offset] = (ws if _whole(ws) else -1, rc if _whole(rc) else -1)
        # every cpu op's recorded inputs (decoded by the per-op performance model, once per
        # distinct signature), as signature ids. Each signature re-encoded compactly, once
        # per distinct raw text, so the same inputs read the same whatever the file's spacing and
        # whichever decode path (whole file, streamed blocks, a repaired event) produced them.
        # The per-op work is C loops (map): a Python loop over every op was a fifth of the load
        ops = np.flatnonzero(kind == _CPU_OP) if self.keep else np.zeros(0, np.int64)
        op_args = pick(args, ops)
        has = np.fromiter(map(len, map(_DIMS, op_args)), np.int64, len(op_args)) > 0
        rows = ops[has]
        # the three raw parts joined by a NUL, which valid JSON text never holds raw: one bytes
        # object to hash per op instead of a tuple of three copies
        keys = list(map(_SEP.join, map(_TRIPLE, pick(args, rows))))
        raw_sigs = self._raw_sigs
        sig = np.fromiter(map(raw_sigs.get, keys, repeat(-1)), np.int64, len(keys))
        if (sig < 0).any():
            sigs = self.sigs
            for i in np.flatnonzero(sig < 0).tolist():
                key = keys[i]
                got = raw_sigs.get(key)
                if got is None:
                    d, t, c = key.split(_SEP)
                    got = raw_sigs[key] = sigs.setdefault(_compact_sig((d, t, c)), len(sigs))
                sig[i] = got
        return (rows + offset).astype(np.int64), sig.astype(np.int32)

    def _dims_index(self, text: bytes) -> int:
        """The index of this "Input Dims" text's decoded list, decoded once per distinct text;
        -1 when it is not a JSON list."""
        i = self.dims.get(text)
        if i is None:
            try:
                dims = msgspec.json.decode(text)
            except msgspec.DecodeError:
                dims = None
            if isinstance(dims, list):
                i = self.dims[text] = len(self.dims_values)
                self.dims_values.append(dims)
            else:
                i = self.dims[text] = -1
        return i

    def shapes(self) -> RowMap[list[Any]]:
        """Trace.shapes: shaped-op row -> its "Input Dims" (equal ones share one list: read-only)."""
        return RowMap(
            np.array(self.shape_rows, np.int64), np.array(self.shape_idx, np.int32), self.dims_values
        )

    def extend(self, other: Inputs, offset: int) -> np.ndarray:
        """Append what another decoder kept of the events that follow (its rows from offset on);
        return the map from its signature ids to this one's (new ones in its order)."""
        self.conversions.update({r + offset: v for r, v in other.conversions.items()})
        theirs = {i: self._dims_index(text) for text, i in other.dims.items() if i >= 0}
        self.shape_rows.extend(r + offset for r in other.shape_rows)
        self.shape_idx.extend(theirs[i] for i in other.shape_idx)
        self.launch_kernels.update({r + offset: v for r, v in other.launch_kernels.items()})
        self.sync_waits.update({r + offset: v for r, v in other.sync_waits.items()})
        sigs = self.sigs
        return np.array([sigs.setdefault(k, len(sigs)) for k in other.sigs], np.int64)
