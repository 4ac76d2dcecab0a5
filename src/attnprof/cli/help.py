"""--help shows each option under its one name; the older spellings kept for compatibility work
but are not listed.

One vocabulary across commands (`-o/--out` for a run directory, `-o/--output` for a file,
`-v/--variants`): an option declared with several long names lists its first one in --help and
accepts every one of them (`run --output DIR`, `report --out FILE`, `model --attn sdpa`,
`--variant`), as typer and click parse them (click's parameters, typer's vendored click or click itself). The listing is filtered while help is written
only, so parsing, error messages and completion still know every name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperCommand

__all__ = ["AliasHidingCommand", "hidden_aliases", "hide_aliases_in_help"]


def hidden_aliases(param: Any) -> list[str]:
    """The long names of `param` after its first: accepted, not listed."""
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[1:]


@contextmanager
def _listed_names_only(command: Any) -> Iterator[None]:
    saved = []
    for p in command.params:
        hide = set(hidden_aliases(p))
        if hide:
            saved.append((p, p.opts))
            p.opts = [o for o in p.opts if o not in hide]
    try:
        yield
    finally:
        for p, opts in saved:
            p.opts = opts


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
