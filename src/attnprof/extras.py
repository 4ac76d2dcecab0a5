"""Which optional extra brings which package, and the checks that name it when it is missing.

`pip install attnprof` gives what analysing, comparing and reporting on traces needs; running
attention (torch), DataFrames (pandas) and the HTML report's plots (matplotlib) come with extras.
This table is the one place that says which extra holds which package; a command or function that
needs one calls require() or load() before doing any work, so that a missing package ends in one
line naming the pip command (MissingExtra, exit 2), never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from attnprof.errors import MissingExtra

__all__ = ["EXTRAS", "available", "load", "missing_extra", "require"]

# importable top-level package -> the extra in pyproject.toml that installs it
EXTRAS: dict[str, str] = {
    "torch": "run",
    "psutil": "run",
    "pandas": "df",
    "matplotlib": "plots",
    "ray": "ray",
    "pyarrow": "parquet",
    "transformers": "models",
    "kernels": "hub",
}


def available(module: str) -> bool:
    """Whether `module` is installed, without importing it (importing torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder refused it, or a half-removed package
        return False


def require(module: str, what: str, *, extra: str | None = None) -> None:
    """Raise MissingExtra (exit 2, one line) unless `module` is installed; `what` names the
    command or option that needs it, e.g. "attnprof run"; `extra` overrides the table where a
    larger extra is the right advice (`attnprof model` needs torch and transformers: [models])."""
    if not available(module):
        raise MissingExtra(module, extra or EXTRAS[module], what)


def load(module: str, what: str, *, extra: str | None = None) -> ModuleType:
    """Import `module`, or raise MissingExtra naming the extra that installs it (`extra`
    overrides the table, as in require())."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:  # the package is there but something inside it is not
            raise
        raise MissingExtra(module, extra or EXTRAS[module], what) from None


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """The MissingExtra for an import that failed because an optional package is not installed
    at all; None for anything else (a submodule missing from an installed package is a bug or a
    version mismatch, not a missing extra)."""
    name = exc.name or ""
    if name in EXTRAS:
        return MissingExtra(name, EXTRAS[name], what)
    return None
