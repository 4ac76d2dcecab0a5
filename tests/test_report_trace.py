"""attnprof report of a trace file alone: what its analysis shows, no run record behind it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _paths import trace
from attnprof.cli import main
from attnprof.report.data import build_report_data

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
