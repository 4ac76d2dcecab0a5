"""The loader and the analysis under hypothesis: truncated, mutated and garbage input gives a
result or the one clear UserError, never another exception.

Each input is loaded both ways: from bytes (parse_trace, the whole-file path) and from a file
(load_trace, the streaming path the CLI takes, in blocks of 512 bytes here so that even these
small traces are cut between many events); the two must agree.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _paths import trace
from attnprof.analysis.pipeline import analyze_trace
from attnprof.errors import UserError
from attnprof.trace import Trace, load_trace, parse_trace
from attnprof.trace import stream as loader

# small real traces: the 71-event Triton trace (driver launch, flows, one kernel), and a GH200
# one with ProfilerSteps, annotations, GEMM and softmax kernels for field mutations; read on first
# use (the strategies that need their sizes are deferred), so that collecting this module never
# reads ../shared: where it is missing, tests/conftest.py stops the session with one line


@functools.cache
def _seed() -> bytes:
    return gzip.decompress(
        trace("facebookresearch__HolisticTraceAnalysis__tests__data__triton_example").read_bytes()
    )


@functools.cache
def _rich() -> bytes:
    return gzip.decompress(trace("marcalph__kernelforge").read_bytes())


def _events(data: bytes) -> int:
    return len(json.loads(data)["traceEvents"])


_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_DIR = tempfile.TemporaryDirectory(prefix="attnprof-fuzz-")
_SMALL_BLOCK = 512


def _outcome(load: Any) -> Trace | UserError:
    try:
        return load()
    except UserError as exc:
        assert str(exc) and "\n" not in str(exc)
        return exc


def _streamed(data: bytes) -> Trace | UserError:
    """load_trace of data written to a file, streamed in small blocks."""
    path = Path(_DIR.name) / "fuzz.json"
    path.write_bytes(data)
    block, loader.BLOCK = loader.BLOCK, _SMALL_BLOCK
    try:
        return _outcome(lambda: load_trace(path, max_memory=0, parallel=False))
    finally:
        loader.BLOCK = block


def _same(a: Trace, b: Trace) -> None:
    for f in dataclasses.fields(Trace):
        if f.name in ("source", "raw_bytes"):  # the label; raw_bytes counts a stripped BOM
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


def _check(data: bytes) -> None:
    whole = _outcome(lambda: parse_trace(data, source="fuzz.json"))
    streamed = _streamed(data)
    # the streaming path gives the whole-file path's trace, or falls back to it
    assert isinstance(whole, UserError) == isinstance(streamed, UserError), (whole, streamed)
    if isinstance(whole, UserError) or isinstance(streamed, UserError):
        return
    _same(whole, streamed)
    # whatever loads must also analyse
    a = analyze_trace(whole, path="fuzz.json")
    a.to_dict()


@_settings
@given(st.deferred(lambda: st.integers(min_value=0, max_value=len(_seed()))))
def test_truncated(n: int) -> None:
    _check(_seed()[:n])


@_settings
@given(
    st.lists(
        st.tuples(st.deferred(lambda: st.integers(0, len(_seed()) - 1)), st.binary(min_size=1, max_size=4)),
        min_size=1,
        max_size=6,
    )
)
def test_byte_mutations(edits: list[tuple[int, bytes]]) -> None:
    data = bytearray(_seed())
    for pos, new in edits:
        data[pos : pos + len(new)] = new
    _check(bytes(data))


@_settings
@given(st.binary(max_size=300))
def test_garbage_bytes(data: bytes) -> None:
    _check(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = ["ph", "cat", "name", "ts", "dur", "pid", "tid", "id", "args"]
_ARGS = [
    "correlation",
    "External id",
    "external id",
    "registers per thread",
    "shared memory",
    "grid",
    "block",
    "est. achieved occupancy %",
    "device",
    "Input type",
    "Concrete Inputs",
]


def _mutated(source: bytes, edits: list[tuple[int, str, object]]) -> bytes:
    """`source` with each (event index, field, value) edit applied; args fields go into args."""
    doc = json.loads(source)
    events = doc["traceEvents"]
    for i, key, value in edits:
        ev = events[i]
        if key in _ARGS and isinstance(ev.get("args"), dict):
            ev["args"][key] = value
        else:
            ev[key] = value
    return json.dumps(doc).encode()


@_settings
@given(
    st.lists(
        st.tuples(
            st.deferred(lambda: st.integers(0, _events(_seed()) - 1)), st.sampled_from(_FIELDS + _ARGS), _json
        ),
        min_size=1,
        max_size=8,
    )
)
def test_field_mutations_of_valid_json(edits: list[tuple[int, str, object]]) -> None:
    _check(_mutated(_seed(), edits))


@_settings
@given(_json)
def test_arbitrary_json_documents(doc: object) -> None:
    _check(json.dumps(doc).encode())
    _check(json.dumps({"traceEvents": doc}).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.deferred(lambda: st.integers(0, _events(_rich()) - 1)), st.sampled_from(_FIELDS + _ARGS), _json
        ),
        min_size=1,
        max_size=12,
    )
)
def test_field_mutations_of_a_rich_trace(edits: list[tuple[int, str, object]]) -> None:
    _check(_mutated(_rich(), edits))
