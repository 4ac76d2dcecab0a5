"""A finding's words in the reader's language (the reports and the terminal's analysis view).

The analyser words its findings in English, with the figures of the trace in them; the catalogs
(report/i18n/*.po) hold one sentence per code (`finding.<CODE>`), whose fields are filled from
the finding's evidence. English readers get the analyser's own message.
"""

from __future__ import annotations

from attnprof.report.i18n import Translator

__all__ = ["finding_message"]


def finding_message(t: Translator, code: str, message: str, evidence: object) -> str:
    """A finding's message in the reader's language: the analyser's own (English) message in
    English, and for codes the catalog does not know; else the catalog's sentence for the code."""
    key = f"finding.{code}"
    if t.lang == "en" or not t.has(key):
        return message or (t(key) if t.has(key) else code)
    return t.sentence(key, evidence)
