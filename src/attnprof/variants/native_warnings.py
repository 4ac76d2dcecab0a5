"""PyTorch's C++ warnings that never become Python warnings, caught as text.

TORCH_WARN inside ATen becomes a Python warning only where the binding installs a
torch::PyWarningHandler (HANDLE_TH_ERRORS). The SDPA checks are bound as plain pybind lambdas
(torch/csrc/Module.cpp: `py_module.def("_can_use_flash_attention", [](const sdp::sdp_params&
params, bool debug) { return sdp::can_use_flash_attention(params, debug); })`), so with
debug=True the reasons of aten/src/ATen/native/transformers/cuda/sdp_utils.cpp go through c10's
default handler, which writes them to the process's stderr (file descriptor 2) as lines like

    [W1201 20:04:38.463544973 sdp_utils.cpp:617] Warning: Flash Attention does not support non-null attn_mask. (function check_for_attn_mask)

`warnings.catch_warnings` never sees them: they are caught here by pointing fd 2 at a temporary
file around the call, and parsed back into their messages; whatever else was written there meanwhile
goes on to the real stderr. A build (or a later binding) that does route them through a
PyWarningHandler raises them as Python UserWarnings instead, so `call_capturing` records Python
warnings too, and reports the messages of both, each once, in the order fd 2 then Python.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["call_capturing", "capture_native_warnings", "parse_warnings"]

T = TypeVar("T")

# "[W<MMDD> <time> [<thread>] <file>:<line>] Warning: <message> (function <name>)"; older
# builds print "[W <file>:<line>] ..."; the "(function ...)" tail and the "Warning: " prefix are
# c10's decoration, not the message
_LINE = re.compile(r"^\[W[^\]]*?(?P<source>[\w.+-]+\.(?:cpp|cu|h|cuh)):\d+\]\s*(?:Warning:\s*)?(?P<msg>.*)$")
_TAIL = re.compile(r"\s*\(function [^()]*\)\s*$")
_lock = threading.Lock()  # fd 2 is the process's: one capture at a time


def parse_warnings(text: str) -> tuple[list[tuple[str, str]], str]:
    """(source file, message) of each c10 warning in `text`, and the rest of the text. A line
    that follows a warning and is no warning itself continues its message (a multi-line
    TORCH_WARN) until the "(function ...)" tail closes it."""
    found: list[tuple[str, str]] = []
    rest: list[str] = []
    open_msg = False
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            msg = m.group("msg")
            open_msg = not _TAIL.search(msg)
            found.append((m.group("source"), _TAIL.sub("", msg).strip()))
        elif open_msg and found:
            open_msg = not _TAIL.search(line)
            src, msg = found[-1]
            found[-1] = (src, f"{msg} {_TAIL.sub('', line).strip()}".strip())
        else:
            rest.append(line)
    return [(s, m) for s, m in found if m], "\n".join(rest)


@contextmanager
def capture_native_warnings() -> Iterator[list[tuple[str, str]]]:
    """Collect the c10 warnings written to fd 2 inside the block: the yielded list is filled
    when the block ends. Output that is no warning is passed on to the real stderr."""
    found: list[tuple[str, str]] = []
    with _lock:
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield found
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                tmp.seek(0)
                text = tmp.read().decode("utf-8", "replace")
        warnings, rest = parse_warnings(text)
        found.extend(warnings)
        if rest.strip():
            os.write(2, (rest + "\n").encode())


def call_capturing(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, list[str]]:
    """fn(*args, **kwargs) and the messages of the warnings it gave: c10's lines on fd 2 and
    Python warnings alike, each message once (a reason sent both ways is one reason)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with capture_native_warnings() as found:
            value = fn(*args, **kwargs)
    msgs = [msg for _src, msg in found] + [str(w.message).strip() for w in caught]
    return value, list(dict.fromkeys(m for m in msgs if m))
