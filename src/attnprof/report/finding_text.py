"""A finding's words in the reader's language (the reports and the terminal's analysis view).

The analyser words its findings in English, with the figures of the trace in them; the catalogs
(report/i18n/*.po) hold one sentence per code (`finding.<CODE>`), whose fields are filled from
the finding's evidence. English readers get the analyser's own message.
"""

from __future__ import annotations

from attnprof.report.i18n import Translator, placeholders

__all__ = ["finding_message"]


def finding_message(t: Translator, code: str, message: str, evidence: object) -> str:
    """A finding's message in the reader's language: the analyser's own (English) message in
    English, and for codes the catalog does not know; else the catalog's sentence for the code."""
    key = f"finding.{code}"
    if t.lang == "en" or not t.has(key):
        return message or (t(key) if t.has(key) else code)
    return _finding_sentence(t, key, evidence)


def _finding_sentence(t: Translator, key: str, evidence: object) -> str:
    """The catalog's sentence for a finding, its fields ({pct_of_peak}) filled from the evidence;
    the `<key>.generic` sentence where the evidence lacks a field."""
    template = t(key)
    fields = placeholders(template)
    if not fields:
        return template
    ev = evidence if isinstance(evidence, dict) else {}
    if fields <= set(ev):
        return t(key, **{k: ev[k] for k in fields})
    return t(f"{key}.generic") if t.has(f"{key}.generic") else template.split(":", 1)[-1].strip()
