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


def test_timestamps_read_exactly_and_cleaned_as_any_field_whatever_the_path(tmp_path: Path) -> None:
    """ts is parsed a chunk at a time (decode.raw_floats): 17-digit microseconds since the epoch
    read as json reads them (correctly rounded), and a timestamp of the wrong type cleaned as the
    lenient decode cleans any field (a number in a string read, anything else 0), with the
    warning, on the whole-file, streamed and forked paths alike."""
    from attnprof.trace import forked, stream
    from attnprof.trace.decode import LENIENT

    stamps = ["1712195495527379.2", "1712195495527384.0", "17", "1.5e3", "-0.0", "9007199254740993"]
    good = [_kernel(0, 1.0) | {"ts": 0} for _ in stamps]
    text = json.dumps({"traceEvents": good})
    for i, st in enumerate(stamps):  # the numbers as written, not as Python would write them
        text = (
            text.replace('"ts": 0', f'"ts": {st}', 1)
            if i == 0
            else text.replace(', "ts": 0,', f', "ts": {st},', 1)
        )
    t = parse_trace(text.encode())
    assert t.ts[t.kernel_rows].tolist() == [float(x) for x in stamps]
    assert not t.warnings
    odd = [
        *good,
        _kernel(0, 1.0) | {"ts": "123.25"},
        _kernel(0, 1.0) | {"ts": None},
        _kernel(0, 1.0) | {"ts": True},
    ]
    odd += [_kernel(0, 1.0) | {"ts": [1]}, _kernel(5, 1.0) | {"dur": [2]}]
    # numbers beyond float range: msgspec refused them even untyped, and the load failed
    raw = json.dumps({"traceEvents": odd}).encode().replace(b'"ts": [1]', b'"ts": 1e400')
    raw = raw.replace(b'"dur": [2]', b'"dur": -1e400')
    p = tmp_path / "odd.json"
    p.write_bytes(raw)
    small = stream.BLOCK
    try:
        stream.BLOCK = 512  # several blocks, and with parallel=True a forked process
        loads = [parse_trace(raw), forked.streamed(p, parallel=False), forked.streamed(p, parallel=True)]
    finally:
        stream.BLOCK = small
    for got in loads:
        assert got is not None
        assert got.ts[got.kernel_rows][-5:].tolist() == [123.25, 0.0, 0.0, 0.0, 5.0]
        assert got.dur[got.kernel_rows][-1] == 0.0
        assert got.warnings.count(LENIENT) == 1


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


def _kernel(ts: float, dur: float, name: str = "ampere_sgemm_128x64_nn") -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {}}


def test_negative_and_absurd_durations_count_as_zero_with_a_warning(tmp_path: Path) -> None:
    from attnprof.analysis import analyze

    events = [_kernel(0, 10), _kernel(20, -5), _kernel(40, 1e300), _kernel(60, 30, "softmax_warp_forward")]
    p = tmp_path / "durs.json"
    p.write_text(json.dumps({"traceEvents": events}))
    t = load_trace(p)
    assert t.dur.tolist() == [10.0, 0.0, 0.0, 30.0]
    assert len(t.warnings) == 1 and "2 event(s)" in t.warnings[0] and "-5 us" in t.warnings[0]
    d = analyze(p).to_dict()
    assert d["totals"]["kernels"] == 4 and d["totals"]["kernel_time_us"] == 40.0
    pcts = [c["pct_time"] for c in d["categories"]]
    assert all(0.0 <= x <= 100.0 for x in pcts) and sum(pcts) == pytest.approx(100.0)
    assert any("negative or impossible duration" in w for w in d["warnings"])


def test_plain_durations_give_no_duration_warning(tmp_path: Path) -> None:
    p = tmp_path / "ok.json"
    p.write_text(json.dumps({"traceEvents": [_kernel(0, 10), _kernel(20, 0)]}))
    assert load_trace(p).warnings == []


@pytest.mark.parametrize("where", ["events", "event", "args", "metadata", "top"])
def test_json_nested_100k_deep_is_a_user_error_not_a_recursion_error(tmp_path: Path, where: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = {
        "events": '{"traceEvents": ' + deep + "}",
        "event": '{"traceEvents": [' + deep + "]}",
        "args": '{"traceEvents": [{"ph": "X", "cat": "kernel", "args": {"grid": ' + deep + "}}]}",
        "metadata": '{"traceEvents": [], "deviceProperties": ' + deep + "}",
        "top": deep,
    }[where]
    p = tmp_path / "deep.json"
    p.write_text(text)
    with pytest.raises(UserError, match="nested deeper") as info:
        load_trace(p)
    assert str(p) in str(info.value)


def test_devices_and_fifos_are_refused_before_reading(tmp_path: Path) -> None:
    import os

    with pytest.raises(UserError, match="character device"):
        load_trace("/dev/zero")
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="FIFO"):  # opening it would block: it must not be opened
        load_trace(fifo)


def test_a_file_too_large_for_the_memory_limit_is_refused_with_the_figures(tmp_path: Path) -> None:
    p = tmp_path / "big.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": [_kernel(i, 1) for i in range(20_000)]}).encode()))
    raw = len(gzip.decompress(p.read_bytes()))
    assert raw > 10 * p.stat().st_size  # the estimate must come from the gzip trailer, not the file
    with pytest.raises(UserError, match="--max-memory") as info:
        load_trace(p, max_memory=raw / 1e12)
    assert f"{raw / 1e6:.1f} MB of JSON" in str(info.value)
    assert load_trace(p, max_memory=0).n_events == 20_000  # 0: no limit


def test_other_accelerators_forward_backward_links_and_shapes_are_kept() -> None:
    """MTIA runtime calls are launches and its device events are kept (not dropped as unknown);
    fwdbwd flows are kept apart from launch flows; autograd sequence numbers and the input
    shapes of GEMM and softmax ops are read."""
    doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::bmm",
                "pid": 1,
                "tid": 1,
                "ts": 0,
                "dur": 5,
                "args": {"Sequence number": 7, "Input Dims": [[2, 4, 8], [2, 8, 4]]},
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add",
                "pid": 1,
                "tid": 1,
                "ts": 6,
                "dur": 1,
                "args": {"Input Dims": [[2], [2]]},
            },
            {
                "ph": "X",
                "cat": "mtia_runtime",
                "name": "runFunction",
                "pid": 1,
                "tid": 1,
                "ts": 1,
                "dur": 2,
                "args": {"correlation": 5},
            },
            {
                "ph": "X",
                "cat": "mtia_ccp_events",
                "name": "pe_exe",
                "pid": 9,
                "tid": 3,
                "ts": 4,
                "dur": 10,
                "args": {},
            },
            {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 1, "ts": 0},
            {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1, "tid": 2, "ts": 50},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 1},
        ]
    }
    t = parse_trace(json.dumps(doc).encode())
    kinds = t.kind.tolist()
    assert kinds.count(Kind.RUNTIME) == 1 and kinds.count(Kind.DEVICE) == 1
    assert t.categories[int(t.cat[kinds.index(Kind.DEVICE)])] == "mtia_ccp_events"
    assert not any("unknown categories" in w for w in t.warnings)
    assert t.flow_fwdbwd.tolist() == [True, True, False]
    assert int(t.seq[0]) == 7 and int(t.seq[1]) == -1
    assert t.shapes == {0: [[2, 4, 8], [2, 8, 4]]}  # aten::add's shapes are not needed


def test_shared_mtia_trace_keeps_its_device_events() -> None:
    t = load_trace(trace("facebookresearch__HolisticTraceAnalysis__tests__data__mtia_inference"))
    assert int((t.kind == Kind.DEVICE).sum()) == 1313
    assert int((t.kind == Kind.RUNTIME).sum()) == 823


def _fields_equal(a: object, b: object) -> list[str]:
    import dataclasses

    bad = []
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        same = np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y
        if not same:
            bad.append(f.name)
    return bad


@pytest.mark.parametrize(
    "prefix", [LEGACY, H100, "facebookresearch__HolisticTraceAnalysis__tests__data__ns_resolution"]
)
def test_streamed_parallel_and_whole_file_loads_are_identical(tmp_path: Path, prefix: str) -> None:
    from attnprof.analysis.pipeline import analyze_trace
    from attnprof.trace import forked, stream

    raw = _raw(prefix)
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    whole = parse_trace(raw, source=plain.name)
    small = stream.BLOCK
    try:
        stream.BLOCK = 8192  # many cuts, and events longer than a block
        streamed = forked.streamed(plain, parallel=False)
        parallel = forked.streamed(plain, parallel=True)  # this process and a forked one, half each
        gz = forked.streamed(trace(prefix), parallel=False)  # gunzipped in a second thread
    finally:
        stream.BLOCK = small
    assert streamed is not None and parallel is not None and gz is not None
    assert _fields_equal(streamed, whole) == []
    assert _fields_equal(parallel, whole) == []
    assert _fields_equal(gz, whole) == ["source"]  # named after the .gz file
    # and so is every figure of the analysis
    a = analyze_trace(whole, top=0).to_dict()
    assert analyze_trace(parallel, top=0).to_dict() == a
    assert load_trace(plain).n_events == whole.n_events  # the default path


def test_streaming_falls_back_to_the_whole_file_path_for_what_it_cannot_cut(tmp_path: Path) -> None:
    from attnprof.trace import forked

    ev = {"ph": "X", "cat": "kernel", "name": "k}, {x", "pid": 0, "tid": 1, "ts": 1, "dur": 2}
    cases = {
        "bare.json": json.dumps([ev, ev]),  # a bare array
        "nan.json": '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}]}',
        "tail.json": json.dumps({"traceEvents": [ev] * 3, "deviceProperties": [{"id": 0}, {"id": 1}]}),
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_text(text)
        whole = parse_trace(p.read_bytes(), source=name)
        got = load_trace(p)
        assert _fields_equal(got, whole) == [], name
    assert forked.streamed(tmp_path / "bare.json") is None and forked.streamed(tmp_path / "nan.json") is None
    assert forked.streamed(tmp_path / "tail.json") is not None  # "}, {" inside a name and after the array


def test_a_gzip_bomb_is_refused_while_it_is_decompressed(tmp_path: Path) -> None:
    from attnprof.trace import limits

    avail = limits.available_memory()
    assert avail is not None
    fraction = (8 << 20) * limits.PEAK_FACTOR / avail  # at most 8 MB of raw JSON
    for name, payload in (
        ("zeros.json.gz", b"\0" * (64 << 20)),  # not JSON: the whole-file path is bounded too
        ("valid.json.gz", b'{"traceEvents": [' + b'{"ph": "i"},' * (6 << 20) + b'{"ph": "i"}]}'),
    ):
        data = bytearray(gzip.compress(payload, compresslevel=1))
        data[-4:] = (100).to_bytes(4, "little")  # the trailer lies (it is only the size mod 4 GiB)
        p = tmp_path / name
        p.write_bytes(bytes(data))
        with pytest.raises(UserError, match="decompresses to more than") as info:
            load_trace(p, max_memory=fraction)
        assert "--max-memory 0" in str(info.value) and str(p) in str(info.value)


def test_cuts_inside_names_and_nested_lists_are_skipped_not_fatal(tmp_path: Path) -> None:
    from attnprof.trace import forked, stream

    events = []
    for i in range(3000):
        events.append(_kernel(i * 10, 5, name=f"k{i % 7}}}, {{lambda(float)#1}}"))  # "}, {" in a name
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": 1, "ts": i * 10, "dur": 4,
                       "args": {"nested": [{"a": 1}, {"b": 2}], "External id": i}})  # fmt: skip
    p = tmp_path / "cuts.json"
    p.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
    whole = parse_trace(p.read_bytes(), source=p.name)
    small, window = stream.BLOCK, stream._CUT_WINDOW
    try:
        stream.BLOCK = 4096
        # the last cuts are looked for at a block's end first: a window smaller than one event
        # (widened until it holds enough cuts) and one larger than the block
        for stream._CUT_WINDOW in (16, 32 << 10):
            for parallel in (False, True):
                streamed = forked.streamed(p, parallel=parallel)
                assert streamed is not None  # no fallback: a bad cut is skipped for the one before
                assert _fields_equal(streamed, whole) == []
    finally:
        stream.BLOCK, stream._CUT_WINDOW = small, window


def test_work_meanwhile_runs_once_while_the_forked_process_decodes(tmp_path: Path) -> None:
    import os

    plain = tmp_path / "t.json"
    plain.write_bytes(_raw("facebookresearch__HolisticTraceAnalysis__tests__data__ns_resolution"))
    whole = parse_trace(plain.read_bytes(), source=plain.name)
    for parallel in (True, False):  # a forked process, where it takes the larger part; none
        calls: list[tuple[int, bool]] = []
        got = load_trace(
            plain, parallel=parallel, meanwhile=lambda forked, c=calls: c.append((os.getpid(), forked))
        )
        assert calls == [(os.getpid(), parallel)], parallel  # once, in this process, saying if forked
        assert _fields_equal(got, whole) == [], parallel

    def fail(forked: bool) -> None:
        raise KeyboardInterrupt

    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    before = set(children.read_text().split()) if children.exists() else set()
    with pytest.raises(KeyboardInterrupt):  # stops the forked process and propagates
        load_trace(plain, parallel=True, meanwhile=fail)
    if children.exists():
        # the forked process was reaped: no zombie left. Other tests' children (a pool's worker)
        # may outlive them in the full suite, so only a child new since the load counts
        assert set(children.read_text().split()) <= before


def test_a_forked_decoder_only_where_the_load_average_leaves_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from attnprof.trace import stream

    for avg, spare in ((0.3, True), (1.9, True), (2.0, False), (3.5, False)):
        monkeypatch.setattr(os, "getloadavg", lambda a=avg: (a, a, a))
        assert stream._cpu_to_spare(2) is spare, avg

    def unknown() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", unknown)
    assert stream._cpu_to_spare(2)  # unknown: as before, two CPUs are used


def test_without_a_memfd_the_forked_part_comes_back_through_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnprof.trace import forked

    plain = tmp_path / "t.json"
    plain.write_bytes(_raw("facebookresearch__HolisticTraceAnalysis__tests__data__ns_resolution"))
    whole = parse_trace(plain.read_bytes(), source=plain.name)
    monkeypatch.setattr(forked, "_memfd", lambda: None)  # not Linux, or memfd_create refused
    got = forked.streamed(plain, parallel=True)
    assert got is not None and _fields_equal(got, whole) == []


def _linked_pair(corr: int, ext: int, flow: int) -> bytes:
    """A cpu op, its launch and its kernel, linked by External id and correlation, and a flow."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
         "args": {"External id": ext, "Sequence number": ext}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1,
         "dur": 2, "args": {"correlation": corr, "External id": ext}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
         "args": {"correlation": corr, "External id": ext, "device": 0}},
        {"ph": "s", "cat": "ac2g", "name": "f", "pid": 1, "tid": 1, "ts": 1, "id": flow},
        {"ph": "f", "cat": "ac2g", "name": "f", "pid": 0, "tid": 7, "ts": 5, "id": flow, "bp": "e"},
    ]  # fmt: skip
    return json.dumps({"traceEvents": ev}).encode()


def test_ids_are_int32_where_they_fit_and_int64_where_one_does_not() -> None:
    from attnprof.analysis.attribution.links import link

    small = parse_trace(_linked_pair(7, 3, 9))
    assert {small.corr.dtype, small.ext.dtype, small.seq.dtype, small.flow_id.dtype} == {np.dtype(np.int32)}
    top = 2**31 - 1  # the largest id int32 holds
    assert parse_trace(_linked_pair(top, 3, 9)).corr.dtype == np.int32
    for big in ((2**31, 3, 9), (7, 2**40, 9), (7, 3, 2**33)):  # one id past int32 widens all four
        t = parse_trace(_linked_pair(*big))
        assert {t.corr.dtype, t.ext.dtype, t.seq.dtype, t.flow_id.dtype} == {np.dtype(np.int64)}, big
        assert int(t.corr[2]) == big[0] and int(t.ext[2]) == big[1] and int(t.flow_id[0]) == big[2]
    for t in (small, parse_trace(_linked_pair(2**31, 2**40, 2**33))):
        links = link(t)  # the kernel finds its launch and its op whichever the width
        assert links.launch.tolist() == [1] and links.cpu_op.tolist() == [0]


def test_frames_and_inputs_are_kept_only_when_asked_for() -> None:
    from attnprof.analysis.attribution.links import link
    from attnprof.analysis.attribution.regions import find_region
    from attnprof.trace.model import Keep

    path = trace("AMD-AGI__TraceLens__tests__traces__mi300__resnet_act_checkpoint")  # with_stack, shapes
    full = load_trace(path)
    lean = load_trace(path, keep=Keep(frames=False, inputs=False))
    py = full.kind == Kind.PYTHON
    assert py.sum() > full.n_events / 2  # most of this trace's events are Python frames
    assert (lean.kind != Kind.PYTHON).all() and lean.n_events == int((~py).sum())
    assert lean.dropped["python_function/X"] == int(py.sum())  # dropped, and said so
    assert not any("unknown categories" in w for w in lean.warnings)
    assert len(full.inputs) > 0 and full.shapes
    assert len(lean.inputs) == 0 and not lean.shapes and not lean.conversions
    for col in ("kind", "ts", "dur", "lane", "corr", "ext", "seq"):  # every other row as it was
        assert np.array_equal(getattr(lean, col), getattr(full, col)[~py]), col
    # the same names (their ids differ: the frames' names are not interned)
    assert [lean.names[i] for i in lean.name.tolist()] == [full.names[i] for i in full.name[~py].tolist()]
    assert len(lean.names) < len(full.names)
    assert np.array_equal(lean.flow_id, full.flow_id) and np.array_equal(lean.registers, full.registers)
    # what the harness reads of a trace loaded so (harness/profile.py) is the same
    a, b = link(full), link(lean)
    assert int((a.launch >= 0).sum()) == int((b.launch >= 0).sum()) and a.gpu_rows.size == b.gpu_rows.size
    name = next(n for n in full.names if n.startswith("ProfilerStep"))
    ra, rb = find_region(full, a, name), find_region(lean, b, name)
    assert [i.cpu_ops.size for i in ra.instances] == [i.cpu_ops.size for i in rb.instances]
    assert [i.gpu.size for i in ra.instances] == [i.gpu.size for i in rb.instances]
    assert [i.cpu_time_us for i in ra.instances] == [i.cpu_time_us for i in rb.instances]


def test_the_whole_file_path_is_refused_by_its_own_larger_estimate(tmp_path: Path) -> None:
    from attnprof.trace import limits

    ev = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 1,
        "ts": 1,
        "dur": 2,
        "args": {"correlation": 1},
    }
    streamable, bare = tmp_path / "doc.json", tmp_path / "bare.json"
    streamable.write_text(json.dumps({"traceEvents": [ev] * 20000}))
    bare.write_text(json.dumps([ev] * 20000))  # a bare array: only the whole-file path reads it
    avail = limits.available_memory()
    assert avail is not None and limits.PEAK_FACTOR < limits.WHOLE_FACTOR
    # a limit between the two estimates of this size: the streamed load fits, the whole-file one not
    size = streamable.stat().st_size
    fraction = size * (limits.PEAK_FACTOR + limits.WHOLE_FACTOR) / 2 / avail
    assert load_trace(streamable, max_memory=fraction).kernel_rows.size == 20000
    with pytest.raises(UserError, match="of memory to analyse") as info:
        load_trace(bare, max_memory=fraction)
    assert "--max-memory 0" in str(info.value) and str(bare) in str(info.value)
    assert load_trace(bare, max_memory=0).kernel_rows.size == 20000  # no limit: it loads


def test_each_kernel_column_is_int32_where_its_values_fit() -> None:
    def kernel(smem: int) -> bytes:
        args = {"registers per thread": 32, "shared memory": smem, "grid": [2, 1, 1], "block": [128, 1, 1]}
        ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": args}
        return json.dumps({"traceEvents": [ev]}).encode()

    small, big = parse_trace(kernel(4096)), parse_trace(kernel(2**33))
    for col in ("registers", "shared_mem", "block_threads", "grid_blocks", "device"):
        assert getattr(small, col).dtype == np.int32, col
    assert big.shared_mem.dtype == np.int64 and int(big.shared_mem[0]) == 2**33  # this one alone widens
    assert big.registers.dtype == np.int32 and big.block_threads.tolist() == [128]


def test_shapes_hold_one_list_per_distinct_input_dims() -> None:
    from attnprof.trace.model import RowMap

    prefix = "AMD-AGI__TraceLens__tests__traces__mi300__Qwen_Qwen1.5-0.5B-Chat"
    t = load_trace(trace(prefix))
    assert isinstance(t.shapes, RowMap) and len(t.shapes) > len(t.shapes.distinct) > 0
    # the same shapes the raw JSON records for those ops, in file order (the kept events' order)
    raw = json.loads(_raw(prefix))["traceEvents"]
    shaped = {"aten::bmm", "aten::matmul", "aten::mm", "aten::baddbmm", "aten::softmax", "aten::_softmax",
              "aten::_safe_softmax"}  # fmt: skip
    want = [e["args"]["Input Dims"] for e in raw
            if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in shaped
            and isinstance((e.get("args") or {}).get("Input Dims"), list)]  # fmt: skip
    assert [t.shapes[r] for r in t.shapes] == want
    assert all(t.names[int(t.name[r])] in shaped for r in t.shapes)
