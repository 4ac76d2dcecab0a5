"""`analyze --ops` in the terminal: the per-op model's sentences and its per-shape table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box

from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.perf_tables import ops_table, perf_lines
from attnprof.report.table import to_rich

if TYPE_CHECKING:
    from rich.console import Console

    from attnprof.analysis.records.result import TraceAnalysis

__all__ = ["render_ops"]


def render_ops(d: TraceAnalysis, console: Console | None = None, *, top: int = 20) -> None:
    console = console or make_console()
    t = terminal_words()
    console.print(f"[bold]{d.source}[/bold]", highlight=False)
    if d.perf_model is not None:
        for line in perf_lines(d.perf_model, t):
            console.print(line, highlight=False, markup=False)
    if any(not o.nested for o in d.ops):
        print_table(console, to_rich(ops_table(d.ops, t, top=top, merged=True), box=box.SIMPLE_HEAD), keep=1)
        if any(o.nested for o in d.ops):
            console.print(t("perf.nested"), style="dim", highlight=False, markup=False)
