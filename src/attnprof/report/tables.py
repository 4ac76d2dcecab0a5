"""The report's content as plain text: its tables as (header, rows), and `report_content`, all the
Markdown and HTML reports show but the plots, so that both show the same figures with the same
units and only lay them out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from attnprof.compare.compare import INCORRECT, Row
from attnprof.compare.diff import Diff
from attnprof.compare.expect import ExpectationResult
from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.reasons import translate_reason
from attnprof.report.summary import summarize
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
    fmt_speed,
    fmt_us,
    number_locale,
    short_name,
)

__all__ = [
    "PERFETTO",
    "ReportContent",
    "TextTable",
    "comparison_table",
    "diff_tables",
    "env_items",
    "expectation_table",
    "finding_items",
    "not_run_table",
    "report_content",
    "speed_cell",
    "trace_items",
]


PERFETTO = "https://ui.perfetto.dev"


@dataclass
class TextTable:
    header: list[str]
    rows: list[list[str]]
    # per-row CSS class for HTML (faster / slower / failed); Markdown ignores it
    classes: list[str] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)
    title: str = ""


def speed_cell(r: Row, baseline: str | None, t: Translator) -> tuple[str, str]:
    if r.status == INCORRECT:
        return t("speed.incorrect"), "incorrect"
    if r.speedup is None:
        return "-", ""
    if r.label == baseline:
        return t("speed.baseline"), "base"
    way, ratio, notable = fmt_speed(r.speedup, r.speedup_low, r.speedup_high)
    text = t(f"speed.{way}", ratio=ratio)
    ci = fmt_interval(r.speedup, r.speedup_low, r.speedup_high)
    return (f"{text} ({ci})" if ci else text), way if notable else ""


def _inflation(r: Row) -> str:
    """Trace time per forward over the clean median: the exported (rich) pass's, and the lean
    pass's after a slash where there was one."""
    if r.profiler_inflation is None:
        return "-"
    rich = f"{fmt_ratio(r.profiler_inflation)}x"
    return f"{rich} / {fmt_ratio(r.lean_inflation)}x" if r.lean_inflation is not None else rich


def _occ(r: Row) -> str:
    if r.occupancy_achieved is None and r.occupancy_theoretical is None:
        return "-"
    s = f"{fmt_pct(r.occupancy_achieved)} / {fmt_pct(r.occupancy_theoretical)}"
    return f"{s}, {r.occupancy_limiter}" if r.occupancy_limiter else s


def comparison_table(data: ReportData, t: Translator) -> TextTable:
    comp = data.comparison
    header = [
        t("col.variant"),
        t("col.backend"),
        t("col.median"),
        t("col.iqr"),
        t("col.speed", baseline=comp.baseline or "-")
        if not comp.baselines
        else t("col.speed_each", baselines=", ".join(comp.baselines.values())),
        t("col.gpu_time"),
        t("col.inflation"),
        t("col.gpu_ops"),
        t("col.cpu_ops"),
        t("col.memcpy"),
        t("col.tensor_cores"),
        t("col.fused"),
        t("col.occupancy"),
        t("col.peak_memory"),
        t("col.max_error"),
        t("col.tflops"),
        t("col.findings"),
    ]
    rows: list[list[str]] = []
    classes: list[str] = []
    for r in comp.rows:
        if not r.ran:
            continue
        speed, cls = speed_cell(r, comp.baselines.get(r.workload or "", comp.baseline), t)
        tflops = fmt_num(r.tflops_useful)
        if r.pct_of_peak is not None:
            tflops += f" ({fmt_pct(r.pct_of_peak)}{' ⚠' if r.above_peak else ''})"
        several = len(comp.workloads) > 1
        rows.append(
            [
                f"{r.label} ({r.workload})" if several and r.workload else r.label,
                r.backend or "-",
                fmt_ms(r.median_ms),
                fmt_ms(r.iqr_ms),
                speed,
                fmt_us(r.gpu_time_us_per_forward),
                _inflation(r),
                fmt_count(r.gpu_ops_per_forward),
                fmt_count(r.cpu_ops_per_forward),
                fmt_count(r.memcpy_per_forward),
                fmt_pct(r.tensor_core_share),
                ", ".join(r.fused_families) or "-",
                _occ(r),
                fmt_bytes(r.peak_bytes),
                fmt_err(r.max_abs_err),
                tflops,
                ", ".join(r.finding_codes) or "-",
            ]
        )
        classes.append(cls)
    table = TextTable(
        header=header, rows=rows, classes=classes, numeric={2, 3, 5, 6, 7, 8, 9, 10, 13, 14, 15}
    )
    # columns with nothing to say for this run go (a CPU run has no GPU time, ops, memcpy,
    # tensor cores or occupancy); variant, backend, median, IQR and speed always stay
    no_gpu = not any((r.gpu_ops_per_forward or 0) > 0 for r in comp.rows)
    empty = {"-", ""} | ({"0", "0 µs"} if no_gpu else set())
    drop = {i for i in range(5, len(header)) if all(row[i] in empty for row in rows)}
    return _drop_columns(table, drop)


def _drop_columns(tt: TextTable, drop: set[int]) -> TextTable:
    keep = [i for i in range(len(tt.header)) if i not in drop]
    return TextTable(
        header=[tt.header[i] for i in keep],
        rows=[[row[i] for i in keep] for row in tt.rows],
        classes=tt.classes,
        numeric={n for n, i in enumerate(keep) if i in tt.numeric},
        title=tt.title,
    )


def not_run_table(data: ReportData, t: Translator) -> TextTable:
    rows = [
        [
            r.label,
            t.maybe(f"status.{r.status}", r.status),
            translate_reason(r.reason, t, r.reason_code) or "-",
        ]
        for r in data.comparison.rows
        if not r.ran
    ]
    return TextTable(header=[t("col.variant"), t("col.status"), t("col.reason")], rows=rows)


def observed_cell(e: ExpectationResult, t: Translator) -> str:
    """What was observed, in the reader's language: the catalog's `observed.<code>` with the
    result's values (a harness reason among them translated where it is a standard one); the
    English text where the result has no code (a count, a status, kernel families)."""
    key = f"observed.{e.observed_code}"
    if not e.observed_code or not t.has(key):
        return e.observed
    args = dict(e.observed_args)
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
    m = _OF.fullmatch(expected or "")
    if m:
        return t("expected.of", range=m["range"], baseline=m["baseline"])
    return expected or "-"


def expectation_table(data: ReportData, t: Translator) -> TextTable:
    status = {"met": t("status.met"), "not met": t("status.not_met"), "skipped": t("status.skipped")}
    css = {"met": "met", "not met": "notmet", "skipped": "skipped"}
    rows = [
        [
            e.row or e.variant,
            t.maybe(f"check.{e.check}", e.check),
            _expected_cell(e.expected, t),
            observed_cell(e, t),
            status[e.status],
        ]
        for e in data.expectations
    ]
    return TextTable(
        header=[t("col.variant"), t("col.check"), t("col.expected"), t("col.observed"), t("col.result")],
        rows=rows,
        classes=[css[e.status] for e in data.expectations],
    )


def diff_tables(diffs: list[Diff], t: Translator, *, top: int = 12) -> list[TextTable]:
    """Per diff, the `top` kernel changes that matter most: attention first, then by |Δ time|."""
    change = {k: t(f"change.{k}") for k in ("added", "removed", "changed", "same")}
    out = []
    for d in diffs:
        picked = sorted(
            ((fam, k) for fam in d.families for k in fam.kernels if k.change != "same"),
            key=lambda fk: (fk[0].category != "attention", -abs(fk[1].delta_us)),
        )[:top]
        rows: list[list[str]] = []
        for fam, k in picked:
            rows.append(
                [
                    t.maybe(f"category.{fam.family}", fam.family),
                    k.short or short_name(k.name, 60),
                    change[k.change],
                    fmt_count(k.count_a),
                    fmt_count(k.count_b),
                    fmt_delta_us(k.delta_us),
                ]
            )
        out.append(
            TextTable(
                header=[
                    t("col.family"),
                    t("col.kernel"),
                    t("col.change"),
                    t("col.per_fwd", name=d.a),
                    t("col.per_fwd", name=d.b),
                    t("col.delta"),
                ],
                rows=rows,
                classes=[k.change for _, k in picked],
                numeric={3, 4, 5},
                title=t(
                    "diff.title",
                    a=d.a,
                    b=d.b,
                    ops_a=fmt_count(d.ops_a),
                    ops_b=fmt_count(d.ops_b),
                    lane=d.lane.upper(),
                    added=d.added,
                    removed=d.removed,
                    changed=d.changed,
                ),
            )
        )
    return out


def env_items(data: ReportData, t: Translator) -> list[tuple[str, str]]:
    if data.record is None:  # trace files alone: only what the traces name
        devices = sorted({r.device_name for r in data.comparison.rows if r.device_name})
        return [
            (t("env.device"), ", ".join(devices) or t("env.device_unknown")),
            (t("env.trace"), ", ".join(data.trace_files)),
        ]
    e, w = data.record.environment, data.record.workload
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
        t("env.peak_value", tflops=fmt_num(e.peak_tflops), source=e.peak_source or "-")
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
        (t("env.causal"), t("env.yes") if w.causal else t("env.no")),
        (t("env.steps"), ", ".join(str(s) for s in data.record.steps)),
        (t("env.created"), data.record.created),
    ]


def finding_items(data: ReportData, t: Translator) -> list[tuple[str, str, str, str, str]]:
    """(variant, code, severity, message, evidence) with the message in the reader's language:
    the catalog's sentence for the code; the analyser's own (English) message in English, and
    for codes the catalog does not know."""
    out = []
    for r in data.comparison.rows:
        for f in r.findings:
            key = f"finding.{f.code}"
            if t.lang == "en" or not t.has(key):
                msg = f.message or (t(key) if t.has(key) else f.code)
            else:
                msg = _finding_sentence(t, key, f.evidence)
            out.append((r.label, f.code, f.severity, msg, _evidence(f.evidence)))
    return out


def _finding_sentence(t: Translator, key: str, evidence: object) -> str:
    """The catalog's sentence for a finding, its fields ({pct_of_peak}) filled from the evidence;
    the `<key>.generic` sentence where the evidence lacks a field."""
    from attnprof.report.i18n import placeholders

    template = t(key)
    fields = placeholders(template)
    if not fields:
        return template
    ev = evidence if isinstance(evidence, dict) else {}
    if fields <= set(ev):
        return t(key, **{k: ev[k] for k in fields})
    return t(f"{key}.generic") if t.has(f"{key}.generic") else template.split(":", 1)[-1].strip()


def _evidence(ev: object) -> str:
    if ev is None:
        return ""
    if isinstance(ev, dict):
        return "; ".join(f"{k}: {_evidence(v)}" for k, v in ev.items() if v not in (None, "", [], {}))
    if isinstance(ev, (list, tuple)):
        return ", ".join(_evidence(v) for v in ev)
    return str(ev)


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
    comparison: TextTable
    not_run: TextTable
    diffs: list[TextTable]
    findings: list[tuple[str, str, str, str, str]]
    expectations: TextTable
    traces: list[tuple[str, str, bool]]
    # `attnprof model` runs only (empty otherwise): attention's share per implementation, per layer
    model: TextTable = field(default_factory=lambda: TextTable(header=[], rows=[]))
    layers: TextTable = field(default_factory=lambda: TextTable(header=[], rows=[]))


def report_content(data: ReportData, t: Translator, out_dir: Path | None) -> ReportContent:
    """out_dir: where the report will be written, so links to the traces can be relative.
    Numbers are written in the report's locale (units.number_locale)."""
    with number_locale(t.lang):
        return _report_content(data, t, out_dir)


def _title(data: ReportData, t: Translator) -> str:
    if data.record is None:
        return t("report.title_trace", trace=", ".join(Path(p).name for p in data.trace_files))
    w = data.record.workload
    return t(
        "report.title",
        shape=f"{w.batch}x{w.heads}x{w.seq}x{w.head_dim}",
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
        diffs=diff_tables(data.comparison.diffs, t),
        findings=finding_items(data, t),
        expectations=expectation_table(data, t),
        traces=trace_items(data, out_dir),
        **_model_sections(data, t),
    )


def _model_sections(data: ReportData, t: Translator) -> dict[str, TextTable]:
    if data.record is None or data.record.model is None:
        return {}
    from attnprof.report.model_tables import layers_table, model_table

    return {"model": model_table(data.record, t), "layers": layers_table(data.record, t)}
