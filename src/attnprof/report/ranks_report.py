"""The HTML page for a folder of per-rank traces: the cross-rank view, self-contained, offline.

Renders attnprof.analysis.ranks.FolderRun records as they are (the same figures as the terminal
view and the JSON), in the report's style and languages. Nothing is fetched; no script.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from attnprof.report.html import _env
from attnprof.report.i18n import Translator
from attnprof.report.tables import TextTable
from attnprof.units import fmt_us

if TYPE_CHECKING:
    from attnprof.analysis.ranks import FolderRun

__all__ = ["render_ranks_html"]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _ranks_table(run: FolderRun, t: Translator) -> TextTable:
    view = run.cross_rank
    slow = view.slowest.rank if view.slowest else None
    rows, classes = [], []
    for r in view.ranks:
        idle = 100.0 * r.idle_us / r.window_us if r.window_us > 0 else None
        rows.append(
            [
                r.rank,
                str(len(r.files)),
                str(r.steps),
                fmt_us(r.step_time_us),
                fmt_us(r.window_us) if r.window_us > 0 else "-",
                fmt_us(r.busy_us) if r.window_us > 0 else "-",
                _pct(idle),
                _pct(r.comm_pct),
                _pct(r.attention_pct),
            ]
        )
        classes.append("slower" if r.rank == slow else "")
    header = [
        t(f"ranks.col.{c}")
        for c in ("rank", "files", "steps", "step", "window", "busy", "idle", "comm", "attn")
    ]
    return TextTable(header=header, rows=rows, classes=classes, numeric=set(range(1, 9)))


def _families_table(run: FolderRun, t: Translator) -> TextTable:
    ranks = [r.rank for r in run.cross_rank.ranks]
    header = [t("ranks.col.family"), t("ranks.col.total"), *(t("ranks.col.on", rank=r) for r in ranks)]
    header.append(t("ranks.col.spread"))
    rows = [
        [
            f.family,
            fmt_us(f.total_us),
            *(fmt_us(f.per_rank_us.get(r, 0.0)) for r in ranks),
            f"{f.spread_pct:.1f}",
        ]
        for f in run.cross_rank.families
    ]
    return TextTable(header=header, rows=rows, numeric=set(range(1, len(header))))


def _slowest_line(run: FolderRun, t: Translator) -> str:
    s = run.cross_rank.slowest
    if s is None:
        return t("ranks.slowest.none")
    return t(
        f"ranks.slowest.{s.basis}",
        rank=s.rank,
        value=fmt_us(s.value_us),
        over_median=f"{s.pct_over_median:+.1f}",
        median=fmt_us(s.median_us),
        over_fastest=f"{s.pct_over_fastest:+.1f}",
        fastest_rank=s.fastest_rank,
        fastest=fmt_us(s.fastest_us),
    )


def render_ranks_html(runs: Sequence[FolderRun], t: Translator, *, folder: str) -> str:
    from attnprof._version import __version__

    sections = [
        {
            "folder": run.folder,
            "ranks": _ranks_table(run, t),
            "slowest": _slowest_line(run, t),
            "families": _families_table(run, t),
            "traces": [d.source for d in run.traces],
        }
        for run in runs
    ]
    return (
        _env()
        .get_template("ranks_report.html.j2")
        .render(lang=t.lang, t=t, version=__version__, title=t("ranks.title", folder=folder), runs=sections)
    )
