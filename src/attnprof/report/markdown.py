"""Markdown report: the same content as the HTML one, minus the plots, for pasting into an issue,
a pull request or a chat. `summary_markdown` gives the bullet summary alone."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.report.table import md_code, md_text, to_markdown
from attnprof.report.tables import PERFETTO, report_content

__all__ = ["render_markdown", "summary_markdown"]


def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {md_text(line)}" for line in lines) + "\n"


def summary_markdown(data: ReportData, t: Translator) -> str:
    return _bullets(summarize(data, t))


def render_markdown(data: ReportData, t: Translator, *, out_dir: Path | None = None) -> str:
    c = report_content(data, t, out_dir)
    # what comes from a trace, a run or a path is made inert (md_text), as the HTML escapes it
    lines = [f"# {md_text(c.title)}", "", md_text(c.generated), ""]
    lines += [f"## {t('h.summary')}", "", _bullets(c.summary)]
    lines += [f"## {t('h.environment')}", ""] + [f"- **{md_text(k)}**: {md_text(v)}" for k, v in c.env] + [""]
    lines += [f"## {t('h.comparison')}", "", *to_markdown(c.comparison), ""]
    if c.not_run.rows:
        lines += [f"### {t('h.not_run')}", "", *to_markdown(c.not_run), ""]
    if c.model.rows:
        lines += [f"## {t('h.model')}", "", md_text(c.model.title), "", *to_markdown(c.model), ""]
    if c.layers.rows:
        lines += [f"### {t('h.layers')}", "", md_text(c.layers.title), "", *to_markdown(c.layers), ""]
    if c.perf:
        lines += [f"## {t('perf.h')}", ""]
        for sec in c.perf:
            if len(c.perf) > 1:
                lines += [f"### {md_text(sec.label)}", ""]
            lines += [*(f"- {md_text(ln)}" for ln in sec.lines), "", *to_markdown(sec.table), ""]
    if c.diffs:
        lines += [f"## {md_text(t('h.diff', baseline=data.comparison.baseline or '-'))}", ""]
        for dt in c.diffs:
            lines += [f"**{md_text(dt.title)}**", ""] + (to_markdown(dt) or ["-"]) + [""]
    lines += [f"## {t('h.findings')}", ""]
    if c.findings:
        for variant, code, severity, msg, ev in c.findings:
            sev = t.maybe(f"severity.{severity}", severity)
            lines.append(
                f"- **{md_text(variant)}** `{code}` ({sev}): {md_text(msg)}"
                + "".join(f"\n  - {md_code(e)}" for e in ev)
            )
    else:
        lines.append(t("findings.none"))
    lines += ["", f"## {t('h.expectations')}", ""]
    if data.expectations:
        lines += [
            md_text(t("expect.source", file=data.expectation_file or "-")),
            "",
            *to_markdown(c.expectations),
        ]
    else:
        lines.append(t("expect.none"))
    lines += ["", f"## {t('h.traces')}", ""]
    for variant, link, exists in c.traces:
        # the destination percent-encoded: a name's spaces, parentheses or <> cannot end the link
        lines.append(
            f"- {md_text(variant)}: [{md_text(Path(link).name)}]({quote(link, safe='/._-~:')})"
            + ("" if exists else " " + t("traces.missing"))
        )
    lines += ["", t("traces.perfetto", perfetto=PERFETTO), ""]
    return "\n".join(lines)
