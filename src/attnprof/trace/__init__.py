"""Trace loading and the columnar trace model (see attnprof.trace.load and attnprof.trace.model)."""

from __future__ import annotations

from attnprof.trace.load import load_trace, parse_trace
from attnprof.trace.model import GPU_KINDS, Kind, Trace

__all__ = ["GPU_KINDS", "Kind", "Trace", "load_trace", "parse_trace"]
