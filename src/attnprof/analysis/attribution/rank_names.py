"""The rank a trace file's name says (rank-3, rank_3, rank3: tensorboard_trace_handler's worker
names, vLLM's graph_capture_rank_N): read by the cross-rank view (ranks.py) where a trace has no
distributedInfo, and by the graph-capture pairing (replay.py `find_pair`)."""

from __future__ import annotations

import re

__all__ = ["rank_in_name"]

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def rank_in_name(name: str) -> str | None:
    """The rank a file name says, else None."""
    m = _RANK_IN_NAME.search(name)
    return m.group(1) if m else None
