"""The local executor: a pool of reused worker processes on this machine.

On CUDA it starts one worker per visible GPU and pins each to its GPU with CUDA_VISIBLE_DEVICES,
so jobs on `--device cuda` spread over the node and never share a GPU (two kernels timed on one
GPU at once time each other). On CPU it starts one worker by default: parallel workers would share
the cores and the memory bandwidth that the timings measure; --workers N trades that for speed and
splits the cores between workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import msgspec

from attnprof.device import auto_device, visible_gpus
from attnprof.errors import UserError
from attnprof.records import Environment
from attnprof.sweep.executor import Finished, ShouldRun
from attnprof.sweep.jobs import JobRequest
from attnprof.sweep.pool import Task, WorkerPool

__all__ = ["WORKER_BYTES", "LocalExecutor", "worker_cap"]

# what one worker process holds once torch is imported and a small job has run (about 320 MiB
# measured here), with room for the job's own tensors
WORKER_BYTES = 512 * 2**20


def worker_cap() -> tuple[int, str]:
    """How many worker processes this machine can hold: one per CPU this process may use, and
    no more than the available memory holds at WORKER_BYTES each; with the reason, for the note."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    from attnprof.harness.memory import available_bytes

    by_memory = max(1, available_bytes("cpu") // WORKER_BYTES)
    if by_memory < cpus:
        return int(
            by_memory
        ), f"{available_bytes('cpu') / 2**30:.1f} GiB available holds {by_memory} at ~0.5 GiB each"
    return cpus, f"{cpus} CPU(s) here"


class LocalExecutor:
    name = "local"

    def __init__(
        self, *, device: str = "cpu", workers: int = 0, handlers: str = "attnprof.sweep.handlers"
    ) -> None:
        if device == "auto":
            device = auto_device()
        self.device = device
        env_for: Callable[[int], Mapping[str, str]] | None = None
        init: dict[str, object] = {"preload": True}
        if device == "cuda":
            gpus = visible_gpus()
            if not gpus:
                raise UserError("--device cuda but no GPU is visible here: use --device cpu")
            workers = workers or len(gpus)

            def env_for(slot: int) -> Mapping[str, str]:
                return {"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]}

        else:
            workers = workers or 1
            if device == "cpu" and workers > 1:
                init["threads"] = max(1, (os.cpu_count() or 1) // workers)
        self.workers = workers
        self.pool = WorkerPool(handlers, workers, init=init, env_for=env_for)

    def probe(self, device: str) -> Environment:
        value = self.pool.call("probe", device, timeout_s=300)
        return msgspec.convert(value, type=Environment)

    def run(
        self, requests: Sequence[JobRequest], *, timeout_s: float | None, should_run: ShouldRun | None = None
    ) -> Iterator[Finished]:
        tasks = [Task(fn="run", payload=msgspec.to_builtins(r), timeout_s=timeout_s, tag=r) for r in requests]
        check = None if should_run is None else (lambda t: should_run(t.tag))
        for out in self.pool.run(tasks, should_run=check):
            yield Finished.from_outcome(out.task.tag, out.fields())

    def close(self) -> None:
        self.pool.close()
