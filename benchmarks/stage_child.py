"""One analysis of FILE, timed per stage, in a fresh process: `python stage_child.py FILE`.

bench_analyze.py --baseline runs it with PYTHONPATH at this checkout's src and at another
commit's, alternating. That commit has no timing hooks of its own, so the stages are timed from
outside: each stage's functions are found by name in every loaded attnprof module and wrapped.
Only the outermost wrapped call is timed (a stage function called from another stage's counts as
that stage's), and what no stage claims is "other". A name a commit lacks leaves its stage at 0.
Prints one JSON line: {"total": s, "stages": {stage: s}, "events": n}.
"""

from __future__ import annotations

import functools
import importlib
import json
import pkgutil
import sys
import time
from collections.abc import Callable
from typing import Any

# stage -> the functions that make it, by name (the pipeline's steps, as analyze_trace calls them)
STAGES: dict[str, tuple[str, ...]] = {
    "load": ("load_trace",),
    "link": ("link",),
    "classify": ("classify", "device_event_category"),
    "attribution": (
        "attention_provenance",
        "device_share",
        "cpu_share",
        "kernel_table",
        "memory_table",
        "launch_table",
        "device_info",
        "cpu_evidence",
        "unfused_chains",
        "launched_in",
        "linked_backward_ops",
    ),
    "regions": ("find_region", "region_stats", "region_comm"),
    "idle": (
        "sanitize",
        "host_activity",
        "idle_per_instance",
        "comm_overlap",
        "compute_union",
        "gap_warnings",
    ),
    "replay": ("graph_replays", "compiled_code"),
    "perf model": ("perf_model", "phases", "roofline"),
    "findings": ("evaluate",),
}
ORDER = [*STAGES, "render", "other"]

_spent: dict[str, float] = dict.fromkeys(ORDER, 0.0)
_depth = [0]


def _timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _depth[0]:
            return fn(*args, **kwargs)
        _depth[0] += 1
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[stage] += time.perf_counter() - t
            _depth[0] -= 1

    wrapper.stage_timed = True  # type: ignore[attr-defined]
    return wrapper


def _import_all() -> None:
    """Every attnprof.analysis and attnprof.trace module, so that a function imported inside
    another's body (a local import reads the defining module's attribute) is wrapped too."""
    for pkg_name in ("attnprof.analysis", "attnprof.trace"):
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
            try:
                importlib.import_module(info.name)
            except Exception:  # an optional extra's module (ray, pandas): not a stage
                continue


def _wrap() -> None:
    wrapped: dict[int, Callable[..., Any]] = {}
    for stage, names in STAGES.items():
        for mod in [m for k, m in sys.modules.items() if k.startswith("attnprof") and m is not None]:
            for name in names:
                fn = getattr(mod, name, None)
                if not callable(fn) or getattr(fn, "stage_timed", False):
                    continue
                if getattr(fn, "__module__", "").split(".")[0] != "attnprof":
                    continue
                w = wrapped.setdefault(id(fn), _timed(stage, fn))
                setattr(mod, name, w)


def main() -> None:
    path = sys.argv[1]
    _import_all()
    from attnprof.analysis import analyze

    _wrap()
    t = time.perf_counter()
    result = analyze(path)
    r = time.perf_counter()
    doc = result.to_dict()
    end = time.perf_counter()
    _spent["render"] = end - r
    total = end - t
    _spent["other"] = max(0.0, total - sum(v for k, v in _spent.items() if k != "other"))
    print(json.dumps({"total": total, "stages": _spent, "events": doc["trace"]["events"]}))


if __name__ == "__main__":
    main()
