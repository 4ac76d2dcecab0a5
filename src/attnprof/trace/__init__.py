"""Trace loading and the columnar trace model (see attnprof.trace.load and attnprof.trace.model).

The names are imported when first used, so that attnprof.trace.limits (imported by the CLI)
does not pull in numpy and msgspec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attnprof.trace.load import load_trace, parse_trace
    from attnprof.trace.model import GPU_KINDS, Kind, Trace

__all__ = ["GPU_KINDS", "Kind", "Trace", "load_trace", "parse_trace"]


def __getattr__(name: str) -> Any:
    if name in ("load_trace", "parse_trace"):
        from attnprof.trace import load

        return getattr(load, name)
    if name in ("GPU_KINDS", "Kind", "Trace"):
        from attnprof.trace import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
