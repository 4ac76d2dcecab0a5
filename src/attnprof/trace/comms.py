"""What the loader keeps of collectives' recorded args (Trace.comms).

c10d's record_param_comms records a collective's process group, sequence number ("Seq", recent
PyTorch), kind, sizes and element type as its args, and Kineto copies them onto the collective's
kernel. They are kept for those two kinds of rows only, and only where one of the identifying
args is there; each field only with the type PyTorch writes (the keys are common words, and
another event may carry "dtype" meaning anything). attnprof.analysis.ranks.collectives aligns and
sizes the collectives from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnprof.trace.decode import Args
from attnprof.trace.limits import MAX_NAME
from attnprof.trace.model import CommArgs, Kind

_CPU_OP = int(Kind.CPU_OP)  # a plain int for numpy comparisons (inputs.py says why)

__all__ = ["PARAM_COMMS", "Comms", "comm_args"]

PARAM_COMMS = "record_param_comms"  # c10d's record function that carries a collective's args
_INT64 = (-(2**63), 2**63 - 1)


def _text(v: Any) -> str | None:
    return v[:MAX_NAME] if isinstance(v, str) and v else None


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _INT64[1] else None


def comm_args(a: Args) -> CommArgs | None:
    """The collective's args an event carries; None when it names no collective."""
    if a.coll_name is None and a.pg_name is None and a.comm_seq is None:
        return None
    group = str(a.pg_name) if _count(a.pg_name) is not None else _text(a.pg_name)
    return CommArgs(
        kind=_text(a.coll_name),
        group=group,
        group_desc=_text(a.pg_desc),
        group_ranks=_text(a.pg_ranks),
        group_size=_count(a.group_size),
        seq=_count(a.comm_seq),
        in_nelems=_count(a.in_nelems),
        out_nelems=_count(a.out_nelems),
        dtype=_text(a.comm_dtype),
    )


class Comms:
    """Collectives' args by row, accumulated chunk by chunk (rows are the trace's)."""

    def __init__(self) -> None:
        self.rows: dict[int, CommArgs] = {}

    def add(
        self,
        args: list[Args],
        kind: np.ndarray,
        name_col: np.ndarray,
        names: dict[str, int],
        krows: np.ndarray,
        kargs: list[Args],
        offset: int,
    ) -> None:
        """Take one chunk's: its kernels (krows, kargs) and its record_param_comms cpu ops."""
        for r, a in zip(krows.tolist(), kargs, strict=True):
            if a.coll_name is not None or a.pg_name is not None or a.comm_seq is not None:
                meta = comm_args(a)
                if meta is not None:
                    self.rows[r + offset] = meta
        pc = names.get(PARAM_COMMS)
        if pc is not None:
            for r in np.flatnonzero((name_col == pc) & (kind == _CPU_OP)).tolist():
                meta = comm_args(args[r])
                if meta is not None:
                    self.rows[r + offset] = meta

    def extend(self, other: Comms, offset: int) -> None:
        self.rows.update({r + offset: v for r, v in other.rows.items()})
