"""Decoding trace JSON into typed events: the event structs, the repairs real traces need.

msgspec decodes each event into a small struct that declares only the fields the analysis reads
(it skips the rest without building them). What real traces get wrong is handled here: invalid
JSON repaired once (raw control characters, bare N/A / NaN / Infinity, invalid UTF-8), text in
UTF-16/32 or behind a byte order mark decoded (as_utf8), fields of unexpected types decoded
event by event and cleaned field by field (decode_lenient), and a syntax error named in one
line (UserError).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec
import numpy as np
import orjson

from attnprof.errors import UserError

__all__ = [
    "BOM",
    "DOC",
    "EVENTS",
    "LENIENT",
    "Args",
    "Doc",
    "Event",
    "as_utf8",
    "decode_chunk",
    "decode_lenient",
    "first_byte",
    "raw_floats",
    "scan",
]


class Args(msgspec.Struct, gc=False, frozen=True):
    # ids every event may carry: -1 when missing (not None), so that a column is one C loop
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    external_id_legacy: int = msgspec.field(default=-1, name="external id")
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory: int | None = msgspec.field(default=None, name="shared memory")
    achieved: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    # lists of ints, but some Kineto versions write them as strings ("[1, 1, 1]")
    grid: Any = None
    block: Any = None
    device: int | None = None
    seq: int = msgspec.field(default=-1, name="Sequence number")
    # kept raw like Input Dims: decoded only for the few dtype conversions the analysis reads
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    # kept raw: decoded only for the few ops whose shapes the analysis reads (_SHAPED)
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")
    # the kernel a launch call names (ROCm's runtime events carry it): a graph capture records
    # launches but no kernels, so this is what its replays are matched against
    kernel: str | None = None
    # a collective's args (record_param_comms, and its kernel where Kineto copies them): typed
    # Any, checked in trace/comms.py, since the same keys on other events may hold anything
    coll_name: Any = msgspec.field(default=None, name="Collective name")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    group_size: Any = msgspec.field(default=None, name="Group size")
    comm_seq: Any = msgspec.field(default=None, name="Seq")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    comm_dtype: Any = msgspec.field(default=None, name="dtype")
    # a cuda_sync record's waited-on stream and the correlation of the cudaEventRecord whose
    # event it waited on (Kineto writes -1 where CUPTI did not say); Any: checked when kept
    wait_on_stream: Any = None
    # a graph-replayed kernel's graph and node (CUPTI's graphId, graphNodeId): the same in every
    # replay of one graph; Any: checked when kept
    graph_id: Any = msgspec.field(default=None, name="graph id")
    graph_node: Any = msgspec.field(default=None, name="graph node id")
    wait_record: Any = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")
    # a process_labels metadata event's label ("GPU 0": Kineto labels every device pid so): tells
    # the device pids, on which events of a category the loader does not read are device work
    # (trace/unread.py); Any: checked where read
    labels: Any = None


_NO_ARGS = Args()


_ZERO = msgspec.Raw(b"0")


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    # kept raw, read by raw_floats a chunk at a time: a timestamp of 17 significant digits (a
    # modern trace's microseconds since the epoch, 1712195495527379.2) is beyond msgspec's fast
    # exact parse, whose slow path took half of the whole decode (0.47 us an event)
    ts: msgspec.Raw = _ZERO
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    args: Args = _NO_ARGS  # one shared instance for the many events without args


class Doc(msgspec.Struct, gc=False):
    # events stay raw JSON slices of the input until decoded chunk by chunk (see parse_trace)
    traceEvents: list[msgspec.Raw] | None = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    trace_id: Any = None


DOC = msgspec.json.Decoder(Doc)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
EVENTS = msgspec.json.Decoder(list[Event])

_CONTROL = re.compile(rb"[\x00-\x1f]")
_BARE = re.compile(rb"(?<=[:\[,])(\s*)(N/A|NaN|-?Infinity|nan|-?inf)(?=\s*[,\]}])")
BOM = b"\xef\xbb\xbf"

LENIENT = (
    "some event fields had unexpected types: those events were decoded field by field and "
    "unusable fields were ignored"
)


# byte order marks: (mark, codec); UTF-32 before UTF-16, whose little-endian mark begins UTF-32's
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def as_utf8(data: bytes, label: str) -> tuple[bytes, str | None]:
    """data as UTF-8 without a byte order mark, and what was done (None: nothing).

    JSON is UTF-8 (RFC 8259), but Windows tools write a UTF-8 mark, and PowerShell's `>` writes
    UTF-16: both were "not JSON (invalid character byte 0)". Without a mark, UTF-16 and UTF-32
    show as NUL bytes around the first ASCII character, as RFC 4627 used to tell them apart.
    """
    if data[:3] == BOM:
        return data[3:], None  # a UTF-8 mark: nothing to say, the bytes were UTF-8
    codec = next((c for mark, c in _BOMS if data.startswith(mark)), None)
    if codec is None and len(data) >= 4 and b"\x00" in data[:4]:
        head = data[:4]
        if head[:3] == b"\x00\x00\x00":
            codec = "utf-32-be"
        elif head[1:4] == b"\x00\x00\x00":
            codec = "utf-32-le"
        elif head[0] == 0 and head[2] == 0:
            codec = "utf-16-be"
        elif head[1] == 0 and head[3] == 0:
            codec = "utf-16-le"
    if codec is None:
        return data, None
    mark = next((len(m) for m, c in _BOMS if c == codec and data.startswith(m)), 0)
    try:
        text = data[mark:].decode(codec)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{label}: looks like {codec.upper()} text but is not valid {codec.upper()} at byte "
            f"{exc.start + mark:,}: save the trace as UTF-8 JSON"
        ) from None
    return text.encode("utf-8", errors="replace"), f"decoded from {codec.upper()} (JSON is UTF-8)"


def first_byte(data: bytes | bytearray) -> int:
    m = re.search(rb"\S", data[:4096])
    return data[m.start()] if m else 0


def scan(data: bytes, label: str) -> tuple[Doc, list[str]]:
    """The top level, events left raw; on invalid JSON, repair once and say what was repaired."""
    try:
        return _top(data, label), []
    except msgspec.DecodeError as first:
        fixed, repairs = _repair(data)
        if not repairs:
            raise _syntax_error(label, first, data) from None
        try:
            return _top(fixed, label), repairs
        except msgspec.DecodeError as second:
            raise _syntax_error(label, second, fixed) from None


def _top(data: bytes, label: str) -> Doc:
    try:
        if first_byte(data) == ord("["):
            return Doc(traceEvents=_RAWS.decode(data))
        return DOC.decode(data)
    except msgspec.ValidationError as exc:
        # valid JSON of the wrong shape: a string, a number, traceEvents that is not a list
        raise UserError(f"{label}: not a PyTorch profiler trace ({exc})") from None


def decode_chunk(raws: list[msgspec.Raw], label: str) -> tuple[list[Event], bool, str | None]:
    """Events of one chunk; (events, decoded leniently, repair made)."""
    buf = b"[" + b",".join(raws) + b"]" if raws else b"[]"
    repair = None
    try:
        return EVENTS.decode(buf), False, None
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        # the raw scan does not validate UTF-8 inside strings: the events can still be invalid
        fixed = buf.decode("utf-8", errors="replace").encode()
        if fixed == buf:
            raise _syntax_error(label, exc, buf) from None
        buf, repair = fixed, "replaced invalid UTF-8 bytes with U+FFFD"
        try:
            return EVENTS.decode(buf), False, repair
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as again:
            raise _syntax_error(label, again, buf) from None
    return decode_lenient(buf)[1], True, repair


_ONE = msgspec.json.Decoder(Event)
# fields of unexpected types, untyped: a float beyond float range (1e400) is read as inf, which the
# cleaning drops, where msgspec refused it ("Number out of range") and the load failed
_UNTYPED = msgspec.json.Decoder(float_hook=float)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def decode_lenient(buf: bytes) -> tuple[int, list[Event]]:
    """(items, events) of a JSON array in which some event has a field of an unexpected type:
    each event decoded on its own, and only those that fail cleaned field by field. The others
    keep their raw fields as written (the recorded inputs are compared as bytes), so the events
    of a lenient chunk are the same whichever chunk or block they were cut into."""
    out: list[Event] = []
    raws = _RAW_LIST.decode(buf)
    for raw in raws:
        try:
            out.append(_ONE.decode(raw))
        except msgspec.ValidationError:
            c = _clean_event(_UNTYPED.decode(raw))
            if c is not None:
                out.append(msgspec.convert(c, Event))
    return len(raws), out


_FLOAT = msgspec.json.Decoder(float)


def raw_floats(raws: Iterable[msgspec.Raw]) -> tuple[np.ndarray, bool]:
    """JSON numbers as float64, and whether any was not one (and was cleaned as decode_lenient
    cleans a field: a number in a string read, anything else 0).

    One orjson parse of them all joined, which is exact (correctly rounded, as msgspec's) and
    fast for any number of digits; where it refuses (a value that is not a number, a number out
    of float range) they are read one by one, as msgspec reads a float field."""
    items = list(raws)
    try:
        values = orjson.loads(b"".join((b"[", b",".join(items), b"]")))
        if set(map(type, values)) <= {float, int}:  # bool is not int here, nor str, None, lists
            return np.array(values, np.float64), False
    except (orjson.JSONDecodeError, OverflowError):
        pass
    out = np.zeros(len(items))
    cleaned = False
    for i, raw in enumerate(items):
        try:
            out[i] = _FLOAT.decode(raw)
        except msgspec.ValidationError:
            cleaned = True
            v = _num(_UNTYPED.decode(raw))
            out[i] = 0.0 if v is None else v
    return out, cleaned


def _repair(data: bytes) -> tuple[bytes, list[str]]:
    """Fix what real traces get wrong; say what was fixed. Control characters are valid nowhere
    raw in JSON strings, and a space is valid both inside and outside strings."""
    repairs: list[str] = []
    fixed, n_ctrl = _CONTROL.subn(b" ", data)
    # \t \n \r outside strings were whitespace already: count only the others
    n_bad = n_ctrl - data.count(b"\n") - data.count(b"\t") - data.count(b"\r")
    if n_bad > 0:
        repairs.append(f"replaced {n_bad} raw control character(s) with spaces")
    fixed, n_bare = _BARE.subn(rb"\1null", fixed)
    if n_bare:
        repairs.append(f"replaced {n_bare} bare N/A / NaN / Infinity value(s) with null")
    if not repairs and fixed != data:
        # only newlines or tabs changed: that makes a string with a raw newline valid
        repairs.append("replaced raw newlines or tabs inside strings with spaces")
    return (fixed if repairs else data), repairs


def _syntax_error(label: str, exc: Exception, data: bytes) -> UserError:
    msg = str(exc)
    if "truncated" in msg.lower():
        return UserError(
            f"{label}: the JSON ends early after {len(data):,} bytes: the trace is truncated "
            "(was the profiler stopped, or the copy cut, while it was being written?)"
        )
    if first_byte(data) not in (ord("{"), ord("[")):
        return UserError(f"{label}: not JSON, so not a PyTorch profiler trace ({msg})")
    return UserError(f"{label}: invalid JSON that could not be repaired ({msg})")


_STR_FIELDS = ("ph", "cat", "name")
_NUM_FIELDS = ("ts", "dur")
_ARG_INT = {
    "correlation",
    "External id",
    "external id",
    "registers per thread",
    "shared memory",
    "device",
    "Sequence number",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
    "graph id",
    "graph node id",
}
_ARG_FLOAT = {"est. achieved occupancy %"}
_INT64 = (-(2**63), 2**63 - 1)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _num(v: Any) -> float | None:
    """A usable number field: a number, or a number in a string, finite and below 1e300."""
    if _is_num(v):
        return float(v) if abs(v) < 1e300 else None
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if f == f and abs(f) < 1e300 else None
    return None


def _clean_event(e: Any) -> dict[str, Any] | None:
    """Keep the fields of one untyped event that have a usable type; None for a non-object."""
    if not isinstance(e, dict):
        return None
    out: dict[str, Any] = {}
    for k in _STR_FIELDS:
        v = e.get(k)
        if isinstance(v, str):
            out[k] = v
    for k in _NUM_FIELDS:
        f = _num(e.get(k))
        if f is not None:
            out[k] = f if k != "ts" else msgspec.Raw(msgspec.json.encode(f))  # ts is kept raw (Event)
    for k in ("pid", "tid"):
        v = e.get(k)
        if _is_int(v) or isinstance(v, str):
            out[k] = v
    v = e.get("id")
    if _is_int(v) or isinstance(v, str):
        out["id"] = v
    args = e.get("args")
    if isinstance(args, dict):
        a: dict[str, Any] = {}
        for k in _ARG_INT:
            if _is_int(args.get(k)):
                a[k] = args[k]
        for k in _ARG_FLOAT:
            if _is_num(args.get(k)):
                a[k] = float(args[k])
        for k in ("grid", "block"):
            if isinstance(args.get(k), list | str):
                a[k] = args[k]
        for k in ("kernel", "labels"):
            if isinstance(args.get(k), str):
                a[k] = args[k]
        for k in ("Input type", "Concrete Inputs", "Input Dims"):  # kept raw (see Args)
            if isinstance(args.get(k), list):
                a[k] = msgspec.Raw(msgspec.json.encode(args[k]))
        out["args"] = a
    return out
