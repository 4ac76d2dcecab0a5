"""The Ray executor: each job is a Ray task; results stream back to the driver, which stores them.

Ray schedules: a task asks for num_cpus (and num_gpus=1 on a GPU sweep, so Ray pins one GPU per
task through CUDA_VISIBLE_DEVICES, which the job's process is started with: _pool). Inside the task, the job does not run in the Ray worker
itself but in a local pool of one attnprof worker process that the Ray worker keeps between tasks
(Ray reuses its workers, so torch is still imported once per Ray worker, not once per job). Why
the extra process: a job that segfaults or aborts then kills only that process, and the task
returns "crashed" with the job's stderr tail, exactly as the local executor records it, instead
of Ray's generic "worker died unexpectedly". The per-job timeout is enforced there too. If the
Ray worker itself dies (node lost, OOM killer), Ray's error is recorded as the crash reason.

`ray` is the `ray` extra, imported only when this executor is used. Without --ray-address a local
Ray instance is started with the CPUs (and GPUs) of this machine, on its loopback address
(attnprof.ray_start), and shut down at the end.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from attnprof.errors import UserError
from attnprof.ray_start import ray_started
from attnprof.records import Environment
from attnprof.sweep.executor import Finished, ShouldRun
from attnprof.sweep.jobs import JobRequest

__all__ = ["RayExecutor"]

# a Ray task gets this much longer than the job's own timeout (enforced inside the task) before
# the driver cancels it: room for the task's own start-up (spawning the job process, importing torch)
GRACE_S = 120.0

_POOL: Any = None  # the attnprof worker pool of this Ray worker process, kept between tasks
_POOL_GPUS: str | None = None  # the CUDA_VISIBLE_DEVICES that pool's worker was started with
HANDLERS = "attnprof.sweep.handlers"
VISIBLE = "CUDA_VISIBLE_DEVICES"


def _pool(handlers: str | None = None) -> Any:
    """This Ray worker's attnprof worker, started with the GPUs Ray gave the current task. Ray
    reuses its worker processes and sets CUDA_VISIBLE_DEVICES for each GPU task anew, but a
    child keeps the environment it was started with: a pool started for an earlier task on GPU
    0 would run this task's job on GPU 0 while Ray has given it GPU 1 (and another task GPU 0).
    So the pool is replaced whenever the task's visible GPUs differ from its own."""
    global _POOL, _POOL_GPUS
    visible = os.environ.get(VISIBLE)
    if _POOL is not None and visible != _POOL_GPUS:
        _POOL.close()
        _POOL = None
    if _POOL is None:
        from attnprof.sweep.pool import WorkerPool

        def env_for(slot: int) -> dict[str, str]:
            return {VISIBLE: visible} if visible is not None else {}

        _POOL = WorkerPool(handlers or HANDLERS, 1, init={"preload": True}, env_for=env_for)
        _POOL_GPUS = visible
    return _POOL


def _where() -> str:
    try:
        import ray

        return f"ray:{ray.util.get_node_ip_address()}"
    except Exception:  # pragma: no cover
        return "ray"


def ray_job(payload: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
    """The body of one Ray task: run one job in this Ray worker's own attnprof worker."""
    from attnprof.sweep.pool import Task

    outs = list(_pool().run([Task(fn="run", payload=payload, timeout_s=timeout_s)]))
    assert len(outs) == 1
    out = outs[0]
    return out.fields() | {"worker": f"{_where()}/{out.worker}"}


def ray_probe(device: str) -> dict[str, Any]:
    value: dict[str, Any] = _pool().call("probe", device, timeout_s=600)
    return value


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        device: str = "cpu",
        num_cpus: float = 1.0,
        max_in_flight: int | None = None,
    ) -> None:
        ray, self._owns = ray_started(address)
        self._ray = ray
        if device == "auto":
            device = "cuda" if ray.cluster_resources().get("GPU") else "cpu"
        self.device = device
        gpus = 1 if device.startswith("cuda") else 0
        if gpus and not ray.cluster_resources().get("GPU"):
            raise UserError("--device cuda with --executor ray, but the Ray cluster has no GPU resources")
        opts = {"num_cpus": num_cpus, "num_gpus": gpus, "max_retries": 0}
        self._task = ray.remote(ray_job).options(**opts)
        self._probe = ray.remote(ray_probe).options(**opts)
        if max_in_flight is None:
            res = ray.cluster_resources()
            slots = res.get("GPU", 0) if gpus else res.get("CPU", 1) / max(num_cpus, 1e-9)
            max_in_flight = max(1, int(slots))
        # no more tasks in flight than can run at once: a task's clock (for the timeout guard)
        # then starts when it starts, not while it queues
        self.max_in_flight = max_in_flight

    def probe(self, device: str) -> Environment:
        value = self._ray.get(self._probe.remote(device), timeout=900)
        return msgspec.convert(value, type=Environment)

    def run(
        self, requests: Sequence[JobRequest], *, timeout_s: float | None, should_run: ShouldRun | None = None
    ) -> Iterator[Finished]:
        ray = self._ray
        pending: deque[JobRequest] = deque(requests)
        inflight: dict[Any, tuple[JobRequest, float, float]] = {}
        try:
            while pending or inflight:
                while pending and len(inflight) < self.max_in_flight:
                    req = pending.popleft()
                    if should_run is not None and not should_run(req):
                        yield Finished(request=req, kind="not_run")
                        continue
                    ref = self._task.remote(msgspec.to_builtins(req), timeout_s)
                    inflight[ref] = (req, time.monotonic(), time.time())
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
                for ref in ready:
                    req, t0, wall0 = inflight.pop(ref)
                    yield self._collect(ref, req, t0, wall0)
                if timeout_s:
                    now = time.monotonic()
                    for ref, (req, t0, wall0) in list(inflight.items()):
                        if now - t0 > timeout_s + GRACE_S:
                            ray.cancel(ref, force=True)
                            inflight.pop(ref)
                            yield Finished(
                                request=req,
                                kind="timeout",
                                message=f"Ray task ran longer than the {timeout_s:g} s timeout (+{GRACE_S:g} s grace); cancelled",
                                worker="ray",
                                wall_s=now - t0,
                                started=wall0,
                                finished=time.time(),
                            )
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)

    def _collect(self, ref: Any, req: JobRequest, t0: float, wall0: float) -> Finished:
        ray = self._ray
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as exc:
            # the Ray worker itself died or the task failed outside our code
            text = str(exc).strip().splitlines()
            return Finished(
                request=req,
                kind="crashed"
                if isinstance(exc, ray.exceptions.WorkerCrashedError | ray.exceptions.NodeDiedError)
                else "error",
                message=f"{type(exc).__name__}: {text[0] if text else ''}",
                log_tail="\n".join(text[-30:]),
                worker="ray",
                wall_s=time.monotonic() - t0,
                started=wall0,
                finished=time.time(),
            )
        return Finished.from_outcome(req, out)

    def close(self) -> None:
        if self._owns:
            self._ray.shutdown()
