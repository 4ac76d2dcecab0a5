"""Clean timing, without the profiler (DOMAIN.md section 7).

CPU: time.perf_counter around each call after a warm-up by time; when one call is shorter than
1 ms, each sample is the mean of enough back-to-back calls to last 1 ms. GPU: CUDA events around
each call, with the L2 cache flushed (a 256 MB buffer zeroed) before every call so that no call
finds its inputs in cache from the previous one. Both report the median and the interquartile
range of the samples, the number of samples and the thread count, keep the raw samples, and flag
the measurement as noisy when IQR / median exceeds 10%.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from attnprof.harness.allocator import WARM_PREFIX, cold_allocator, release_free_memory, warm_allocator
from attnprof.harness.load import LoadMeter
from attnprof.records import ColdTiming, TimingSummary

__all__ = ["NOISE_THRESHOLD", "Scoped", "summarize", "time_call", "time_interleaved"]

NOISE_THRESHOLD = 0.10

# the cold state's share of the timing budget, and its least sample count: enough for the
# interval that decides whether the two states differ beyond noise (compare's COLD_ALLOCATOR)
COLD_SHARE = 0.25
COLD_MIN_SAMPLES = 8
# the buffer zeroed between CUDA samples to flush L2 (larger than any GPU's L2: H100's is 50 MB);
# the memory gate counts it
L2_FLUSH_BYTES = 256 * 1024 * 1024


def summarize(samples_ms: list[float], *, threads: int, method: str) -> TimingSummary:
    s = sorted(samples_ms)
    n = len(s)
    if n >= 4:
        q = statistics.quantiles(s, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = (s[-1] - s[0]) if n > 1 else 0.0
    med = statistics.median(s)
    return TimingSummary(
        median_ms=med,
        iqr_ms=iqr,
        mean_ms=statistics.fmean(s),
        min_ms=s[0],
        n=n,
        threads=threads,
        method=method,
        noisy=med > 0 and iqr / med > NOISE_THRESHOLD,
        samples_ms=samples_ms,
    )


def time_call(
    call: Callable[[], Any],
    *,
    device: str,
    budget_s: float = 1.0,
    min_samples: int = 10,
    max_samples: int = 500,
    warmup_s: float = 0.1,
) -> TimingSummary:
    """Median/IQR of one forward call, measured for about `budget_s` seconds (at least
    `min_samples`, at most `max_samples` samples) after `warmup_s` seconds of warm-up."""
    summaries = time_interleaved(
        {"call": call},
        device=device,
        budget_s=budget_s,
        min_samples=min_samples,
        max_samples=max_samples,
        warmup_s=warmup_s,
    )
    return summaries["call"]


def _ignore_arg(call: Callable[[], Any]) -> Callable[[Any], Any]:
    return lambda _arg: call()


# a call, or a (setup, call) pair: the setup's result is the call's argument, off the clock
Plain = Callable[[], Any] | tuple[Callable[[], Any], Callable[[Any], Any]]


@dataclass(frozen=True)
class Scoped:
    """A timed call that must run inside a context (an SDPA backend pinned with sdpa_kernel): the
    context is entered around each sample, outside the clock, as a user pins a backend around a
    model's step and not around each attention call (entering sdpa_kernel costs ~8 us of Python
    a call on CPU: 10% of a small shape's call, between two variants running the same kernel)."""

    timed: Plain
    scope: Callable[[], AbstractContextManager[Any]]


Timed = Plain | Scoped


def time_interleaved(
    calls: dict[str, Timed],
    *,
    device: str,
    budget_s: float,
    min_samples: int = 10,
    max_samples: int = 500,
    warmup_s: float = 0.05,
    cold_share: float = COLD_SHARE,
) -> dict[str, TimingSummary]:
    """Time several calls in rounds, one sample of each per round (rotating the order), for
    about `budget_s` seconds in all. On a shared machine a burst of background load then lands
    on every variant alike, so their ratios hold even when absolute times wander. Samples are
    taken as in time_call: perf_counter batches of >= 1 ms on CPU, CUDA events with an L2
    flush on GPU. A (setup, call) pair times call(setup()) with setup outside the clock (the
    backward after its forward); the L2 flush then comes after the setup.

    On CPU with glibc, the samples are taken in the warm allocator state, and a further
    `cold_share` of the budget in the cold one (harness/allocator.py), recorded as `cold`: the
    two differ where allocation and page faults, not arithmetic, are part of a variant's time."""
    import torch

    labels = list(calls)
    allocator = warm_allocator()  # one deliberate allocator state for every timing (allocator.py)
    cuda = device.startswith("cuda")
    setups: dict[str, Callable[[], Any] | None] = {}
    plain: dict[str, Callable[[Any], Any]] = {}
    scopes: dict[str, Callable[[], AbstractContextManager[Any]]] = {}
    for label, c in calls.items():
        if isinstance(c, Scoped):
            scopes[label], c = c.scope, c.timed
        if isinstance(c, tuple):
            setups[label], plain[label] = c
        else:
            setups[label], plain[label] = None, _ignore_arg(c)
    inner: dict[str, int] = {}
    for label in labels:  # warm-up, and the batch size that makes a CPU sample last >= 1 ms
        with scopes.get(label, nullcontext)():
            t_end = time.perf_counter() + warmup_s
            n, t0 = 0, time.perf_counter()
            while True:
                setup = setups[label]
                plain[label](setup() if setup else None)
                n += 1
                # two calls give the batch size; one call of a second or more already tells it (k = 1)
                if time.perf_counter() >= t_end and (n >= 2 or time.perf_counter() - t0 > 1.0):
                    break
        if cuda:
            torch.cuda.synchronize(device)
        per_call = (time.perf_counter() - t0) / n
        inner[label] = 1 if cuda or per_call <= 0 else max(1, int(1e-3 / per_call))
    rounds = _Rounds(labels, plain, setups, inner, device=device, scopes=scopes)
    meter = LoadMeter().start()
    rounds.take(budget_s=budget_s, min_samples=min_samples, max_samples=max_samples)
    method = "cuda events, L2 flushed between calls" if cuda else "perf_counter"
    if len(labels) > 1:
        method += ", interleaved"
    threads = torch.get_num_threads()
    out = {label: summarize(s, threads=threads, method=method) for label, s in rounds.samples.items()}
    spread = max((s.iqr_ms / s.median_ms for s in out.values() if s.median_ms > 0), default=None)
    for label, s in out.items():
        s.rounds_paired = len(labels) > 1
        s.allocator = allocator
        s.minor_faults_per_call = rounds.faults_per_call(label)
    cold_state = (
        cold_allocator() if not cuda and allocator.startswith(WARM_PREFIX) and cold_share > 0 else None
    )
    if cold_state is not None:
        try:
            cold = _Rounds(labels, plain, setups, inner, device=device, scopes=scopes)
            cold.take(
                budget_s=budget_s * cold_share,
                min_samples=COLD_MIN_SAMPLES,
                max_samples=max_samples,
                before_sample=release_free_memory,
            )
        finally:
            warm_allocator()
        for label, s in out.items():
            samples = cold.samples[label]
            cs = summarize(samples, threads=threads, method=method)
            s.cold = ColdTiming(
                allocator=cold_state,
                median_ms=cs.median_ms,
                iqr_ms=cs.iqr_ms,
                n=cs.n,
                samples_ms=samples,
                minor_faults_per_call=cold.faults_per_call(label),
            )
    load = meter.stop(spread)  # over both states: a burst in either makes their comparison moot
    for s in out.values():
        s.load = load
    return out


class _Rounds:
    """Interleaved rounds over prepared calls: samples (ms per call) and minor page faults."""

    def __init__(
        self,
        labels: list[str],
        plain: dict[str, Callable[[Any], Any]],
        setups: dict[str, Callable[[], Any] | None],
        inner: dict[str, int],
        *,
        device: str,
        scopes: dict[str, Callable[[], AbstractContextManager[Any]]] | None = None,
    ) -> None:
        self.labels, self.plain, self.setups, self.inner, self.device = labels, plain, setups, inner, device
        self.scopes = scopes or {}
        self.samples: dict[str, list[float]] = {label: [] for label in labels}
        self.faults: dict[str, int] = dict.fromkeys(labels, 0)
        self.ncalls: dict[str, int] = dict.fromkeys(labels, 0)

    def faults_per_call(self, label: str) -> float | None:
        return self.faults[label] / self.ncalls[label] if self.ncalls[label] else None

    def take(
        self,
        *,
        budget_s: float,
        min_samples: int,
        max_samples: int,
        before_sample: Callable[[], None] | None = None,
    ) -> None:
        import torch

        cuda = self.device.startswith("cuda")
        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=self.device) if cuda else None
        stream = torch.cuda.current_stream(torch.device(self.device)) if cuda else None
        labels, samples = self.labels, self.samples
        deadline = time.perf_counter() + budget_s
        rnd = 0
        while True:
            done = min(len(v) for v in samples.values())
            if done >= max_samples or (done >= min_samples and time.perf_counter() >= deadline):
                break
            order = labels[rnd % len(labels) :] + labels[: rnd % len(labels)]
            rnd += 1
            for label in order:
                with self.scopes.get(label, nullcontext)():  # outside the clock
                    self._sample(label, flush, stream, before_sample)

    def _sample(
        self,
        label: str,
        flush: Any,
        stream: Any,
        before_sample: Callable[[], None] | None,
    ) -> None:
        """One sample of `label`: its k calls on CPU, one call between CUDA events on GPU."""
        import torch

        samples = self.samples
        call, setup, k = self.plain[label], self.setups[label], self.inner[label]
        if flush is not None:
            arg = setup() if setup else None
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # on the run's device's stream, not the current device's (cuda:0 unless set)
            start.record(stream)
            call(arg)
            end.record(stream)
            end.synchronize()
            samples[label].append(start.elapsed_time(end))
            return
        if before_sample is not None:
            before_sample()
        # page faults of these k calls (and their setup, if any), read outside the timed span
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        if setup is None:
            t0 = time.perf_counter()
            for _ in range(k):
                call(None)
            samples[label].append((time.perf_counter() - t0) * 1e3 / k)
        else:
            spent = 0.0
            for _ in range(k):
                arg = setup()
                t0 = time.perf_counter()
                call(arg)
                spent += time.perf_counter() - t0
            samples[label].append(spent * 1e3 / k)
        self.faults[label] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        self.ncalls[label] += k
