"""Errors the library raises; only the CLI turns them into messages and exit codes.

UserError means the input is wrong (exit 2): its message is one line that names the problem
and the fix. ExpectationMismatch is raised under --strict (exit 3). Interrupted (exit 130) follows
Ctrl-C or SIGTERM once what finished is saved. Anything else is an internal error (exit 1).
"""

from __future__ import annotations

__all__ = ["AttnprofError", "ExpectationMismatch", "Interrupted", "MissingExtra", "UserError", "first_line"]


class AttnprofError(Exception):
    """Base class for errors attnprof raises on purpose."""

    exit_code = 1


class UserError(AttnprofError, ValueError):
    """Bad input: one line naming the problem and the fix."""

    exit_code = 2


class MissingExtra(UserError):
    """An optional dependency is missing; the message carries the exact pip command."""

    def __init__(self, module: str, extra: str, what: str) -> None:
        super().__init__(f"{what} needs the optional package '{module}': pip install 'attnprof[{extra}]'")
        self.module = module
        self.extra = extra


class ExpectationMismatch(AttnprofError):
    """Observed behaviour differs from a stated expectation (raised only under --strict)."""

    exit_code = 3


class Interrupted(AttnprofError):
    """Stopped by SIGINT/SIGTERM after saving what finished; the message says how to resume."""

    exit_code = 130


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, "" when it has none: what a recorded failure,
    a refusal or a cleanup's report quotes of an error (tracebacks and long tails left out)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
