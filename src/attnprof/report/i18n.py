"""Message catalogs for reports: English, Indonesian, Thai.

The catalogs are gettext .po files (report/i18n/<lang>.po) so translators can use their usual
tools. Message ids are stable keys ("h.summary", "reason.FP32_UPCAST"); every msgstr is a
str.format template whose fields ({variant}, {ratio}) must be the same in every language. We read
the .po text directly instead of compiling .mo files: the catalogs are small, and this keeps the
package free of a build step and of Babel.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from attnprof.errors import UserError

__all__ = ["LANGUAGES", "Translator", "load_catalog", "parse_po", "placeholders"]

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
    text = resources.files("attnprof.report").joinpath("i18n", f"{lang}.po").read_text(encoding="utf-8")
    return parse_po(text)


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class Translator:
    """t("h.summary") -> the heading in this language; t("summary.same", a=..., b=...) fills
    fields. A message missing from the language falls back to English (and the catalog test
    makes sure none is missing).

    `words` put other templates over the catalog's (the terminal's terse English: "median" for
    "Median"); they may also hold templates the catalogs lack, which `maybe` then finds. `names`:
    message-id prefixes ("check.") that `maybe` leaves as the name given, untranslated."""

    def __init__(
        self, lang: str = "en", *, words: Mapping[str, str] | None = None, names: tuple[str, ...] = ()
    ) -> None:
        self.lang = lang
        self._cat = {**load_catalog(lang), **(words or {})}
        self._en = {**load_catalog("en"), **(words or {})}
        self._names = names

    def __call__(self, msgid: str, **fields: Any) -> str:
        template = self._cat.get(msgid) or self._en.get(msgid)
        if template is None:
            raise KeyError(f"no message {msgid!r} in the catalogs")
        return template.format(**fields) if fields else template

    def has(self, msgid: str) -> bool:
        return msgid in self._cat

    def maybe(self, msgid: str, default: str) -> str:
        """The message when the catalogs have it (a status, a category, a check name), else
        `default`: for names that are words only when the catalog knows them."""
        return self(msgid) if msgid in self._en and not msgid.startswith(self._names) else default

    def join(self, items: Sequence[str]) -> str:
        """'a, b and c' in the language's own way."""
        items = [i for i in items if i]
        if len(items) <= 1:
            return "".join(items)
        conj = self("list.and")
        # Thai writes "และ" against a Thai word but spaces it from a Latin one ("และ flex")
        if not conj.endswith(" ") and items[-1][:1].isascii():
            conj += " "
        return self("list.sep").join(items[:-1]) + conj + items[-1]
