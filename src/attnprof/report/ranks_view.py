"""Terminal rendering of a folder of per-rank traces: the ranks side by side, in <= 100 columns.

Renders attnprof.analysis.ranks.folder.FolderRun as it is; computes nothing but percentages of the
figures it prints. Every word comes from the report catalogs (report/i18n/*.po, keys ranks.* and
coll.*, those of the folder's --html page and --md file where they say the same), the terminal's
terse English (console.TERMINAL_WORDS) over them in English; `attnprof analyze DIR --lang id`
prints the same view in Indonesian, its numbers in the reader's locale. Notes the analysis
writes of a trace (warnings, repairs) stay as the analysis words them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnprof.report.collectives_report import bandwidth_table, collectives_lines, collectives_table
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.ranks_report import ranks_table, slowest_line
from attnprof.report.table import EMPHASIS, to_rich
from attnprof.units import fmt_num, fmt_us, number_locale

if TYPE_CHECKING:
    from attnprof.analysis.ranks.folder import FolderRun
    from attnprof.report.i18n import Translator

__all__ = ["render_folder"]

_FAMILIES_SHOWN = 10


def render_folder(run: FolderRun, console: Console | None = None, lang: str = "en") -> None:
    """Print the folder's view in `lang` (en, id, th)."""
    if console is None:
        console = make_console()
    t = terminal_words(lang)
    with number_locale(lang):
        _render(run, console, t)


def _render(run: FolderRun, console: Console, t: Translator) -> None:
    from attnprof.analysis.ranks.folder import note_key

    view = run.cross_rank
    n_files = sum(len(r.files) for r in view.ranks)
    console.print(
        Text(t("ranks.summary", folder=run.folder, files=n_files, ranks=len(view.ranks)), style="bold")
    )
    for d in run.traces:
        for line in d.repairs:
            console.print(Text(f"{d.source}: {t('av.repaired', note=line)}", style="yellow"))
        for line in d.warnings:
            console.print(Text(f"{d.source}: {t('av.warning', note=line)}", style="yellow"))

    table = to_rich(
        ranks_table(run, t).drop_columns({1}),  # the files are named above
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    print_table(console, table, t=t)
    console.print(Text(t("ranks.legend"), style="dim"))
    if view.slowest is not None:
        console.print(Text(slowest_line(run, t)))
    key = note_key(view)
    if key is not None:
        console.print(Text(t(key), style="dim"))
    if view.families:
        fam = Table(title=t("ranks.h.families"), box=box.SIMPLE_HEAD, pad_edge=False)
        for i, col in enumerate(("family", "total", "min", "max", "max_on", "spread")):
            fam.add_column(t(f"ranks.col.{col}"), justify="left" if i == 0 else "right", no_wrap=True)
        for f in view.families[:_FAMILIES_SHOWN]:
            fam.add_row(
                f.family[:36],
                fmt_us(f.total_us),
                fmt_us(f.min_us),
                fmt_us(f.max_us),
                t("ranks.col.on", rank=f.max_rank),
                fmt_num(f.spread_pct, ".1f"),
            )
        console.print(fam)
        console.print(Text(t("ranks.spread_legend"), style="dim"))
    _collectives(run, console, t)


def _collectives(run: FolderRun, console: Console, t: Translator) -> None:
    """The collectives across ranks (report/collectives_report.py), the columns that do not fit
    left out from the right and named."""
    view = run.cross_rank.collectives
    if view is None:
        return
    console.print(Text(t("coll.h.collectives"), style="bold"))
    for line in collectives_lines(view, t):
        console.print(Text(line, style=EMPHASIS[line.emphasis]))
    if view.collectives:
        print_table(console, to_rich(collectives_table(view, t), box=box.SIMPLE_HEAD, pad_edge=False), t=t)
    bw = bandwidth_table(view, t)
    if bw is not None:
        print_table(console, to_rich(bw, box=box.SIMPLE_HEAD, pad_edge=False), t=t)
    console.print(Text(t("coll.legend"), style="dim"))
