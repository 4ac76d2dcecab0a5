"""Ratio statistics for timings: a speed ratio with its bootstrap confidence interval.

A ratio of two medians is only a claim when its interval excludes 1; otherwise the two are a tie.
The interval is a percentile bootstrap (docs/run.md, "Statistics"): resample the samples with
replacement, take the ratio of the resampled medians, repeat, and read the 2.5th and 97.5th
percentiles. Samples from one interleaved run are *paired*: sample i of every variant was taken
in the same round, so they share whatever background load that round had; resampling rounds
(the same indices for both) keeps that pairing, and a burst that slows both alike cancels in
the ratio instead of widening it. Samples from different runs are resampled independently.
The generator is seeded, so the same samples always give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

__all__ = ["CONFIDENCE", "MIN_INTERVAL_SAMPLES", "RatioInterval", "geomean_ratio_interval", "ratio_interval"]

CONFIDENCE = 0.95
# the fewest samples on each side for a 95% interval of a ratio of medians. A distribution-free
# interval for a median from n samples is at best [min, max], which holds the median with
# probability 1 - 2 * 0.5**n: 94% at n = 5, 97% at n = 6. Below 6 the bootstrap returns little
# more than the smallest and largest ratio and its "95%" would claim more than the data holds.
# compare/rank.py applies it to every claim compare, run and report make; models/ to its margin.
MIN_INTERVAL_SAMPLES = 6
_RESAMPLES = 2000
_SEED = 20240917


class RatioInterval(msgspec.Struct, frozen=True, kw_only=True):
    """median(num) / median(den), and the bootstrap interval around it."""

    ratio: float
    low: float
    high: float
    paired: bool
    n: int  # samples on the smaller side

    @property
    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def ratio_interval(num: Sequence[float], den: Sequence[float], *, paired: bool) -> RatioInterval | None:
    """The ratio median(num) / median(den) with its CONFIDENCE bootstrap interval, or None with
    fewer than 3 samples on a side (too few to say anything about spread). paired=True needs
    equally long sequences whose i-th samples were taken together (one interleaved round)."""
    import numpy as np

    a = np.asarray(num, dtype=float)
    b = np.asarray(den, dtype=float)
    if a.size < 3 or b.size < 3 or (b <= 0).any() or (a <= 0).any():
        return None
    paired = paired and a.size == b.size
    rng = np.random.default_rng(_SEED)
    if paired:
        idx = rng.integers(0, a.size, size=(_RESAMPLES, a.size))
        ra, rb = a[idx], b[idx]
    else:
        ra = a[rng.integers(0, a.size, size=(_RESAMPLES, a.size))]
        rb = b[rng.integers(0, b.size, size=(_RESAMPLES, b.size))]
    ratios = np.median(ra, axis=1) / np.median(rb, axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return RatioInterval(
        ratio=float(np.median(a) / np.median(b)),
        low=float(low),
        high=float(high),
        paired=paired,
        n=int(min(a.size, b.size)),
    )


def geomean_ratio_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> RatioInterval | None:
    """The geometric mean over configurations of median(num) / median(den), with its bootstrap
    interval: each replicate resamples every configuration's two sample sets independently (a
    sweep times its jobs apart) and takes the geometric mean of their median ratios. None when
    any configuration has fewer than 3 samples on a side."""
    import numpy as np

    if not pairs:
        return None
    rng = np.random.default_rng(_SEED)
    logs = np.zeros(_RESAMPLES)
    point = 0.0
    n = None
    for num, den in pairs:
        a = np.asarray(num, dtype=float)
        b = np.asarray(den, dtype=float)
        if a.size < 3 or b.size < 3 or (a <= 0).any() or (b <= 0).any():
            return None
        ra = np.median(a[rng.integers(0, a.size, size=(_RESAMPLES, a.size))], axis=1)
        rb = np.median(b[rng.integers(0, b.size, size=(_RESAMPLES, b.size))], axis=1)
        logs += np.log(ra / rb)
        point += float(np.log(np.median(a) / np.median(b)))
        n = min(a.size, b.size) if n is None else min(n, a.size, b.size)
    k = len(pairs)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.exp(np.percentile(logs / k, [tail, 100 - tail]))
    return RatioInterval(
        ratio=float(np.exp(point / k)), low=float(low), high=float(high), paired=False, n=int(n or 0)
    )
