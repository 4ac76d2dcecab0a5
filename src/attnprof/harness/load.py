"""Was the machine busy while we timed? Measured over the timing window itself.

Three signals, each recorded with its threshold in MachineLoad (docs/run.md, "Statistics"):

- other processes' CPU use: /proc/stat's busy time on the CPUs this process may run on, minus
  this process's own CPU time (getrusage), as a share of those CPUs' capacity over the window.
  A busy loop on every core shows up here within the window, unlike the load average.
- steal: the hypervisor's `steal` column of /proc/stat, as a share of the window.
- spread: the largest IQR / median among the timed variants.

The 1-minute load average is recorded too (it lags by tens of seconds and counts our own
threads, so it only flags a machine more than twice oversubscribed). Where /proc/stat cannot be
read (macOS, some sandboxes) those fields are None and only the spread decides.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

from attnprof.reasons import english, reason
from attnprof.records import MachineLoad

__all__ = ["OTHER_LOAD_LIMIT", "SPREAD_LIMIT", "STEAL_LIMIT", "LoadMeter"]

OTHER_LOAD_LIMIT = 0.25  # other processes used more than a quarter of our CPUs
STEAL_LIMIT = 0.05
SPREAD_LIMIT = 0.25  # IQR above a quarter of the median: the distribution is not one speed
LOADAVG_FACTOR = 2.0


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _proc_stat(cpus: set[int]) -> tuple[float, float, float] | None:
    """(busy, steal, total) jiffies summed over `cpus`, or None where /proc/stat is unreadable."""
    try:
        with open("/proc/stat") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    busy = steal = total = 0.0
    seen = False
    for line in lines:
        name, *rest = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        v = [float(x) for x in rest[:8]] + [0.0] * (8 - len(rest[:8]))
        user, nice, system, idle, iowait, irq, softirq, st = v
        busy += user + nice + system + irq + softirq
        steal += st
        total += user + nice + system + idle + iowait + irq + softirq + st
        seen = True
    return (busy, steal, total) if seen else None


def _own_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class LoadMeter:
    """start() before timing, stop(spread) after: the machine's load over that window."""

    _t0: float = 0.0
    _own0: float = 0.0
    _stat0: tuple[float, float, float] | None = None
    _cpus: frozenset[int] = frozenset()

    def start(self) -> LoadMeter:
        self._cpus = frozenset(_cpus())
        self._stat0 = _proc_stat(set(self._cpus))
        self._own0 = _own_cpu_s()
        self._t0 = time.perf_counter()
        return self

    def stop(self, spread: float | None) -> MachineLoad:
        wall = time.perf_counter() - self._t0
        own = _own_cpu_s() - self._own0
        stat1 = _proc_stat(set(self._cpus))
        n = max(1, len(self._cpus))
        other = steal = None
        if self._stat0 is not None and stat1 is not None:
            d_busy, d_steal, d_total = (b - a for a, b in zip(self._stat0, stat1, strict=True))
            if d_total > 0:
                hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
                busy_s = d_busy / hz
                capacity_s = d_total / hz
                other = max(0.0, (busy_s - own) / capacity_s)
                steal = d_steal / d_total
        try:
            loadavg: float | None = os.getloadavg()[0]
        except (AttributeError, OSError):
            loadavg = None
        codes = []  # as data (attnprof.reasons): a report says them in its language from the code
        if other is not None and other > OTHER_LOAD_LIMIT:
            codes.append(reason("load_other", share=other, n=n))
        if steal is not None and steal > STEAL_LIMIT:
            codes.append(reason("load_steal", share=steal))
        if spread is not None and spread > SPREAD_LIMIT:
            codes.append(reason("load_spread", share=spread))
        if loadavg is not None and loadavg > LOADAVG_FACTOR * n:
            codes.append(reason("load_loadavg", load=loadavg, n=n))
        return MachineLoad(
            wall_s=wall,
            cpus=n,
            own_cpu_share=own / (wall * n) if wall > 0 else 0.0,
            other_cpu_share=other,
            steal_share=steal,
            loadavg_1m=loadavg,
            max_spread=spread,
            unreliable=bool(codes),
            reasons=[english(c) for c in codes],
            reason_codes=codes,
        )
