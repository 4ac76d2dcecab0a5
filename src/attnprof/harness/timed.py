"""Clean timing of prepared calls, and what it puts on a result: the timings, noisy warnings,
useful TFLOP/s and % of peak (none for a wrong answer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnprof.harness.options import RunOptions
from attnprof.harness.timing import Plain, Scoped, Timed
from attnprof.records import RunResult, TimingSummary, is_incorrect

if TYPE_CHECKING:
    from attnprof.variants.registry import Built
    from attnprof.workload import Workload

__all__ = ["Prepared", "apply_timing", "grad_mode", "noisy_warning", "time_calls"]


@dataclass
class Prepared:
    """A variant ready for clean timing: its forward and, with backward, its backward."""

    label: str
    built: Built
    backward: Callable[[Any], Any] | None = None
    call_s: float = 0.0  # the first warm-up call (forward, and backward with it), in seconds

    def calls(self) -> dict[str, Timed]:
        """Timing series: the forward; with backward also the backward alone (its forward
        runs untimed before each sample) and forward + backward as one call."""
        b = self.built
        fwd = b.bare if b.scope is not None and b.bare is not None else b.call
        bwd = self.backward
        series: dict[str, Plain] = {self.label: fwd}
        if bwd is not None:
            series[f"{self.label}{_BWD}"] = (fwd, bwd)
            series[f"{self.label}{_TOTAL}"] = lambda: bwd(fwd())
        if b.scope is not None and b.bare is not None:  # entered once per sample, off the clock
            scope = b.scope
            return {k: Scoped(v, scope) for k, v in series.items()}
        return dict(series)


_BWD, _TOTAL = "\x00bwd", "\x00total"


def time_calls(
    calls: dict[str, Any], workload: Workload, opts: RunOptions, *, cold: bool = True
) -> dict[str, TimingSummary]:
    from attnprof.harness.timing import COLD_SHARE, time_interleaved

    with grad_mode(workload):
        return time_interleaved(
            calls,
            device=workload.device,
            budget_s=opts.time_budget_s * len(calls),
            min_samples=opts.min_samples,
            warmup_s=opts.warmup_s,
            cold_share=COLD_SHARE if cold else 0.0,
        )


def grad_mode(workload: Workload) -> Any:
    import torch

    return torch.enable_grad() if workload.backward else torch.no_grad()


def noisy_warning(summary: TimingSummary, what: str = "") -> str | None:
    """The warning for a timing whose spread is large against its median, or None."""
    if not summary.noisy:
        return None
    return f"noisy {what}timing: IQR is {summary.iqr_ms / summary.median_ms:.0%} of the median"


def _tflops(flops: float, summary: TimingSummary | None) -> float | None:
    if summary is None or summary.median_ms <= 0:
        return None
    return flops / (summary.median_ms / 1e3) / 1e12


def apply_timing(result: RunResult, summaries: dict[str, TimingSummary], peak_tflops: float | None) -> None:
    summary = summaries[result.label]
    result.timing = summary
    result.timing_bwd = summaries.get(result.label + _BWD)
    result.timing_total = summaries.get(result.label + _TOTAL)
    for what, s in (
        ("", summary),
        ("backward ", result.timing_bwd),
        ("forward+backward ", result.timing_total),
    ):
        warning = noisy_warning(s, what) if s is not None else None
        if warning:
            result.warnings.append(warning)
    # a wrong answer has no useful throughput: its time is kept, its TFLOP/s and % of peak are not
    if is_incorrect(result.accuracy):
        return
    result.tflops_useful = _tflops(result.flops_useful, summary)
    if result.timing_bwd is not None and not any(is_incorrect(a) for a in result.grad_accuracy.values()):
        result.tflops_useful_bwd = _tflops(result.flops_useful_bwd, result.timing_bwd)
        result.tflops_useful_total = _tflops(
            result.flops_useful + result.flops_useful_bwd, result.timing_total
        )
    if result.tflops_useful is not None and peak_tflops:
        result.pct_of_peak = 100.0 * result.tflops_useful / peak_tflops
        if result.pct_of_peak > 100.0:
            result.warnings.append(
                f"{result.pct_of_peak:.0f}% of peak: above 100% means the peak or the timing is wrong"
            )
