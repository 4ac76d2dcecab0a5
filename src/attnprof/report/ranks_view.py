"""Terminal rendering of a folder of per-rank traces: the ranks side by side, in <= 100 columns.

Renders attnprof.analysis.ranks.folder.FolderRun as it is; computes nothing but percentages of the
figures it prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnprof.report.collectives_report import bandwidth_table, collectives_lines, collectives_table
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.ranks_report import ranks_table
from attnprof.report.table import EMPHASIS, to_rich
from attnprof.units import fmt_num, fmt_us

if TYPE_CHECKING:
    from attnprof.analysis.ranks.folder import FolderRun

__all__ = ["render_folder"]

_FAMILIES_SHOWN = 10
_BASIS = {"step_time": "mean step time", "gpu_window": "device active window"}


def _pct(v: float | None) -> str:
    return "-" if v is None else fmt_num(v, ".1f")


def render_folder(run: FolderRun, console: Console | None = None) -> None:
    if console is None:
        console = make_console()
    view = run.cross_rank
    n_files = sum(len(r.files) for r in view.ranks)
    console.print(Text(f"{run.folder}: {n_files} trace(s), {len(view.ranks)} rank(s)", style="bold"))
    for d in run.traces:
        for line in d.repairs:
            console.print(Text(f"{d.source}: repaired: {line}", style="yellow"))
        for line in d.warnings:
            console.print(Text(f"{d.source}: warning: {line}", style="yellow"))

    table = to_rich(
        ranks_table(run, terminal_words()).drop_columns({1}),  # the files are named above
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    print_table(console, table)
    console.print(
        Text(
            "busy: union of GPU op intervals; idle: GPU window - busy; comm % and attn %: of the "
            "summed GPU op time",
            style="dim",
        )
    )
    s = view.slowest
    if s is not None:
        console.print(
            f"slowest rank: {s.rank}, {_BASIS[s.basis]} {fmt_us(s.value_us)}: "
            f"{fmt_num(s.pct_over_median, '+.1f')}% over the median ({fmt_us(s.median_us)}), "
            f"{fmt_num(s.pct_over_fastest, '+.1f')}% over the fastest (rank {s.fastest_rank}, {fmt_us(s.fastest_us)})"
        )
    if view.note:
        console.print(Text(view.note, style="dim"))
    if view.families:
        fam = Table(title="Kernel time by family across ranks", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("family", "total", "min", "max", "max on", "spread %"):
            fam.add_column(col, justify="left" if col == "family" else "right", no_wrap=True)
        for f in view.families[:_FAMILIES_SHOWN]:
            fam.add_row(
                f.family[:36],
                fmt_us(f.total_us),
                fmt_us(f.min_us),
                fmt_us(f.max_us),
                f"rank {f.max_rank}",
                fmt_num(f.spread_pct, ".1f"),
            )
        console.print(fam)
        console.print(Text("spread: (max - min) / mean of the family's time across ranks", style="dim"))
    _collectives(run, console)


def _collectives(run: FolderRun, console: Console) -> None:
    """The collectives across ranks (report/collectives_report.py), the columns that do not fit
    left out from the right and named."""
    view = run.cross_rank.collectives
    if view is None:
        return
    t = terminal_words()
    console.print(Text(t("coll.h.collectives"), style="bold"))
    for line in collectives_lines(view, t):
        console.print(Text(line, style=EMPHASIS[line.emphasis]))
    if view.collectives:
        print_table(console, to_rich(collectives_table(view, t), box=box.SIMPLE_HEAD, pad_edge=False))
    bw = bandwidth_table(view, t)
    if bw is not None:
        print_table(console, to_rich(bw, box=box.SIMPLE_HEAD, pad_edge=False))
    console.print(Text(t("coll.legend"), style="dim"))
