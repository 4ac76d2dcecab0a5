"""The model sections of a report (`attnprof model` runs): attention's share of each
implementation's step, and attention time per layer. Empty tables for any other run."""

from __future__ import annotations

from attnprof.records import RunRecord
from attnprof.report.i18n import Translator
from attnprof.report.model_view import layer_rows
from attnprof.report.tables import TextTable
from attnprof.units import fmt_ms

__all__ = ["layers_table", "model_table"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def model_table(record: RunRecord, t: Translator) -> TextTable:
    if record.model is None:
        return TextTable(header=[], rows=[])
    rows = []
    for r in record.results:
        m = r.model
        if r.status != "ok" or m is None:
            continue
        rows.append(
            [
                r.label,
                fmt_ms(r.timing.median_ms) if r.timing else "-",
                _pct(m.attention_share),
                _pct(m.analyser_share) + ("" if m.shares_agree is not False else " (!)"),
                fmt_ms(m.attention_ms),
            ]
        )
    return TextTable(
        header=[
            t("col.variant"),
            t("col.median"),
            t("col.attention_share"),
            t("col.analyser_share"),
            t("col.attention_ms"),
        ],
        rows=rows,
        numeric={1, 2, 3, 4},
        title=t(
            "model.about",
            model=record.model.name,
            cls=record.model.model_class,
            layers=record.model.layers,
            step=record.model.step,
        ),
    )


def layers_table(record: RunRecord, t: Translator) -> TextTable:
    if record.model is None:
        return TextTable(header=[], rows=[])
    names, rows = layer_rows(record.results)
    return TextTable(
        header=[t("col.layer"), *names],
        rows=[[layer, *cells] for layer, cells in rows],
        numeric=set(range(len(names) + 1)),
        title=t("model.layers_backward" if record.model.backward else "model.layers"),
    )
