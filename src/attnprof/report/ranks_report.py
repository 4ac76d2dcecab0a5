"""The HTML page and the Markdown file for a folder of per-rank traces: the cross-rank view.

Renders attnprof.analysis.ranks.folder.FolderRun records as they are (the same figures as the terminal
view and the JSON), in the report's style and languages; the collectives' words and tables come
from report/collectives_report.py. The page is self-contained: nothing is fetched; no script.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from attnprof.report.collectives_report import bandwidth_table, collectives_lines, collectives_table
from attnprof.report.i18n import Translator
from attnprof.report.table import Cell, Column, Table, md_code, md_text, to_markdown
from attnprof.units import fmt_num, fmt_us

if TYPE_CHECKING:
    from attnprof.analysis.ranks.folder import FolderRun

__all__ = ["ranks_table", "render_ranks_html", "render_ranks_markdown", "slowest_line"]


def _pct(v: float | None) -> Cell:
    return Cell("-" if v is None else fmt_num(v, ".1f"), v, "%")


def _us(v: float | None, shown: bool = True) -> Cell:
    return Cell(fmt_us(v), v, "µs") if shown else Cell("-")


def ranks_table(run: FolderRun, t: Translator) -> Table:
    """One row per rank, the slowest emphasised: the terminal (report/ranks_view.py) and the
    HTML page draw this one table."""
    view = run.cross_rank
    slow = view.slowest.rank if view.slowest else None
    keys = ("files", "steps", "step", "window", "busy", "idle", "comm", "comm_exposed", "attn")
    table = Table(
        columns=[Column(t("ranks.col.rank"), no_wrap=True)]
        + [Column(t(f"ranks.col.{c}"), numeric=True, no_wrap=True) for c in keys],
        title=t("ranks.h.ranks"),  # the terminal titles it; the page has its heading
    )
    for r in view.ranks:
        window = r.window_us > 0
        table.add(
            [
                Cell(r.rank, emphasis="alarm" if r.rank == slow else ""),
                Cell(str(len(r.files)), len(r.files)),
                Cell(str(r.steps), r.steps),
                _us(r.step_time_us),
                _us(r.window_us, window),
                _us(r.busy_us, window),
                _pct(100.0 * r.idle_us / r.window_us if window else None),
                _pct(r.comm_pct),
                _us(r.comm_exposed_us, r.comm_union_us > 0),
                _pct(r.attention_pct),
            ],
            cls="slower" if r.rank == slow else "",
        )
    return table


def _families_table(run: FolderRun, t: Translator) -> Table:
    ranks = [r.rank for r in run.cross_rank.ranks]
    headers = [t("ranks.col.total"), *(t("ranks.col.on", rank=r) for r in ranks), t("ranks.col.spread")]
    table = Table(columns=[Column(t("ranks.col.family"))] + [Column(h, numeric=True) for h in headers])
    for f in run.cross_rank.families:
        table.add(
            [
                f.family,
                _us(f.total_us),
                *(_us(f.per_rank_us.get(r, 0.0)) for r in ranks),
                _pct(f.spread_pct),
            ]
        )
    return table


def slowest_line(run: FolderRun, t: Translator) -> str:
    """Which rank is slowest, by how much (the terminal's view and the page's say it alike)."""
    s = run.cross_rank.slowest
    if s is None:
        return t("ranks.slowest.none")
    return t(
        f"ranks.slowest.{s.basis}",
        rank=s.rank,
        value=fmt_us(s.value_us),
        over_median=fmt_num(s.pct_over_median, "+.1f"),
        median=fmt_us(s.median_us),
        over_fastest=fmt_num(s.pct_over_fastest, "+.1f"),
        fastest_rank=s.fastest_rank,
        fastest=fmt_us(s.fastest_us),
    )


def render_ranks_html(runs: Sequence[FolderRun], t: Translator, *, folder: str) -> str:
    from attnprof._version import __version__
    from attnprof.report.html import _env

    sections = [
        {
            "folder": run.folder,
            "ranks": ranks_table(run, t),
            "slowest": slowest_line(run, t),
            "families": _families_table(run, t),
            "traces": [d.source for d in run.traces],
            "collectives": _collectives(run, t),
        }
        for run in runs
    ]
    return (
        _env()
        .get_template("ranks_report.html.j2")
        .render(lang=t.lang, t=t, version=__version__, title=t("ranks.title", folder=folder), runs=sections)
    )


def _collectives(run: FolderRun, t: Translator) -> dict[str, Any] | None:
    view = run.cross_rank.collectives
    if view is None:
        return None
    return {
        "lines": collectives_lines(view, t),
        "listed": collectives_table(view, t),
        "bandwidth": bandwidth_table(view, t),
    }


def render_ranks_markdown(runs: Sequence[FolderRun], t: Translator, *, folder: str) -> str:
    """The folder's view as Markdown: the same sections and tables as the HTML page."""
    lines = [f"# {md_text(t('ranks.title', folder=folder))}", ""]
    for run in runs:
        lines += [f"## {md_code(run.folder)}", "", md_text(slowest_line(run, t)), ""]
        lines += [*to_markdown(ranks_table(run, t)), "", md_text(t("ranks.legend")), ""]
        if run.cross_rank.families:
            lines += [f"### {md_text(t('ranks.h.families'))}", "", *to_markdown(_families_table(run, t)), ""]
            lines += [md_text(t("ranks.spread_legend")), ""]
        coll = _collectives(run, t)
        if coll is not None:
            lines += [f"### {md_text(t('coll.h.collectives'))}", ""]
            lines += [*(f"- {md_text(line)}" for line in coll["lines"]), ""]
            for key in ("listed", "bandwidth"):
                table = coll[key]
                if isinstance(table, Table) and table.rows:
                    lines += [f"**{md_text(table.title)}**", "", *to_markdown(table), ""]
            lines += [md_text(t("coll.legend")), ""]
        lines += [f"### {md_text(t('ranks.h.traces'))}", ""]
        lines += [*(f"- {md_code(d.source)}" for d in run.traces), ""]
    return "\n".join(lines)
