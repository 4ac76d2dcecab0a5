"""The short bullet summary: what matters in a run, in plain words, in the reader's language.

It states only what the records hold: speed ratios from the clean timings, reasons from the
trace findings (a finding the slower variant has and the faster lacks), op counts, memory,
accuracy, noise and expectations. A reason is given only where a finding supports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attnprof.analysis.stats import RatioInterval
from attnprof.compare.compare import INCORRECT, Row, baseline_for, interval
from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.reasons import translate_reason
from attnprof.units import (
    fmt_bytes,
    fmt_count,
    fmt_err,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    localize,
    number_locale,
)

__all__ = ["BAD_CODES", "GOOD_CODES", "SAME_SPEED", "incorrect_line", "opaque", "reasons", "summarize"]

# findings that make a variant slower, in the order a reader should hear them
BAD_CODES: tuple[str, ...] = (
    "FP32_UPCAST",
    "MASK_REBUILT_EACH_CALL",
    "SAFE_SOFTMAX",
    "OUT_OF_PLACE_COPY",
    "CUDA_CORE_GEMM",
    "UNFUSED_ATTENTION",
    "TRANSPOSES_BEFORE_KERNEL",
    "GPU_IDLE_SYNC",
    "GPU_IDLE_HOST_COMPUTE",
    "LAUNCH_BOUND",
)
# findings that make a variant faster
GOOD_CODES: tuple[str, ...] = ("FUSED_ATTENTION", "CUDA_GRAPH")
# trace time per forward over the clean median from which the summary says the profiler inflates
INFLATION_NOTE = 1.5
# without an interval (fewer than 3 samples), below this ratio two timings are "about the same"
SAME_SPEED = 1.1


def opaque(row: Row) -> bool:
    """Runs as compiled code (Row.compiled_region): its op counts and op-level findings cannot be
    set against an eager variant's."""
    return row.compiled_region


def reasons(fast: Row, slow: Row, t: Translator) -> tuple[str, str] | None:
    """(subject, reasons) for why `fast` beats `slow`, or None when no record says why.

    A reason is evidence the two differ in, pointing the way the clean times do: a finding the
    faster one has and the slower lacks (what it does right), else one the slower has and the
    faster lacks (what it does wrong), else fewer ops per forward. Never for a compiled (opaque)
    side, whose trace cannot show the ops or findings an eager one would."""
    if opaque(fast) or opaque(slow):
        return None
    fast_codes, slow_codes = set(fast.finding_codes), set(slow.finding_codes)
    # credit what the faster one does right first ("computes attention in one fused kernel" says
    # more than "the other materialises the scores"), else what the slower one does wrong
    good = [c for c in GOOD_CODES if c in fast_codes and c not in slow_codes]
    if good:
        return fast.label, t.join([t(f"reason.{c}") for c in good])
    bad = [c for c in BAD_CODES if c in slow_codes and c not in fast_codes]
    if bad:
        return slow.label, t.join([t(f"reason.{c}") for c in bad])
    gpu = fast.gpu_ops_per_forward and slow.gpu_ops_per_forward
    lane = "gpu_ops_per_forward" if gpu else "cpu_ops_per_forward"
    n, m = getattr(fast, lane), getattr(slow, lane)
    if n is not None and m is not None and n < m:
        return fast.label, t("reason.fewer_ops", n=fmt_count(n), m=fmt_count(m))
    return None


def _ci(iv: RatioInterval, t: Translator) -> str:
    low, high = (iv.low, iv.high) if iv.ratio >= 1 else (1 / iv.high, 1 / iv.low)
    return t("summary.ci", low=fmt_ratio(low), high=fmt_ratio(high))


def _speed_line(row: Row, base: Row, t: Translator) -> str:
    """One comparison with the baseline: a tie when the ratio's interval holds 1, else "x
    faster", with a "because" only for a reliable run and evidence that points the same way."""
    assert row.median_ms is not None and base.median_ms is not None
    fast, slow = (row, base) if row.median_ms < base.median_ms else (base, row)
    assert fast.median_ms is not None and slow.median_ms is not None
    ratio = slow.median_ms / fast.median_ms
    dtype = row.dtype or "-"
    iv = interval(fast, slow)
    if iv is None:
        if ratio < SAME_SPEED:
            return t("summary.same", a=row.label, b=base.label, dtype=dtype, ratio=fmt_ratio(ratio))
        ci = t("summary.no_ci")
    elif not iv.excludes_one:
        return t("summary.tie", a=row.label, b=base.label, dtype=dtype, ratio=fmt_ratio(ratio), ci=_ci(iv, t))
    else:
        ci = _ci(iv, t)
    why = None if (fast.unreliable or slow.unreliable) else reasons(fast, slow, t)
    if why is None:
        return t(
            "summary.faster", fast=fast.label, slow=slow.label, ratio=fmt_ratio(ratio), dtype=dtype, ci=ci
        )
    return t(
        "summary.faster_because",
        fast=fast.label,
        slow=slow.label,
        ratio=fmt_ratio(ratio),
        dtype=dtype,
        ci=ci,
        subject=why[0],
        reasons=why[1],
    )


def _fastest_line(ran: Sequence[Row], t: Translator) -> str:
    """The fastest, or the rows tied for fastest: every row whose ratio to the quickest median
    has an interval holding 1."""
    fastest = min(ran, key=lambda r: r.median_ms or 0.0)
    tied = [fastest]
    for r in ran:
        if r is fastest:
            continue
        iv = interval(fastest, r)
        if iv is not None and not iv.excludes_one:
            tied.append(r)
    n = len(fastest.samples_ms)
    if len(tied) == 1:
        return t("summary.fastest", variant=fastest.label, time=fmt_ms(fastest.median_ms), n=n)
    return t(
        "summary.fastest_tie",
        list=t.join([r.label for r in tied]),
        variant=fastest.label,
        time=fmt_ms(fastest.median_ms),
        n=n,
    )


def incorrect_line(r: Row, t: Translator) -> str:
    """Why a row is out of every ranking: its non-finite values, else its error and tolerance."""
    if r.nan_count or r.inf_count:
        return t("summary.incorrect_nan", variant=r.label, nan=r.nan_count or 0, inf=r.inf_count or 0)
    return t(
        "summary.incorrect_err",
        variant=r.label,
        err=fmt_err(r.max_abs_err),
        atol=fmt_num(r.atol, "g"),
        rtol=fmt_num(r.rtol, "g"),
        dtype=r.dtype or "-",
    )


def _ops_line(rows: Sequence[Row], t: Translator) -> list[str]:
    """Ops per forward of the eager variants; compiled ones are named apart, not counted."""
    gpu = any((r.gpu_ops_per_forward or 0) > 0 for r in rows)
    key = "gpu_ops_per_forward" if gpu else "cpu_ops_per_forward"
    eager = [r for r in rows if not opaque(r)]
    items = [f"{r.label} {fmt_count(getattr(r, key))}" for r in eager if getattr(r, key) is not None]
    out = [t("summary.ops_gpu" if gpu else "summary.ops_cpu", list=", ".join(items))] if items else []
    compiled = [r.label for r in rows if opaque(r)]
    if compiled and eager:
        out.append(t("summary.opaque", list=t.join(compiled)))
    return out


# the load meter's reasons (harness/load.py), by pattern, so reports can say them in their language
_LOAD_REASONS = (
    ("load.other", re.compile(r"other processes used (?P<pct>\d+)% of the (?P<n>\d+) CPUs while timing")),
    ("load.steal", re.compile(r"the hypervisor took (?P<pct>\d+)% of CPU time \(steal\) while timing")),
    ("load.spread", re.compile(r"timing spread up to (?P<pct>\d+)% of the median \(IQR\)")),
    ("load.loadavg", re.compile(r"load average (?P<load>[\d.]+) on (?P<n>\d+) CPUs")),
)


def _load_reason(reason: str, t: Translator) -> str:
    for key, pattern in _LOAD_REASONS:
        m = pattern.fullmatch(reason)
        if m:
            return t(key, **{k: localize(v) for k, v in m.groupdict().items()})
    return reason


def _reason(r: Row, t: Translator) -> str:
    reason = translate_reason(r.reason, t, r.reason_code)
    # the harness starts its reasons with the variant's name, which the bullet already gives
    return reason.removeprefix(f"{r.variant}: ") if r.variant else reason


def summarize(data: ReportData, t: Translator) -> list[str]:
    """The bullets, most important first, numbers in the reader's locale."""
    with number_locale(t.lang):
        return _summarize(data, t)


def _summarize(data: ReportData, t: Translator) -> list[str]:
    comp = data.comparison
    if data.record is None:  # trace files alone: profiled times only, nothing to rank or check
        return [t("summary.trace_only"), *_ops_line([r for r in comp.rows if r.ok], t)]
    ran = [r for r in comp.rows if r.ok and r.median_ms is not None]
    if not ran:
        bad = [incorrect_line(r, t) for r in comp.rows if r.status == INCORRECT]
        return [t("summary.empty"), *bad]
    out: list[str] = []
    load = list(dict.fromkeys(x for r in ran for x in r.load_reasons))
    if load:  # first: every ratio below must be read with this in mind
        out.append(t("summary.unreliable", reasons="; ".join(_load_reason(x, t) for x in load)))
    if comp.mixed_workloads:
        out.append(t("summary.mixed", list="; ".join(comp.workloads)))
    grouped = len(comp.workloads) > 1 and not comp.mixed_workloads
    if grouped:
        out.append(t("summary.grouped", n=len(comp.workloads)))
    groups = [[r for r in ran if r.workload == w] for w in comp.workloads] if grouped else [ran]
    for group in [g for g in groups if g]:

        def tag(line: str, g: list[Row] = group) -> str:
            return t("summary.in_workload", workload=g[0].workload, line=line) if grouped else line

        out.append(tag(_fastest_line(group, t)))
        for r in group:
            base = baseline_for(comp, r)
            if base is not None and base.median_ms is not None and r.label != base.label and base.ok:
                out.append(tag(_speed_line(r, base, t)))
        out.extend(tag(line) for line in _ops_line(group, t))
    infl = [(r, r.profiler_inflation) for r in ran if r.profiler_inflation is not None]
    if infl and max(x for _, x in infl) >= INFLATION_NOTE:
        least, most = min(infl, key=lambda p: p[1]), max(infl, key=lambda p: p[1])
        out.append(
            t(
                "summary.inflation",
                low=fmt_ratio(least[1]),
                low_variant=least[0].label,
                high=fmt_ratio(most[1]),
                high_variant=most[0].label,
            )
        )
    mem = [r for r in ran if r.peak_bytes is not None]
    if grouped:
        mem = []  # peak memory grows with the shape: across workloads it says nothing
    if len(mem) >= 2:
        hi = max(mem, key=lambda r: r.peak_bytes or 0)
        lo = min(mem, key=lambda r: r.peak_bytes or 0)
        if (hi.peak_bytes or 0) > 1.5 * max(lo.peak_bytes or 0, 1):
            out.append(
                t(
                    "summary.memory",
                    high=fmt_bytes(hi.peak_bytes),
                    high_variant=hi.label,
                    low=fmt_bytes(lo.peak_bytes),
                    low_variant=lo.label,
                )
            )
    out.extend(incorrect_line(r, t) for r in comp.rows if r.status == INCORRECT)
    env = data.record.environment
    out.extend(
        t(
            "summary.above_peak",
            variant=r.label,
            pct=fmt_pct(r.pct_of_peak),
            peak=fmt_num(env.peak_tflops),
        )
        for r in ran
        if r.above_peak
    )
    noisy = [r.label for r in ran if r.noisy]
    if noisy:
        out.append(t("summary.noisy", list=t.join(noisy)))
    not_run = [f"{r.label} ({_reason(r, t)})" if r.reason else r.label for r in comp.rows if not r.ran]
    if not_run:
        out.append(t("summary.not_run", list="; ".join(not_run)))
    checked = [e for e in data.expectations if e.status != "skipped"]
    if checked:
        failed = [e for e in checked if e.status == "not met"]
        if failed:
            names = sorted({f"{e.row or e.variant} {e.check}" for e in failed})
            out.append(
                t("summary.expect_some", not_met=len(failed), total=len(checked), list=", ".join(names))
            )
        else:
            out.append(t("summary.expect_all", met=len(checked)))
    return out
