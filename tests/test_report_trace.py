"""attnprof report of a trace file alone: what its analysis shows, no run record behind it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from _paths import trace
from attnprof.cli import main
from attnprof.report.data import build_report_data
from attnprof.report.plots import _tick

H100_FLASH = "AMD-AGI__TraceLens__tests__traces__h100"


def test_report_data_of_a_trace_has_no_run_record() -> None:
    data = build_report_data(trace(H100_FLASH))
    assert data.record is None and data.run_dirs == []
    assert data.trace_files == [str(trace(H100_FLASH))]
    assert [r.kind for r in data.comparison.rows] == ["trace"]
    assert data.expectations == [] and data.expectation_file is None  # "auto" checks none for a trace


def test_markdown_report_of_a_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(trace(H100_FLASH)), "--format", "md", "-o", "-"]) == 0
    md = capsys.readouterr().out
    name = trace(H100_FLASH).name
    assert md.startswith(f"# attnprof report: {name}\n")
    assert "- **Device**: NVIDIA H100" in md  # as the trace names it
    assert f"- **Trace file**: {trace(H100_FLASH)}" in md
    # no clean timing and no accuracy behind a bare trace: the summary says so and ranks nothing
    assert "A profiler trace alone" in md
    assert "Nothing ran successfully" not in md
    assert "GPU ops per forward:" in md
    assert "FUSED_ATTENTION" in md  # the trace's findings are listed
    # the link to the trace is relative to the trace's own folder (where the report would go)
    assert f"[{name}]({name})" in md


def test_html_report_of_a_trace_in_thai_draws_its_plots(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(trace(H100_FLASH)), "--lang", "th", "-o", str(out)]) == 0
    html = out.read_text()
    assert html.count("<svg") >= 2  # categories and timeline; the time plot needs a clean timing
    assert "มีเพียงเทรซของโปรไฟเลอร์" in html
    assert "ไฟล์เทรซ" in html


def _axes_share(svg: str) -> float:
    """The plot area's width as a share of its SVG's: matplotlib draws the axes' background
    (the first patch in axes_1) as a rectangle M x0 y L x1 y ..."""
    width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))  # type: ignore[union-attr]
    box = re.search(r'axes_1">\s*<g id="[^"]*patch_\d+">\s*<path d="M ([\d.]+) [\d.]+\s*L ([\d.]+) ', svg)
    assert box is not None, svg[:400]
    return (float(box.group(2)) - float(box.group(1))) / width


@pytest.mark.parametrize("lang", ["en", "th"])
def test_a_traces_long_file_name_does_not_squeeze_its_plots(tmp_path: Path, lang: str) -> None:
    """A bare trace's row label is its file name (80 characters here): on one line it took the
    figure's width and left the category bars and the timeline a sliver (7% of the width in en).
    Wrapped after its separators, the plot area keeps a good part of the figure."""
    out = tmp_path / "r.html"
    assert main(["report", str(trace(H100_FLASH)), "--lang", lang, "-o", str(out)]) == 0
    # the plots of the rows (the per-op model's roofline, in its own section, names no row)
    page = out.read_text()
    plots = page[page.index('<section id="plots">') :]
    svgs = re.findall(r"<svg.*?</svg>", plots[: plots.index("</section>")], re.S)
    assert len(svgs) >= 2
    for svg in svgs:
        assert _axes_share(svg) > 0.35  # 0.40-0.55 now (Thai legends are wider); 0.07 before
        assert "traces__h100" in svg and "1016001" in svg  # the name is wrapped, its ends kept


def test_tick_labels_wrap_after_separators_and_elide_only_the_middle() -> None:
    assert _tick("naive-inplace (n=200)") == "naive-inplace (n=200)"  # short: as it is
    name = "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert-small-uncased__1016001 (61)"
    lines = _tick(name).split("\n")
    assert "".join(lines).replace(" ", "") == name.replace(" ", "")  # three lines hold it whole
    assert all(len(line) <= 34 for line in lines) and len(lines) == 3
    assert lines[0].endswith("__")  # broken after a separator, not inside a word
    longer = "facebookresearch__HolisticTraceAnalysis__tests__data__ns_resolution_trace__rank-0.pt.trace"
    first, _, last = _tick(longer).split("\n")
    assert first == "facebookresearch__" and last.startswith("…") and longer.endswith(last[1:])


def _tiny_trace(path: Path) -> Path:
    """A CPU-only Chrome trace in the profiler's format: one aten op inside one ProfilerStep."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_html_report_of_a_trace_goes_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _tiny_trace(tmp_path / "step.pt.trace.json")
    assert main(["report", str(t), "--lang", "id"]) == 0
    out = tmp_path / "step.pt.trace.report.id.html"
    assert capsys.readouterr().out == f"{out}\n"
    html = out.read_text()
    assert "Laporan attnprof: step.pt.trace.json" in html
    assert "tidak disebut dalam jejak" in html  # a CPU trace names no device


def test_a_file_that_is_not_a_trace_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    assert main(["report", str(notes)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neither a run directory nor a trace file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("name", "fmt", "markdown"), [("r.md", None, True), ("r.html", None, False), ("r.md", "html", False)]
)
def test_the_output_name_chooses_the_format_unless_one_is_given(
    tmp_path: Path, name: str, fmt: str | None, markdown: bool
) -> None:
    out = tmp_path / name
    args = ["report", str(trace(H100_FLASH)), "-o", str(out)] + (["--format", fmt] if fmt else [])
    assert main(args) == 0
    text = out.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<!DOCTYPE html>") is not markdown
    assert text.lstrip().startswith("#") is markdown
