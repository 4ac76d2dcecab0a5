"""The cross-rank collectives of a folder (attnprof.analysis.ranks.collectives.CollectiveView) in words
and tables, for the terminal (report/ranks_view.py), the HTML page and the Markdown file
(report/ranks_report.py) alike: each builder is called once per view with that view's
Translator.

Renders the view as it is: every figure shown is a field of the record; the only arithmetic is
none (shares and bandwidths come computed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.analysis.ranks.bus_bandwidth import WHY
from attnprof.report.i18n import Translator
from attnprof.report.table import Cell, Column, Table
from attnprof.units import fmt_bytes, fmt_num, fmt_us, short_name

if TYPE_CHECKING:
    from attnprof.analysis.ranks.collectives import Collective, CollectiveView

__all__ = ["bandwidth_table", "collectives_lines", "collectives_table"]


def _gbps(v: float | None) -> Cell:
    return Cell("-" if v is None else fmt_num(v, ".3g"), v, "GB/s")


def _us(v: float) -> Cell:
    return Cell(fmt_us(v), v, "µs")


def _name(c: Collective) -> str:
    # the recorded collective name says more than an NCCL kernel's template signature
    return c.kind if c.kind else short_name(c.name, 40)


def collectives_lines(view: CollectiveView, t: Translator) -> list[Cell]:
    """The view's sentences: what was aligned and how, skew and wait, stragglers (emphasised),
    bandwidth not measured and why."""
    bases = [
        t("coll.basis.count", basis=t(f"coll.basis.{b}"), count=n)
        if len(view.bases) > 1
        else t(f"coll.basis.{b}")
        for b, n in view.bases.items()
    ]
    lines = [
        Cell(
            t(
                "coll.summary",
                aligned=view.aligned,
                basis=t.join(bases) or t("coll.basis.none"),
                left_out=view.left_out,
            )
        ),
        Cell(t("coll.skew", skew=fmt_us(view.max_skew_us), wait=fmt_us(view.total_wait_us))),
    ]
    if view.partial:  # groups larger than the ranks given: who was last is not known there
        text = (
            t(
                "coll.partial.named",
                partial=view.partial,
                aligned=view.aligned,
                names=rank_spans(view.missing),
            )
            if view.missing
            else t("coll.partial", partial=view.partial, aligned=view.aligned, missing=view.missing_ranks)
        )
        lines.append(Cell(text, view.partial, emphasis="warn"))
    for s in view.stragglers:
        text = t(
            "coll.straggler",
            rank=s.rank,
            last_in=s.last_in,
            of=s.of,
            share=fmt_num(s.share_pct, ".0f"),
            chance=fmt_num(s.chance_pct, ".0f"),
            waited=fmt_us(s.waited_for_us),
        )
        lines.append(Cell(text, s.rank, emphasis="alarm"))
    if view.ties:  # no rank waited in them: none arrived last
        lines.append(Cell(t("coll.ties", ties=view.ties, aligned=view.aligned), view.ties))
    if not view.stragglers and view.aligned > view.partial + view.ties:
        lines.append(Cell(t("coll.no_straggler")))
    for code in WHY:  # why a bandwidth is unknown, worded by the catalogs (coll.bw.<code>)
        if code in view.no_bandwidth:
            reason = t(f"coll.bw.{code}")
            lines.append(
                Cell(t("coll.bw.missing", count=view.no_bandwidth[code], total=view.aligned, reason=reason))
            )
    return lines


def collectives_table(view: CollectiveView, t: Translator) -> Table:
    """The listed collectives (those with the longest wait), in launch order; the columns that
    matter most first (the terminal leaves out from the right what does not fit)."""
    keys = (
        "group",
        "seq",
        "ranks",
        "last",
        "wait",
        "skew",
        "time",
        "busbw",
        "algbw",
        "bytes",
        "first",
        "basis",
    )
    table = Table(
        columns=[Column(t("coll.col.collective"), no_wrap=True)]
        + [Column(t(f"coll.col.{k}"), numeric=k not in ("group", "basis"), no_wrap=True) for k in keys],
        title=t("coll.h.listed", n=len(view.collectives)),
    )
    slow = {s.rank for s in view.stragglers}
    for c in view.collectives:
        table.add(
            [
                Cell(_name(c), c.name),
                Cell(c.group or "-", c.group),
                Cell("-" if c.seq is None else str(c.seq), c.seq),
                Cell(str(c.ranks), c.ranks),
                Cell(c.last_rank or "-", c.last_rank, emphasis="alarm" if c.last_rank in slow else ""),
                _us(c.wait_us),
                _us(c.skew_us),
                _us(c.time_us),
                _gbps(c.bus_bandwidth_gbps),
                _gbps(c.algbw_gbps),
                Cell(fmt_bytes(c.bytes), c.bytes, "B"),
                Cell(c.first_rank or "-", c.first_rank),
                Cell(t(f"coll.basis_short.{c.basis}"), c.basis),
            ]
        )
    return table


def bandwidth_table(view: CollectiveView, t: Translator) -> Table | None:
    """Per group and kind, the measured collectives together; None when none is measured."""
    if not view.bandwidth:
        return None
    keys = ("count", "bytes", "time", "algbw", "busbw", "busbw_range")
    table = Table(
        columns=[Column(t("coll.col.kind"), no_wrap=True), Column(t("coll.col.group"), no_wrap=True)]
        + [Column(t(f"coll.col.{k}"), numeric=True, no_wrap=True) for k in keys],
        title=t("coll.h.bandwidth"),
    )
    for b in view.bandwidth:
        span = f"{fmt_num(b.busbw_min_gbps, '.3g')}–{fmt_num(b.busbw_max_gbps, '.3g')}"
        table.add(
            [
                Cell(b.kind),
                Cell(b.group or "-", b.group),
                Cell(str(b.count), b.count),
                Cell(fmt_bytes(b.bytes), b.bytes, "B"),
                _us(b.time_us),
                _gbps(b.algbw_gbps),
                _gbps(b.busbw_gbps),
                Cell(span, None, "GB/s"),
            ]
        )
    return table


def rank_spans(ranks: list[str]) -> str:
    """Numbered ranks as runs ("4-7, 12"): a list of 200 missing ranks stays one line."""
    nums = sorted(int(r) for r in ranks)
    spans: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        spans.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(spans)
