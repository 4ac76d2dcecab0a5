"""The model sections of a report (`attnprof model` runs): attention's share of each
implementation's step, and attention time per layer (the terminal's `attnprof model` view draws
this per-layer table too). Empty tables for any other run."""

from __future__ import annotations

from attnprof.records import RunRecord, RunResult
from attnprof.report.i18n import Translator
from attnprof.report.table import Cell, Column, Table
from attnprof.units import fmt_ms, fmt_num, fmt_us

__all__ = ["layer_rows", "layers_table", "model_table"]


def _pct(x: float | None) -> str:
    return "-" if x is None else fmt_num(x, ".1%")


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
        if not r.ran or m is None:
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


def layer_rows(results: list[RunResult]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Implementations (columns) and, per layer, the attention time of each (fwd, or fwd + bwd)."""
    ok = [r for r in results if r.model is not None and r.model.layers]
    layers = sorted({la.layer for r in ok for la in r.model.layers})  # type: ignore[union-attr]
    rows: list[tuple[str, list[str]]] = []
    for n in layers:
        cells = []
        for r in ok:
            la = next((x for x in r.model.layers if x.layer == n), None)  # type: ignore[union-attr]
            if la is None:
                cells.append("-")
            elif la.bwd_us is not None:  # forward + backward, both in ms: one narrow cell
                cells.append(f"{fmt_num(la.fwd_us / 1e3, '.3g')} + {fmt_num(la.bwd_us / 1e3, '.3g')}")
            else:
                cells.append(fmt_us(la.fwd_us))
        rows.append((str(n), cells))
    return [r.label for r in ok], rows


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
