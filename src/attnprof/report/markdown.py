"""Markdown report: the same content as the HTML one, minus the plots, for pasting into an issue,
a pull request or a chat. `summary_markdown` gives the bullet summary alone."""

from __future__ import annotations

from pathlib import Path

from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.report.tables import (
    TextTable,
    comparison_table,
    diff_tables,
    env_items,
    expectation_table,
    finding_items,
    not_run_table,
    trace_items,
)

__all__ = ["render_markdown", "summary_markdown"]

PERFETTO = "https://ui.perfetto.dev"


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _table(tt: TextTable) -> list[str]:
    if not tt.rows:
        return []
    lines = ["| " + " | ".join(_cell(h) for h in tt.header) + " |"]
    lines.append("|" + "|".join("---:" if i in tt.numeric else "---" for i in range(len(tt.header))) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in tt.rows]
    return lines


def summary_markdown(data: ReportData, t: Translator) -> str:
    return "\n".join(f"- {line}" for line in summarize(data, t)) + "\n"


def _title(data: ReportData, t: Translator) -> str:
    w = data.record.workload
    return t(
        "report.title",
        shape=f"{w.batch}x{w.heads}x{w.seq}x{w.head_dim}",
        dtype=w.dtype,
        device=data.record.environment.device_name,
    )


def render_markdown(data: ReportData, t: Translator, *, out_dir: Path | None = None) -> str:
    lines = [
        f"# {_title(data, t)}",
        "",
        t("report.generated", version=data.version, source=", ".join(data.run_dirs)),
        "",
    ]
    lines += [f"## {t('h.summary')}", "", summary_markdown(data, t)]
    lines += [f"## {t('h.environment')}", ""] + [f"- **{k}**: {v}" for k, v in env_items(data, t)] + [""]
    lines += [f"## {t('h.comparison')}", "", *_table(comparison_table(data, t)), ""]
    nr = not_run_table(data, t)
    if nr.rows:
        lines += [f"### {t('h.not_run')}", "", *_table(nr), ""]
    diffs = diff_tables(data.comparison.diffs, t)
    if diffs:
        lines += [f"## {t('h.diff', baseline=data.comparison.baseline or '-')}", ""]
        for dt in diffs:
            lines += [f"**{dt.title}**", ""] + (_table(dt) or ["-"]) + [""]
    lines += [f"## {t('h.findings')}", ""]
    findings = finding_items(data, t)
    if findings:
        for variant, code, severity, msg, ev in findings:
            lines.append(f"- **{variant}** `{code}` ({severity}): {msg}" + (f" — `{ev}`" if ev else ""))
    else:
        lines.append(t("findings.none"))
    lines += ["", f"## {t('h.expectations')}", ""]
    if data.expectations:
        lines += [
            t("expect.source", file=data.expectation_file or "-"),
            "",
            *_table(expectation_table(data, t)),
        ]
    else:
        lines.append(t("expect.none"))
    lines += ["", f"## {t('h.traces')}", ""]
    for variant, link, exists in trace_items(data, out_dir):
        lines.append(
            f"- {variant}: [{Path(link).name}]({link})" + ("" if exists else " " + t("traces.missing"))
        )
    lines += ["", t("traces.perfetto", perfetto=PERFETTO), ""]
    return "\n".join(lines)
