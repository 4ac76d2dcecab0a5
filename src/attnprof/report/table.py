"""The one table model every view builds, and its three renderers: rich (terminal), Markdown, HTML.

A view's builder (report/tables.py, store_report.py, ranks_report.py, sweep_view.py) makes a
Table once: columns, and rows of Cells. A Cell is the text a reader sees (it is a str, so a
template or a test reads it as one) with the figure behind it, its unit, and an emphasis name.
The renderers only lay the table out: `to_rich` for the terminal, `to_markdown` for Markdown, and
the `table` macro in templates/_table.html.j2 for HTML. Emphasis names, not colours, are what
builders set: the terminal maps them to rich styles here, HTML to the classes of _style.html.j2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["EMPHASIS", "Cell", "Column", "Table", "cell", "fit", "to_markdown", "to_rich"]

# emphasis name -> rich style; "" is plain
EMPHASIS: dict[str, str] = {
    "": "",
    "strong": "bold",
    "dim": "dim",
    "good": "green",
    "bad": "red",
    "alarm": "bold red",
    "warn": "yellow",
}


class Cell(str):
    """The text shown, with `value` (the number or name behind it; None when the cell is text
    only), `unit` ("ms", "B", "x", "%" ...) and `emphasis` (a key of EMPHASIS)."""

    __slots__ = ("emphasis", "unit", "value")
    value: float | int | str | None
    unit: str
    emphasis: str

    def __new__(
        cls, text: str, value: float | int | str | None = None, unit: str = "", emphasis: str = ""
    ) -> Cell:
        self = super().__new__(cls, text)
        self.value, self.unit, self.emphasis = value, unit, emphasis
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Cell, (str(self), self.value, self.unit, self.emphasis))


def cell(x: str | Cell | None, emphasis: str = "") -> Cell:
    """A Cell from text ("-" for None); a Cell passes through (with `emphasis` if it has none)."""
    if isinstance(x, Cell):
        return x if x.emphasis or not emphasis else Cell(x, x.value, x.unit, emphasis)
    return Cell("-" if x is None else x, emphasis=emphasis)


def fit(label: str, width: int) -> str:
    """A name in at most `width` characters: trace files and users' file.py:function variants
    can be 80 long; keep both ends, which tell them apart."""
    if len(label) <= width:
        return label
    head = (width - 1) // 2
    return label[:head] + "…" + label[-(width - 1 - head) :]


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned; "num" in HTML, "---:" in Markdown
    # terminal layout only (rich): whether the cell may wrap, its widest, and how it is cut
    no_wrap: bool = False
    max_width: int | None = None
    overflow: Literal["fold", "crop", "ellipsis", "ignore"] = "ellipsis"
    justify: Literal["left", "right", "center"] | None = None  # default: right if numeric


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)
    # per-row class: HTML's tr class (faster, slower, failed, met ...); empty: none
    classes: list[str] = field(default_factory=list)
    title: str = ""
    # per-row emphasis for the terminal (a key of EMPHASIS), where a whole row stands out
    emphasis: list[str] = field(default_factory=list)

    @property
    def header(self) -> list[str]:
        return [c.header for c in self.columns]

    @property
    def numeric(self) -> set[int]:
        return {i for i, c in enumerate(self.columns) if c.numeric}

    def add(self, cells: list[Any], *, cls: str = "", emphasis: str = "") -> None:
        """A row: str, Cell or None ("-") per column."""
        self.rows.append([cell(c) for c in cells])
        self.classes.append(cls)
        self.emphasis.append(emphasis)

    def drop_columns(self, drop: set[int]) -> Table:
        keep = [i for i in range(len(self.columns)) if i not in drop]
        return Table(
            columns=[self.columns[i] for i in keep],
            rows=[[row[i] for i in keep] for row in self.rows],
            classes=self.classes,
            title=self.title,
            emphasis=self.emphasis,
        )


def to_rich(table: Table, *, title: bool = True, **layout: Any) -> Any:
    """A rich Table: `layout` are rich.table.Table's own options (box, pad_edge, ...)."""
    from rich.table import Table as RichTable
    from rich.text import Text

    out = RichTable(title=(table.title or None) if title else None, **layout)
    for c in table.columns:
        out.add_column(
            c.header,
            justify=c.justify or ("right" if c.numeric else "left"),
            no_wrap=c.no_wrap,
            max_width=c.max_width,
            overflow=c.overflow,
        )
    for n, row in enumerate(table.rows):
        emphasis = table.emphasis[n] if n < len(table.emphasis) else ""
        out.add_row(
            *(Text(c, style=EMPHASIS[getattr(c, "emphasis", "")]) for c in row), style=EMPHASIS[emphasis]
        )
    return out


def md_text(s: str) -> str:
    """Text copied into Markdown (kernel and file names from a trace, paths, messages), made
    inert as the HTML report's autoescape makes it there: <, > and & as entities (a kernel named
    `<img onerror=...>` or `<script>` is shown, not run, by renderers that pass HTML through),
    [ and ] backslashed (no link or image made of a name), a newline a space."""
    return (
        s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("[", "\\[")
        .replace("]", "\\]")
        .replace("\n", " ")
    )


def md_code(s: str) -> str:
    """`s` as a Markdown code span that a backtick inside it cannot end."""
    s = s.replace("\n", " ")
    run = 0
    longest = 0
    for ch in s:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _md_cell(s: str) -> str:
    return md_text(s).replace("|", "\\|")


def to_markdown(table: Table) -> list[str]:
    """A GitHub Markdown table (no lines at all when it has no rows)."""
    if not table.rows:
        return []
    num = table.numeric
    lines = ["| " + " | ".join(_md_cell(h) for h in table.header) + " |"]
    lines.append("|" + "|".join("---:" if i in num else "---" for i in range(len(table.columns))) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return lines
