"""The one place terminal output gets its rich Console, and prints tables without cutting numbers.

A terminal gets its own width (COLUMNS, else its size; at most 200). A pipe or a file gets 100
columns, or COLUMNS when that is narrower, so output pasted into an issue or a chat keeps its
shape; a caller that writes a file of its own (`results -o FILE`) may ask for up to 200. A table wider than that leaves out columns from the right and says which (print_table):
a number is never cut to "1.85 …".
"""

from __future__ import annotations

import os
import sys
from functools import cache
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnprof.units import ascii_spelling

if TYPE_CHECKING:
    from attnprof.report.i18n import Translator

__all__ = [
    "MAX_TTY_WIDTH",
    "MAX_WIDTH",
    "TERMINAL_WORDS",
    "colour_off",
    "make_console",
    "print_table",
    "set_no_color",
    "terminal_words",
]

MAX_WIDTH = 100  # pipes and files
MAX_TTY_WIDTH = 200  # a wide terminal, past which lines get hard to follow


_no_color_flag = [False]
_typer_default: list[Any] = []  # typer.rich_utils.COLOR_SYSTEM before any change


def set_no_color(value: bool) -> None:
    """--no-color seen on the command line (attnprof.cli.main): every console of the process,
    typer's help and usage ones too, is plain from then on, whatever view makes it."""
    _no_color_flag[0] = value
    # typer builds its own rich Console for --help and usage errors; None keeps it plain, and
    # its own default comes back when colour is on again (an in-process caller's next command)
    import typer.rich_utils

    if not _typer_default:
        _typer_default.append(typer.rich_utils.COLOR_SYSTEM)
    typer.rich_utils.COLOR_SYSTEM = None if colour_off() else _typer_default[0]


def colour_off(no_color: bool = False) -> bool:
    """Whether output must carry no escape sequences: --no-color, or NO_COLOR
    (https://no-color.org) set to any non-empty value."""
    return no_color or _no_color_flag[0] or bool(os.environ.get("NO_COLOR"))


def make_console(
    *,
    no_color: bool = False,
    file: IO[str] | None = None,
    stderr: bool = False,
    width: int | None = None,
    force_terminal: bool | None = None,
) -> Console:
    out = file or (sys.stderr if stderr else sys.stdout)
    if width is not None:
        chosen = min(width, MAX_TTY_WIDTH)
    elif out.isatty():
        # a terminal gets its own width (COLUMNS, else its size), wider than 100 too: tables then
        # show every column instead of leaving some out
        chosen = min(Console(file=out).width, MAX_TTY_WIDTH)
    else:
        chosen = min(_columns() or MAX_WIDTH, MAX_WIDTH)
    plain = colour_off(no_color)
    return _Console(
        file=out,
        force_terminal=force_terminal,
        # rich's no_color drops colours but still writes bold and dim as ESC[1m / ESC[2m; no
        # colour system writes no escape sequence at all, which is what NO_COLOR asks of a tool
        no_color=plain,
        color_system=None if plain else "auto",
        highlight=False,
        width=chosen,
        emoji=False,
        soft_wrap=False,
    )


class _Console(Console):
    """A Console whose tables are spelled in what its stream can encode before rich lays them
    out: the stream's error handler (attnprof.cli) would otherwise widen "±" to "+/-" after the
    column widths were fixed, and the rows would no longer line up."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(fit_encoding(self, o) for o in objects), **kwargs)


def _encodes(encoding: str, ch: str) -> bool:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _spell(encoding: str, s: str) -> str:
    if s.isascii():
        return s
    return "".join(c if _encodes(encoding, c) else ascii_spelling(c) for c in s)


def _spell_text(encoding: str, t: Text) -> Text:
    """`t` in characters the encoding has, its styled spans moved with the text they style."""
    plain = t.plain
    if plain.isascii():
        return t
    pieces, offsets = [], [0]
    for c in plain:
        piece = c if _encodes(encoding, c) else ascii_spelling(c)
        pieces.append(piece)
        offsets.append(offsets[-1] + len(piece))
    out = Text(
        "".join(pieces), style=t.style, justify=t.justify, overflow=t.overflow, no_wrap=t.no_wrap, end=t.end
    )
    for span in t.spans:
        out.stylize(span.style, offsets[span.start], offsets[min(span.end, len(plain))])
    return out


def fit_encoding(console: Console, obj: Any) -> Any:
    """A rich Table (title, headers, cells) or Text in what the console's stream can encode; any
    other renderable as it is. A UTF-8 stream gets `obj` back untouched."""
    encoding = console.encoding or "utf-8"
    if encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf16", "utf32"):
        return obj

    def spell(x: Any) -> Any:
        if isinstance(x, Text):
            return _spell_text(encoding, x)
        if isinstance(x, str):
            return _spell(encoding, x)
        return x

    if isinstance(obj, Table):
        obj.title = spell(obj.title)
        obj.caption = spell(obj.caption)
        for column in obj.columns:
            column.header = spell(column.header)
            column.footer = spell(column.footer)
            column._cells = [spell(c) for c in column._cells]
        return obj
    return spell(obj)


# The terminal speaks terse English: the report catalog's English with these words over it
# (headers short enough for 100 columns), so that a table's builder serves the terminal and the
# reports alike. Expectation check names and the statuses a check expects or observes stay as
# the expectation files and run.json write them ("refused", not "refused (memory)").
TERMINAL_WORDS: dict[str, str] = {
    "speed.incorrect": "incorrect",
    "speed.baseline": "1.00x (base)",
    "speed.with_interval": "{speed} [{ci}]",
    "occupancy.pair": "{achieved}/{theoretical}",
    "occupancy.limited": "{pair} {limiter}",
    "tflops.above_peak": " !",
    **{f"col.{k}": k for k in ("variant", "check", "expected", "observed", "result", "family", "change")},
    "col.kernel": "kernel / op",
    "col.per_fwd": "{side}",
    "col.delta": "Δ time",
    "diff.title": "{b} vs {a} ({lane} ops per forward): {ops_a} -> {ops_b} ops; +{added} added, "
    "-{removed} removed, ~{changed} changed (Δ: traced time, inflated by the profiler)",
    "diff.title_clean": "{b} vs {a} ({lane} ops per forward): {ops_a} -> {ops_b} ops; +{added} added, "
    "-{removed} removed, ~{changed} changed (Δ: clean time, each side's clean median split by "
    "its ops' shares of its trace)",
    "col.bucket": "bucket",
    "col.fastest": "fastest",
    "col.margin": "margin",
    "col.runner_up": "runner-up",
    "col.best_sdpa": "best SDPA",
    "col.pytorch_choice": "PyTorch",
    "col.differs": "pin?",
    "rec.within_noise": "~",
    "ranks.col.step": "step time",
    "ranks.col.busy": "busy",
    "ranks.col.comm": "comm %",
    "ranks.col.attn": "attn %",
    "ranks.col.family": "family",
    "ranks.legend": "busy: union of GPU op intervals; idle: GPU window - busy; comm % and attn %: of the "
    "summed GPU op time",
    "ranks.spread_legend": "spread: (max - min) / mean of the family's time across ranks",
    "ranks.slowest.step_time": "slowest rank: {rank}, mean step time {value}: {over_median}% over the median "
    "({median}), {over_fastest}% over the fastest (rank {fastest_rank}, {fastest})",
    "ranks.slowest.gpu_window": "slowest rank: {rank}, device active window {value}: {over_median}% over the "
    "median ({median}), {over_fastest}% over the fastest (rank {fastest_rank}, {fastest})",
    "perf.col.time": "time",
    "perf.col.cpu_time": "CPU time",
    "perf.col.share": "%time",
    "perf.col.pct_bound": "%roof",
    "perf.col.calls": "calls",
    "perf.col.bound": "bound",
}


@cache
def terminal_words(lang: str = "en") -> Translator:
    """The terminal's Translator: English with TERMINAL_WORDS over it; another language (a view
    that --lang translates) speaks its catalog's words, which the reports use too."""
    from attnprof.report.i18n import Translator

    if lang != "en":
        return Translator(lang, names=("check.", "status."))
    return Translator("en", words=TERMINAL_WORDS, names=("check.", "status."))


def _columns() -> int | None:
    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def print_table(console: Console, table: Table, *, keep: int = 1, t: Translator | None = None) -> list[str]:
    """Print `table` without cutting any cell: when its natural width (every cell whole) is more
    than the console's, columns are left out from the right (never the first `keep`), and a
    line under it names them (in `t`'s language; English when None). Returns the headers left out."""
    dropped: list[str] = []
    table = fit_encoding(console, table)  # measured as it will be printed
    while len(table.columns) > keep and _cuts(console, table):
        dropped.append(str(table.columns.pop().header))
    console.print(table)
    if dropped:
        words = t if t is not None else terminal_words()
        line = words("console.left_out", width=console.width, columns=", ".join(reversed(dropped)))
        console.print(Text(line, style="dim"))
    return dropped


def _cuts(console: Console, table: Table) -> bool:
    """Whether rich, fitting `table` to the console, would cut a no-wrap cell (a number) short or
    break a word of a wrapping one. Wrapping between words loses nothing. Uses rich's own
    column-width computation."""
    options = console.options
    # as Table.__rich_console__ does: the columns share the width left after the box's edges
    widths = table._calculate_column_widths(
        console, options.update_width(options.max_width - table._extra_width)
    )
    wide = options.update(max_width=100_000)
    for column, width in zip(table.columns, widths, strict=True):
        need = table._measure_column(console, wide, column)
        # a no-wrap cell needs its whole width; a wrapping one its longest word (no "ate/n")
        if width < (need.maximum if column.no_wrap else need.minimum):
            return True
    return False
