"""The run-level checks compare adds to a run's row (its findings beside the analyser's): % of
peak above 100 stated with the clean figure, page faults and the cold allocator while timing,
forward + backward below backward, and the correctness gate (`incorrect`). Their severities come
from the catalogue of finding codes (analysis/findings/codes.py), their English sentences from the
catalogs (report/i18n/en.po `finding.<CODE>`, filled from the evidence: `_worded`)."""

from __future__ import annotations

from typing import Any

from attnprof.analysis.findings.codes import finding
from attnprof.analysis.records.result import Finding
from attnprof.analysis.stats import ratio_interval
from attnprof.compare.records import INCORRECT, Row
from attnprof.records import (
    RunResult,
    TimingSummary,
    is_incorrect,
)
from attnprof.run_context import RunContext


def _worded(code: str, evidence: dict[str, Any]) -> Finding:
    """A finding of `code` whose English sentence is the catalog's (`finding.<code>`, filled from
    its evidence by codes.finding, as every finding is), so it is written once, in
    report/i18n/*.po, for every language."""
    return finding(code, evidence)


def _peak_check(row: Row, ctx: RunContext) -> None:
    """One figure for "% of peak" on a run's row: the clean timing's, as in the table. The
    analyser's ABOVE_PEAK (from the trace's profiled time, another number) is replaced by one
    that states the clean figure, so the table, finding, summary and JSON say the same."""
    row.findings = [f for f in row.findings if f.code != "ABOVE_PEAK"]
    if row.pct_of_peak is None or row.pct_of_peak <= 100.0:
        return
    env = ctx.record.environment
    pct = int(f"{row.pct_of_peak:.0f}")  # as the tables print it (units.fmt_pct)
    row.findings.append(
        _worded(
            "ABOVE_PEAK",
            {
                "pct_of_peak": pct,
                "tflops_useful": row.tflops_useful,
                "peak_tflops": env.peak_tflops,
                "peak_source": env.peak_source,
            },
        )
    )


# minor page faults per call from which a variant's time includes mapping fresh memory: 64 faults
# are 256 KiB of 4 KiB pages touched for the first time, on every call
PAGE_FAULTS_PER_CALL = 64


def _fault_check(row: Row) -> None:
    """PAGE_FAULTS: the variant maps fresh memory on every call even in the warm allocator state
    (an allocation above its 32 MiB mmap threshold, or memory a library maps itself), so
    allocation and page faults, not arithmetic, are part of what its time measures."""
    n = row.minor_faults_per_call
    if n is None or n < PAGE_FAULTS_PER_CALL:
        return
    row.findings.append(
        _worded(
            "PAGE_FAULTS",
            {"minor_faults_per_call": round(n), "allocator": row.allocator},
        )
    )


# the least cold/warm ratio (its interval's lower end) that COLD_ALLOCATOR reports: smaller
# differences, even when outside noise, change no ranking the reports make
COLD_MIN_RATIO = 1.05


def _cold_check(row: Row, t: TimingSummary | None) -> None:
    """COLD_ALLOCATOR: in the cold allocator state (as in a fresh process) the variant is slower
    than in the warm one beyond noise, AND it page-faults more there: only then do allocation and
    page faults, not arithmetic, account for the difference (a slower cold time without the
    faults names no cause). Not on an unreliable run: the two states are timed one after the
    other, so load that came and went between them would pass for a cause."""
    if t is None or t.cold is None or (t.load is not None and t.load.unreliable):
        return
    cold = t.cold
    iv = ratio_interval(cold.samples_ms, t.samples_ms, paired=False)
    warm_faults = t.minor_faults_per_call or 0.0
    cold_faults = cold.minor_faults_per_call
    if iv is None or iv.low < COLD_MIN_RATIO or cold_faults is None:
        return
    if cold_faults - warm_faults < PAGE_FAULTS_PER_CALL:
        return
    row.findings.append(
        _worded(
            "COLD_ALLOCATOR",
            {
                "cold_ms": round(cold.median_ms, 4),
                "warm_ms": round(t.median_ms, 4),
                "ratio": round(iv.ratio, 2),
                "ratio_low": round(iv.low, 2),
                "ratio_high": round(iv.high, 2),
                "cold_faults_per_call": round(cold_faults),
                "warm_faults_per_call": round(warm_faults),
            },
        )
    )


def _total_check(row: Row) -> None:
    """TOTAL_BELOW_BACKWARD: forward + backward timed as one call came out shorter than the
    backward alone. The one call does all the backward's work and more, so this is a measurement
    problem (load that came and went between the two timings, or a backward timed with work the
    one call skips), not a speed: the ranking by forward + backward is not to be trusted."""
    bwd, total = row.bwd_median_ms, row.total_median_ms
    if bwd is None or total is None or total >= bwd:
        return
    row.findings.append(
        _worded(
            "TOTAL_BELOW_BACKWARD",
            {"total_ms": round(total, 4), "bwd_ms": round(bwd, 4)},
        )
    )


def _gate(row: Row, res: RunResult, dtype: str) -> None:
    """The correctness gate: a result whose output failed the accuracy check is `incorrect`, loses
    every figure that would rank it (TFLOP/s, % of peak) and carries an INCORRECT_OUTPUT finding."""
    if not res.ran or not res.incorrect:
        return
    grads = res.failed_gradients()
    code = "INCORRECT_OUTPUT"
    if is_incorrect(res.accuracy) or not grads:
        assert res.accuracy is not None
        acc = res.accuracy
        row.reason = acc.failure(dtype)
    else:  # the output is right, a gradient is not
        code = "INCORRECT_GRADIENT"
        acc = max((res.grad_accuracy[g] for g in grads), key=lambda a: a.rank_error())
        row.reason = acc.failure(dtype, what=f"gradient {', '.join(grads)}")
    row.status = INCORRECT
    row.tflops_useful = row.pct_of_peak = None
    row.findings.insert(
        0,
        _worded(
            code,
            {
                "max_abs_err": acc.max_abs_err,
                "nan_count": acc.nan_count,
                "inf_count": acc.inf_count,
                "atol": acc.tolerance,
                "rtol": acc.rtol,
                **({"gradients": ", ".join(grads)} if code == "INCORRECT_GRADIENT" else {}),
            },
        ),
    )
