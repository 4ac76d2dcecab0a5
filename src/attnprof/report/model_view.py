"""Terminal rendering for `attnprof model` (rich): per implementation, the step time, attention's
share of it (two ways), per-layer attention time, memory, output difference against eager and
findings; then the fastest implementation with its margin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table as RichTable

from attnprof.compare.rank import NOTABLE
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.model_tables import layers_table
from attnprof.report.run_view import ProgressReporter
from attnprof.report.table import to_rich
from attnprof.units import fmt_bytes, fmt_ms, fmt_num

if TYPE_CHECKING:
    from rich.console import Console

    from attnprof.records import RunRecord
    from attnprof.workload import Workload

__all__ = ["ModelProgress", "fastest_line", "render_model"]


class ModelProgress(ProgressReporter):
    """The run's progress bar, headed by the model instead of one attention shape."""

    def __init__(self, *, total: int, title: str, workload: Workload, quiet: bool, no_color: bool) -> None:
        super().__init__(total=total, workload=workload, quiet=quiet, no_color=no_color)
        self.title = title

    def __enter__(self) -> ModelProgress:
        if not self.quiet:
            self.console.print(f"[bold]attnprof model[/]: {self.title}")
        self.progress.start()
        return self


def _pct(x: float | None) -> str:
    return "-" if x is None else fmt_num(x, ".1%")


def fastest_line(record: RunRecord) -> str | None:
    """'sdpa is the fastest, 12% faster than eager' from the record's clean timings."""
    m = record.model
    if m is None or m.fastest is None:
        return None
    if m.runner_up is None or m.margin is None:
        return f"fastest: {m.fastest} (the only implementation that ran)"
    line = f"fastest: {m.fastest}, {m.runner_up} takes {fmt_num(m.margin, '.0%')} longer per step"
    if m.margin_low is not None and m.margin_high is not None:
        line += f" (95% interval {fmt_num(m.margin_low, '+.0%')} to {fmt_num(m.margin_high, '+.0%')})"
    else:
        line += " (too few samples for an interval: it may be noise)"
    if m.margin_within_noise:
        line += "; a tie: the interval includes 0, so the order may flip on a rerun"
    if m.timing_note:
        line += f"; {m.timing_note}"
    return line


def _summary_table(record: RunRecord) -> RichTable:
    ok = [r for r in record.results if r.ran and r.timing]
    fastest = min((r.timing.median_ms for r in ok if r.timing), default=None)
    table = RichTable(header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    for col, justify in (
        ("implementation", "left"),
        ("step ± IQR", "right"),
        ("×fastest", "right"),
        ("attn", "right"),
        ("analyser", "right"),
        ("peak", "right"),
        ("Δ eager", "right"),
    ):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in ok:
        assert r.timing is not None
        m = r.model
        ratio = r.timing.median_ms / fastest if fastest else 1.0
        colour = "green" if ratio < NOTABLE else ("yellow" if ratio < 2 else "red")  # compare/rank.py
        err = "-"
        if r.accuracy:
            err = r.accuracy.error_text() + ("" if r.accuracy.ok else " [red]✗[/]")
        share = _pct(m.attention_share if m else None)
        analyser = _pct(m.analyser_share if m else None)
        if m is not None and m.shares_agree is False:
            analyser += " [yellow]![/]"
        table.add_row(
            r.label + (" [yellow]~[/]" if r.timing.noisy else ""),
            f"{fmt_ms(r.timing.median_ms)} ±{fmt_ms(r.timing.iqr_ms)}",
            f"[{colour}]{fmt_num(ratio, '.2f')}x[/]",
            share,
            analyser,
            fmt_bytes(r.memory.peak_bytes if r.memory else None),
            err,
        )
    return table


def _layers_table(record: RunRecord) -> RichTable | None:
    """The report's per-layer table (model_tables.layers_table), its columns named without the
    "attnprof-" prefix to fit."""
    table = layers_table(record, terminal_words())
    if not table.rows:
        return None
    table.columns = [replace(c, header=c.header.removeprefix("attnprof-")) for c in table.columns]
    return to_rich(
        table, title=False, header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD, title_justify="left"
    )


def _findings(console: Console, record: RunRecord) -> None:
    seen: dict[str, list[str]] = {}
    for r in record.results:
        if r.model is None:
            continue
        for f in r.model.findings:
            code = f.split(":", 1)[0]
            seen.setdefault(code, []).append(r.label)
    if seen:
        console.print("[bold]findings[/] (attnprof compare / report on this directory explain each):")
        for code, labels in seen.items():
            console.print(f"  {code}: {', '.join(labels)}")


def render_model(record: RunRecord, out: Path | None, *, no_color: bool = False) -> None:
    console = make_console(no_color=no_color)
    m = record.model
    assert m is not None
    # print_table: at 80 columns a column is left out (and named) rather than a number cut to "…"
    print_table(console, _summary_table(record))
    layers = _layers_table(record)
    if layers is not None:
        what = "ms forward + ms backward" if m.backward else "time"
        console.print(f"[bold]attention per layer[/] ({what} per step in the profiled steps):")
        print_table(console, layers)
    _findings(console, record)
    for r in record.results:
        if r.status in ("unsupported", "skipped"):
            console.print(f"[dim]not run: {r.reason}[/]")
        elif not r.ran:
            console.print(f"[yellow]{r.label}: {r.status}: {r.reason}[/]")
        for w in r.warnings:
            if not w.startswith("noisy timing"):
                console.print(f"[yellow]warning: {r.label}: {w}[/]")
    line = fastest_line(record)
    if line:
        console.print(f"[bold]{line}[/]")
    env = record.environment
    ok = [r for r in record.results if r.timing]
    threads = ok[0].timing.threads if ok and ok[0].timing else env.threads
    wl = record.workload
    gqa = f", {wl.kv_heads} kv heads" if wl.kv_heads != wl.heads else ""
    console.print(
        f"[dim]{m.model_class} ({m.source}{', ' + m.size if m.size else ''}, {m.layers} layers, "
        f"{fmt_num(m.parameters / 1e6, '.1f')}M parameters), {m.step}; attention per layer: {wl.heads} heads{gqa}, "
        f"head_dim {wl.head_dim}, {wl.seq} x {wl.kv_seq}, {wl.dtype} on {env.device_name} ({env.device}, "
        f"{threads} threads), torch {env.torch_version}, transformers {m.transformers_version}[/]"
    )
    console.print(
        "[dim]step: clean time of one step (no profiler); attn: attention's share of the step, time "
        "inside the attn_fwd/layer.N ranges / step time in the profiled steps; analyser: the same share "
        "from the ops the analyser classifies as attention (! = they disagree beyond noise); Δ eager: max absolute difference of the output from eager attention's in fp32 on the same weights; ~ marks noisy "
        "timings[/]"
    )
    if out is not None:
        console.print(f"run directory: {out}  (attnprof report {out} shows the per-layer breakdown)")
