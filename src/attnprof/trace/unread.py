"""The events the loader does not read, per category: how many, and how many are device work.

An event whose category the loader has no kind for is dropped (columns.py), so that no analysis
carries events none of them reads. Dropped silently, device work would vanish: a CUPTI
range-profiler trace (cuda_profiler_range: one complete event per kernel on the GPU's pid, the
kernel's name and metrics in it) holds no kernel event, and was called CPU-only. So every
dropped event is counted by category, phase, pid and whether it carries args "device"; which
pids are a device's is only known once the whole file is read: a pid that holds a kept device op
(kernel, memcpy, memset, another accelerator's device event, a GPU annotation), one a
process_labels metadata event labels as a device ("GPU 0": Kineto labels every device pid so),
or one whose own name says device ("CUDA functions": PyTorch 1.x's autograd export). An event is
device-side when it is complete ("X", work with a duration) on a device pid or with a device arg.
Metadata events are not counted: they describe the trace, they are not events of it.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import repeat
from operator import attrgetter, is_not

import numpy as np

from attnprof.trace.decode import Event
from attnprof.trace.limits import MAX_NAME
from attnprof.trace.model import Unread

__all__ = ["UnreadCounter", "device_named"]

# a pid label or a pid's own name that says device: Kineto's "GPU 0", other accelerators',
# PyTorch 1.x's "CUDA functions"
_DEVICE_NAME = re.compile(r"(?i)^\s*(gpu|cuda|mtia|xpu|npu|hpu|device)\b")
_PID = attrgetter("pid")
_ARGS = attrgetter("args")
_DEVICE = attrgetter("device")

Pid = int | str


def device_named(pid: object) -> bool:
    """Whether a pid written as a string names a device ("CUDA functions", "GPU 0")."""
    return isinstance(pid, str) and _DEVICE_NAME.search(pid) is not None


class UnreadCounter:
    """The dropped events of a load, counted as they are dropped (Builder.add), chunk by chunk."""

    def __init__(self) -> None:
        # (category, phase, pid, carries args "device") -> events
        self.counts: Counter[tuple[str, str, Pid, bool]] = Counter()
        self.labelled: set[Pid] = set()  # pids a process_labels event labels as a device

    def add(self, dropped: list[Event], pair_of: np.ndarray, pairs: list[tuple[str, str]]) -> None:
        """dropped: one chunk's dropped events; pair_of: each one's (category, phase) pair id, an
        index into pairs. The per-event work runs in C; only the distinct combinations (a few
        dozen) reach Python."""
        n = len(dropped)
        if not n:
            return
        keys = list(map(_PID, dropped))
        table = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        pid_ids = np.fromiter(map(table.__getitem__, keys), np.int64, n)
        has_dev = np.fromiter(map(is_not, map(_DEVICE, map(_ARGS, dropped)), repeat(None)), bool, n)
        combo = (pair_of.astype(np.int64) * len(table) + pid_ids) * 2 + has_dev
        found, counts = np.unique(combo, return_counts=True)
        pids = list(table)
        meta = False
        for key, count in zip(found.tolist(), counts.tolist(), strict=True):
            pair, pid = divmod(key >> 1, len(table))
            cat, ph = pairs[pair]
            if ph == "M":
                meta = True
                continue
            self.counts[(cat, ph, pids[pid], bool(key & 1))] += count
        if meta:
            for e in dropped:
                labels = e.args.labels
                is_label = e.ph == "M" and e.name == "process_labels" and isinstance(labels, str)
                if is_label and _DEVICE_NAME.search(labels):
                    self.labelled.add(e.pid)

    def extend(self, other: UnreadCounter) -> None:
        self.counts.update(other.counts)
        self.labelled |= other.labelled

    def finish(self, device_pids: set[Pid]) -> list[Unread]:
        """Per category, device-side work first; device_pids: the pids holding kept device ops."""
        device_pids = device_pids | self.labelled
        per: dict[str, list[int]] = {}
        for (cat, ph, pid, dev), n in self.counts.items():
            on_pid = pid in device_pids or device_named(pid)
            r = per.setdefault(cat[:MAX_NAME], [0, 0, 0, 0])
            r[0] += n
            r[1] += n if on_pid else 0
            r[2] += n if dev else 0
            r[3] += n if ph == "X" and (on_pid or dev) else 0
        out = [Unread(c, count, pid, arg, side) for c, (count, pid, arg, side) in per.items()]
        return sorted(out, key=lambda u: (-u.device_side, -u.count, u.category))
