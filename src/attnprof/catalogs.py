"""The message catalogs, read: English, Indonesian, Thai (gettext .po files in report/i18n/), for
every layer that words something. The reports translate through report/i18n.py's Translator;
the layers below them (compare's run-level findings) take their English sentences from here, so a
finding's sentence is written once, in the catalogs, never again in the code that finds it.

The .po text is read directly (no compiled .mo files, no Babel): the catalogs are small. The files
are read by path inside the package (attnprof/report/i18n/), which imports nothing of report/.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import cache
from importlib import resources

from attnprof.errors import UserError

__all__ = ["LANGUAGES", "english", "fill_sentence", "load_catalog", "parse_po", "placeholders"]

LANGUAGES: tuple[str, ...] = ("en", "id", "th")

_QUOTED = re.compile(r'^"(.*)"\s*$')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unquote(s: str) -> str:
    m = _QUOTED.match(s.strip())
    if m is None:
        raise ValueError(f"not a quoted .po string: {s!r}")
    return re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), m.group(1))


def parse_po(text: str) -> dict[str, str]:
    """msgid -> msgstr for a .po file (plain entries with multi-line strings; the header entry
    with the empty msgid is dropped)."""
    out: dict[str, str] = {}
    key: str | None = None
    field: str | None = None
    parts: dict[str, list[str]] = {}

    def flush() -> None:
        if "msgid" in parts and "msgstr" in parts:
            mid = "".join(parts["msgid"])
            if mid:
                out[mid] = "".join(parts["msgstr"])
        parts.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("msgid "):
            flush()
            field, key = "msgid", line[6:]
            parts["msgid"] = [_unquote(key)]
        elif line.startswith("msgstr "):
            field = "msgstr"
            parts["msgstr"] = [_unquote(line[7:])]
        elif line.startswith('"') and field is not None:
            parts[field].append(_unquote(line))
        else:
            raise ValueError(f"unsupported .po line: {raw!r}")
    flush()
    return out


@cache
def load_catalog(lang: str) -> dict[str, str]:
    if lang not in LANGUAGES:
        raise UserError(f"--lang {lang!r} is not available: use one of {', '.join(LANGUAGES)}")
    text = resources.files("attnprof").joinpath("report", "i18n", f"{lang}.po").read_text(encoding="utf-8")
    return parse_po(text)


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def fill_sentence(catalog: Mapping[str, str], key: str, evidence: object) -> str:
    """The catalog's sentence `key`, its fields ({pct_of_peak}) filled from `evidence` (a
    finding's); the `<key>.generic` sentence where the evidence lacks a field."""
    template = catalog[key]
    fields = placeholders(template)
    if not fields:
        return template
    ev = evidence if isinstance(evidence, dict) else {}
    if fields <= set(ev):
        return template.format(**{k: ev[k] for k in fields})
    generic = catalog.get(f"{key}.generic")
    return generic if generic is not None else template.split(":", 1)[-1].strip()


def english(key: str, evidence: object = None) -> str:
    """The English catalog's sentence `key`, filled from `evidence` (fill_sentence)."""
    return fill_sentence(load_catalog("en"), key, evidence)
