"""The loader's work stays in proportion to its input whatever the input holds (issue 24): runs of
whitespace, huge strings, strings full of what looks like a cut between events; byte order marks
and UTF-16 files are read; an empty trace is warned about.

No timing is asserted (the machine is shared): the work is measured as the bytes handed to the
JSON decoder and the peak of traced memory, which do not depend on the load.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from _paths import trace
from attnprof.errors import UserError
from attnprof.trace import load_trace, parse_trace
from attnprof.trace import stream as loader
from attnprof.trace.limits import MAX_NAME

EV = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "ts": 1,
    "dur": 2,
    "pid": 0,
    "tid": 7,
    "args": {"correlation": 1},
}
EVB = json.dumps(EV).encode()
TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"


class _Counting:
    """The loader's own event decoder, counting the bytes it is handed."""

    def __init__(self, real: msgspec.json.Decoder[Any]) -> None:
        self.real, self.bytes = real, 0

    def decode(self, buf: bytes) -> Any:
        self.bytes += len(buf)
        return self.real.decode(buf)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counting:
    c = _Counting(loader.EVENTS)
    monkeypatch.setattr(loader, "EVENTS", c)
    return c


def test_a_gigantic_run_of_whitespace_is_not_held_in_memory(tmp_path: Path) -> None:
    # 64 MB of spaces between two events, 64 KB gzipped: before, every byte of it was held (and
    # appended to bytes, one copy of all that was pending per block: 100 MB took 24 s)
    p = tmp_path / "ws.json.gz"
    with gzip.open(p, "wb", compresslevel=1) as f:
        f.write(b'{"traceEvents":[' + EVB + b",")
        for _ in range(64):
            f.write(b" " * (1 << 20))
        f.write(EVB + b"]}")
    tracemalloc.start()
    try:
        t = load_trace(p, max_memory=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t.n_events == 2
    assert t.raw_bytes == (64 << 20) + 2 * len(EVB) + len(b'{"traceEvents":[,]}')
    assert peak < 8 << 20, f"peak traced memory {peak / 1e6:.1f} MB for 64 MB of whitespace"


def test_whitespace_inside_a_name_is_kept_up_to_the_name_cap(tmp_path: Path) -> None:
    # the whitespace squeeze must not change what a string keeps: a name that is a run of spaces
    # keeps its first MAX_NAME characters, the same as the whole-file path
    name = "a" + " " * (8 << 20) + "b"
    doc = {"traceEvents": [EV, dict(EV, name=name), EV]}
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps(doc).encode())
    t = load_trace(p, max_memory=0, parallel=False)
    assert t.names[1] == name[:MAX_NAME]
    assert t.names == parse_trace(p.read_bytes()).names


def test_a_huge_name_is_cut_and_the_cut_is_warned(tmp_path: Path) -> None:
    # a 10 MB name made the analysis take 33 s (its patterns are matched at about 3 s per MB)
    long = "x" * (10 << 20)
    p = tmp_path / "t.json"
    p.write_bytes(
        json.dumps({"traceEvents": [EV, dict(EV, name=long), dict(EV, cat="k" * (MAX_NAME + 5))]}).encode()
    )
    t = load_trace(p, max_memory=0)
    assert max(map(len, t.names)) == MAX_NAME
    assert t.names[1] == long[:MAX_NAME]
    assert all(len(c) <= MAX_NAME for c in t.categories)
    assert any(len(k) <= MAX_NAME + 4 for k in t.dropped)  # the unknown category, cut
    assert any("1 event name(s) longer than 65,536 characters" in w and "10,485,760" in w for w in t.warnings)
    assert all(len(w) < 1000 for w in t.warnings)


def test_a_name_within_the_cap_is_kept_whole_without_a_warning(tmp_path: Path) -> None:
    name = "void cutlass::Kernel<" + "T" * 5000 + ">"  # the size of the longest real names
    p = tmp_path / "t.json"
    p.write_bytes(json.dumps({"traceEvents": [dict(EV, name=name)]}).encode())
    t = load_trace(p)
    assert t.names == [name]
    assert not any("longer than" in w for w in t.warnings)


@pytest.mark.parametrize("fake", [b"},{", b"}, {"])
def test_strings_full_of_false_cuts_are_decoded_a_bounded_number_of_times(
    tmp_path: Path, counted: _Counting, fake: bytes
) -> None:
    # one false cut per block in an 8 MB name: each was tried by decoding all that was pending
    # (the N**2 / 2 of issue 24); now the tries wait for pending to double
    blocks = 32
    name = (b"x" * (loader.BLOCK - len(fake)) + fake) * blocks
    data = (
        b'{"traceEvents":['
        + EVB
        + b',{"ph":"X","cat":"kernel","name":"'
        + name
        + b'","ts":1}, '
        + EVB
        + b"]}"
    )
    p = tmp_path / "t.json"
    p.write_bytes(data)
    t = load_trace(p, max_memory=0, parallel=False)
    assert t.n_events == 3
    assert counted.bytes <= 5 * len(data), f"{counted.bytes / len(data):.1f}x the file decoded"


def test_strings_full_of_false_array_ends_cost_no_tries(tmp_path: Path, counted: _Counting) -> None:
    # the last event holds thousands of "}]": each was a try at the end of the array, decoding
    # all that was pending (the array's end is now looked for from the document's end)
    name = (b"x" * 1000 + b"}]") * 4000
    data = b'{"traceEvents":[' + EVB + b',{"ph":"X","cat":"kernel","name":"' + name + b'","ts":1}]}'
    p = tmp_path / "t.json"
    p.write_bytes(data)
    t = load_trace(p, max_memory=0, parallel=False)
    assert t.n_events == 2
    assert counted.bytes <= 3 * len(data), f"{counted.bytes / len(data):.1f}x the file decoded"


def test_a_tail_full_of_array_ends_is_read_by_the_whole_file_path(tmp_path: Path) -> None:
    tail = b',"pg_config":[' + b",".join([b'[{"a":1}]'] * 40) + b"]"
    data = b'{"traceEvents":[' + EVB + b"," + EVB + b"]" + tail + b"}"
    p = tmp_path / "t.json"
    p.write_bytes(data)
    t = load_trace(p, max_memory=0, parallel=False)
    assert t.n_events == 2 and t.names == parse_trace(data).names


def _doc_bytes() -> bytes:
    return json.dumps({"traceEvents": [EV, dict(EV, name="ünïcode ✓", ts=5)]}, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("encoding", "prefix", "repair"),
    [
        ("utf-8", b"\xef\xbb\xbf", None),
        ("utf-16", b"", "UTF-16-LE"),  # Python's utf-16 writes a little-endian mark
        ("utf-16-le", b"", "UTF-16-LE"),  # no mark: told by its NUL bytes
        ("utf-16-be", b"", "UTF-16-BE"),
        ("utf-32", b"", "UTF-32-LE"),
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_bom_and_utf16_files_are_read(
    tmp_path: Path, encoding: str, prefix: bytes, repair: str | None, gz: bool
) -> None:
    data = prefix + _doc_bytes().decode().encode(encoding)
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(data) if gz else data)
    t = load_trace(p)
    assert t.n_events == 2
    assert t.names == ["k", "ünïcode ✓"]
    if repair is None:
        assert not t.repairs
    else:
        assert t.repairs == [f"decoded from {repair} (JSON is UTF-8)"]


def test_a_broken_utf16_file_is_named_precisely(tmp_path: Path) -> None:
    data = "\ufeff".encode("utf-16-le") + _doc_bytes().decode().encode("utf-16-le")[:-1]  # odd length
    p = tmp_path / "t.json"
    p.write_bytes(data)
    with pytest.raises(
        UserError, match=r"looks like UTF-16-LE text but is not valid UTF-16-LE .*save the trace as UTF-8"
    ):
        load_trace(p)


def test_plain_utf8_is_not_taken_for_utf16(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(_doc_bytes())
    t = load_trace(p)
    assert not t.repairs and t.n_events == 2


@pytest.mark.parametrize(
    "body", [b"[]", b'{"traceEvents": []}', b'{"traceEvents": [  ], "schemaVersion": 1}']
)
def test_an_event_less_trace_is_warned(tmp_path: Path, body: bytes) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(body)
    t = load_trace(p)
    assert t.n_events == 0
    assert any(w.startswith("the trace holds no events") for w in t.warnings)


def test_a_trace_of_only_metadata_is_warned(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}] * 3
    p.write_bytes(json.dumps({"traceEvents": meta}).encode())
    t = load_trace(p)
    assert any(w.startswith("none of its 3 event(s) is a CPU op") for w in t.warnings)


def test_a_real_trace_has_neither_warning() -> None:
    t = load_trace(trace(TRITON))
    assert not any("no events" in w or "nothing to analyse" in w for w in t.warnings)


def test_the_cli_warns_about_an_empty_trace(tmp_path: Path) -> None:
    import subprocess
    import sys

    p = tmp_path / "empty.json"
    p.write_bytes(b"[]")
    r = subprocess.run([sys.executable, "-m", "attnprof", "analyze", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "warning: the trace holds no events" in r.stdout


def test_small_blocks_cut_a_real_trace_as_the_whole_file_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small blocks make a real trace go through many cuts; the result must equal the whole-file path
    raw = gzip.decompress(trace(TRITON).read_bytes())
    p = tmp_path / "t.json"
    p.write_bytes(raw)
    monkeypatch.setattr(loader, "BLOCK", 512)
    a, b = load_trace(p, parallel=False), parse_trace(raw)
    assert a.names == b.names
    assert np.array_equal(a.ts, b.ts) and np.array_equal(a.corr, b.corr)


def test_recorded_inputs_are_held_as_columns_and_read_as_a_dict() -> None:
    from attnprof.trace.model import RowMap

    t = load_trace(trace("marcalph__kernelforge"))  # recorded with record_shapes
    m = t.inputs
    assert isinstance(m, RowMap) and len(m) > 100
    d = dict(m.items())
    assert dict(m) == d == {**m} and list(m) == sorted(d)
    r = next(iter(d))
    assert m[r] == d[r] and r in m and m.get(r) == d[r]
    assert (r + 10**9) not in m and m.get(-5) is None and "x" not in m
    with pytest.raises(KeyError):
        m[10**9]
    assert len(set(map(id, m.values()))) == len(m.distinct)  # equal signatures: one object
    assert m == parse_trace(gzip.decompress(trace("marcalph__kernelforge").read_bytes())).inputs
