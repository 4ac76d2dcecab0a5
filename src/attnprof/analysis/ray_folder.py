"""A folder's traces as Ray tasks (`attnprof analyze DIR --executor ray`): one task per trace, each
asking Ray for the memory its analysis needs (the loader's estimate, attnprof.trace.limits), the
summaries reduced on the driver as they come back.

Without an address Ray is started on this machine, on the loopback address only
(`_node_ip_address="127.0.0.1"`: nothing listens beyond the machine), and shut down afterwards;
with `--ray-address` (e.g. `ray://head:10001` or `auto`) the tasks go to that cluster, whose
workers must see the trace paths (a shared file system) and have attnprof installed. A task
that raises UserError (a bad trace) ends the analysis with that one line, as the local pool does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attnprof.errors import UserError
from attnprof.extras import load

__all__ = ["ray_map"]


def _memory_for(path: Path, cap: float | None) -> int:
    """Bytes a trace's analysis needs: the raw JSON size times the loader's peak factor, capped
    by the cluster's memory resource (a request no node can meet would wait forever)."""
    from attnprof.trace.limits import PEAK_FACTOR, check_input

    need = int(check_input(path, max_memory=0) * PEAK_FACTOR) + (64 << 20)
    return int(min(need, cap)) if cap else need


def ray_map(
    fn: Callable[..., Any], paths: Sequence[Path], args: tuple[Any, ...], address: str | None
) -> list[Any]:
    """[fn(path, *args) for path in paths], each call a Ray task; results in the order of paths."""
    ray = load("ray", "--executor ray")
    owns = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["_node_ip_address"] = "127.0.0.1"
        try:
            ray.init(**kwargs)
        except ConnectionError as exc:
            raise UserError(
                f"--ray-address {address}: cannot connect to a Ray cluster there ({exc})"
            ) from None
        owns = True
    try:
        cap = ray.cluster_resources().get("memory")
        task = ray.remote(fn)
        refs = [
            task.options(num_cpus=1, memory=_memory_for(p, cap), max_retries=0).remote(p, *args)
            for p in paths
        ]
        try:
            return list(ray.get(refs))
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, UserError):
                raise UserError(str(cause)) from None
            raise
    finally:
        if owns:
            ray.shutdown()
