"""attnprof: profile attention implementations in PyTorch, explain the traces, recommend one.

The public API is small; everything else lives in submodules (see docs/).
Importing attnprof does not import torch: analysis of traces needs none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnprof._version import __version__

__all__ = [
    "RunRecord",
    "RunResult",
    "Workload",
    "__version__",
    "analyze",
    "list_variants",
    "run",
]

from attnprof.records import RunRecord, RunResult
from attnprof.workload import Workload

if TYPE_CHECKING:
    from attnprof.harness.run import run
    from attnprof.variants.registry import list_variants


def __getattr__(name: str) -> Any:
    # lazy: these pull in torch (run, list_variants) or numpy (analyze)
    if name == "run":
        from attnprof.harness.run import run

        return run
    if name == "list_variants":
        from attnprof.variants.registry import list_variants

        return list_variants
    if name == "analyze":
        from attnprof.analysis import analyze

        return analyze
    raise AttributeError(name)
