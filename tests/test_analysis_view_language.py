"""The terminal's analysis view in the reader's language (`attnprof analyze --lang`): every word
of the view comes from the catalogs (keys av.*), English unchanged. A small synthetic trace with
regions, idle time, kernels and findings, rendered in en, id and th."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from attnprof.analysis import TraceAnalysis
from attnprof.report.analysis_view import render_analysis
from attnprof.report.i18n import Translator, load_catalog
from attnprof.units import number_locale
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
    # the finding's sentence in the reader's language, filled from its evidence, its numbers in
    # the reader's locale
    f = a.finding("GPU_STREAM_WAIT_UNRECORDED")
    assert f is not None and f.evidence["message_key"] == "finding.GPU_STREAM_WAIT_UNRECORDED"
    with number_locale(lang):
        sentence = Translator(lang).sentence(f.evidence["message_key"], f.evidence)
    assert cat["av.findings"] in text and sentence in text and sentence != f.message
    assert cat["av.cause.stream_wait_unrecorded"] in text  # the idle line names its causes in words


# -- numbers in the reader's locale (issue 30: one home, units.number_locale over Babel's CLDR) --

H100 = "AMD-AGI__TraceLens__tests__traces__h100"


def _cli(lang: str) -> str:
    import subprocess
    import sys

    from _paths import trace

    cmd = [sys.executable, "-m", "attnprof", "analyze", str(trace(H100)), "--lang", lang, "--no-color"]
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, check=True
    )
    return done.stdout


def test_analyze_writes_numbers_in_the_readers_locale() -> None:
    en, ind, th = _cli("en"), _cli("id"), _cli("th")
    # CLDR: Indonesian groups with "." and writes a decimal comma; Thai as English
    assert "2,551 (2,059" in en and "98.7 µs" in en and "63.8%" in en
    assert "2.551 (2.059" in ind and "98,7 µs" in ind and "63,8%" in ind
    assert "2,551" not in ind and "98.7 µs" not in ind and "63.8%" not in ind
    assert "2,551 (" in th and "98.7 µs" in th


def test_no_number_is_formatted_by_hand_in_the_views() -> None:
    """Every figure a view writes goes through attnprof.units (fmt_num and the fmt_* beside it),
    which write it in the locale number_locale set: a format spec with a precision or a group
    separator in an f-string of report/ or cli/ would bypass it. The progress lines (English
    only, as every stage line) are the exception."""
    import ast
    import re

    src = Path(__file__).resolve().parents[1] / "src" / "attnprof"
    exempt = {"load_progress.py", "folder_progress.py"}
    found = []
    for path in [*(src / "report").rglob("*.py"), *(src / "cli").rglob("*.py")]:
        if path.name in exempt:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
                spec = "".join(str(v.value) for v in node.format_spec.values if isinstance(v, ast.Constant))
                if "," in spec or re.search(r"\.\d+[fge%]?$|^[ge%]$", spec):
                    found.append(f"{path.name}:{node.lineno} {{...:{spec}}}")
    assert found == []
