"""Where in the user's Python a device op came from: the frame and the nn.Module around its
launching op, from the python_function events a trace recorded with ``with_stack=True``.

- **frame**: the innermost Python frame on the launching op's thread that holds the op's start
  and is the user's code: not PyTorch's own (``torch/``, ``site-packages/torch/``), not inductor's
  generated code (``torchinductor_``), not a builtin (``<built-in ...>``) or the standard
  library's wrappers (``<frozen ...>``, ``threading.py``, ``contextlib.py``);
- **module**: the innermost ``nn.Module: Name_N`` frame there.

A graph replay's kernel reads the frames of its captured op (imported with it from the capture
trace, attnprof.analysis.replay.replay). Null where the trace recorded no frames.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.links import innermost
from attnprof.trace.model import Kind, Trace, unique

__all__ = ["frames_of"]

_MODULE = re.compile(r"^nn\.Module: ")
_NOT_USER = re.compile(
    r"^<built-in|^<frozen|^<string>|(^|/)torch/|torchinductor_|(^|/)threading\.py|(^|/)contextlib\.py"
    r"|(^|/)runpy\.py|^nn\.Module: "
)


def frames_of(trace: Trace, anchors: npt.NDArray[np.int64]) -> tuple[list[str | None], list[str | None]]:
    """(user frame, module) per anchor row (a CPU op or launch; -1: none)."""
    n = anchors.size
    py = trace.rows(Kind.PYTHON)
    if not py.size or not n:
        return [None] * n, [None] * n
    names = trace.names
    ids = unique(trace.name[py])
    module_id = {int(i) for i in ids.tolist() if _MODULE.search(names[int(i)])}
    user_id = {int(i) for i in ids.tolist() if not _NOT_USER.search(names[int(i)])}
    ok = anchors >= 0
    out: list[list[str | None]] = []
    for wanted in (user_id, module_id):
        rows = py[np.isin(trace.name[py], list(wanted))] if wanted else py[:0]
        got = np.full(n, -1, np.int64)
        if rows.size and ok.any():
            got[ok] = innermost(trace, rows, anchors[ok])
        out.append([names[int(trace.name[r])] if r >= 0 else None for r in got.tolist()])
    return out[0], out[1]
