"""What the `attnprof` command decides from its command word before the command line itself is
imported (attnprof.__main__, and attnprof.cli `main`): whether the process is short, and so
trims its start and its exit, and decodes its trace ahead (trace/forked.py `start_early`).

Short: a command whose process is short, so that starting and stopping the interpreter is much of
its time (a small trace's analysis: docs/benchmarks.md). Such a process asks numpy's OpenBLAS
for one thread (it starts one per CPU when numpy is imported, 60-75 ms here, and the analysis
does no linear algebra; a user's OPENBLAS_NUM_THREADS wins), exits without tearing the
interpreter down (32-52 ms for numpy, msgspec and typer here: attnprof.cli `_exit_now`), and
forks the decoder of a large trace before the command line's imports.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["SHORT_COMMANDS", "command_word", "is_short", "prepare_short"]

SHORT_COMMANDS = frozenset({"analyze"})


def command_word(args: Sequence[str]) -> str | None:
    """The command a command line (sys.argv[1:]) runs: its first word that is not an option (the
    root options take no value)."""
    return next((a for a in args if not a.startswith("-")), None)


def is_short(args: Sequence[str]) -> bool:
    return command_word(args) in SHORT_COMMANDS


def prepare_short() -> None:
    """Before numpy is first imported."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
