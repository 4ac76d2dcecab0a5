"""The message catalogs, read: English, Indonesian, Thai (gettext .po files in report/i18n/), for
every layer that words something. The reports translate through report/i18n.py's Translator;
the layers below them (every finding: analysis/findings/codes.py `finding`) take their English sentences
from here, so a finding's sentence is written once, in the catalogs, never again in the code that
finds it.

The .po text is read directly (no compiled .mo files, no Babel): the catalogs are small. The files
are read by path inside the package (attnprof/report/i18n/), which imports nothing of report/.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from attnprof.errors import UserError
from attnprof.units import LocaleFormatter, fmt_num, fmt_us

__all__ = ["LANGUAGES", "english", "fill_sentence", "load_catalog", "parse_po", "placeholders"]

LANGUAGES: tuple[str, ...] = ("en", "id", "th")

_QUOTED = re.compile(r'^"(.*)"\s*$')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unquote(s: str) -> str:
    m = _QUOTED.match(s.strip())
    if m is None:
        raise ValueError(f"not a quoted .po string: {s!r}")
    text = m.group(1)
    if "\\" not in text:  # most strings: no escape to undo (a third of the catalog's reading)
        return text
    return re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), text)


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
    # the catalog beside this module where the package is a folder (the usual install): reading it
    # through importlib.resources imports its readers and zipfile, a tenth of a small trace's
    # analysis; a zipped package still reads it through resources
    here = Path(__file__).parent / "report" / "i18n" / f"{lang}.po"
    if here.is_file():
        return parse_po(here.read_text(encoding="utf-8"))
    from importlib import resources

    text = resources.files("attnprof").joinpath("report", "i18n", f"{lang}.po").read_text(encoding="utf-8")
    return parse_po(text)


def placeholders(template: str) -> set[str]:
    """The evidence fields a template reads: `{time_us:us}` and `{chain[gemm]}` read `time_us`
    and `chain`."""
    return {
        re.split(r"[.\[]", name, maxsplit=1)[0]
        for _, name, _, _ in string.Formatter().parse(template)
        if name
    }


class _Words(LocaleFormatter):
    """str.format with the formats a finding's sentence needs beside Python's own, so that its
    numbers and lists are written where the catalog puts them, in every language alike:

    - `{x:us}` a time in µs with its unit (units.fmt_us, in the reader's number locale), and
      any other number with Python's format spec in that locale (units.fmt_num);
    - `{x:list}` a list (or a dict's keys) joined by ", "; `{x:semi}` by "; ";
    - `{x:us_each}` a dict name -> µs as "fwd 1.2 ms, bwd 2.5 ms";
    - `{x:times}` a dict name -> count as "name x2, other x0.5";
    - `{x:clause}` x names another sentence of the catalog (a clause said only when it applies;
      "" or None: nothing), filled from the same evidence; `{x:clauses}` a list of such keys,
      said one after the other, joined by "; "."""

    def __init__(self, catalog: Mapping[str, str], evidence: Mapping[str, Any]) -> None:
        self.catalog = catalog
        self.evidence = evidence

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "us":
            return fmt_us(float(value))
        if format_spec in ("list", "semi"):
            return ("; " if format_spec == "semi" else ", ").join(str(v) for v in value)
        if format_spec == "us_each":
            return ", ".join(f"{k} {fmt_us(float(v))}" for k, v in dict(value).items())
        if format_spec == "times":
            return ", ".join(f"{k} x{fmt_num(float(v), 'g')}" for k, v in dict(value).items())
        if format_spec == "clause":
            return self.vformat(self.catalog[value], (), self.evidence) if value else ""
        if format_spec == "clauses":
            return "; ".join(self.vformat(self.catalog[v], (), self.evidence) for v in value)
        return super().format_field(value, format_spec)


def fill_sentence(catalog: Mapping[str, str], key: str, evidence: object) -> str:
    """The catalog's sentence `key`, its fields ({pct_of_peak}) filled from `evidence` (a
    finding's); the `<key>.generic` sentence where the evidence lacks a field."""
    template = catalog[key]
    fields = placeholders(template)
    if not fields:
        return template
    ev = evidence if isinstance(evidence, dict) else {}
    if fields <= set(ev):
        try:
            return _Words(catalog, ev).vformat(template, (), ev)
        except (KeyError, IndexError, TypeError, ValueError):
            # a clause's field, or a value of another shape, missing from an analysis written
            # by another version: the generic sentence, never a traceback in a report
            if f"{key}.generic" not in catalog:
                raise
    generic = catalog.get(f"{key}.generic")
    return generic if generic is not None else template.split(":", 1)[-1].strip()


def english(key: str, evidence: object = None) -> str:
    """The English catalog's sentence `key`, filled from `evidence` (fill_sentence)."""
    return fill_sentence(load_catalog("en"), key, evidence)
