"""The typed analysis record (attnprof.analysis.records.result) and its JSON contract, "attnprof.analysis/1".

The JSON is msgspec's encoding of the record, nothing written by hand: decoding what `analyze --json`
prints gives back an equal TraceAnalysis, and encoding that gives back the same bytes. A field
declared out of JSON order, a key the record does not declare (decoding would drop it), a null
turned into a missing key or an int into a float all break the byte comparison.
"""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import orjson
import pytest

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.records.result import (
    Gaps,
    KernelStat,
    RegionStat,
    Roofline,
    TraceAnalysis,
    decode_analysis,
)
from attnprof.workload import Workload

# as `attnprof analyze --json` writes it (attnprof.cli.analyze)
_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY

TRACES = [
    "AMD-AGI__TraceLens__tests__traces__h100",  # CUDA: occupancy, flash kernels, launch gaps
    "facebookresearch__HolisticTraceAnalysis__tests__data__mtia_inference",  # device events only
    "facebookresearch__HolisticTraceAnalysis__tests__data__cpu_only",  # no device at all
    "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example",  # driver-API launch
    "facebookresearch__HolisticTraceAnalysis__tests__data__amd_trace__mi250",  # ROCm, backward links
    "pytorch__kineto__tb_plugin__samples__resnet50",  # the 2021 legacy format
    "CodingPlatelets__SwitchTransformers",  # unfused attention confirmed by shapes
]


def _encode(a: TraceAnalysis) -> bytes:
    return orjson.dumps(a.to_dict(), option=_OPTS)


@pytest.mark.parametrize("prefix", TRACES)
def test_json_of_a_real_trace_decodes_into_the_record_and_encodes_back_byte_for_byte(prefix: str) -> None:
    # with a workload, so that the roofline is a record too, not null
    wl = Workload(batch=1, heads=2, seq=64, head_dim=16, dtype="bf16")
    a = analyze(trace(prefix), top=0, workload=wl)
    raw = _encode(a)
    back = decode_analysis(raw)
    assert isinstance(back.roofline, Roofline) and isinstance(back.regions[0], RegionStat)
    assert all(isinstance(k, KernelStat) for k in back.kernels)
    assert back == a
    assert _encode(back) == raw


def test_cli_json_is_the_records_encoding() -> None:
    """What the command prints (a real subprocess) decodes into the record and back to its bytes."""
    cmd = [sys.executable, "-c", "from attnprof.cli import main; main()", "analyze", "--json"]
    p = subprocess.run(
        [*cmd, str(trace(TRACES[0]))],
        capture_output=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert p.returncode == 0, p.stderr
    back = decode_analysis(p.stdout)
    assert back.kernels[0].occupancy is not None and back.device.name == "NVIDIA H100 80GB HBM3"
    assert _encode(back) + b"\n" == p.stdout


def test_nulls_stay_null_and_gaps_keep_only_the_keys_the_trace_supports() -> None:
    a = analyze(trace(TRACES[2]))  # CPU only: no launches, so no launch gap figures at all
    d = a.to_dict()
    assert d["roofline"] is None and d["device"]["accelerator"] is None and d["device"]["name"] is None
    assert d["trace"]["gaps"] == {}
    gaps = Gaps(kernel_launches=3, launches_without_device_op=0)
    assert msgspec.to_builtins(gaps) == {"kernel_launches": 3, "launches_without_device_op": 0}


def test_a_missing_key_is_refused_not_guessed() -> None:
    d = analyze(trace(TRACES[3])).to_dict()
    del d["totals"]["kernels"]
    with pytest.raises(msgspec.ValidationError, match="kernels"):
        decode_analysis(orjson.dumps(d))


def test_terminal_view_of_a_roofline_with_no_measured_time() -> None:
    """A region with no time has no achieved TFLOP/s (None): the terminal view says "not
    measured" and why, instead of failing on the None (it raised TypeError before)."""
    import io
    from pathlib import Path

    from rich.console import Console

    from attnprof.report.analysis_view import render_analysis

    d = analyze(trace(TRACES[2]))
    roof = Roofline(
        basis="cpu time per instance",
        region="attn_fwd",
        workload="1x2x64x16 fp32",
        flops_useful=1.0,
        flops_executed=1.0,
        bytes_min=1.0,
        time_us=0.0,
        note="no time measured in the region",
    )
    buf = io.StringIO()
    render_analysis(msgspec.structs.replace(d, roofline=roof), Console(file=buf, width=200))
    line = next(x for x in buf.getvalue().splitlines() if x.startswith("roofline"))
    assert line.endswith("not measured (no time measured in the region)"), line
    assert Path(d.path).name in buf.getvalue() or d.source in buf.getvalue()
