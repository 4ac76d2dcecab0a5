"""Shared pieces for the sweep tests: a worker handlers module with misbehaving jobs.

The pool tests run these in real worker processes: os.abort() and a real null-pointer read
through ctypes, not simulated failures.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any

_state: dict[str, Any] = {"init": None, "calls": 0}


def init(config: dict[str, Any]) -> None:
    _state["init"] = config


def echo(payload: Any) -> Any:
    _state["calls"] += 1
    return {"payload": payload, "pid": os.getpid(), "calls": _state["calls"], "init": _state["init"]}


def sleep(payload: Any) -> Any:
    time.sleep(float(payload))
    return {"slept": payload}


def abort(payload: Any) -> Any:
    print(f"about to abort: {payload}", flush=True)
    sys.stderr.write("last words on stderr\n")
    sys.stderr.flush()
    os.abort()


def segfault(payload: Any) -> Any:
    print("about to write to address 0", flush=True)
    ctypes.memset(0, 1, 8)  # a real SIGSEGV (ctypes guards reads of NULL, not memset)
    return None


def fail(payload: Any) -> Any:
    raise RuntimeError(f"handler failed on {payload}")


def recycle(payload: Any) -> Any:
    return {"recycle": True, "pid": os.getpid()}


def env(payload: Any) -> Any:
    return {k: os.environ.get(k) for k in payload}


def big(payload: Any) -> Any:
    return {"data": list(range(int(payload))), "pid": os.getpid()}


HANDLERS = {
    "echo": echo,
    "sleep": sleep,
    "abort": abort,
    "segfault": segfault,
    "fail": fail,
    "recycle": recycle,
    "env": env,
    "big": big,
}
