"""Terminal rendering of comparisons, diffs and expectation results (rich).

Tables are built to fit 100 columns: the comparison is split into a timing table and a
per-forward trace table instead of one table too wide to read. Relative speed is green when a
variant is faster than the baseline and red when slower (plain text with --no-color).
The terminal speaks terse English (console.terminal_words); the translated reports are Markdown
and HTML. The timing, trace and main-kernel tables are the terminal's own views; the diff and the
expectations are the reports' tables (report/tables.py), built by the same builders and cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.text import Text

from attnprof.compare.compare import INCORRECT, Comparison
from attnprof.compare.diff import Diff
from attnprof.compare.expect import ExpectationResult, summarize_results
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.measured import schedule_lines
from attnprof.report.summary import time_source_line
from attnprof.report.table import Cell, Column, Table, fit, to_rich
from attnprof.report.tables import (
    diff_table,
    error_cell,
    expectation_table,
    inflation_cell,
    occupancy_cell,
    speed_cell,
    tflops_cell,
)
from attnprof.units import fmt_bytes, fmt_count, fmt_ms, fmt_pct, fmt_us, short_name

__all__ = [
    "print_comparison",
    "print_expectations",
    "render_comparison",
    "render_diff",
    "render_expectations",
]

_LAYOUT: dict[str, Any] = {"box": box.SIMPLE_HEAD, "title_justify": "left", "pad_edge": False}


def _label(label: str, width: int = 34) -> str:
    return fit(label, width)


def render_comparison(console: Console, comp: Comparison) -> None:
    if any(r.median_ms is not None for r in comp.rows):
        print_table(console, to_rich(timing_table(comp), **_LAYOUT))
    print_table(console, to_rich(trace_table(comp), **_LAYOUT))
    # the kernel that matters (the fused attention kernel, else the longest): only with GPU data
    kernels = kernel_table(comp)
    if kernels.rows:
        print_table(console, to_rich(kernels, **_LAYOUT))
    _footer(console, comp)


def timing_table(comp: Comparison) -> Table:
    """The clean timings of the variants that ran, against the baseline (the terminal's view)."""
    t = terminal_words()
    versus = comp.baseline or "the baseline"
    if comp.mixed_workloads:
        versus += " across DIFFERENT workloads (--mixed-workloads)"
    elif comp.baselines:
        versus = "each workload's baseline (" + ", ".join(comp.baselines.values()) + ")"
    several = len(comp.workloads) > 1
    table = Table(
        columns=[
            Column("variant", no_wrap=True),
            *([Column("workload", overflow="fold", max_width=22)] if several else []),
            Column("backend", overflow="fold", max_width=14),
            # the speed may wrap between the ratio and its [interval]; numbers never do
            *(
                Column(name, numeric=True, no_wrap=name != "speed")
                for name in ("median", "IQR", "speed", "peak mem", "max err", "TFLOP/s")
            ),
        ],
        title=f"Clean timing (no profiler); speed relative to {versus}",
    )
    for r in comp.rows:
        if not r.ran or r.median_ms is None:  # not run: listed below with the reason; traces: untimed
            continue
        table.add(
            [
                _label(r.label),
                *([r.workload or "-"] if several else []),
                r.backend or "-",
                Cell(fmt_ms(r.median_ms) + ("*" if r.noisy else ""), r.median_ms, "ms"),
                Cell(fmt_ms(r.iqr_ms), r.iqr_ms, "ms"),
                speed_cell(r, comp.baselines.get(r.workload or "", comp.baseline), t),
                Cell(fmt_bytes(r.peak_bytes), r.peak_bytes, "B"),
                error_cell(r, t),
                tflops_cell(r, t),
            ]
        )
    return table


def trace_table(comp: Comparison) -> Table:
    """Per forward, from the trace: time and op counts per lane (the terminal's view).

    The profiler inflates per-op times, differently per variant, so where a row has a clean
    median the trace's time is shown against it (trace / clean, rich / lean pass), never as an
    absolute time beside the clean one; a trace alone has only the profiled time, labelled so.
    A run without device activity gets no GPU columns of zeros."""
    rows = [r for r in comp.rows if r.ran]
    gpu = any(r.gpu_ops_per_forward for r in rows)
    clean = any(r.profiler_inflation is not None for r in rows)
    names = (["GPU time"] if gpu else []) + ["trace/clean (rich/lean)" if clean else "CPU time (profiled)"]
    names += (["GPU ops"] if gpu else []) + ["CPU ops"] + (["memcpy", "TC GEMM"] if gpu else [])
    table = Table(
        columns=[Column("variant", no_wrap=True)] + [Column(n, numeric=True, no_wrap=True) for n in names],
        title="Per forward, from the trace",
    )
    for r in rows:
        g = r.gpu_time_us_per_forward if r.gpu_ops_per_forward else None
        cpu = (
            inflation_cell(r)
            if clean
            else Cell(fmt_us(r.cpu_time_us_per_forward), r.cpu_time_us_per_forward, "µs")
        )
        cells: list[Cell | str] = [_label(r.label)]
        if gpu:
            cells.append(Cell(fmt_us(g), g, "µs") if g is not None else "-")
        cells.append(cpu)
        if gpu:
            cells.append(Cell(fmt_count(r.gpu_ops_per_forward), r.gpu_ops_per_forward))
        cells.append(Cell(fmt_count(r.cpu_ops_per_forward), r.cpu_ops_per_forward))
        if gpu:
            cells += [
                Cell(fmt_count(r.memcpy_per_forward), r.memcpy_per_forward),
                Cell(fmt_pct(r.tensor_core_share), r.tensor_core_share, "%"),
            ]
        table.add(cells)
    return table


def kernel_table(comp: Comparison) -> Table:
    """The main kernel per variant with GPU data: its fused family, else its name; occupancy."""
    t = terminal_words()
    table = Table(
        columns=[
            Column("variant", no_wrap=True),
            Column("fused family (or kernel)", no_wrap=True, max_width=34),
            Column("occupancy (ach./theor.)", no_wrap=True),
        ],
        title="Main kernel: the fused attention kernel, else the longest one",
    )
    for r in comp.rows:
        if r.ok and (r.fused_families or r.occupancy_kernel):
            what = ", ".join(r.fused_families) or f"- ({short_name(r.occupancy_kernel or '-', 30)})"
            table.add([_label(r.label, 28), what, occupancy_cell(r, t)])
    return table


def _footer(console: Console, comp: Comparison) -> None:
    with_findings = [r for r in comp.rows if r.findings]
    if with_findings:
        console.print(Text("Findings", style="bold"))
        for r in with_findings:
            console.print(Text.assemble(("  " + _label(r.label) + ": ", "bold"), ", ".join(r.finding_codes)))
    for r in comp.rows:
        if r.status == INCORRECT:
            console.print(Text(f"  {r.label}: {r.reason}", style="bold red"))
    not_run = [r for r in comp.rows if not r.ran]
    if not_run:
        console.print(Text("Not run", style="bold"))
    for r in not_run:
        reason = r.reason or ""
        if reason.startswith(f"{r.variant}: "):  # the harness prefixes its reasons with the name
            reason = reason[len(r.variant or "") + 2 :]
        console.print(Text(f"  {r.label} ({r.status})" + (f": {reason}" if reason else ""), style="yellow"))
    if any(r.pct_of_peak is not None for r in comp.rows):
        console.print(
            Text("  TFLOP/s: useful FLOPs / clean median; (%) of the run's peak, ! above 100%", style="dim")
        )
    if any(r.noisy for r in comp.rows):
        console.print(Text("  * noisy timing: IQR above 10% of the median", style="dim"))
    steps = sorted(
        (r for r in comp.rows if r.ok and r.total_median_ms is not None),
        key=lambda r: r.total_median_ms or 0.0,
    )
    if steps:  # --backward: the table's times are the forward's, its speeds forward + backward's
        listed = ", ".join(f"{r.label} {fmt_ms(r.total_median_ms)}" for r in steps)
        console.print(
            Text(
                "  --backward: times are of the forward, speeds of forward + backward (one call) per "
                f"step: {listed}",
                style="yellow",
            )
        )
    source = time_source_line(comp.rows, terminal_words())
    if source is not None:
        console.print(Text(f"  {source}", style="dim"))
    for line in schedule_lines(comp.rows, terminal_words()):  # measured otherwise than the run's default
        console.print(Text(f"  {line}", style="yellow"))
    for note in comp.notes:
        console.print(Text(f"  note: {note}", style="dim"))


def render_diff(console: Console, diff: Diff, *, top: int = 12) -> None:
    """Families with the largest time change first; within each, kernels by |delta|."""
    # no absolute totals here: op times are the profiler's (inflated), and the clean medians above
    # are the times; the Δ column is traced time, for ranking the changes
    table = diff_table(diff, terminal_words(), top=top, by_family=True, name_width=46, label=_label)
    console.print(Text(table.title, style="bold"))
    print_table(console, to_rich(table, title=False, box=box.SIMPLE_HEAD, pad_edge=False))


def render_expectations(console: Console, results: Sequence[ExpectationResult], *, title: str = "") -> None:
    table = expectation_table(results, terminal_words(), group_skipped=True)
    table.title = title or table.title
    print_table(console, to_rich(table, **_LAYOUT))
    counts = summarize_results(results)
    line = f"{counts['met']} met, {counts['not met']} not met, {counts['skipped']} skipped"
    if counts["info"]:  # exact figures the file shows but does not enforce
        line += f", {counts['info']} info (not enforced)"
    console.print(Text(line, style="bold red" if counts["not met"] else "bold green"))


def print_comparison(comp: Comparison, *, no_color: bool = False) -> None:
    console = make_console(no_color=no_color)
    render_comparison(console, comp)
    for d in comp.diffs:
        render_diff(console, d)


def print_expectations(
    results: Sequence[ExpectationResult], *, no_color: bool = False, title: str = ""
) -> None:
    render_expectations(make_console(no_color=no_color), results, title=title)
