"""The model sections of a report (`attnprof model` runs): attention's share of each
implementation's step, and attention time per layer. Empty tables for any other run."""

from __future__ import annotations

from attnprof.records import RunRecord
from attnprof.report.i18n import Translator
from attnprof.report.model_view import layer_rows
from attnprof.report.table import Cell, Column, Table
from attnprof.units import fmt_ms

__all__ = ["layers_table", "model_table"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def model_table(record: RunRecord, t: Translator) -> Table:
    if record.model is None:
        return Table(columns=[])
    keys = ("median", "attention_share", "analyser_share", "attention_ms")
    table = Table(
        columns=[Column(t("col.variant")), *(Column(t(f"col.{k}"), numeric=True) for k in keys)],
        title=t(
            "model.about",
            model=record.model.name,
            cls=record.model.model_class,
            layers=record.model.layers,
            step=record.model.step,
        ),
    )
    for r in record.results:
        m = r.model
        if r.status != "ok" or m is None:
            continue
        median = r.timing.median_ms if r.timing else None
        table.add(
            [
                r.label,
                Cell(fmt_ms(median), median, "ms"),
                Cell(_pct(m.attention_share), m.attention_share, "%"),
                Cell(
                    _pct(m.analyser_share) + ("" if m.shares_agree is not False else " (!)"),
                    m.analyser_share,
                    "%",
                ),
                Cell(fmt_ms(m.attention_ms), m.attention_ms, "ms"),
            ]
        )
    return table


def layers_table(record: RunRecord, t: Translator) -> Table:
    if record.model is None:
        return Table(columns=[])
    names, rows = layer_rows(record.results)
    table = Table(
        columns=[Column(h, numeric=True) for h in (t("col.layer"), *names)],
        title=t("model.layers_backward" if record.model.backward else "model.layers"),
    )
    for layer, cells in rows:
        table.add([layer, *cells])
    return table
