"""The one place terminal output gets its rich Console: at most 100 columns, colour optional.

A terminal narrower than 100 columns gets its own width; a pipe or a file gets 100, so output
pasted into an issue or a chat keeps its shape.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console

__all__ = ["MAX_WIDTH", "make_console"]

MAX_WIDTH = 100


def make_console(
    *,
    no_color: bool = False,
    file: IO[str] | None = None,
    stderr: bool = False,
    width: int | None = None,
    force_terminal: bool | None = None,
) -> Console:
    out = file or (sys.stderr if stderr else sys.stdout)
    detected = Console(file=out).width if out.isatty() else MAX_WIDTH
    return Console(
        file=out,
        force_terminal=force_terminal,
        no_color=no_color,
        highlight=False,
        width=min(width or detected, MAX_WIDTH),
        emoji=False,
        soft_wrap=False,
    )
