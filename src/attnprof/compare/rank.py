"""The one rule for ranking rows: which timing ranks, what is a tie, what is notable, and when an
interval may be called a 95% interval. Every view (run's table, compare, report, the model view)
renders the claims made here and makes none of its own.

- Which timing ranks (`ranked_by`): a forward run by its forward, a `--backward` run by forward +
  backward timed as one call (what a training step pays; recommend ranks its backward buckets the
  same way), a model run by its step.
- A speed claim between two rows (`speed`), or between two sets of samples per configuration
  (`samples_claim`: recommend's pinning gain over a bucket's configurations): the ratio of
  their ranked medians and its 95% bootstrap interval (analysis/stats.py `ratio_interval`,
  paired by round within one run; `geomean_ratio_interval` over configurations). A
  95% interval needs MIN_INTERVAL_SAMPLES samples on each side (docs/run.md, "Statistics"):
  below that the claim is "too_few" and carries the range of the ratios instead, never a 95%
  claim. With enough samples: "faster"/"slower" when the interval excludes 1, else "tie".
- Tied with the fastest (`fastest`): a row is tied with the fastest only if no row is faster
  than it beyond noise (every pair is tested, not only the pair with the fastest).
- Notable (NOTABLE): the one threshold for a difference shown without an interval of its own (a
  sweep's margin, a colour): below it, two timings are "about the same".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from attnprof.analysis.stats import MIN_INTERVAL_SAMPLES, geomean_ratio_interval, ratio_interval

if TYPE_CHECKING:
    from attnprof.compare.records import Row

__all__ = [
    "MIN_INTERVAL_SAMPLES",
    "NOTABLE",
    "Claim",
    "Fastest",
    "Speed",
    "fastest",
    "ranked_median",
    "ranked_samples",
    "samples_claim",
    "speed",
]

# the least ratio between two timings without an interval of their own that a view may call a
# difference (colour, "notable"): within 10% separate jobs drift that much on a shared machine
NOTABLE = 1.1

Claim = Literal["faster", "slower", "tie", "too_few"]
RankedBy = Literal["forward", "forward + backward", "step"]


class Speed(msgspec.Struct, frozen=True, kw_only=True):
    """How one row stands against another, by their ranked timings."""

    ratio: float  # the other's median / this one's (> 1: this one is faster)
    claim: Claim
    # the 95% interval of `ratio`: only with MIN_INTERVAL_SAMPLES samples a side
    low: float | None = None
    high: float | None = None
    # too_few: the smallest and largest ratio the samples give (None without samples)
    range_low: float | None = None
    range_high: float | None = None
    n: int = 0  # samples on the smaller side
    paired: bool = False

    @property
    def beyond_noise(self) -> bool:
        return self.claim in ("faster", "slower")


def ranked_by(row: Row) -> RankedBy:
    return row.ranked_by


def ranked_median(row: Row) -> float | None:
    """The median a row is ranked by (ranked_by)."""
    return row.total_median_ms if row.ranked_by == "forward + backward" else row.median_ms


def ranked_samples(row: Row) -> list[float]:
    return row.total_samples_ms if row.ranked_by == "forward + backward" else row.samples_ms


def _range(num: Sequence[float], den: Sequence[float], paired: bool) -> tuple[float | None, float | None]:
    """The smallest and largest ratio the samples allow: per round when paired, else the
    extremes of the two sets."""
    num = [x for x in num if x > 0]
    den = [x for x in den if x > 0]
    if not num or not den:
        return None, None
    if paired and len(num) == len(den):
        ratios = [a / b for a, b in zip(num, den, strict=True)]
        return min(ratios), max(ratios)
    return min(num) / max(den), max(num) / min(den)


def speed(row: Row, other: Row) -> Speed | None:
    """How many times faster `row` is than `other` (other's ranked time / row's), and the claim
    the samples allow; None when either has no ranked median."""
    mine, theirs = ranked_median(row), ranked_median(other)
    if not mine or not theirs:
        return None
    num, den = ranked_samples(other), ranked_samples(row)
    paired = row.input == other.input and row.kind == other.kind == "run"
    paired = paired and row.paired_rounds and other.paired_rounds and len(num) == len(den)
    return samples_claim([(num, den)], ratio=theirs / mine, paired=paired)


def samples_claim(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *, ratio: float, paired: bool = False
) -> Speed:
    """The claim the samples allow about `ratio`, the ratio of num's time to den's (> 1: den is
    faster): for one pair (num, den) of sample sets, or for several configurations at once (the
    geometric mean of their ratios, each configuration's sets resampled apart, as a sweep times
    its jobs apart: recommend's pinning gain). Fewer than MIN_INTERVAL_SAMPLES samples on a side
    of any pair: "too_few", with the range of the ratios (for several pairs, the geometric means
    of their per-pair extremes), never a 95% interval."""
    n = min((min(len(a), len(b)) for a, b in pairs), default=0)
    if n < MIN_INTERVAL_SAMPLES:
        lows: list[float] = []
        highs: list[float] = []
        for a, b in pairs:
            lo, hi = _range(a, b, paired)
            if lo is None or hi is None:
                lows = highs = []
                break
            lows.append(lo)
            highs.append(hi)
        low, high = (_geomean(lows), _geomean(highs)) if lows else (None, None)
        return Speed(ratio=ratio, claim="too_few", range_low=low, range_high=high, n=n, paired=paired)
    if len(pairs) == 1:
        iv = ratio_interval(pairs[0][0], pairs[0][1], paired=paired)
    else:
        iv, paired = geomean_ratio_interval(pairs), False
    if iv is None:  # a non-positive sample: no interval can be had
        return Speed(ratio=ratio, claim="too_few", n=n, paired=paired)
    claim: Claim = "faster" if iv.low > 1.0 else "slower" if iv.high < 1.0 else "tie"
    return Speed(ratio=ratio, claim=claim, low=iv.low, high=iv.high, n=n, paired=paired)


def _geomean(xs: Sequence[float]) -> float:
    import math

    if len(xs) == 1:
        return xs[0]  # exactly the one pair's figure
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


class Fastest(msgspec.Struct, kw_only=True):
    """The fastest of some rows by ranked median, the rows tied with it (no row is faster than
    them beyond noise, and their interval against the fastest holds 1), and the rows nothing is
    faster than beyond noise but whose samples are too few to tell."""

    fastest: Row
    tied: list[Row]
    untold: list[Row]


def fastest(rows: Sequence[Row]) -> Fastest | None:
    ranked = [r for r in rows if r.ok and ranked_median(r)]
    if not ranked:
        return None
    top = min(ranked, key=lambda r: ranked_median(r) or 0.0)
    tied: list[Row] = []
    untold: list[Row] = []
    for r in ranked:
        if r is top:
            continue
        beaten = False
        for s in ranked:
            sp = speed(s, r) if s is not r else None
            if sp is not None and sp.claim == "faster":
                beaten = True
                break
        if beaten:
            continue
        vs = speed(r, top)
        if vs is not None and vs.claim == "tie":
            tied.append(r)
        elif vs is not None and vs.claim == "too_few":
            untold.append(r)
    return Fastest(fastest=top, tied=tied, untold=untold)
