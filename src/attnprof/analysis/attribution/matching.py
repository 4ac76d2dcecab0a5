"""The one ordered matcher of every name table in the analysis, `first_match`, and why it is fast.

Kernel names are long (templated CUTLASS and cuDNN names run to 600 characters) and most of the
tables' patterns ignore case ((?i)). Python's re finds a case-sensitive literal with a fast scan
but tries a case-insensitive alternation at every position of the name: on the 77 kernel names
of the 48 MB benchmark trace the kernel rules took 35 ms, a fifth of the analysis after loading.
So a pattern that ignores case is searched, where it safely can be, as its case-sensitive twin
over the name lowercased once (`caseless`): 2.7x faster on those names, with the same answer.

When the twin gives the same answer as the pattern, for every ASCII name (non-ASCII names are
always searched by the pattern itself, since Unicode lowercasing can change a string's length):
the pattern ignores case throughout (no flag group turns it off or back on), every letter outside
a character class is lowered (under IGNORECASE a letter matches either case; the lowered name
holds the lower one), every class holds single characters (lowered) or ranges between two letters
of one case or between two non-letters with no letter between them, and no escape names a
character by its code (\\x41 is "A", which a lowered name never holds) or refers back to a group
(a backreference compares text, whose case differs). Any other pattern has no twin and is searched
as it is; the tests compare the twin's answers with the pattern's on every table's examples and on
real kernel names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

__all__ = ["caseless", "first_match"]

L = TypeVar("L")

# escapes that name a character by its code, or a group by number: a twin is not derived
_CODE_ESCAPES = frozenset("xuUN0123456789")
# the global inline flags at a pattern's start, as Python 3.11 requires them
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_NO_TWIN = object()
_twins: dict[re.Pattern[str], re.Pattern[str] | None] = {}


def caseless(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """The case-sensitive twin of a pattern that ignores case, to search lowered ASCII names
    with (the module's docstring says when it answers as the pattern does), or None."""
    if not pattern.flags & re.IGNORECASE:
        return None
    text = pattern.pattern
    lead = _LEADING_FLAGS.match(text)
    if lead is None or "i" not in lead.group(1):
        return None
    rest = text[lead.end() :]
    # a non-ASCII letter may lower to another length, or match an ASCII letter under IGNORECASE
    body = _lowered(rest) if rest.isascii() else None
    if body is None:
        return None
    flags = lead.group(1).replace("i", "")
    try:
        return re.compile((f"(?{flags})" if flags else "") + body)
    except re.error:
        return None


def _lowered(body: str) -> str | None:
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            if i + 1 >= n or body[i + 1] in _CODE_ESCAPES:
                return None
            out.append(body[i : i + 2])
            i += 2
        elif c == "[":
            end = _class(body, i, out)
            if end is None:
                return None
            i = end
        elif c == "(" and body.startswith("(?", i) and not re.match(r"\(\?(?:[:=!]|<[=!]|P<\w+>)", body[i:]):
            return None  # a scoped flag group, a named backreference, a conditional: no twin
        else:
            out.append(c.lower())
            i += 1
    return "".join(out)


def _class(body: str, start: int, out: list[str]) -> int | None:
    """Append the lowered character class starting at body[start] ("["); its end, or None."""
    i = start + 1
    items: list[str] = ["["]
    if body.startswith("^", i):
        items.append("^")
        i += 1
    first = True
    while i < len(body):
        c = body[i]
        if c == "]" and not first:
            items.append("]")
            out.append("".join(items))
            return i + 1
        first = False
        if c == "\\":
            if i + 1 >= len(body) or body[i + 1] in _CODE_ESCAPES:
                return None
            items.append(body[i : i + 2])
            i += 2
            continue
        if c == "[":
            return None  # a nested set, which re warns of: no twin
        if i + 2 < len(body) and body[i + 1] == "-" and body[i + 2] not in "]\\":
            lo, hi = c, body[i + 2]
            if not _same_letters(lo, hi):
                return None
            items.append(f"{lo.lower()}-{hi.lower()}")
            i += 3
            continue
        items.append(c.lower())
        i += 1
    return None


def _same_letters(lo: str, hi: str) -> bool:
    """A range that lowering maps to itself, letter for letter: both ends lower-case letters or
    both upper-case, or a range holding no ASCII letter at all."""
    if lo.isascii() and hi.isascii() and lo.isalpha() and hi.isalpha():
        return lo.islower() == hi.islower()
    if not (lo.isascii() and hi.isascii()):
        return False
    return not any(chr(k).isalpha() for k in range(ord(lo), ord(hi) + 1))


def _twin(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    twin = _twins.get(pattern, _NO_TWIN)
    if twin is _NO_TWIN:
        twin = _twins[pattern] = caseless(pattern)
    return twin  # type: ignore[return-value]


def first_match(table: Iterable[tuple[L, re.Pattern[str]]], name: str) -> L | None:
    """The label of the first (label, pattern) row whose pattern is found in `name`, else None:
    the one ordered matcher of every name table in the analysis (kernel rules, precisions,
    directions, device events in classify.py; attention ops in provenance.py; runtime-call kinds
    in runtime_calls.py; memory kinds in attention_side.py). Order is the rule: a row wins over
    every row after it."""
    if not name.isascii():
        return next((label for label, pattern in table if pattern.search(name)), None)
    low = name.lower()
    for label, pattern in table:
        twin = _twin(pattern)
        if (twin.search(low) if twin is not None else pattern.search(name)) is not None:
            return label
    return None
