"""A pool of reused worker processes with crash detection, replacement and per-task timeouts.

Why processes that are reused: importing torch and starting the profiler cost seconds, a job at a
small shape milliseconds; a process per job would spend its time starting up. Why processes at
all: a variant that segfaults, aborts, or is killed by the OOM killer must take down only itself.

How a death is seen: each worker writes replies on a pipe whose only write end it holds, so its
death is end-of-file on that pipe; the process is also polled, in case a fork()ed grandchild keeps
the pipe open. The worker's stdout and stderr go to a pipe that the pool drains all the time
(a full pipe would block the worker), keeping the last few KiB for the crash report.

A task that outlives its timeout has its worker SIGKILLed (a hung kernel does not answer a polite
signal); the slot gets a fresh worker. All of this runs in the caller's thread with one selector:
no threads, so the caller can write to SQLite from the generator's loop body.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from attnprof.errors import AttnprofError
from attnprof.sweep.protocol import read_frame, write_frame
from attnprof.sweep.worker import INIT_ENV

__all__ = ["Task", "TaskOutcome", "WorkerPool", "WorkerStartError", "describe_exit"]

TAIL_BYTES = 8192
TAIL_LINES = 30
POLL_S = 0.2


class WorkerStartError(AttnprofError):
    """Workers die before they can take a task: the environment, not a job, is broken."""


@dataclass
class Task:
    fn: str
    payload: Any
    timeout_s: float | None = None
    tag: Any = None  # the caller's own object, handed back in the outcome
    id: int = -1


Kind = Literal["ok", "error", "crashed", "timeout", "not_run"]


@dataclass
class TaskOutcome:
    task: Task
    kind: Kind
    value: Any = None
    message: str = ""  # traceback (error) or how the worker died (crashed, timeout)
    log_tail: str = ""  # the worker's last output lines (crashed, timeout)
    worker: str = ""
    wall_s: float = 0.0
    started: float = 0.0  # time.time() when dispatched
    finished: float = 0.0

    def fields(self) -> dict[str, Any]:
        """Everything but the task, as plain data (what a Ray task hands back to the driver)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "task"}


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker closed its pipe but is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = {
            "SIGKILL": " (the kernel's OOM killer does this when memory runs out)",
            "SIGSEGV": " (a segmentation fault: a null or wild pointer in native code)",
            "SIGABRT": " (abort(): a failed assertion or an uncaught C++ exception)",
            "SIGBUS": " (a bus error: bad memory access, or /dev/shm full)",
        }.get(name, "")
        return f"worker died from {name}{hint}"
    return f"worker exited with code {returncode}"


@dataclass
class _Worker:
    slot: int
    proc: subprocess.Popen[bytes]
    req_fd: int  # we write requests here
    rep_fd: int  # we read replies here
    out_fd: int  # the worker's stdout+stderr
    ready: bool = False
    task: Task | None = None
    started_mono: float = 0.0
    started_wall: float = 0.0
    tail: bytearray = field(default_factory=bytearray)
    tasks_done: int = 0

    @property
    def name(self) -> str:
        return f"local#{self.slot}/pid{self.proc.pid}"

    def tail_text(self) -> str:
        text = self.tail.decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-TAIL_LINES:])

    def outcome(
        self, task: Task, kind: Kind, *, message: str = "", value: Any = None, log_tail: str | None = None
    ) -> TaskOutcome:
        """How `task` ended on this worker, now; log_tail defaults to the worker's output tail."""
        return TaskOutcome(
            task=task,
            kind=kind,
            value=value,
            message=message,
            log_tail=self.tail_text() if log_tail is None else log_tail,
            worker=self.name,
            wall_s=time.monotonic() - self.started_mono,
            started=self.started_wall,
            finished=time.time(),
        )


class WorkerPool:
    """`size` worker processes running `python -m attnprof.sweep.worker <handlers>`.

    handlers: a module with HANDLERS (name -> function of one JSON-able payload) and optionally
    init(config). env_for(slot) gives each slot's extra environment (CUDA_VISIBLE_DEVICES for one
    worker per GPU). Workers start lazily, on the first task.
    """

    def __init__(
        self,
        handlers: str,
        size: int = 1,
        *,
        init: Mapping[str, Any] | None = None,
        env_for: Callable[[int], Mapping[str, str]] | None = None,
        max_start_failures: int = 3,
    ) -> None:
        if size < 1:
            raise ValueError("pool size must be >= 1")
        self.handlers = handlers
        self.size = size
        self.init = dict(init or {})
        self.env_for = env_for
        self.max_start_failures = max_start_failures
        self._sel = selectors.DefaultSelector()
        self._workers: dict[int, _Worker] = {}
        self._next_id = 0
        self._start_failures = 0
        self.spawned = 0

    # -- worker life cycle --------------------------------------------------------------------
    def _spawn(self, slot: int) -> _Worker:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = dict(os.environ)
        env[INIT_ENV] = json.dumps(self.init)
        env.setdefault(
            "PYTHONUNBUFFERED", "1"
        )  # so a crash's last prints are in the pipe, not lost in a buffer
        if self.env_for is not None:
            env.update(self.env_for(slot))
        cmd = [
            sys.executable,
            "-m",
            "attnprof.sweep.worker",
            self.handlers,
            str(req_r),
            str(rep_w),
            str(os.getpid()),
        ]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(req_r, rep_w),
            env=env,
        )
        # the worker's ends: close ours so its death reads as EOF
        os.close(req_r)
        os.close(rep_w)
        assert proc.stdout is not None
        out_fd = proc.stdout.fileno()
        os.set_blocking(out_fd, False)
        w = _Worker(slot=slot, proc=proc, req_fd=req_w, rep_fd=rep_r, out_fd=out_fd)
        self._sel.register(rep_r, selectors.EVENT_READ, ("rep", w))
        self._sel.register(out_fd, selectors.EVENT_READ, ("out", w))
        self._workers[slot] = w
        self.spawned += 1
        return w

    def _drain(self, w: _Worker) -> bool:
        """Move what the worker printed into its tail; False at end-of-file."""
        while True:
            try:
                chunk = os.read(w.out_fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            w.tail += chunk
            if len(w.tail) > TAIL_BYTES:
                del w.tail[: len(w.tail) - TAIL_BYTES]

    def _retire(self, w: _Worker, *, kill: bool) -> None:
        for fd in (w.rep_fd, w.out_fd):
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)
        if kill and w.proc.poll() is None:
            w.proc.kill()
        with contextlib.suppress(OSError):
            os.close(w.req_fd)
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()
        self._drain(w)
        os.close(w.rep_fd)
        assert w.proc.stdout is not None
        w.proc.stdout.close()
        self._workers.pop(w.slot, None)

    def close(self) -> None:
        """Stop every worker: close their request pipes (they exit), then kill stragglers."""
        for w in list(self._workers.values()):
            try:
                os.close(w.req_fd)
                w.req_fd = os.open(os.devnull, os.O_WRONLY)  # keep _retire's close harmless
            except OSError:
                pass
        deadline = time.monotonic() + 3
        for w in list(self._workers.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            self._retire(w, kill=True)
        self._sel.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running tasks ------------------------------------------------------------------------
    def run(
        self,
        tasks: Iterable[Task],
        *,
        should_run: Callable[[Task], bool] | None = None,
    ) -> Iterator[TaskOutcome]:
        """Run tasks on the pool; yield each outcome as it arrives (in completion order).

        should_run is asked just before a task is dispatched (a concurrent sweep may have done it
        meanwhile); a task it declines is yielded with kind "not_run".
        """
        pending: deque[Task] = deque()
        for t in tasks:
            t.id = self._next_id
            self._next_id += 1
            pending.append(t)
        for slot in range(min(self.size, len(pending))):
            if slot not in self._workers:
                self._spawn(slot)
        while pending or any(w.task is not None for w in self._workers.values()):
            # dispatch to every ready, idle worker
            for w in list(self._workers.values()):
                while w.ready and w.task is None and pending:
                    t = pending.popleft()
                    if should_run is not None and not should_run(t):
                        yield TaskOutcome(task=t, kind="not_run")
                        continue
                    w.task = t
                    w.started_mono = time.monotonic()
                    w.started_wall = time.time()
                    w.tail.clear()
                    # a worker that died meanwhile fails this write; the EOF on its reply pipe
                    # then reports the crash with this task as its job
                    with contextlib.suppress(OSError):
                        write_frame(w.req_fd, {"id": t.id, "fn": t.fn, "payload": t.payload})
            # a slot without a worker (retired after a crash) gets a fresh one while work remains
            if pending:
                for slot in range(self.size):
                    if slot not in self._workers:
                        self._spawn(slot)
            yield from self._wait_once(pending)

    def _wait_once(self, pending: deque[Task]) -> Iterator[TaskOutcome]:
        now = time.monotonic()
        timeout = POLL_S
        for w in self._workers.values():
            if w.task is not None and w.task.timeout_s is not None:
                timeout = min(timeout, max(0.0, w.started_mono + w.task.timeout_s - now))
        for key, _ in self._sel.select(timeout):
            kind, w = key.data
            if w.slot not in self._workers or self._workers[w.slot] is not w:
                continue  # retired earlier in this round
            if kind == "out":
                if not self._drain(w):
                    self._sel.unregister(w.out_fd)
                continue
            msg = read_frame(w.rep_fd)
            if msg is None:
                yield from self._on_death(w, pending)
            elif msg.get("kind") == "ready":
                w.ready = True
                self._start_failures = 0
            elif w.task is not None and msg.get("id") == w.task.id:
                yield self._finish(w, msg)
        # deaths that EOF did not show (a grandchild holding the pipe) and timeouts
        now = time.monotonic()
        for w in list(self._workers.values()):
            if w.proc.poll() is not None:
                yield from self._on_death(w, pending)
            elif (
                w.task is not None
                and w.task.timeout_s is not None
                and now - w.started_mono >= w.task.timeout_s
            ):
                t = w.task
                w.task = None
                self._retire(w, kill=True)
                yield w.outcome(
                    t, "timeout", message=f"job ran longer than its {t.timeout_s:g} s timeout; worker killed"
                )

    def _finish(self, w: _Worker, msg: dict[str, Any]) -> TaskOutcome:
        t = w.task
        assert t is not None
        w.task = None
        w.tasks_done += 1
        self._drain(w)
        ok = bool(msg.get("ok"))
        out = w.outcome(
            t,
            "ok" if ok else "error",
            value=msg.get("value"),
            message=msg.get("error", ""),
            log_tail="" if ok else None,
        )
        if isinstance(out.value, dict) and out.value.get("recycle"):
            # the handler says this process is no longer trustworthy (e.g. after a CUDA error
            # the context is poisoned): retire it cleanly; the slot gets a fresh one
            self._retire(w, kill=False)
        return out

    def _on_death(self, w: _Worker, pending: deque[Task]) -> Iterator[TaskOutcome]:
        if self._workers.get(w.slot) is not w:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.proc.wait(timeout=5)
        rc = w.proc.poll()
        t = w.task
        was_ready = w.ready
        self._retire(w, kill=True)
        how = describe_exit(rc)
        if t is None:
            if not was_ready:
                self._start_failures += 1
                if self._start_failures >= self.max_start_failures:
                    raise WorkerStartError(
                        f"sweep workers die on start-up ({how}); last output: "
                        + (w.tail_text().strip().splitlines() or ["(none)"])[-1]
                    )
            return
        yield w.outcome(t, "crashed", message=how)

    def call(self, fn: str, payload: Any, *, timeout_s: float | None = None) -> Any:
        """Run one task and return its value; raise AttnprofError if it failed."""
        for out in self.run([Task(fn=fn, payload=payload, timeout_s=timeout_s)]):
            if out.kind == "ok":
                return out.value
            detail = out.message.strip().splitlines()[-1:] or [out.kind]
            raise AttnprofError(f"worker task {fn} failed ({out.kind}): {detail[0]}")
        raise AttnprofError(f"worker task {fn} returned nothing")  # pragma: no cover
