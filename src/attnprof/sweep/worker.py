"""The worker process of the local pool: `python -m attnprof.sweep.worker HANDLERS RFD WFD PPID`.

It imports HANDLERS (a module with a HANDLERS dict of name -> function, and optionally an
init(config) function) once, then answers requests read from the pipe RFD on the pipe WFD until
RFD closes. Reusing the process is the point: torch is imported once per worker, not once per job.

Its stdout and stderr both go to one pipe the parent reads, so a crash's last words reach the
store, and nothing a variant prints can corrupt the request/reply pipes.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any

from attnprof.sweep.protocol import read_frame, write_frame

INIT_ENV = "ATTNPROF_WORKER_INIT"


def _die_with_parent(ppid: int) -> None:
    """Ask Linux to SIGKILL us when the parent dies (e.g. `kill -9` of the sweep).

    Without it, a worker in the middle of a long job would keep the CPU (or GPU) busy after
    its sweep is gone; it would only notice when it next reads or writes a pipe.
    """
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
            pass
    if os.getppid() != ppid:  # the parent died before prctl took effect
        os._exit(0)


def main(argv: list[str]) -> int:
    handlers_module, rfd_s, wfd_s, ppid_s = argv
    rfd, wfd = int(rfd_s), int(wfd_s)
    _die_with_parent(int(ppid_s))
    # fork()ed grandchildren (rare, but multiprocessing does it) must not hold our pipes open,
    # or the parent could not see our death as EOF; exec()ed ones are covered by CLOEXEC
    os.set_inheritable(rfd, False)
    os.set_inheritable(wfd, False)
    mod = importlib.import_module(handlers_module)
    handlers: dict[str, Any] = mod.HANDLERS
    init = getattr(mod, "init", None)
    if init is not None:
        init(json.loads(os.environ.get(INIT_ENV, "{}") or "{}"))
    write_frame(wfd, {"kind": "ready", "pid": os.getpid()})
    while True:
        msg = read_frame(rfd)
        if msg is None:  # the parent closed the pipe: we are done
            return 0
        task_id = msg["id"]
        fn = handlers.get(msg["fn"])
        try:
            if fn is None:
                raise KeyError(f"worker has no handler {msg['fn']!r}; it has {sorted(handlers)}")
            value = fn(msg["payload"])
            reply = {"kind": "reply", "id": task_id, "ok": True, "value": value}
        except Exception:
            reply = {"kind": "reply", "id": task_id, "ok": False, "error": traceback.format_exc(limit=20)}
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            write_frame(wfd, reply)
        except BrokenPipeError:
            return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
