"""The terminal's analysis view in the reader's language (`attnprof analyze --lang`): every word
of the view comes from the catalogs (keys av.*), English unchanged. A small synthetic trace with
regions, idle time, kernels and findings, rendered in en, id and th."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from attnprof.analysis import TraceAnalysis
from attnprof.report.analysis_view import render_analysis
from attnprof.report.i18n import Translator, load_catalog
from test_stream_waits import _held_stream, run

# fragments of the English view's own words (not the trace's names)
ENGLISH = ("device time", "Findings", "per instance", "host meanwhile", "Top kernels", "events:", "device:")


def _render(tmp_path: Path, lang: str) -> str:
    return _rendered(tmp_path, lang)[0]


def _rendered(tmp_path: Path, lang: str) -> tuple[str, TraceAnalysis]:
    a = run(tmp_path, _held_stream(records=True))
    out = io.StringIO()
    render_analysis(a, Console(file=out, width=1000, no_color=True), Translator(lang))
    return out.getvalue(), a


def test_the_english_view_keeps_its_words(tmp_path: Path) -> None:
    text = _render(tmp_path, "en")
    for fragment in ENGLISH:
        assert fragment in text, fragment
    assert "a stream is held by a wait" in text  # the analyser's own message, in English


@pytest.mark.parametrize("lang", ["id", "th"])
def test_the_view_in_another_language_holds_none_of_the_english_words(tmp_path: Path, lang: str) -> None:
    text, a = _rendered(tmp_path, lang)
    found = [f for f in ENGLISH if f in text]
    assert not found, (lang, found)
    cat = load_catalog(lang)
    # the finding's sentence in the reader's language, filled from its evidence (the terminal
    # writes numbers the Python way)
    f = a.finding("GPU_STREAM_WAIT_UNRECORDED")
    assert f is not None and f.evidence["message_key"] == "finding.GPU_STREAM_WAIT_UNRECORDED"
    sentence = Translator(lang).sentence(f.evidence["message_key"], f.evidence)
    assert cat["av.findings"] in text and sentence in text and sentence != f.message
    assert cat["av.cause.stream_wait_unrecorded"] in text  # the idle line names its causes in words
