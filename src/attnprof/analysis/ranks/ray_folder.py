"""A folder's traces as Ray tasks (`attnprof analyze DIR --executor ray`): a few traces per task,
each task asking Ray for the memory its largest trace's analysis needs (the loader's estimate,
attnprof.trace.limits), the summaries reduced on the driver as the tasks finish.

Where the time went (docs/benchmarks.md, 64 rank traces on 2 busy cores): starting a local Ray
(GCS, raylet, dashboard and log processes, each a Python start-up) took 9-15 s, its shutdown
1.4 s, while the tasks themselves took about what the local pool takes. So the tasks are few
(about two per CPU of the cluster, a batch of traces each: fewer scheduling round trips and
object references), each sends back its traces' summaries as msgpack bytes (attnprof.analysis
.ranks.summarize: no per-object pickling, and the bytes are the cache's summary as they are),
and traces whose summary is kept never reach Ray: a folder read before starts no Ray at all.
What remains is Ray's own start; an instance already running (`ray start --head`, then
`--ray-address auto`) does not pay it.

Without an address Ray is started on this machine, on the loopback address only
(`_node_ip_address="127.0.0.1"`: nothing listens beyond the machine), and shut down afterwards;
with `--ray-address` (e.g. `ray://head:10001` or `auto`) the tasks go to that cluster, whose
workers must see the trace paths (a shared file system) and have attnprof installed. A task
that raises UserError (a bad trace) ends the analysis with that one line, as the local pool does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from attnprof.errors import UserError
from attnprof.ray_start import ray_started

__all__ = ["TASKS_PER_CPU", "batches", "ray_map"]

TASKS_PER_CPU = 2  # a task per CPU leaves CPUs idle behind the slowest; more costs round trips


def _memory_for(path: Path, cap: float | None) -> int:
    """Bytes a trace's analysis needs: the raw JSON size times the loader's peak factor, capped
    by the cluster's memory resource (a request no node can meet would wait forever)."""
    from attnprof.trace.limits import PEAK_FACTOR, check_input

    need = int(check_input(path, max_memory=0) * PEAK_FACTOR) + (64 << 20)
    return int(min(need, cap)) if cap else need


def batches(paths: Sequence[Path], cpus: int) -> list[list[Path]]:
    """paths in consecutive batches, about TASKS_PER_CPU per CPU (at least one path each)."""
    size = max(1, math.ceil(len(paths) / max(1, cpus * TASKS_PER_CPU)))
    return [list(paths[i : i + size]) for i in range(0, len(paths), size)]


def ray_map(
    fn: Callable[..., list[Any]], paths: Sequence[Path], args: tuple[Any, ...], address: str | None
) -> Iterator[tuple[list[Path], list[Any]]]:
    """fn(batch, *args) for batches of paths, each call a Ray task; (batch, its results) as each
    task finishes."""
    ray, owns = ray_started(address)
    try:
        resources = ray.cluster_resources()
        cap = resources.get("memory")
        task = ray.remote(fn)
        pending = {}
        for batch in batches(paths, int(resources.get("CPU", 1))):
            memory = max(_memory_for(p, cap) for p in batch)
            ref = task.options(num_cpus=1, memory=memory, max_retries=0).remote(batch, *args)
            pending[ref] = batch
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, UserError):
                        raise UserError(str(cause)) from None
                    raise
                yield pending.pop(ref), out
    finally:
        if owns:
            ray.shutdown()
