"""The handlers a local pool worker serves for a sweep (see attnprof.sweep.worker)."""

from __future__ import annotations

from typing import Any

import msgspec

from attnprof.sweep.jobs import JobRequest, execute, probe

__all__ = ["HANDLERS", "init"]


def init(config: dict[str, Any]) -> None:
    threads = int(config.get("threads") or 0)
    if threads > 0:
        # several CPU workers share the cores: without this each would start one thread per core
        # and they would time each other's oversubscription instead of the kernels
        import torch

        torch.set_num_threads(threads)
    if config.get("preload"):
        # pay torch's import and the harness's first-use costs before the first job's clock
        import attnprof.harness.run
        import attnprof.variants.registry  # noqa: F401


def _probe(payload: Any) -> Any:
    return msgspec.to_builtins(probe(str(payload)))


def _run(payload: Any) -> Any:
    reply = execute(msgspec.convert(payload, type=JobRequest))
    out = msgspec.to_builtins(reply)
    out["recycle"] = reply.recycle  # the pool reads this key to retire the worker
    return out


HANDLERS = {"probe": _probe, "run": _run}
