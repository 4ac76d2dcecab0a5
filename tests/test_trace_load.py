"""The loader on every real trace format, and on the broken inputs real traces come as."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from _paths import TRACES, trace
from attnprof.errors import UserError
from attnprof.trace import Kind, load_trace, parse_trace

ALL = sorted(TRACES.glob("*.json.gz"))
LEGACY = "pytorch__kineto__tb_plugin__samples__resnet50"
H100 = "AMD-AGI__TraceLens__tests__traces__h100"
TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"


def _raw(prefix: str) -> bytes:
    return gzip.decompress(trace(prefix).read_bytes())


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name[:40])
def test_every_shared_trace_loads_into_columns(path: Path) -> None:
    t = load_trace(path)
    assert t.n_events > 0
    n = t.n_events
    for col in (t.kind, t.name, t.ts, t.dur, t.lane, t.corr, t.ext):
        assert col.shape == (n,)
    assert t.name.max() < len(t.names)
    assert t.kernel_rows.size == int((t.kind == Kind.KERNEL).sum())
    assert t.registers.shape == t.kernel_rows.shape
    assert not t.repairs  # the shared traces are valid JSON


def test_legacy_2021_categories_map_to_the_modern_kinds() -> None:
    t = load_trace(trace(LEGACY))
    counts = np.bincount(t.kind, minlength=8)
    assert counts[Kind.KERNEL] == 8772
    assert counts[Kind.MEMSET] == 312
    assert counts[Kind.MEMCPY] == 12
    assert counts[Kind.CPU_OP] == 23646  # "Operator"
    assert counts[Kind.RUNTIME] == 11923  # "Runtime"
    # legacy kernels carry "external id" (lower case); it must land in the same column
    assert (t.ext[t.kernel_rows] >= 0).all()
    assert t.flow_id.size == 2 * 9096  # "async" s/f flows


def test_plain_json_and_gzip_give_the_same_trace(tmp_path: Path) -> None:
    raw = _raw(H100)
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    a, b = load_trace(plain), load_trace(trace(H100))
    assert a.names == b.names
    assert np.array_equal(a.ts, b.ts)


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    p = tmp_path / "trace.json"  # gzip bytes under a .json name
    p.write_bytes(trace(H100).read_bytes())
    assert load_trace(p).kernel_rows.size == 60


def test_bare_array_top_level(tmp_path: Path) -> None:
    events = json.loads(_raw(H100))["traceEvents"]
    p = tmp_path / "array.json"
    p.write_text(json.dumps(events))
    t = load_trace(p)
    assert t.kernel_rows.size == 60
    assert t.device_properties == []


def test_control_characters_and_bare_na_are_repaired_and_reported() -> None:
    raw = _raw(TRITON).decode()
    doc = json.loads(raw)
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    text = json.dumps(doc)
    # a raw control character inside a name, and a bare N/A value: both invalid JSON
    broken = text.replace(json.dumps(kernel["name"]), json.dumps(kernel["name"])[:-1] + '\x01"', 1)
    broken = broken.replace('"queued": 0', '"queued": N/A', 1)
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken)
    t = parse_trace(broken.encode(), source="broken.json")
    assert t.kernel_rows.size == 1
    assert any("control character" in r for r in t.repairs)
    assert any("N/A" in r for r in t.repairs)


def test_field_of_unexpected_type_is_decoded_leniently() -> None:
    doc = json.loads(_raw(TRITON))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["correlation"] = "not a number"
    kernel["dur"] = "1.76"
    t = parse_trace(json.dumps(doc).encode())
    assert t.kernel_rows.size == 1
    assert t.dur[t.kernel_rows[0]] == pytest.approx(1.76)
    assert t.corr[t.kernel_rows[0]] == -1
    assert t.warnings


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"hello world", "not JSON"),
        (b'{"traceEvents": [{"ph": "X", "name": "a"', "truncated"),
        (b'{"foo": 1}', "traceEvents"),
        (b"[1, 2, 3]", "not a PyTorch profiler trace"),
        (b'"a string"', "not a PyTorch profiler trace"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
    ],
)
def test_bad_input_is_one_clear_user_error_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(UserError) as info:
        load_trace(p)
    text = str(info.value)
    assert str(p) in text
    assert message.lower() in text.lower()
    assert "\n" not in text


def test_truncated_gzip_is_a_user_error(tmp_path: Path) -> None:
    data = trace(H100).read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="gzip"):
        load_trace(p)


def test_missing_file_and_directory_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        load_trace(tmp_path / "nope.json")
    with pytest.raises(UserError, match="directory"):
        load_trace(tmp_path)
