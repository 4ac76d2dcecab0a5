"""attnprof's clean timing against another timer (Triton's do_bench on CUDA), measured alike.

`attnprof run` times a variant in rotation with the others (harness/timing.py): one sample of
each per round, the L2 cache flushed (a 256 MiB buffer zeroed) before every CUDA call, CUDA
events on the device's current stream and a sync after each call. Triton's do_bench times one
callable in a dedicated loop: a 256 MB buffer zeroed before every call, events on the current
stream, one sync at the end. Two figures taken minutes apart (run.json's median, then do_bench)
differ by the method *and* by the GPU's drift in between (clocks, temperature, other work), and
cannot say which.

`cross_check` times the same call with both timers in interleaved rounds: round i gives each
timer `round_s` seconds, the order alternating (A B, B A, ...), on the same stream, each call
after a flush larger than L2 and outside the events. Drift then lands on both alike, and each
round gives one ratio of the two timers' medians. The result is the ratio of medians with its
95% bootstrap interval over the rounds (paired by round: analysis/stats.py), and the bound it
can hold: the interval's half-width, the smallest difference between the two timers this
comparison tells apart from none. What remains inside it is each timer's own noise over that
many rounds; more rounds narrow it as about 1/sqrt(rounds). Its verdict against a tolerance:

- agree: the whole interval lies within 1 +- tolerance;
- differ: the whole interval lies outside it (a difference larger than the tolerance);
- cannot tell: the interval straddles a tolerance edge (the timers' noise is too large for
  that tolerance at this number of rounds), or there were too few rounds for an interval.

A timer is a function (call, seconds) -> per-call times in milliseconds. `attnprof_timer` is
attnprof's own sampler (time_interleaved, with the variants it was rotated with, if any),
`dedicated_loop` do_bench's loop written out (on CUDA with attnprof's flush buffer; on CPU the
same loop with perf_counter, so the mechanism runs without a GPU), `triton_do_bench` Triton's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from attnprof.analysis.stats import MIN_INTERVAL_SAMPLES, RatioInterval, ratio_interval

__all__ = [
    "CrossCheck",
    "SampleTimer",
    "attnprof_timer",
    "cross_check",
    "dedicated_loop",
    "triton_do_bench",
    "verdict",
]

# (call, seconds) -> per-call times in ms
SampleTimer = Callable[[Callable[[], Any], float], list[float]]
Verdict = Literal["agree", "differ", "cannot tell"]
TOLERANCE = 0.05  # the shared GPU check's bound: attnprof within 5% of do_bench


def verdict(interval: RatioInterval | None, tolerance: float) -> Verdict:
    """agree / differ / cannot tell, from the interval of ratio A / B (module docstring)."""
    if interval is None:
        return "cannot tell"
    lo, hi = 1.0 - tolerance, 1.0 + tolerance
    if lo <= interval.low and interval.high <= hi:
        return "agree"
    if interval.low > hi or interval.high < lo:
        return "differ"
    return "cannot tell"


@dataclass
class CrossCheck:
    """Two timers on one call, in interleaved rounds: per-round medians and what they allow."""

    names: tuple[str, str]
    medians: dict[str, list[float]]  # per timer, its median (ms) in each round
    order: list[str]  # the timers in the order they ran, round after round
    tolerance: float
    stream: str = ""  # the CUDA stream both timers recorded on ("" on CPU)
    interval: RatioInterval | None = field(init=False)

    def __post_init__(self) -> None:
        a, b = self.names
        # the project's least rounds for a 95% claim about a ratio (analysis/stats.py)
        enough = min(len(v) for v in self.medians.values()) >= MIN_INTERVAL_SAMPLES
        self.interval = ratio_interval(self.medians[a], self.medians[b], paired=True) if enough else None

    @property
    def rounds(self) -> int:
        return min(len(v) for v in self.medians.values())

    @property
    def ratio(self) -> float | None:
        return self.interval.ratio if self.interval is not None else None

    @property
    def resolution(self) -> float | None:
        """Half the width of the 95% interval of the ratio, relative: differences between the
        two timers larger than this are told apart from none; smaller ones are not."""
        iv = self.interval
        return (iv.high - iv.low) / 2 if iv is not None else None

    @property
    def verdict(self) -> Verdict:
        return verdict(self.interval, self.tolerance)

    def lines(self) -> list[str]:
        """The comparison in words: both medians, the ratio and its interval, the bound it can
        hold and why, the verdict."""
        a, b = self.names
        ma, mb = statistics.median(self.medians[a]), statistics.median(self.medians[b])
        where = f" on {self.stream}" if self.stream else ""
        out = [f"{a} {ma:.4f} ms vs {b} {mb:.4f} ms (medians of {self.rounds} interleaved rounds{where})"]
        iv, tol = self.interval, self.tolerance
        if iv is None:
            out.append(
                f"ratio {a}/{b}: no interval from {self.rounds} round(s) (at least {MIN_INTERVAL_SAMPLES} "
                f"give one): this comparison can hold no bound"
            )
        else:
            res = self.resolution or 0.0
            out.append(f"ratio {a}/{b} {iv.ratio:.3f}, 95% interval {iv.low:.3f}-{iv.high:.3f}")
            out.append(
                f"bound: differences beyond +-{res:.1%} are told apart from none (the interval's half-width: "
                f"paired rounds cancel the drift both timers see; what is left is their own noise over "
                f"{self.rounds} rounds, narrowing as 1/sqrt(rounds)); "
                + (
                    f"narrower than the +-{tol:.0%} tolerance, so it can decide that bound unless the ratio "
                    "sits at its edge"
                    if res < tol
                    else f"too wide to decide a +-{tol:.0%} bound: more rounds or a quieter machine"
                )
            )
        words = {
            "agree": f"agree within +-{tol:.0%}",
            "differ": f"differ by more than {tol:.0%}",
            "cannot tell": f"cannot tell at +-{tol:.0%}",
        }
        out.append(f"verdict: {words[self.verdict]}")
        return out


def cross_check(
    call: Callable[[], Any],
    timers: Mapping[str, SampleTimer],
    *,
    device: str,
    rounds: int = 12,
    round_s: float = 0.2,
    tolerance: float = TOLERANCE,
) -> CrossCheck:
    """Time `call` with two timers (the first is the one judged, usually attnprof's) in
    `rounds` interleaved rounds of `round_s` seconds each, alternating which goes first, on the
    device's current stream, in attnprof's warm allocator state."""
    from attnprof.harness.allocator import warm_allocator

    if len(timers) != 2:
        raise ValueError(f"cross_check compares two timers, got {len(timers)}")
    names = tuple(timers)
    a, b = names
    warm_allocator()  # both timers see the allocator state attnprof times in (harness/allocator.py)
    medians: dict[str, list[float]] = {a: [], b: []}
    order: list[str] = []
    stream = ""
    ctx: Any = None
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        ctx = torch.cuda.device(dev)
        stream = f"cuda stream {torch.cuda.current_stream(dev).stream_id} of {device}"
    import contextlib

    with ctx if ctx is not None else contextlib.nullcontext():
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                samples = timers[name](call, round_s)
                order.append(name)
                if samples:
                    medians[name].append(statistics.median(samples))
    n = min(len(medians[a]), len(medians[b]))
    return CrossCheck(
        names=(a, b),
        medians={k: v[:n] for k, v in medians.items()},
        order=order,
        tolerance=tolerance,
        stream=stream,
    )


def attnprof_timer(device: str, *, companions: Mapping[str, Callable[[], Any]] | None = None) -> SampleTimer:
    """attnprof's own sampler (harness/timing.py time_interleaved), the call rotated with
    `companions` as `attnprof run` rotates a variant with the others: perf_counter batches of
    >= 1 ms on CPU, CUDA events after an L2 flush with a sync after each call on GPU. The budget
    is the target's: each round takes (1 + companions) times `seconds`."""
    from attnprof.harness.timing import time_interleaved

    others = dict(companions or {})

    def timer(call: Callable[[], Any], seconds: float) -> list[float]:
        calls: dict[str, Any] = {"\x00target": call, **others}
        out = time_interleaved(
            calls,
            device=device,
            budget_s=seconds * len(calls),
            min_samples=3,
            warmup_s=0.01,
            cold_share=0.0,
        )
        return list(out["\x00target"].samples_ms)

    return timer


def dedicated_loop(device: str, *, warmup_ms: float = 25.0) -> SampleTimer:
    """do_bench's loop written out: estimate one call's time from 5 calls, warm up for
    `warmup_ms`, then back-to-back calls for the budget, each timed on its own. On CUDA: events
    around each call on the current stream, attnprof's L2 flush buffer zeroed before each (outside
    the events), one sync at the end, as do_bench does. On CPU: perf_counter around batches of
    calls lasting >= 1 ms, the statistic attnprof's CPU samples are."""
    cuda = device.startswith("cuda")

    def timer(call: Callable[[], Any], seconds: float) -> list[float]:
        if cuda:
            return _dedicated_cuda(call, seconds, device, warmup_ms)
        t0 = time.perf_counter()
        for _ in range(5):
            call()
        est = max((time.perf_counter() - t0) / 5, 1e-7)
        for _ in range(max(1, int(warmup_ms / 1e3 / est))):
            call()
        # a sample is k back-to-back calls lasting >= 1 ms, as attnprof's CPU samples are: a
        # median of single calls sits below a median of block means on a skewed distribution
        # (docs/benchmarks.md, bench_timing), which would be a difference of statistic, not of loop
        k = max(1, int(1e-3 / est))
        out = []
        for _ in range(max(3, int(seconds / (est * k)))):
            s = time.perf_counter()
            for _ in range(k):
                call()
            out.append((time.perf_counter() - s) * 1e3 / k)
        return out

    return timer


def _dedicated_cuda(call: Callable[[], Any], seconds: float, device: str, warmup_ms: float) -> list[float]:
    import torch

    from attnprof.harness.timing import L2_FLUSH_BYTES

    dev = torch.device(device)
    stream = torch.cuda.current_stream(dev)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=dev)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(stream)
    for _ in range(5):
        flush.zero_()
        call()
    e.record(stream)
    e.synchronize()
    est = max(s.elapsed_time(e) / 5, 1e-4)  # ms per call, its flush included, as do_bench estimates
    for _ in range(max(1, int(warmup_ms / est))):
        call()
    n = max(3, int(seconds * 1e3 / est))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush.zero_()
        starts[i].record(stream)
        call()
        ends[i].record(stream)
    torch.cuda.synchronize(dev)
    return [a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)]


def triton_do_bench(*, warmup_ms: float = 25.0) -> SampleTimer:
    """Triton's do_bench (triton.testing): its own 256 MB flush before each call, events on the
    current stream. Every per-call time where this Triton returns them (return_mode="all"), else
    its median alone. Raises ModuleNotFoundError where Triton is not installed."""
    import triton.testing as tt

    def timer(call: Callable[[], Any], seconds: float) -> list[float]:
        rep = max(1.0, seconds * 1e3)
        try:
            got = tt.do_bench(call, warmup=warmup_ms, rep=rep, return_mode="all")
        except (AssertionError, ValueError, TypeError):  # an older Triton without "all"
            got = tt.do_bench(call, warmup=warmup_ms, rep=rep, quantiles=[0.5])
        if isinstance(got, (int, float)):
            return [float(got)]
        return [float(x) for x in got]

    return timer
