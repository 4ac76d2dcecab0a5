"""Numbers with sensible units, the same in every output format, written in the reader's locale.

The terminal and JSON write numbers the Python way. Reports in another language render inside
number_locale(lang), where the decimal and group symbols are that locale's, as Babel's CLDR data
gives them: Indonesian writes 1,5 ms and 12.345 (Thai, like English, 1.5 ms). Digits, units and
significant figures stay the same, so a figure reads the same value in every report.

Kernel names are shortened here too (short_name), once for every output: the analysis JSON's
short names and the reports' narrower columns come from the same function.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache

# How output in a locale that cannot write µ, ±, × or arrows (LC_ALL=C with PYTHONUTF8=0: an
# ASCII stdout) spells them: the CLI's stream error handler for any text, and the terminal's
# tables before they are laid out (report/console.py), so that columns are as wide as what is
# printed. Any other character that does not fit (Thai, say) becomes "?".
ASCII_SPELLINGS = {
    "µ": "u", "±": "+/-", "×": "x", "→": "->", "←": "<-", "↔": "<->", "…": "...", "Δ": "d",
    "≤": "<=", "≥": ">=", "≈": "~", "—": "-", "–": "-", "·": ".", "✓": "ok", "✗": "x", "°": "deg",
    "‘": "'", "’": "'", "“": '"', "”": '"', "•": "*", "≠": "!=", "²": "^2", "³": "^3",
}  # fmt: skip


def ascii_spelling(ch: str) -> str:
    """What a character that the output cannot encode is printed as."""
    return ASCII_SPELLINGS.get(ch, "?")


_LOCALE: ContextVar[str | None] = ContextVar("attnprof_number_locale", default=None)


@contextmanager
def number_locale(lang: str) -> Iterator[None]:
    """Format numbers in `lang`'s symbols inside the block (en: unchanged)."""
    token = _LOCALE.set(None if lang == "en" else lang)
    try:
        yield
    finally:
        _LOCALE.reset(token)


@cache
def _symbols(lang: str) -> tuple[str, str]:
    from babel import numbers

    return numbers.get_decimal_symbol(lang), numbers.get_group_symbol(lang)


def _n(text: str) -> str:
    """A number written the Python way ("1.5", "12,345", "1.2e-03") in the current locale's symbols."""
    lang = _LOCALE.get()
    if lang is None:
        return text
    dec, group = _symbols(lang)
    if (dec, group) == (".", ","):
        return text
    return text.replace(",", "\0").replace(".", dec).replace("\0", group)


def localize(number: str) -> str:
    """A number already written the Python way (a figure captured from a message), in the
    current locale's symbols."""
    return _n(number)


def fmt_num(x: float | None, spec: str = ".3g") -> str:
    """Any other number (TFLOP/s, a peak), in the current locale."""
    return "-" if x is None else _n(format(x, spec))


class LocaleFormatter(string.Formatter):
    """str.format for the catalogs' templates: a number's field ({share:.0%}, a bare {ratio})
    written in the current number locale by fmt_num, anything else as str.format writes it."""

    def format_field(self, value: object, format_spec: str) -> str:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return fmt_num(value, format_spec)
        return str(super().format_field(value, format_spec))


__all__ = [
    "ASCII_SPELLINGS",
    "LocaleFormatter",
    "ascii_spelling",
    "fmt_bounds",
    "fmt_bytes",
    "fmt_count",
    "fmt_delta_us",
    "fmt_err",
    "fmt_interval",
    "fmt_ms",
    "fmt_num",
    "fmt_pct",
    "fmt_ratio",
    "fmt_us",
    "localize",
    "number_locale",
    "short_name",
]


def fmt_ms(ms: float | None) -> str:
    """A time given in milliseconds, in s, ms or µs with three significant digits."""
    if ms is None:
        return "-"
    # round to three significant digits before the unit is chosen: 999.99 ms is "1 s", not "1e+03 ms"
    ms = float(format(ms, ".3g"))
    if ms >= 1000:
        return f"{_n(format(ms / 1000, '.3g'))} s"
    if ms >= 1:
        return f"{_n(format(ms, '.3g'))} ms"
    return f"{_n(format(ms * 1000, '.3g'))} µs"


def fmt_us(us: float | None) -> str:
    return "-" if us is None else fmt_ms(us / 1000.0)


def fmt_delta_us(us: float) -> str:
    """A time change given in microseconds, signed: +1.2 ms, -350 µs, ±0 µs."""
    return ("+" if us > 0 else "-" if us < 0 else "±") + fmt_us(abs(us))


def fmt_bytes(n: float | None) -> str:
    """A size in B, KiB, MiB, GiB or TiB, three significant digits: the one byte formatter, which
    the harness's messages (attnprof.harness.memory.format_bytes) use too."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{_n(format(value, '.3g'))} {unit}"
        value /= 1024
    return f"{_n(format(value, '.3g'))} TiB"


def fmt_count(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else _n(f"{x:.1f}")


def fmt_ratio(x: float | None) -> str:
    """Speed ratios: two decimals near 1 (1.04x), one above 1.5 (4.0x), none from 100."""
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    return _n(f"{x:.1f}" if x >= 1.5 else f"{x:.2f}")


def fmt_bounds(low: float, high: float) -> tuple[str, str]:
    """An interval's two ends as fmt_ratio writes ratios, with as many more decimals as it takes
    (up to 4) for ends that differ to read differently: [1.7-1.7] hides an interval's width."""
    a, b = fmt_ratio(low), fmt_ratio(high)
    if a != b or low == high or max(low, high) >= 100:
        return a, b
    for digits in range(2, 5):
        a, b = _n(f"{low:.{digits}f}"), _n(f"{high:.{digits}f}")
        if a != b:
            break
    return a, b


def fmt_interval(speedup: float, low: float | None, high: float | None) -> str:
    """The speedup's interval in the direction a speed cell states it: "1.19–1.31" (times as fast),
    inverted for a slower one; empty without an interval."""
    if low is None or high is None:
        return ""
    if speedup < 1:
        low, high = 1 / high, 1 / low
    a, b = fmt_bounds(low, high)
    return f"{a}–{b}"


def fmt_pct(frac: float | None) -> str:
    return "-" if frac is None else f"{frac * 100:.0f}%"


def fmt_err(x: float | None) -> str:
    return "-" if x is None else _n(f"{x:.1e}")


_STRIP = re.compile(r"^(void|std::enable_if<[^>]*>::type)\s+")
_NS = re.compile(
    r"\b(at::native::|at::cuda::|\(anonymous namespace\)::|c10::|cutlass::|at::detail::|std::|binary_internal::)"
)


def _cut_params(name: str) -> str:
    """Drop the parameter list: the first '(' at template depth 0 (kept when it opens the name)."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def _collapse(name: str, keep_depth: int) -> str:
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            if depth > keep_depth:
                continue
        elif ch == ">":
            depth -= 1
            if depth == keep_depth:
                out.append(">")
            if depth >= keep_depth:
                continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=8192)  # a region lists up to 500 ops, most of them the same few kernels
def short_name(name: str, width: int = 60) -> str:
    """A kernel name a person can read in a table: no 'void', no parameters, fewer namespaces,
    inner template arguments folded, cut to width. Memcpy / memset names are kept whole.

    The one short name of a kernel: the analysis writes it into its JSON (kernels[].short_name,
    regions[].gpu_ops[].name, at the default width) and the reports shorten further with it."""
    if name.startswith(("Memcpy", "Memset")):
        return name if len(name) <= width else name[: width - 1] + "…"
    s = _STRIP.sub("", name.strip()).replace("(anonymous namespace)::", "")
    s = _NS.sub("", _cut_params(s))
    for depth in (2, 1):  # fold inner template arguments until it fits; the outer ones name the op
        if len(s) > width:
            s = _collapse(s, depth)
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s
