"""What an executor is: something that runs JobRequests somewhere and streams back what happened.

The sweep (attnprof.sweep.run) owns the store; an executor only runs jobs. Local processes
(attnprof.sweep.local) and Ray tasks (attnprof.sweep.ray_exec) implement the same protocol, so a
sweep grows from a laptop to a cluster by changing --executor, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import msgspec

from attnprof.records import Environment
from attnprof.sweep.jobs import JobReply, JobRequest

__all__ = ["Executor", "Finished", "ShouldRun"]

# asked just before a job is dispatched; False: another sweep on the store finished it meanwhile
ShouldRun = Callable[[JobRequest], bool]


@dataclass
class Finished:
    """One job's end, as the executor saw it.

    kind "ok": the job ran to a reply (whose result has the harness's own status, which may be
    error or oom). "crashed", "timeout", "error": no reply; message says why. "not_run": declined
    by should_run (a concurrent sweep finished it first, or holds its lease).
    """

    request: JobRequest
    kind: Literal["ok", "crashed", "timeout", "error", "not_run"]
    reply: JobReply | None = None
    message: str = ""
    log_tail: str = ""
    worker: str = ""
    wall_s: float = 0.0
    started: float = 0.0
    finished: float = 0.0

    @classmethod
    def from_outcome(cls, request: JobRequest, out: Mapping[str, Any]) -> Finished:
        """The end of a job that a worker pool ran: out holds a pool TaskOutcome's fields (see
        TaskOutcome.fields), where an "ok" outcome's value is the JobReply as plain data."""
        kind = out["kind"]
        return cls(
            request=request,
            kind=kind,
            reply=msgspec.convert(out["value"], type=JobReply) if kind == "ok" else None,
            message=out["message"],
            log_tail=out["log_tail"],
            worker=out["worker"],
            wall_s=out["wall_s"],
            started=out["started"],
            finished=out["finished"],
        )


class Executor(Protocol):
    name: str
    device: str  # the grid's device with "auto" resolved (cpu, cuda or cuda:N)

    def probe(self, device: str) -> Environment:
        """The environment jobs on `device` run in, as a worker sees it (for the job keys)."""
        ...

    def run(
        self, requests: Sequence[JobRequest], *, timeout_s: float | None, should_run: ShouldRun | None = None
    ) -> Iterator[Finished]:
        """Run the requests; yield each one's end as it happens, in completion order."""
        ...

    def close(self) -> None: ...
