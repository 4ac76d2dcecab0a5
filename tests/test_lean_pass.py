"""Two profiler passes, honestly used: each variant is profiled lean (no shapes, memory or stacks)
and rich (shapes and memory); the lean trace is kept beside the rich one and recorded, and every
time share a report shows (ops, categories, the timeline, the diffs' op times, the causes' sizes)
is read from it, while counts, findings, shapes and memory stay the rich trace's. A run directory
without lean traces (made before they were kept) still reports, from the rich trace, and says so.
A real CPU run (the session's cpu_run, S=64), its traces analysed here directly to compare."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from attnprof.analysis import analyze
from attnprof.analysis.attribution.classify import cpu_category
from attnprof.analysis.records.result import RegionStat
from attnprof.cli import main
from attnprof.compare.build import _self_segments
from attnprof.compare.records import Row, TimelineOp
from attnprof.records import RunRecord
from attnprof.report.data import build_report_data
from attnprof.report.html import render_html
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize


def _events(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rt") as f:
        events: list[dict[str, object]] = json.load(f)["traceEvents"]
    return events


def _region(path: Path) -> RegionStat:
    """attn_fwd as the analyser reports it for one trace file."""
    return next(r for r in analyze(path, region=None, top=0).regions if r.name == "attn_fwd")


def _profiled(rows: list[Row]) -> list[Row]:
    rows = [r for r in rows if r.ok and r.trace]
    assert rows
    return rows


def _assert_times_from(row: Row, trace: Path) -> None:
    """The row's op times, category times, timeline and the time they are shares of are those
    of `trace`'s attn_fwd region."""
    region = _region(trace)
    ops = {
        o.name: (float(o.per_instance), float(o.self_us_per_instance))
        for o in region.cpu_ops_by_name
        if o.name
    }
    assert {o.name: (o.count, o.time_us) for o in row.ops} == ops
    cats: dict[str, float] = defaultdict(float)
    for name, (_, us) in ops.items():
        cats[cpu_category(name)] += us
    assert row.cpu_category_time_us == pytest.approx({c: us for c, us in cats.items() if us > 0})
    assert row.ops_time_us_per_forward == pytest.approx(region.cpu_time_us_per_instance)
    segments: list[TimelineOp] = _self_segments(region.cpu_ops)
    assert row.timeline == segments and row.timeline_lane == "cpu"


def test_the_lean_trace_is_kept_beside_the_rich_one_and_recorded(cpu_run: tuple[Path, RunRecord]) -> None:
    out, record = cpu_run
    profiled = [r for r in record.results if r.status == "ok" and r.trace]
    assert profiled
    for r in profiled:
        assert r.trace and r.lean_trace == r.trace.removesuffix(".json.gz") + ".lean.json.gz"
        lean, rich = _events(out / r.lean_trace), _events(out / r.trace)
        # the lean pass records no shapes and no memory; the rich one both
        assert not any("Input Dims" in e.get("args", {}) for e in lean)  # type: ignore[operator]
        assert not any(e.get("name") == "[memory]" for e in lean)
        assert any(e.get("name") == "[memory]" for e in rich)
        # (flex's trace is one compiled region: no aten op with inputs to record)
        assert r.variant == "flex" or any("Input Dims" in e.get("args", {}) for e in rich)  # type: ignore[operator]
        # the lean time per forward the run recorded is this trace's (one definition of a forward)
        assert r.profile is not None
        region = _region(out / r.lean_trace)
        # (the analysis rounds to the nanosecond)
        assert region.cpu_time_us_per_instance == pytest.approx(
            r.profile.lean_cpu_time_us_per_forward, abs=1e-3
        )
    # run.json names it, relative to the run directory like the rich trace
    raw = json.loads((out / "run.json").read_text())
    assert {x["lean_trace"] for x in raw["results"] if x["trace"]} == {r.lean_trace for r in profiled}


def test_time_shares_come_from_the_lean_trace_and_counts_from_the_rich_one(
    cpu_run: tuple[Path, RunRecord], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = cpu_run
    data = build_report_data(out)
    comp = data.comparison
    for row in _profiled(comp.rows):
        assert row.time_source == "lean" and row.lean_trace and row.trace
        _assert_times_from(row, Path(row.lean_trace))
        # op counts, the profiled time per forward (the rich inflation) and findings: the rich trace's
        rich = _region(Path(row.trace))
        assert row.cpu_ops_per_forward == rich.cpu_ops_per_instance
        assert row.cpu_time_us_per_forward == pytest.approx(rich.cpu_time_us_per_instance)
        codes = {f.code for f in analyze(Path(row.trace), region=None, top=0).findings}
        assert codes <= set(row.finding_codes) | {"ABOVE_PEAK"}  # compare restates ABOVE_PEAK on clean time
    # the diffs set the lean op times side by side, each side's in clean time: its clean median
    # split by the lean op's share of the lean trace's time per forward
    assert comp.diffs
    for d in comp.diffs:
        assert d.basis == "clean"
        ra, rb = comp.row(d.a), comp.row(d.b)
        a, b = (
            {o.name: o.time_us / r.ops_time_us_per_forward * r.median_ms * 1e3 for o in r.ops}  # type: ignore[operator]
            for r in (ra, rb)
        )
        for k in (k for fam in d.families for k in fam.kernels):
            assert k.time_a_us == pytest.approx(a.get(k.name, 0.0)) and k.time_b_us == pytest.approx(
                b.get(k.name, 0.0)
            )
    # every output says which pass the shares come from
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        assert t("source.lean") in summarize(data, t)
    html = render_html(data, Translator("th"), out_dir=out)
    assert Translator("th")("source.lean") in html
    assert main(["compare", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert " ".join(Translator("en")("source.lean").split()) in printed


def test_a_run_without_lean_traces_reports_from_the_rich_ones_and_says_so(
    cpu_run: tuple[Path, RunRecord], tmp_path: Path
) -> None:
    """run.json as attnprof wrote it before the lean trace was kept: no lean_trace key, no lean
    files. The report is whole, its shares the rich trace's, and it says so in every language."""
    out, _ = cpu_run
    old = tmp_path / "old"
    shutil.copytree(out, old, ignore=shutil.ignore_patterns("*.lean.json.gz"))
    raw = (old / "run.json").read_bytes()
    text = re.sub(rb',\s*"lean_trace": (null|"[^"]*")', b"", raw)
    assert b"lean_trace" not in text and b'"trace": "traces/' in text
    (old / "run.json").write_bytes(text)
    data = build_report_data(old)
    for row in _profiled(data.comparison.rows):
        assert row.time_source == "rich" and row.lean_trace is None and row.trace
        _assert_times_from(row, Path(row.trace))
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        assert t("source.rich") in summarize(data, t)
    assert Translator("th")("source.rich") in render_html(data, Translator("th"), out_dir=old)


def test_a_lean_trace_gone_falls_back_for_its_row_alone(
    cpu_run: tuple[Path, RunRecord], tmp_path: Path
) -> None:
    """The record names a lean trace that is not there: that row's shares are the rich trace's,
    a note says so, the other rows keep the lean ones, and the summary names the exception."""
    out, _ = cpu_run
    mixed = tmp_path / "mixed"
    shutil.copytree(out, mixed)
    data = build_report_data(mixed)
    gone = _profiled(data.comparison.rows)[0]
    assert gone.lean_trace
    Path(gone.lean_trace).unlink()
    data = build_report_data(mixed)
    rows = _profiled(data.comparison.rows)
    row = next(r for r in rows if r.label == gone.label)
    assert row.time_source == "rich" and row.trace
    _assert_times_from(row, Path(row.trace))
    assert any(n.startswith(f"{row.label}: lean trace ") and "missing" in n for n in data.comparison.notes)
    assert all(r.time_source == "lean" for r in rows if r is not row)
    t = Translator("en")
    assert t("source.mixed", list=row.label) in summarize(data, t)
