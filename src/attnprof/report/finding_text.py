"""A finding's words in the reader's language (the reports and the terminal's analysis view).

A finding's sentence lives in the catalogs (report/i18n/*.po) only: the rule that makes it names
the sentence's key in its evidence (`message_key`: `finding.<CODE>` or `finding.<CODE>.<variant>`)
and its JSON message is that sentence in English, filled from the evidence. Every language is
filled from the same key and evidence; English readers get the message itself (the same words).
"""

from __future__ import annotations

from attnprof.catalogs import placeholders
from attnprof.report.i18n import Translator

__all__ = ["finding_message"]


def finding_message(t: Translator, code: str, message: str, evidence: object) -> str:
    """A finding's message in the reader's language: the (English) message in English, and for
    codes the catalogs do not know; else the catalog's sentence its evidence names, filled from
    it (an analysis written before findings named their key, or whose evidence lacks a figure the
    sentence reads: the code's own sentence, `finding.<CODE>`)."""
    code_key = f"finding.{code}"
    if t.lang == "en" or not t.has(code_key):
        return message or (t(code_key) if t.has(code_key) else code)
    ev = evidence if isinstance(evidence, dict) else {}
    key = ev.get("message_key")
    if isinstance(key, str) and t.has(key) and placeholders(t(key)) <= set(ev):
        return t.sentence(key, ev)
    return t.sentence(code_key, ev)
