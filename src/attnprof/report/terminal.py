"""Terminal rendering of comparisons, diffs and expectation results (rich).

Tables are built to fit 100 columns: the comparison is split into a timing table and a
per-forward trace table instead of one table too wide to read. Relative speed is green when a
variant is faster than the baseline and red when slower (plain text with --no-color).
The terminal speaks English; the translated reports are Markdown and HTML.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnprof.compare.compare import INCORRECT, Comparison, Row
from attnprof.compare.diff import Diff
from attnprof.compare.expect import ExpectationResult, summarize_results
from attnprof.report.console import make_console, print_table
from attnprof.units import (
    fmt_bytes,
    fmt_count,
    fmt_delta_us,
    fmt_err,
    fmt_interval,
    fmt_ms,
    fmt_pct,
    fmt_speed,
    fmt_us,
    short_name,
)

__all__ = [
    "print_comparison",
    "print_expectations",
    "render_comparison",
    "render_diff",
    "render_expectations",
    "speed_text",
]


def speed_text(row: Row, baseline: str | None) -> Text:
    if row.status == INCORRECT:
        return Text("incorrect", style="bold red")
    if row.speedup is None:
        return Text("-")
    if row.label == baseline:
        return Text("1.00x (base)", style="bold")
    way, ratio, notable = fmt_speed(row.speedup, row.speedup_low, row.speedup_high)
    ci = fmt_interval(row.speedup, row.speedup_low, row.speedup_high)
    text = f"tie ({ratio}x)" if way == "tie" else f"{ratio}x {way}"
    text += f" [{ci}]" if ci else ""
    return Text(text, style=("green" if way == "faster" else "red") if notable else "")


def _occupancy(r: Row) -> str:
    if r.occupancy_achieved is None and r.occupancy_theoretical is None:
        return "-"
    txt = f"{fmt_pct(r.occupancy_achieved)}/{fmt_pct(r.occupancy_theoretical)}"
    return f"{txt} {r.occupancy_limiter}" if r.occupancy_limiter else txt


def _label(label: str, width: int = 34) -> str:
    """Trace file names can be 80 characters; keep both ends, which tell them apart."""
    if len(label) <= width:
        return label
    head = (width - 1) // 2
    return label[:head] + "…" + label[-(width - 1 - head) :]


def render_comparison(console: Console, comp: Comparison) -> None:
    if any(r.median_ms is not None for r in comp.rows):
        _timing_table(console, comp)
    _trace_table(console, comp)
    _footer(console, comp)


def _timing_table(console: Console, comp: Comparison) -> None:
    versus = comp.baseline or "the baseline"
    if comp.mixed_workloads:
        versus += " across DIFFERENT workloads (--mixed-workloads)"
    elif comp.baselines:
        versus = "each workload's baseline (" + ", ".join(comp.baselines.values()) + ")"
    timing = Table(
        title=f"Clean timing (no profiler); speed relative to {versus}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
    )
    timing.add_column("variant", no_wrap=True)
    several = len(comp.workloads) > 1
    if several:
        timing.add_column("workload", overflow="fold", max_width=22)
    timing.add_column("backend", overflow="fold", max_width=14)
    for name in ("median", "IQR", "speed", "peak mem", "max err", "TFLOP/s"):
        # the speed may wrap between the ratio and its [interval]; numbers never do
        timing.add_column(name, justify="right", no_wrap=name != "speed")
    for r in comp.rows:
        if not r.ran or r.median_ms is None:  # not run: listed below with the reason; traces: untimed
            continue
        median = fmt_ms(r.median_ms) + ("*" if r.noisy else "")
        timing.add_row(
            _label(r.label),
            *([r.workload or "-"] if several else []),
            r.backend or "-",
            median,
            fmt_ms(r.iqr_ms),
            speed_text(r, comp.baselines.get(r.workload or "", comp.baseline)),
            fmt_bytes(r.peak_bytes),
            Text(fmt_err(r.max_abs_err), style="red" if r.accuracy_ok is False else ""),
            "-"
            if r.tflops_useful is None
            else f"{r.tflops_useful:.3g}"
            + (
                f" ({fmt_pct(r.pct_of_peak)}{' !' if r.above_peak else ''})"
                if r.pct_of_peak is not None
                else ""
            ),
        )
    print_table(console, timing)


def _trace_table(console: Console, comp: Comparison) -> None:
    trace = Table(
        title="Per forward, from the trace", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False
    )
    trace.add_column("variant", no_wrap=True)
    for name in ("GPU time", "CPU time", "GPU ops", "CPU ops", "memcpy", "TC GEMM"):
        trace.add_column(name, justify="right", no_wrap=True)
    for r in comp.rows:
        if not r.ran:
            continue
        trace.add_row(
            _label(r.label),
            fmt_us(r.gpu_time_us_per_forward) if r.gpu_ops_per_forward else "-",
            fmt_us(r.cpu_time_us_per_forward),
            fmt_count(r.gpu_ops_per_forward),
            fmt_count(r.cpu_ops_per_forward),
            fmt_count(r.memcpy_per_forward),
            fmt_pct(r.tensor_core_share),
        )
    print_table(console, trace)
    # the kernel that matters (the fused attention kernel, else the longest): only with GPU data
    kern = [r for r in comp.rows if r.ok and (r.fused_families or r.occupancy_kernel)]
    if not kern:
        return
    table = Table(
        title="Main kernel: the fused attention kernel, else the longest one",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
    )
    table.add_column("variant", no_wrap=True)
    table.add_column("fused family (or kernel)", no_wrap=True, overflow="ellipsis", max_width=34)
    table.add_column("occupancy (ach./theor.)", no_wrap=True)
    for r in kern:
        what = ", ".join(r.fused_families) or f"- ({short_name(r.occupancy_kernel or '-', 30)})"
        table.add_row(_label(r.label, 28), what, _occupancy(r))
    print_table(console, table)


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
    for note in comp.notes:
        console.print(Text(f"  note: {note}", style="dim"))


def render_diff(console: Console, diff: Diff, *, top: int = 12) -> None:
    """Families with the largest time change first; within each, kernels by |delta|."""
    # no absolute totals here: op times are the profiler's (inflated), and the clean medians above
    # are the times; the Δ column is traced time, for ranking the changes
    head = (
        f"{_label(diff.b)} vs {_label(diff.a)} ({diff.lane.upper()} ops per forward): "
        f"{fmt_count(diff.ops_a)} -> {fmt_count(diff.ops_b)} ops; "
        f"+{diff.added} added, -{diff.removed} removed, ~{diff.changed} changed "
        "(Δ: traced time, inflated by the profiler)"
    )
    console.print(Text(head, style="bold"))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("family", overflow="fold", max_width=20)
    table.add_column("kernel / op", overflow="ellipsis", no_wrap=True, max_width=46)
    table.add_column("change")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("Δ time", justify="right")
    style = {"added": "green", "removed": "red", "changed": "yellow", "same": "dim"}
    shown = 0
    for fam in diff.families:
        table.add_row(
            Text(fam.family, style="bold"),
            "",
            "",
            fmt_count(fam.count_a),
            fmt_count(fam.count_b),
            fmt_delta_us(fam.delta_us),
        )
        for k in fam.kernels:
            if k.change == "same" or shown >= top:
                continue
            shown += 1
            table.add_row(
                "",
                k.short or short_name(k.name, 46),
                Text(k.change, style=style[k.change]),
                fmt_count(k.count_a),
                fmt_count(k.count_b),
                fmt_delta_us(k.delta_us),
            )
    print_table(console, table)


def _grouped(results: Sequence[ExpectationResult]) -> list[tuple[ExpectationResult, int]]:
    """Checks skipped for one reason on one row collapse into one line: a file written for bf16
    should not fill an fp32 run's table with a dozen identical 'skipped' lines."""
    out: list[tuple[ExpectationResult, int]] = []
    for r in results:
        if (
            out
            and r.status == "skipped"
            and out[-1][0].status == "skipped"
            and (out[-1][0].row, out[-1][0].variant, out[-1][0].observed) == (r.row, r.variant, r.observed)
        ):
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((r, 1))
    return out


def render_expectations(console: Console, results: Sequence[ExpectationResult], *, title: str = "") -> None:
    table = Table(title=title or "Expectations", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    table.add_column("variant", overflow="fold", max_width=18)
    table.add_column("check", overflow="fold", max_width=19)
    # widths that fit 100 columns with the result column: expected holds the longest finding code
    # with its comma (TRANSPOSES_BEFORE_KERNEL,), observed wraps between words
    table.add_column("expected", overflow="fold", max_width=26)
    table.add_column("observed", overflow="fold", max_width=20)
    table.add_column("result", no_wrap=True)
    style = {"met": "green", "not met": "bold red", "skipped": "dim"}
    for r, n in _grouped(results):
        table.add_row(
            r.row or r.variant,
            r.check if n == 1 else f"({n} checks)",
            (r.expected or "-") if n == 1 else "-",
            r.observed,
            Text(r.status, style=style[r.status]),
            style="dim" if r.status == "skipped" else "",
        )
    print_table(console, table)
    counts = summarize_results(results)
    line = f"{counts['met']} met, {counts['not met']} not met, {counts['skipped']} skipped"
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
