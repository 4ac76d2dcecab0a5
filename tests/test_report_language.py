"""The id and th report pages hold no English beyond names of code: every sentence, label,
legend, tick and provenance line goes through the catalogs. A real run's HTML is scanned as a
reader sees it (text outside <code>, <style> and the SVG's <metadata>), with the variant, op and
kernel names taken out, for English words that must not be there."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from attnprof.report.data import build_report_data
from attnprof.report.html import render_html
from attnprof.report.i18n import Translator
from attnprof.report.store_report import build_store_report_data, render_store_html

# words and phrases of the English catalog that a translated page must not show; each was seen
# in an id or th page before (issue 9): the peak's provenance, finding advice, severities,
# statuses, the summary's connectives, plot labels and legends
ENGLISH = (
    "because", "faster", "slower", "fastest", "than", "the", "and", "with", "without", "each",
    "measured", "best", "square", "calls", "threads", "cached", "not cached", "load average",
    "fused", "whisker", "whiskers", "outliers", "unsupported", "incorrect", "warning", "error",
    "noisy", "unreliable", "expected", "observed", "skipped", "not met", "summary", "findings",
    "elementwise", "layout", "other", "copy", "Use the", "Build it once", "per call", "peak",
    "memory", "median of", "share of", "times", "generate",
)  # fmt: skip
_SKIP = {"code", "style", "script", "metadata", "title"}


class _Text(HTMLParser):
    """The page's text as a reader sees it: outside code, styles and SVG metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in _SKIP

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in _SKIP

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def page_text(html: str, names: set[str]) -> str:
    p = _Text()
    p.feed(html)
    text = " ".join(p.parts)
    text = re.sub(r"\S*(::|/|\.json|_)\S*", " ", text)  # op names, paths, file names, identifiers
    for name in sorted(names, key=len, reverse=True):  # variant and kernel names are code
        text = text.replace(name, " ")
    return text


@pytest.mark.parametrize("lang", ["id", "th"])
def test_translated_pages_hold_no_english_words(cpu_run: tuple[Path, object], lang: str) -> None:
    out, _ = cpu_run
    data = build_report_data(out)
    names = {r.label for r in data.comparison.rows} | {r.variant or "" for r in data.comparison.rows}
    names |= {o.name for r in data.comparison.rows for o in r.ops} - {""}
    html = render_html(data, Translator(lang), out_dir=out)
    text = page_text(html, names)
    found = sorted({w for w in ENGLISH if _has(text, w)})
    assert not found, (
        lang,
        found,
        [m.group(0) for w in found for m in re.finditer(rf"(?i).{{40}}{w}.{{40}}", text)],
    )
    # the provenance of the peak, a plot's tick labels and the summary are in the page at all
    assert data.record is not None and data.record.environment.peak_provenance is not None
    if lang == "id":  # Indonesian numbers with a decimal comma, in the text and the plots alike
        assert re.search(r"\d,\d+ (ms|µs)", text)
        assert not re.search(r"<text[^>]*>[^<]*\d\.\d", html)


@pytest.mark.parametrize("lang", ["id", "th"])
def test_translated_store_pages_hold_no_english_words(cpu_store: Path, lang: str) -> None:
    """The sweep store's report alike: statuses in its table and summary, plot ticks."""
    data = build_store_report_data(cpu_store)
    names = {r.label for r in data.results} | {r.variant for r in data.results}
    html = render_store_html(data, Translator(lang))
    text = page_text(html, names)
    found = sorted({w for w in ENGLISH if _has(text, w)})
    assert not found, (lang, found)


def _has(text: str, word: str) -> bool:
    return re.search(rf"(?i)(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None
