"""The HTML report: one self-contained file that works offline.

Everything is inline: CSS in a <style> element, plots as SVG elements, no script, no font, image
or stylesheet fetched from anywhere (the only links are to the trace files and to Perfetto, which
the reader follows by choice). Content is the Markdown report's plus the plots.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from attnprof.extras import EXTRAS, available
from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.perf_tables import PerfSection
from attnprof.report.tables import PERFETTO, report_content
from attnprof.units import fmt_num, number_locale

__all__ = ["plots_missing", "render_html"]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("attnprof.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["breakable"] = breakable
    return env


def breakable(text: object) -> Markup:
    """Escaped text with a line-break opportunity (<wbr>) after each underscore and "::": a
    narrow column breaks UNFUSED_ATTENTION or aten::_softmax between its words, not inside one
    (copying the text copies no extra character)."""
    out = str(escape(text))
    return Markup(out.replace("_", "_<wbr>").replace("::", "::<wbr>"))


def plots_missing(t: Translator) -> str | None:
    """The line a report shows instead of its plots when matplotlib is not installed (the plain
    install has none: the [plots] extra adds it); None when plots can be drawn."""
    if available("matplotlib"):
        return None
    return t("plot.missing", command=f"pip install 'attnprof[{EXTRAS['matplotlib']}]'")


def _plots(data: ReportData, t: Translator) -> list[tuple[str, str | None]]:
    if plots_missing(t) is not None:
        return []
    with number_locale(t.lang):  # tick labels in the tables' number locale
        return _draw(data, t)


def _draw(data: ReportData, t: Translator) -> list[tuple[str, str | None]]:
    from attnprof.report import plots  # matplotlib: imported only when it is there

    rows = [r for r in data.comparison.rows if r.ok]
    gpu = any(r.gpu_category_time_us for r in rows)
    lane_cpu = not gpu
    timeline_lane = next((r.timeline_lane for r in rows if r.timeline), "cpu" if lane_cpu else "gpu")
    out: list[tuple[str, str | None]] = [
        (t("plot.time"), plots.time_plot(rows, t)),
        (
            t("plot.categories_gpu") if gpu else t("plot.categories_cpu"),
            plots.category_plot(rows, "gpu" if gpu else "cpu", t),
        ),
        (t(f"plot.timeline_{timeline_lane}"), plots.timeline_plot(rows, t)),
    ]
    if data.scaling_axis:
        axis = {"seq": "S", "batch": "B", "heads": "H", "head_dim": "D"}[data.scaling_axis]
        out.append((t("plot.scaling", axis=axis), plots.scaling_plot(data.scaling, data.scaling_axis, t)))
    return out


def _perf_plots(sections: list[PerfSection], t: Translator) -> list[tuple[str, str | None]]:
    """Per section: the roofline's caption and SVG (None without matplotlib or points)."""
    if plots_missing(t) is not None:
        return [("", None) for _ in sections]
    from attnprof.report import plots

    out: list[tuple[str, str | None]] = []
    with number_locale(t.lang):
        for s in sections:
            m = s.model
            if m is not None and m.peak_tflops and m.peak_tbps:
                caption = t("perf.roofline", peak=fmt_num(m.peak_tflops, ".4g"), bw=fmt_num(m.peak_tbps))
            else:
                caption = t("perf.roofline_no_peak")
            out.append((caption, plots.roofline_plot(s.ops, m, t)))
    return out


def render_html(data: ReportData, t: Translator, *, out_dir: Path | None = None) -> str:
    """out_dir: where the file will be written, so links to the traces can be relative."""
    content = report_content(data, t, out_dir)
    link = Markup('<a href="{0}">{0}</a>').format(PERFETTO)
    perfetto_line = escape(t("traces.perfetto", perfetto="\x00")).replace("\x00", link)
    template = _env().get_template("report.html.j2")
    return template.render(
        lang=t.lang,
        t=t,
        version=data.version,
        plots=_plots(data, t),
        plots_note=plots_missing(t),
        baseline=data.comparison.baseline or "-",
        expectation_file=data.expectation_file or "-",
        perfetto_line=perfetto_line,
        perf_plots=_perf_plots(content.perf, t),
        **{f.name: getattr(content, f.name) for f in fields(content)},
    )
