"""--help shows each option under its one name; the other spellings it accepts are named at the end
of its help ("Also: --attn."), so a reader who met one in a script or an old doc finds it.

One vocabulary across commands (`-o/--out` for a run directory, `-o/--output` for a file,
`-v/--variants`): an option declared with several long names lists its first one in --help and
accepts every one of them (`run --output DIR`, `report --out FILE`, `model --attn sdpa`,
`--variant`), as typer and click parse them (click's parameters, typer's vendored click or click
itself). The listing is changed while help is written only, so parsing, error messages and
completion still know every name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperCommand

__all__ = ["AliasHidingCommand", "also_note", "hidden_aliases", "hide_aliases_in_help"]


def hidden_aliases(param: Any) -> list[str]:
    """The long names of `param` after its first: accepted, not listed."""
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[1:]


@contextmanager
def _listed_names_only(command: Any) -> Iterator[None]:
    saved = []
    for p in command.params:
        hide = hidden_aliases(p)
        if hide:
            saved.append((p, p.opts, p.help))
            p.opts = [o for o in p.opts if o not in hide]
            p.help = f"{p.help or ''} {also_note(hide)}".strip()
    try:
        yield
    finally:
        for p, opts, text in saved:
            p.opts, p.help = opts, text


def also_note(aliases: list[str]) -> str:
    """The words that end an option's help when it has other spellings."""
    return f"Also: {', '.join(aliases)}."


class AliasHidingCommand(TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        with _listed_names_only(self):
            super().format_help(ctx, formatter)


def hide_aliases_in_help(app: typer.Typer) -> None:
    """Every command of `app` declared without a class of its own (typer's default) lists one
    name per option."""
    for info in app.registered_commands:
        if info.cls is None or info.cls is TyperCommand:
            info.cls = AliasHidingCommand
