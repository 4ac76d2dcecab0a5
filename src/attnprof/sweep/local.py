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

__all__ = ["LocalExecutor"]


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
