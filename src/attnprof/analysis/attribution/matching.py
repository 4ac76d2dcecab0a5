"""The one ordered matcher of every name table in the analysis, `first_match`, and why it is fast.

Kernel names are long (templated CUTLASS and cuDNN names run to 600 characters) and most of the
tables' patterns ignore case ((?i)). Python's re finds a case-sensitive literal with a fast scan
but tries a case-insensitive alternation at every position of the name: on the 77 kernel names
of the 48 MB benchmark trace the kernel rules took 25 ms, a fifth of the analysis after loading.
So a pattern that ignores case is searched, where it safely can be, as its case-sensitive twin
over the name lowercased once (`caseless`); and before any search, the name is looked into for
the literals one of which every match holds (`needed_literals`, from re's own parse of the
pattern: "wgrad", "dgrad", ... for the convolution rules), which most names lack. Both are
read ahead while `analyze`'s forked process decodes a large trace (`prepare`), else when a
name first reaches them, and a pattern is compiled only once a name gets past its literals. The
kernel rules over those 77 names: 18 ms the first time before, 7 ms now (5 ms once prepared).

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
from typing import Any, TypeVar

__all__ = ["caseless", "first_match", "needed_literals", "prepare", "register", "twin_text"]

L = TypeVar("L")

# escapes that name a character by its code, or a group by number: a twin is not derived
_CODE_ESCAPES = frozenset("xuUN0123456789")
# the global inline flags at a pattern's start, as Python 3.11 requires them
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")

try:  # re's own parser: Python 3.11 on
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse


def caseless(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """The case-sensitive twin of a pattern that ignores case, to search lowered ASCII names
    with (the module's docstring says when it answers as the pattern does), or None."""
    text = twin_text(pattern)
    try:
        return re.compile(text) if text is not None else None
    except re.error:  # lowering made it invalid: no twin
        return None


def twin_text(pattern: re.Pattern[str]) -> str | None:
    """caseless's pattern, as text (not compiled, nor checked: first_match compiles it when a
    name needs it, and parses it first)."""
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
    return (f"(?{flags})" if flags else "") + body


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


class _Matcher:
    """How first_match searches an ASCII name for one pattern: by its twin over the lowered name
    where it has one, else as it is; and first for the literals one of which any match holds
    (`needed`), which rule out most names at the cost of a substring search, and leave the
    pattern uncompiled for a trace none of whose names holds them."""

    __slots__ = ("lowered", "needed", "pattern", "source", "text")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.source = pattern
        text = twin_text(pattern)
        needed = None
        if text is not None:
            try:
                needed = needed_literals(text)
            except re.error:  # lowering made it invalid: searched as it is
                text = None
        if text is None and not pattern.flags & re.IGNORECASE:
            needed = needed_literals(pattern.pattern, pattern.flags)
        self.lowered = text is not None
        self.text = text
        self.needed = needed
        self.pattern: re.Pattern[str] | None = None if self.lowered else pattern

    def found(self, name: str, low: str) -> bool:
        subject = low if self.lowered else name
        needed = self.needed
        if needed is not None:
            for lit in needed:
                if lit in subject:
                    break
            else:
                return False
        if self.pattern is None:
            assert self.text is not None
            self.pattern = re.compile(self.text)
        return self.pattern.search(subject) is not None


# by the pattern's id: hashing a compiled pattern hashes its code, a microsecond for a long one
_matchers: dict[int, _Matcher] = {}
_registered: list[re.Pattern[str]] = []


def register(patterns: Iterable[re.Pattern[str]]) -> None:
    """The patterns of a name table, for `prepare` to read ahead (called where it is defined)."""
    _registered.extend(patterns)


def prepare() -> None:
    """Read every registered pattern for first_match now (its twin and needed literals: about
    0.15 ms each, re's parser), where it costs nothing: `analyze` calls this while its forked
    process decodes a large trace. Otherwise each is read when a name first reaches it (a small
    trace's few names reach few of them)."""
    for pattern in _registered:
        if id(pattern) not in _matchers:
            _matchers[id(pattern)] = _Matcher(pattern)


def needed_literals(text: str, flags: int = 0) -> tuple[str, ...] | None:
    """Strings one of which every match of the pattern holds in the searched text (a literal
    run, or one per branch of an alternation, a repeat of at least one, a group or a lookaround
    holding them), or None where nothing is certain. Read from the parse of re itself; where
    re's parser is not what this expects, None."""
    try:
        tree = _sre_parse.parse(text, flags)
    except Exception as exc:  # another Python's parser: no prefilter, the pattern is searched anyway
        if isinstance(exc, re.error):  # the pattern itself is invalid: the caller says what then
            raise
        return None
    try:
        found = _needed(tree, bool(flags & re.IGNORECASE) or bool(tree.state.flags & re.IGNORECASE))
    except Exception:
        return None
    return tuple(sorted(found, key=len, reverse=True)) if found else None


def _score(lits: frozenset[str]) -> tuple[int, int]:
    return min(map(len, lits)), -len(lits)  # the longest shortest literal, then the fewest


def _needed(sub: Any, icase: bool) -> frozenset[str] | None:
    best: frozenset[str] | None = None
    run: list[str] = []

    def consider(lits: frozenset[str] | None) -> None:
        nonlocal best
        if lits and (best is None or _score(lits) > _score(best)):
            best = lits

    for op, av in sub:
        kind = getattr(op, "name", str(op))
        if kind == "LITERAL" and not icase:
            run.append(chr(av))
            continue
        if run:
            consider(frozenset({"".join(run)}))
            run = []
        if kind == "SUBPATTERN":  # (group, flags added, flags removed, pattern)
            added, removed = av[1], av[2]
            consider(_needed(av[3], (icase or bool(added & re.IGNORECASE)) and not removed & re.IGNORECASE))
        elif kind == "BRANCH":
            alts = [_needed(b, icase) for b in av[1]]
            if all(alts):
                consider(frozenset().union(*alts))  # type: ignore[arg-type]
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and av[0] >= 1:
            consider(_needed(av[2], icase))
        elif kind == "ASSERT":  # a lookahead or lookbehind: its text is in the name too
            consider(_needed(av[1], icase))
        elif kind == "ATOMIC_GROUP":
            consider(_needed(av, icase))
        # classes, anchors, negative lookarounds, group references: no literal certain here
    if run:
        consider(frozenset({"".join(run)}))
    return best


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
        m = _matchers.get(id(pattern))
        if m is None or m.source is not pattern:
            m = _matchers[id(pattern)] = _Matcher(pattern)
        if m.found(name, low):
            return label
    return None
