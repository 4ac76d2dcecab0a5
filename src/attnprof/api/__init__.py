"""The requests the commands make, each built from its flags and validated in one place.

A command (attnprof.cli) turns its flags into a request here and the request's result into a
view; which option applies on which route (a trace, a folder of rank traces, a capture pair, a
resumed run) is decided once, in the request, so an option is either honoured on a route or
refused there with one line (attnprof.errors.UserError, exit 2). No torch on import.
"""

from __future__ import annotations

from attnprof.api.analyze import AnalyzeRequest, AnalyzeResult
from attnprof.api.run import RunFlags, RunRequest, check_resume

__all__ = ["AnalyzeRequest", "AnalyzeResult", "RunFlags", "RunRequest", "check_resume"]
