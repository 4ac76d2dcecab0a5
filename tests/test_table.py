"""One table model (report/table.py), built once per view and drawn by rich, Markdown and HTML.

Real records throughout: the shared CPU run and CPU sweep store of conftest, a real two-rank
folder of the shared traces. What is checked: every renderer shows the builder's cells in the
builder's order; the cells hold the figures they show; the terminal and the reports draw the
same builders (only the words differ); the bucket label is one text everywhere.
"""

from __future__ import annotations

import io
import os
import re
from html import unescape
from pathlib import Path

from rich.console import Console

from _paths import trace
from attnprof.recommend import recommend
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.table import Cell, Column, Table, to_markdown, to_rich
from attnprof.report.tables import comparison_table, expectation_table, report_content
from attnprof.store import Store
from attnprof.units import fmt_ms


def _html_rows(page: str, start: int = 0) -> list[list[str]]:
    """The cells of the first HTML table at or after `start`, as text."""
    body = page[page.index("<tbody>", start) : page.index("</tbody>", start)]
    return [
        # <wbr> is a line-break opportunity, not text (report/html.py breakable)
        [unescape(c.replace("<wbr>", "")) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


def _md_rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[2:]]


def test_every_renderer_draws_the_builders_cells_in_order(cpu_run: tuple[Path, object]) -> None:
    from attnprof.report.html import render_html

    data = build_report_data(cpu_run[0])
    t = Translator("en")
    table = comparison_table(data, t)
    assert len(table.rows) >= 3 and all(len(row) == len(table.columns) for row in table.rows)
    expected = [[str(c) for c in row] for row in table.rows]
    # Markdown: the same header and cells, numbers right-aligned
    md = to_markdown(table)
    assert _md_rows(md) == expected
    aligns = md[1].strip("|").split("|")
    assert [a == "---:" for a in aligns] == [c.numeric for c in table.columns]
    # HTML: the comparison section's table holds the very same cells
    page = render_html(data, t)
    assert _html_rows(page, page.index('<section id="comparison">')) == expected
    # rich: every cell whole, in its row's order (a console wide enough that nothing wraps)
    buf = io.StringIO()
    Console(file=buf, width=2000).print(to_rich(table, box=None))
    lines = buf.getvalue().splitlines()
    for row in expected:
        line = next(x for x in lines if x.split() and x.split()[0] == row[0])
        at = 0
        for c in row:  # each cell after the one before it
            at = line.index(c, at) + len(c)


def test_cells_hold_the_figures_they_show(cpu_run: tuple[Path, object]) -> None:
    data = build_report_data(cpu_run[0])
    table = comparison_table(data, Translator("en"))
    median = table.header.index("Median")
    ran = [r for r in data.comparison.rows if r.ran]
    for row, r in zip(table.rows, ran, strict=True):
        cell = row[median]
        assert isinstance(cell, Cell) and cell.unit == "ms" and cell.value == r.median_ms
        assert cell == fmt_ms(r.median_ms)
    # the speed cell: the ratio behind the words, emphasised only where it is notable
    speed = table.rows[0][4]
    assert speed.unit == "x" and speed.value == ran[0].speedup
    # Indonesian writes the same figure with its own decimal comma; the value is the same number
    with_comma = report_content(data, Translator("id"), None).comparison
    assert [row[median].value for row in with_comma.rows] == [row[median].value for row in table.rows]


def test_terminal_and_report_draw_one_expectation_table(cpu_run: tuple[Path, object]) -> None:
    data = build_report_data(cpu_run[0])
    assert data.expectations
    en = expectation_table(data.expectations, Translator("en"))
    term = expectation_table(data.expectations, terminal_words())
    # the same rows: the terminal's words are shorter headers and the checks' own names
    assert term.header == ["variant", "check", "expected", "observed", "result"]
    assert en.header == ["Variant", "Check", "Expected", "Observed", "Result"]
    for a, b, e in zip(en.rows, term.rows, data.expectations, strict=True):
        assert (a[0], a[2], a[3], a[4]) == (b[0], b[2], b[3], b[4])
        assert b[1] == e.check
    # grouped for the terminal: skipped checks of one row for one reason are one line
    grouped = expectation_table(data.expectations, terminal_words(), group_skipped=True)
    skipped = sum(e.status == "skipped" for e in data.expectations)
    assert skipped > 1 and len(grouped.rows) < len(term.rows)
    assert sum(
        int(m[1]) if (m := re.fullmatch(r"\((\d+) checks\)", r[1])) else 1 for r in grouped.rows
    ) == len(term.rows)


def test_a_status_check_reads_in_the_words_of_each_medium() -> None:
    """Reports say a status in the catalog's words; the terminal as run.json and the expectation
    file write it."""
    from attnprof.compare.expect import ExpectationResult

    e = ExpectationResult(
        variant="naive", row="naive", check="status", expected="ok", observed="refused", status="not met"
    )
    (term,) = expectation_table([e], terminal_words()).rows
    (en,) = expectation_table([e], Translator("en")).rows
    assert term[1:5] == ["status", "ok", "refused", "not met"]
    assert en[1:5] == ["status", "ok", "refused (memory)", "not met"]
    assert term[4].emphasis == en[4].emphasis == "alarm"


def test_one_bucket_label_in_every_view(cpu_store: Path) -> None:
    from attnprof.cli import main
    from attnprof.report.store_report import build_store_report_data, render_store_markdown
    from attnprof.report.table import md_text

    with Store(cpu_store, readonly=True) as st:
        recs = recommend(st.query(samples=True))
    labels = [r.bucket.label() for r in recs]
    assert "fp32 D=16 S≤32" in labels
    md = render_store_markdown(build_store_report_data(cpu_store), Translator("en"))
    for r in recs:
        # the report's table names the device (its brackets escaped, as Markdown text is)
        assert f"| {md_text(r.bucket.label(device=True))} |" in md
        assert r.bucket.label(device=True) == r.bucket.label() + " [cpu]"
    buf = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(buf):
        assert main(["recommend", "--store", str(cpu_store), "--no-color"]) == 0
    out = buf.getvalue()
    assert "fastest per bucket on cpu" in out  # the terminal names the device in the title
    for label in labels:
        assert re.search(rf"^ *{re.escape(label)} +\d", out, re.M), label


def test_ranks_table_is_built_once_for_terminal_and_page(tmp_path: Path) -> None:
    from attnprof.analysis.ranks.folder import analyze_folder
    from attnprof.report.ranks_report import ranks_table, render_ranks_html
    from attnprof.report.ranks_view import render_folder

    for r in (0, 1):
        src = trace(f"facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-{r}")
        os.symlink(src, tmp_path / src.name)  # a link, not a copy of the shared trace
    (run,) = analyze_folder(tmp_path, workers=1)
    table = ranks_table(run, Translator("en"))
    page = render_ranks_html([run], Translator("en"), folder=str(tmp_path))
    assert _html_rows(page) == [[str(c) for c in row] for row in table.rows]
    buf = io.StringIO()
    render_folder(run, console=make_console(file=buf, width=100))
    text = buf.getvalue()
    for row in table.rows:
        # the terminal leaves the files column out (the files are named above the table)
        cells = [str(c) for n, c in enumerate(row) if n != 1]
        assert re.search(r"\s+".join(re.escape(c) for c in cells), text), cells


def test_rich_draws_cell_text_as_text_not_markup() -> None:
    """A cell is text: "[ok]" in a job name or "[cpu]" in a workload is shown, not read as a
    rich style."""
    from attnprof.report.sweep_view import print_summary
    from attnprof.sweep.run import SweepSummary

    table = Table(columns=[Column("job")])
    table.add(["sdpa B=1 S=64 [ok]"])
    buf = io.StringIO()
    print_table(make_console(file=buf), to_rich(table))
    assert "sdpa B=1 S=64 [ok]" in buf.getvalue()
    buf = io.StringIO()
    summary = SweepSummary(store=Path("s.db"), total=1, already=0, ran=1, slowest=[(0.5, "naive B=1 [ok]")])
    print_summary(summary, make_console(file=buf))
    assert "naive B=1 [ok]" in buf.getvalue()
