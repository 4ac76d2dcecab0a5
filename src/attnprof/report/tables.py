"""The tables of a run's comparison, built once as report/table.py's model: Markdown and HTML
reports in the reader's language, and the terminal (report/terminal.py) in its terse English (a
Translator whose `words` are the terminal's), from the same builders and the same cells.
Also `report_content`: all the Markdown and HTML reports show but the plots, so that both show
the same figures with the same units and only lay them out."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from attnprof.compare.compare import INCORRECT, Row
from attnprof.compare.diff import Diff, KernelChange
from attnprof.compare.expect import ExpectationResult
from attnprof.records import Status
from attnprof.report.data import ReportData
from attnprof.report.finding_text import finding_message
from attnprof.report.i18n import Translator
from attnprof.report.measured import rounds_value, steps_value
from attnprof.report.peak_view import peak_source
from attnprof.report.perf_tables import PerfSection, perf_sections
from attnprof.report.reasons import translate_reason
from attnprof.report.summary import non_finite_text, summarize
from attnprof.report.table import Cell, Column, Table
from attnprof.units import (
    fmt_bytes,
    fmt_count,
    fmt_delta_us,
    fmt_err,
    fmt_interval,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    fmt_us,
    number_locale,
    short_name,
)
from attnprof.workload import WorkloadId

__all__ = [
    "PERFETTO",
    "ReportContent",
    "comparison_table",
    "diff_table",
    "env_items",
    "error_cell",
    "expectation_table",
    "finding_items",
    "inflation_cell",
    "not_run_table",
    "occupancy_cell",
    "report_content",
    "speed_cell",
    "tflops_cell",
    "trace_items",
]


PERFETTO = "https://ui.perfetto.dev"

# a speed cell's emphasis -> the class of its row in HTML (the speed column's colour)
_SPEED_CLASS = {"alarm": "incorrect", "strong": "base", "good": "faster", "bad": "slower"}


def speed_cell(r: Row, baseline: str | None, t: Translator) -> Cell:
    """Speed relative to the baseline with its 95% interval; emphasised where it is notable."""
    if r.status == INCORRECT:
        return Cell(t("speed.incorrect"), emphasis="alarm")
    if r.speedup is None:
        return Cell("-")
    if r.label == baseline:
        return Cell(t("speed.baseline"), r.speedup, "x", "strong")
    # the claim is compare/rank.py's: a colour only for a difference beyond noise
    ratio = fmt_ratio(max(r.speedup, 1 / r.speedup))
    claim = r.speedup_claim or "too_few"
    if claim == "too_few":
        text = t("speed.too_few", ratio=ratio)
        spread = fmt_interval(r.speedup, r.speedup_range_low, r.speedup_range_high)
        if spread:
            text = t("speed.with_range", speed=text, range=spread)
        return Cell(text, r.speedup, "x", "")
    way = "tie" if claim == "tie" else "faster" if r.speedup >= 1 else "slower"
    text = t(f"speed.{way}", ratio=ratio)
    ci = fmt_interval(r.speedup, r.speedup_low, r.speedup_high)
    if ci:
        text = t.maybe("speed.with_interval", "{speed} ({ci})").format(speed=text, ci=ci)
    return Cell(text, r.speedup, "x", {"faster": "good", "slower": "bad"}.get(way, ""))


def error_cell(r: Row, t: Translator) -> Cell:
    """The output's max error against the fp64 reference, or, for an output holding NaN or inf,
    their counts: the max over its finite values alone would pass for a small error (an all-NaN
    output once showed 0.0e+00)."""
    bad = "bad" if r.accuracy_ok is False else ""
    if text := non_finite_text(r.nan_count, r.inf_count, t):
        return Cell(text, None, emphasis="bad")
    return Cell(fmt_err(r.max_abs_err), r.max_abs_err, emphasis=bad)


def occupancy_cell(r: Row, t: Translator) -> Cell:
    """Achieved / theoretical occupancy of the main kernel, and what limits it."""
    if r.occupancy_achieved is None and r.occupancy_theoretical is None:
        return Cell("-")
    pair = t.maybe("occupancy.pair", "{achieved} / {theoretical}").format(
        achieved=fmt_pct(r.occupancy_achieved), theoretical=fmt_pct(r.occupancy_theoretical)
    )
    text = (
        t.maybe("occupancy.limited", "{pair}, {limiter}").format(pair=pair, limiter=r.occupancy_limiter)
        if r.occupancy_limiter
        else pair
    )
    return Cell(text, r.occupancy_achieved, "%")


def tflops_cell(r: Row, t: Translator) -> Cell:
    """Useful TFLOP/s, with its share of the run's peak and a mark above 100%."""
    if r.tflops_useful is None:
        return Cell("-")
    text = fmt_num(r.tflops_useful)
    if r.pct_of_peak is not None:
        mark = t.maybe("tflops.above_peak", " ⚠") if r.above_peak else ""
        text += f" ({fmt_pct(r.pct_of_peak / 100)}{mark})"
    return Cell(text, r.tflops_useful, "TFLOP/s")


def inflation_cell(r: Row) -> Cell:
    """Trace time per forward over the clean median: the exported (rich) pass's, and the lean
    pass's after a slash where there was one."""
    if r.profiler_inflation is None:
        return Cell("-")
    rich = f"{fmt_ratio(r.profiler_inflation)}x"
    text = f"{rich} / {fmt_ratio(r.lean_inflation)}x" if r.lean_inflation is not None else rich
    return Cell(text, r.profiler_inflation, "x")


def comparison_table(data: ReportData, t: Translator) -> Table:
    comp = data.comparison
    speed = (
        t("col.speed", baseline=comp.baseline or "-")
        if not comp.baselines
        else t("col.speed_each", baselines=", ".join(comp.baselines.values()))
    )
    ranked = {r.ranked_by for r in comp.rows if r.kind == "run"}
    if ranked and ranked != {"forward"}:  # the speeds are not of the median column beside them
        speed = t("col.speed_ranked", speed=speed, per=", ".join(t(f"per.{x}") for x in sorted(ranked)))
    table = Table(
        columns=[
            Column(t("col.variant")),
            Column(t("col.backend")),
            Column(t("col.median"), numeric=True),
            Column(t("col.iqr"), numeric=True),
            Column(speed),
            *(
                Column(t(f"col.{key}"), numeric=True)
                for key in (
                    "bwd_median",
                    "total_median",
                    "gpu_time",
                    "inflation",
                    "gpu_ops",
                    "cpu_ops",
                    "memcpy",
                    "tensor_cores",
                )
            ),
            Column(t("col.fused")),
            Column(t("col.occupancy")),
            *(Column(t(f"col.{key}"), numeric=True) for key in ("peak_memory", "max_error", "tflops")),
            Column(t("col.findings")),
        ]
    )
    several = len(comp.workloads) > 1
    for r in comp.rows:
        if not r.ran:
            continue
        sp = speed_cell(r, comp.baselines.get(r.workload or "", comp.baseline), t)
        table.add(
            [
                f"{r.label} ({r.workload})" if several and r.workload else r.label,
                r.backend or "-",
                Cell(fmt_ms(r.median_ms), r.median_ms, "ms"),
                Cell(fmt_ms(r.iqr_ms), r.iqr_ms, "ms"),
                sp,
                Cell(fmt_ms(r.bwd_median_ms), r.bwd_median_ms, "ms"),
                Cell(fmt_ms(r.total_median_ms), r.total_median_ms, "ms"),
                Cell(fmt_us(r.gpu_time_us_per_forward), r.gpu_time_us_per_forward, "µs"),
                inflation_cell(r),
                Cell(fmt_count(r.gpu_ops_per_forward), r.gpu_ops_per_forward),
                Cell(fmt_count(r.cpu_ops_per_forward), r.cpu_ops_per_forward),
                Cell(fmt_count(r.memcpy_per_forward), r.memcpy_per_forward),
                Cell(fmt_pct(r.tensor_core_share), r.tensor_core_share, "%"),
                ", ".join(r.fused_families) or "-",
                occupancy_cell(r, t),
                Cell(fmt_bytes(r.peak_bytes), r.peak_bytes, "B"),
                error_cell(r, t),
                tflops_cell(r, t),
                ", ".join(r.finding_codes) or "-",
            ],
            cls=_SPEED_CLASS.get(sp.emphasis, ""),
        )
    # columns with nothing to say for this run go (a CPU run has no GPU time, ops, memcpy,
    # tensor cores or occupancy); variant, backend, median, IQR and speed always stay
    no_gpu = not any((r.gpu_ops_per_forward or 0) > 0 for r in comp.rows)
    empty = {"-", ""} | ({"0", "0 µs"} if no_gpu else set())
    drop = {i for i in range(5, len(table.columns)) if all(row[i] in empty for row in table.rows)}
    return table.drop_columns(drop)


def not_run_table(data: ReportData, t: Translator) -> Table:
    table = Table(columns=[Column(t("col.variant")), Column(t("col.status")), Column(t("col.reason"))])
    for r in data.comparison.rows:
        if not r.ran:
            table.add(
                [
                    r.label,
                    t.maybe(f"status.{r.status}", r.status),
                    translate_reason(r.reason, t, r.reason_code) or "-",
                ]
            )
    return table


def observed_cell(e: ExpectationResult, t: Translator) -> str:
    """What was observed, in the reader's language: the catalog's `observed.<code>` with the
    result's values (a harness reason among them translated where it is a standard one); the
    English text where the result has no code (a count, a status, kernel families)."""
    key = f"observed.{e.observed_code}"
    if not e.observed_code or not t.has(key):
        # a status check observes a status: the catalog's word for it
        return t.maybe(f"status.{e.observed}", e.observed) if e.check == "status" else e.observed
    args = dict(e.observed_args)
    if "status" in args and t.lang != "en":  # the catalog's word for the status; English keeps the code
        args["status"] = t.maybe(f"status.{args['status']}", str(args["status"]))
    if "reason" in args:
        args["reason"] = translate_reason(args["reason"], t, e.reason_code)
    return t(key, **args)


# expected values that are words rather than names or numbers
_EXPECTED_WORDS = {
    "present": "observed.present",
    "absent": "observed.absent",
    "yes": "env.yes",
    "no": "env.no",
}


_OF = re.compile(r"(?P<range>.+x) of (?P<baseline>\S+)")


def _expected_cell(expected: str, t: Translator) -> str:
    """An expected value in the reader's language: a word from the catalog, ">= 1.30x of X" with
    its "of" translated, anything else (names, numbers) as written."""
    if expected in _EXPECTED_WORDS:
        return t(_EXPECTED_WORDS[expected])
    if expected in get_args(Status):
        return t.maybe(f"status.{expected}", expected)  # a status check's expected status
    m = _OF.fullmatch(expected or "")
    if m:
        return t("expected.of", range=m["range"], baseline=m["baseline"])
    return expected or "-"


def _grouped(results: Sequence[ExpectationResult]) -> list[tuple[ExpectationResult, int]]:
    """Checks skipped for one reason on one row collapse into one line: a file written for bf16
    should not fill an fp32 run's table with a dozen identical 'skipped' lines."""
    out: list[tuple[ExpectationResult, int]] = []
    for r in results:
        if (
            out
            and r.status == "skipped"
            and out[-1][0].status == "skipped"
            and (out[-1][0].row, out[-1][0].variant, out[-1][0].observed) == (r.row, r.variant, r.observed)
        ):
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((r, 1))
    return out


_RESULT = {
    "met": ("met", "good", ""),
    "not met": ("notmet", "alarm", ""),
    "skipped": ("skipped", "dim", "dim"),
    "info": ("info", "dim", ""),
}


def expectation_table(
    results: Sequence[ExpectationResult], t: Translator, *, group_skipped: bool = False
) -> Table:
    """One line per check (with group_skipped, the skipped checks of one row for one reason
    as one line); the result emphasised, a skipped row dim."""
    status = {
        "met": t("status.met"),
        "not met": t("status.not_met"),
        "skipped": t("status.skipped"),
        "info": t("status.info"),
    }
    # widths that fit 100 columns with the result column: expected holds the longest finding code
    # with its comma (TRANSPOSES_BEFORE_KERNEL,), observed wraps between words
    table = Table(
        columns=[
            Column(t("col.variant"), overflow="fold", max_width=18),
            Column(t("col.check"), overflow="fold", max_width=19),
            Column(t("col.expected"), overflow="fold", max_width=26),
            Column(t("col.observed"), overflow="fold", max_width=20),
            Column(t("col.result"), no_wrap=True),
        ],
        title=t("h.expectations"),
    )
    for e, n in _grouped(results) if group_skipped else [(e, 1) for e in results]:
        cls, emphasis, row = _RESULT[e.status]
        table.add(
            [
                e.row or e.variant,
                t.maybe(f"check.{e.check}", e.check) if n == 1 else f"({n} checks)",
                _expected_cell(e.expected, t) if n == 1 else "-",
                observed_cell(e, t),
                Cell(status[e.status], emphasis=emphasis),
            ],
            cls=cls,
            emphasis=row,
        )
    return table


def diff_table(
    d: Diff,
    t: Translator,
    *,
    top: int = 12,
    by_family: bool = False,
    name_width: int = 60,
    label: Callable[[str], str] = str,
) -> Table:
    """The `top` kernel changes that matter most: attention first, then by |Δ time|. by_family:
    every family instead (by |Δ time|, with its counts), its changed kernels under it, until `top`
    kernels are shown."""
    change = {k: t(f"change.{k}") for k in ("added", "removed", "changed", "same")}
    emphasis = {"added": "good", "removed": "bad", "changed": "warn", "same": "dim"}
    table = Table(
        columns=[
            Column(t("col.family"), overflow="fold", max_width=20),
            Column(t("col.kernel"), no_wrap=True, max_width=46),
            Column(t("col.change")),
            Column(t("col.per_fwd", name=d.a, side="A"), numeric=True),
            Column(t("col.per_fwd", name=d.b, side="B"), numeric=True),
            Column(t("col.delta"), numeric=True),
        ],
        title=t(
            # CPU diffs of timed runs are in clean time (compare/diff.py, Diff.basis)
            "diff.title_clean" if d.basis == "clean" else "diff.title",
            a=label(d.a),
            b=label(d.b),
            ops_a=fmt_count(d.ops_a),
            ops_b=fmt_count(d.ops_b),
            lane=d.lane.upper(),
            added=d.added,
            removed=d.removed,
            changed=d.changed,
        ),
    )

    def kernel(family: str, k: KernelChange) -> None:
        table.add(
            [
                family,
                k.short or short_name(k.name, name_width),
                Cell(change[k.change], emphasis=emphasis[k.change]),
                Cell(fmt_count(k.count_a), k.count_a),
                Cell(fmt_count(k.count_b), k.count_b),
                Cell(fmt_delta_us(k.delta_us), k.delta_us, "µs"),
            ],
            cls=k.change,
        )

    moved = sum(1 for fam in d.families for k in fam.kernels if k.change != "same")

    def more(shown: int) -> None:
        """Every row, or a line saying how many are not shown (the JSON has them all)."""
        if moved > shown:
            table.add([Cell(t("diff.more", n=moved - shown), emphasis="dim"), "", "", "", "", ""])

    if not by_family:
        picked = sorted(
            ((fam, k) for fam in d.families for k in fam.kernels if k.change != "same"),
            key=lambda fk: (fk[0].category != "attention", -abs(fk[1].delta_us)),
        )[:top]
        for fam, k in picked:
            kernel(t.maybe(f"category.{fam.family}", fam.family), k)
        more(len(picked))
        return table
    shown = 0
    for fam in d.families:
        table.add(
            [
                Cell(fam.family, emphasis="strong"),
                "",
                "",
                Cell(fmt_count(fam.count_a), fam.count_a),
                Cell(fmt_count(fam.count_b), fam.count_b),
                Cell(fmt_delta_us(fam.delta_us), fam.delta_us, "µs"),
            ]
        )
        for k in fam.kernels:
            if k.change == "same" or shown >= top:
                continue
            shown += 1
            kernel("", k)
    more(shown)
    return table


def env_items(data: ReportData, t: Translator) -> list[tuple[str, str]]:
    if data.record is None:  # trace files alone: only what the traces name
        devices = sorted({r.device_name for r in data.comparison.rows if r.device_name})
        return [
            (t("env.device"), ", ".join(devices) or t("env.device_unknown")),
            (t("env.trace"), ", ".join(data.trace_files)),
        ]
    e, w = data.record.environment, data.record.workload
    rounds = rounds_value(data.record, data.comparison.rows, t)
    device = e.device_name + (f" (sm {e.compute_capability})" if e.compute_capability else "")
    soft = f"PyTorch {e.torch_version}, Python {e.python}" + (
        f", CUDA {e.cuda_version}" if e.cuda_version else ""
    )
    shapes = sorted({(p.batch, p.heads, p.seq, p.head_dim) for p in data.scaling})
    shape = (
        ", ".join(f"{b}, {h}, {s}, {d}" for b, h, s, d in shapes)
        if shapes
        else f"{w.batch}, {w.heads}, {w.seq}, {w.head_dim}"
    )
    if w.kv_heads != w.heads or w.kv_seq != w.seq:
        shape += f" (kv heads {w.kv_heads}, kv seq {w.kv_seq})"
    peak = (
        t("env.peak_value", tflops=fmt_num(e.peak_tflops), source=peak_source(e, t))
        if e.peak_tflops
        else t("env.peak_none")
    )
    return [
        (t("env.device"), f"{device} [{w.device}]"),
        (t("env.peak"), peak),
        (t("env.cpu"), e.cpu_model),
        (t("env.threads"), str(e.threads)),
        (t("env.software"), soft),
        (t("env.shape"), shape),
        (t("env.dtype"), w.dtype),
        # a mask other than plain causal or none is named as given (sliding=64 is no "causal: no")
        (t("env.causal"), t("env.yes") if w.causal else t("env.no"))
        if w.mask in ("", "causal", "none")
        else (t("env.mask"), w.mask),
        *([(t("env.direction"), t("env.fwd_bwd"))] if w.backward else []),
        # the run's default, and the variants measured otherwise (report/measured.py)
        (t("env.steps"), steps_value(data.record, data.comparison.rows, t)),
        *([(t("env.rounds"), rounds)] if rounds is not None else []),
        (t("env.created"), data.record.created),
    ]


def finding_items(data: ReportData, t: Translator) -> list[tuple[str, str, str, str, list[str]]]:
    """(variant, code, severity, message, evidence) with the message in the reader's language:
    the catalog's sentence its evidence names, filled from it (report/finding_text.py)."""
    out = []
    for r in data.comparison.rows:
        for f in r.findings:
            out.append(
                (
                    r.label,
                    f.code,
                    f.severity,
                    finding_message(t, f.code, f.message, f.evidence),
                    _evidence(f.evidence),
                )
            )
    return out


def _evidence(ev: object) -> list[str]:
    """A finding's evidence as a short list of "field: value" items, as a reader takes it in:
    whole numbers without ".0", a list of identical entries (one per region instance) once with
    its count, empty fields left out. The fields are the analysis JSON's own names (code)."""
    if not isinstance(ev, dict):
        return [] if ev in (None, "", [], {}) else [_ev_value(ev)]
    # the keys of its sentence and clauses (message_key, `clause.…` values) are for the wording
    return [
        f"{k}: {_ev_value(v)}"
        for k, v in ev.items()
        if v not in (None, "", [], {}) and k != "message_key" and not _words_key(v)
    ]


def _words_key(v: object) -> bool:
    """A clause's key (or a list of them) a finding's sentence is worded with, not a fact."""
    items = v if isinstance(v, list) else [v]
    return bool(items) and all(isinstance(x, str) and x.startswith("clause.") for x in items)


def _ev_value(v: object) -> str:
    if isinstance(v, float):
        return fmt_num(v, "g")
    if isinstance(v, dict):
        return ", ".join(
            f"{k} {_ev_value(x)}" if isinstance(x, (int, float)) else f"{k}: {_ev_value(x)}"
            for k, x in v.items()
        )
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
        # records, one per instance or example: identical ones once, with their count
        seen: dict[str, int] = {}
        for x in v:
            text = f"[{_ev_value(x)}]"
            seen[text] = seen.get(text, 0) + 1
        return ", ".join(text if n == 1 else f"{text} x{n}" for text, n in seen.items())
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, int) for x in v):  # a shape
            return f"[{', '.join(map(str, v))}]"
        return ", ".join(_ev_value(x) for x in v)
    return str(v)


def trace_items(data: ReportData, out_dir: Path | None) -> list[tuple[str, str, bool]]:
    """(variant, path as the report should link it, exists); relative to the report's folder."""
    items = []
    for r in data.comparison.rows:
        if not r.trace:
            continue
        p = Path(r.trace)
        link = str(p)
        if out_dir is not None:
            try:
                link = str(p.resolve().relative_to(out_dir.resolve()))
            except ValueError:
                link = p.resolve().as_uri()
        items.append((r.label, link, p.is_file()))
    return items


@dataclass
class ReportContent:
    """What a report says, in the reader's language, but the plots."""

    title: str
    generated: str
    summary: list[str]
    env: list[tuple[str, str]]
    comparison: Table
    not_run: Table
    diffs: list[Table]
    findings: list[tuple[str, str, str, str, list[str]]]
    expectations: Table
    traces: list[tuple[str, str, bool]]
    # `attnprof model` runs only (empty otherwise): attention's share per implementation, per layer
    model: Table = field(default_factory=lambda: Table(columns=[]))
    layers: Table = field(default_factory=lambda: Table(columns=[]))
    # the per-op performance model of each analysed trace (report/perf_tables.py)
    perf: list[PerfSection] = field(default_factory=list)


def report_content(data: ReportData, t: Translator, out_dir: Path | None) -> ReportContent:
    """out_dir: where the report will be written, so links to the traces can be relative.
    Numbers are written in the report's locale (units.number_locale)."""
    with number_locale(t.lang):
        return _report_content(data, t, out_dir)


def _title(data: ReportData, t: Translator) -> str:
    if data.record is None:
        return t("report.title_trace", trace=", ".join(Path(p).name for p in data.trace_files))
    w = WorkloadId.of(data.record.workload)
    model = data.record.model
    if model is not None:  # a model run's workload is one attention call inside it: not its title
        return t(
            "report.title_model", model=model.name, dtype=w.dtype, device=data.record.environment.device_name
        )
    return t(
        "report.title",
        shape=f"{w.shape}{w.kind}",
        dtype=w.dtype,
        device=data.record.environment.device_name,
    )


def _report_content(data: ReportData, t: Translator, out_dir: Path | None) -> ReportContent:
    return ReportContent(
        title=_title(data, t),
        generated=t(
            "report.generated", version=data.version, source=", ".join(data.run_dirs + data.trace_files)
        ),
        summary=summarize(data, t),
        env=env_items(data, t),
        comparison=comparison_table(data, t),
        not_run=not_run_table(data, t),
        diffs=[diff_table(d, t) for d in data.comparison.diffs],
        findings=finding_items(data, t),
        expectations=expectation_table(data.expectations, t),
        traces=trace_items(data, out_dir),
        **_model_sections(data, t),
        perf=perf_sections(data, t),
    )


def _model_sections(data: ReportData, t: Translator) -> dict[str, Table]:
    if data.record is None or data.record.model is None:
        return {}
    from attnprof.report.model_tables import layers_table, model_table

    return {"model": model_table(data.record, t), "layers": layers_table(data.record, t)}
