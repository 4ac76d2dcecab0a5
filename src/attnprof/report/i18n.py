"""Message catalogs for reports: English, Indonesian, Thai.

The catalogs are gettext .po files (report/i18n/<lang>.po) so translators can use their usual
tools. Message ids are stable keys ("h.summary", "reason.FP32_UPCAST"); every msgstr is a
str.format template whose fields ({variant}, {ratio}) must be the same in every language. We read
the .po text directly (attnprof/catalogs.py, which compare's findings read their English from too)
instead of compiling .mo files: the catalogs are small, and this keeps the package free of a
build step and of Babel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attnprof.catalogs import LANGUAGES, fill_sentence, load_catalog, parse_po, placeholders
from attnprof.units import LocaleFormatter

__all__ = ["LANGUAGES", "Translator", "load_catalog", "parse_po", "placeholders"]


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
        # numbers passed as numbers are written in the current number locale
        return LocaleFormatter().vformat(template, (), fields) if fields else template

    def sentence(self, msgid: str, evidence: object) -> str:
        """A finding's sentence filled from its evidence (catalogs.fill_sentence: the
        `<msgid>.generic` one where the evidence lacks a field), in this language."""
        return fill_sentence({**self._en, **self._cat}, msgid, evidence)

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
