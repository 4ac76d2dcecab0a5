"""The per-op performance model as a table and as sentences: terminal (`analyze --ops`), Markdown
and HTML (`report TRACE`) draw the same rows.

Rows are the outermost modelled ops (analysis/perf/perf_model.py): an op inside another modelled op
(aten::addmm inside aten::linear) shares its kernels and would count them twice; the JSON lists
it, marked nested. Every figure is the record's; nothing is computed here but formatting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attnprof.report.table import Cell, Column, Table
from attnprof.units import fmt_bytes, fmt_count, fmt_num, fmt_us

if TYPE_CHECKING:
    from attnprof.analysis.records.perf_records import OpPerf, PerfModel
    from attnprof.report.data import ReportData
    from attnprof.report.i18n import Translator

# rows of a report's per-shape table per trace (the JSON and `analyze --ops --top 0` have all)
REPORT_ROWS = 15

__all__ = ["PerfSection", "dims_text", "ops_table", "perf_lines", "perf_sections", "table_ops"]


@dataclass
class PerfSection:
    """One trace's per-op model in a report: whose it is, its sentences, its table (the HTML
    report adds the roofline drawn from `ops`)."""

    label: str
    lines: list[str]
    table: Table
    ops: list[OpPerf] = field(default_factory=list)
    model: PerfModel | None = None


def dims_text(dims: list[Any]) -> str:
    """The tensor inputs' shapes: "[1,141,512] [512,512]" (scalars and empty entries left out)."""
    shapes = [d for d in dims if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    return " ".join("[" + ",".join(str(x) for x in s) + "]" for s in shapes)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{fmt_num(x, '.3g')}%"


def table_ops(ops: list[OpPerf], top: int = 20) -> list[OpPerf]:
    """The rows a table shows: outermost ops, by time, the first `top` (0: all)."""
    rows = [o for o in ops if not o.nested]
    return rows[:top] if top > 0 else rows


def ops_table(
    ops: list[OpPerf], t: Translator, *, top: int = 20, merged: bool = False, formula: bool = True
) -> Table:
    """merged: the input dims on a second line of the op's cell (the terminal's 100 columns),
    instead of a column of their own. formula: the model's own words (English, as the JSON has
    them), for English readers."""
    cpu = any(o.cpu_time_us is not None for o in ops)
    cols = [Column(t("perf.col.op"), max_width=28, overflow="fold")]
    if not merged:
        cols.append(Column(t("perf.col.inputs"), max_width=40, overflow="fold"))
    cols += [
        Column(t("perf.col.cpu_time" if cpu else "perf.col.time"), numeric=True, no_wrap=True),
        Column(t("perf.col.share"), numeric=True, no_wrap=True),
        Column(t("perf.col.tflops"), numeric=True, no_wrap=True),
        Column(t("perf.col.tbps"), numeric=True, no_wrap=True),
        Column(t("perf.col.bound")),
        Column(t("perf.col.pct_bound"), numeric=True, no_wrap=True),
        Column(t("perf.col.calls"), numeric=True),
        Column(t("perf.col.intensity"), numeric=True, no_wrap=True),
        Column(t("perf.col.dtype")),
        Column(t("perf.col.gflop"), numeric=True, no_wrap=True),
        Column(t("perf.col.bytes"), numeric=True, no_wrap=True),
    ]
    if formula:
        cols.append(Column(t("perf.col.formula"), max_width=40))
    table = Table(columns=cols, title=t("perf.h"))
    for o in table_ops(ops, top):
        time_us = o.device_time_us if o.device_time_us is not None else o.cpu_time_us
        above = o.pct_of_bound is not None and o.pct_of_bound > 100.0
        pct = Cell(
            _pct(o.pct_of_bound) + (t.maybe("tflops.above_peak", " ⚠") if above else ""),
            o.pct_of_bound,
            "%",
            "alarm" if above else "",
        )
        dims = dims_text(o.input_dims)
        first = [Cell(f"{o.name}\n{dims}" if merged else o.name, o.name)]
        if not merged:
            first.append(Cell(dims))
        table.add(
            [
                *first,
                Cell(fmt_us(time_us), time_us, "µs"),
                Cell(_pct(o.pct_time), o.pct_time, "%"),
                Cell(fmt_num(o.tflops), o.tflops, "TFLOP/s"),
                Cell(fmt_num(o.tbps), o.tbps, "TB/s"),
                Cell(t(f"perf.bound.{o.bound}") if o.bound else "-", o.bound),
                pct,
                Cell(fmt_count(o.count), o.count),
                Cell(fmt_num(o.intensity), o.intensity, "FLOP/B"),
                Cell(o.dtype),
                _gflop_cell(o, t),
                Cell(fmt_bytes(o.bytes), o.bytes, "B")
                if o.bytes is not None
                else Cell(t("perf.flops_not_measured")),
                *([Cell(o.formula)] if formula else []),
            ],
            cls="above-peak" if above else "",
        )
    return table


def _gflop_cell(o: OpPerf, t: Translator) -> Cell:
    """GFLOP per call as the model knows it: not measured (None), or marked as an upper bound."""
    if o.flops is None:
        return Cell(t("perf.flops_not_measured"))
    text = fmt_num(o.flops / 1e9)
    if o.flops_basis == "dense upper bound":
        text = t("perf.flops_upper_bound", value=text)
    return Cell(text, o.flops / 1e9, "GFLOP")


def perf_lines(pm: PerfModel, t: Translator) -> list[str]:
    """The whole trace through the model, in sentences that follow from the figures given."""
    if not pm.shapes_recorded:
        return [t("perf.no_shapes")]
    out = [
        t(
            "perf.summary",
            flops=fmt_num(pm.model_flops / 1e9, ".4g"),
            busy=fmt_us(pm.busy_time_us),
            tflops=fmt_num(pm.achieved_tflops),
        )
    ]
    if pm.mfu_pct is not None and pm.peak_tflops is not None:
        out.append(
            t(
                "perf.mfu",
                mfu=_pct(pm.mfu_pct),
                dtype=pm.dtype or "-",
                peak=fmt_num(pm.peak_tflops, ".4g"),
                source=t(f"perf.source.{pm.peak_kind}", device=pm.peak_device or "-")
                if pm.peak_kind
                else "-",
            )
        )
    elif pm.dtype is not None:
        out.append(t("perf.no_peak", dtype=pm.dtype, device=pm.device or "-"))
    out.append(
        t(
            "perf.shares",
            compute=_pct(pm.compute_bound_pct),
            memory=_pct(pm.memory_bound_pct),
            unknown=_pct(pm.bound_unknown_pct),
            unmodelled=_pct(pm.unmodelled.pct),
        )
    )
    if pm.not_measured_pct:
        out.append(t("perf.not_measured_line", pct=_pct(pm.not_measured_pct)))
    if pm.upper_bound_flops > 0 and pm.model_flops > 0:
        out.append(t("perf.upper_bound_line", pct=_pct(100.0 * pm.upper_bound_flops / pm.model_flops)))
    u = pm.unmodelled
    if u.time_us > 0:
        out.append(
            t(
                "perf.unmodelled",
                no_op=fmt_us(u.no_op_us),
                no_shapes=fmt_us(u.no_shapes_us),
                no_formula=fmt_us(u.not_modelled_us),
                top=t.join([f"{o.name} {fmt_us(o.time_us)}" for o in u.top_not_modelled]) or "-",
            )
        )
    return out


def perf_sections(data: ReportData, t: Translator) -> list[PerfSection]:
    """A section per analysed row whose trace has modelled ops (record_shapes=True)."""
    out = []
    for r in data.comparison.rows:
        pm = r.perf_model
        if not r.ok or pm is None or not any(not o.nested for o in r.perf_ops):
            continue
        lines = perf_lines(pm, t)
        if any(o.nested for o in r.perf_ops):
            lines.append(t("perf.nested"))
        out.append(
            PerfSection(
                r.label,
                lines,
                ops_table(r.perf_ops, t, top=REPORT_ROWS, formula=t.lang == "en"),
                list(r.perf_ops),
                pm,
            )
        )
    return out
