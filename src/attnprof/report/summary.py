"""The short bullet summary: what matters in a run, in plain words, in the reader's language.

It states only what the records hold: speed ratios from the clean timings, the reasons compare
found for them (Row.why: compare/causes.py decides which cause is large enough to name, this
module only words it), op counts, memory, accuracy, noise and expectations.
"""

from __future__ import annotations

from collections.abc import Sequence

from attnprof.compare.causes import opaque
from attnprof.compare.compare import INCORRECT, Row, baseline_for
from attnprof.compare.rank import MIN_INTERVAL_SAMPLES, Speed, fastest, ranked_median, ranked_samples, speed
from attnprof.compare.records import FEWER_OPS, Cause, Why
from attnprof.report.data import ReportData
from attnprof.report.i18n import Translator
from attnprof.report.reasons import say_loads, translate_reason
from attnprof.units import (
    fmt_bounds,
    fmt_bytes,
    fmt_count,
    fmt_err,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    number_locale,
)

__all__ = [
    "incorrect_line",
    "summarize",
    "time_source_line",
]

# trace time per forward over the clean median from which the summary says the profiler inflates
INFLATION_NOTE = 1.5


def _causes(why: Why, causes: Sequence[Cause], t: Translator) -> str:
    """The causes of a Why, in words: each finding code's `reason.<code>` sentence, fewer ops
    with both counts."""

    def one(c: Cause) -> str:
        if c.code == FEWER_OPS:
            return t("reason.fewer_ops", n=fmt_count(why.ops_fast), m=fmt_count(why.ops_slow))
        return t(f"reason.{c.code}")

    return t.join([one(c) for c in causes])


def _ci(sp: Speed, t: Translator) -> str:
    """The 95% interval in the direction the sentence states the ratio (slower over faster)."""
    assert sp.low is not None and sp.high is not None
    low, high = (sp.low, sp.high) if sp.ratio >= 1 else (1 / sp.high, 1 / sp.low)
    a, b = fmt_bounds(low, high)
    return t("summary.ci", low=a, high=b)


def _speed_line(row: Row, base: Row, t: Translator) -> str:
    """One comparison with the baseline, as compare/rank.py claims it: a tie when the ratio's
    95% interval holds 1, "too few samples to tell" (with the range) below the samples an
    interval needs, else "x faster", with a "because" only for a reliable run and evidence that
    points the same way."""
    fast, slow = (row, base) if (ranked_median(row) or 0.0) < (ranked_median(base) or 0.0) else (base, row)
    sp = speed(fast, slow)
    assert sp is not None
    ratio = sp.ratio
    dtype = row.dtype or "-"
    if sp.claim == "too_few":
        if sp.range_low is None or sp.range_high is None:
            return t("summary.too_few_bare", a=row.label, b=base.label, dtype=dtype, ratio=fmt_ratio(ratio))
        return t(
            "summary.too_few",
            a=row.label,
            b=base.label,
            dtype=dtype,
            ratio=fmt_ratio(ratio),
            n=sp.n,
            low=fmt_ratio(sp.range_low),
            high=fmt_ratio(sp.range_high),
            min=MIN_INTERVAL_SAMPLES,
        )
    if sp.claim == "tie":
        return t("summary.tie", a=row.label, b=base.label, dtype=dtype, ratio=fmt_ratio(ratio), ci=_ci(sp, t))
    ci = _ci(sp, t)
    # why the faster one is faster: compare/causes.py decided it (Row.why), this only words it
    why = row.why
    head = dict(fast=fast.label, slow=slow.label, ratio=fmt_ratio(ratio), dtype=dtype, ci=ci)
    if why is None:
        return t("summary.faster", **head)
    if why.named:
        return t("summary.faster_because", **head, subject=why.subject, reasons=_causes(why, why.named, t))
    # every cause the two differ in is too small for the gap: say so, name none as the reason
    return t(
        "summary.faster_small",
        **head,
        subject=why.subject,
        reasons=_causes(why, why.small, t),
        cause=fmt_ms(why.largest_ms),
        gap=fmt_ms(why.gap_ms),
    )


def _fastest_lines(ran: Sequence[Row], t: Translator) -> list[str]:
    """The fastest, or the rows tied for fastest (compare/rank.py `fastest`: no row is faster
    than a tied one beyond noise), and those too few samples leave untold."""
    top = fastest(ran)
    if top is None:
        return []
    best = top.fastest
    head = dict(
        variant=best.label,
        time=fmt_ms(ranked_median(best)),
        n=len(ranked_samples(best)),
        per=t(f"per.{best.ranked_by}"),
    )
    if top.tied:
        out = [t("summary.fastest_tie", list=t.join([best.label, *(r.label for r in top.tied)]), **head)]
    else:
        out = [t("summary.fastest", **head)]
    if top.untold:
        out.append(
            t("summary.fastest_untold", list=t.join([r.label for r in top.untold]), variant=best.label)
        )
    return out


def non_finite_text(nan: int | None, inf: int | None, t: Translator) -> str | None:
    """ "non-finite (3 NaN, 1 inf)" in the report's language, or None where there are neither."""
    counts = [t(key, n=fmt_count(n)) for key, n in (("err.nan", nan), ("err.inf", inf)) if n]
    return t("err.non_finite", counts=", ".join(counts)) if counts else None


def incorrect_line(r: Row, t: Translator) -> str:
    """Why a row is out of every ranking: its non-finite values, else its error and tolerance;
    with --backward, the gradients that failed where the output did not."""
    if r.accuracy_ok is not False and r.failed_gradients:
        bad = [r.grad_non_finite[g] for g in r.failed_gradients if g in r.grad_non_finite]
        # a max error over a NaN gradient's finite values says nothing
        non_finite = non_finite_text(sum(b[0] for b in bad), sum(b[1] for b in bad), t)
        err = non_finite or fmt_err(max(r.grad_max_abs_err.get(g, 0.0) for g in r.failed_gradients))
        return t("summary.incorrect_grad", variant=r.label, grads=", ".join(r.failed_gradients), err=err)
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


def time_source_line(rows: Sequence[Row], t: Translator) -> str | None:
    """Which profiler pass the time shares (ops, categories, timelines, diffs, cause sizes) come
    from (Row.time_source): the lean one, the rich one (runs that kept no lean trace), or both,
    naming the rows that use the rich one. None when no run row's trace was analysed."""
    analysed = [r for r in rows if r.time_source is not None]
    if not analysed:
        return None
    rich = [r.label for r in analysed if r.time_source == "rich"]
    if not rich:
        return t("source.lean")
    if len(rich) == len(analysed):
        return t("source.rich")
    return t("source.mixed", list=t.join(rich))


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
    load = say_loads(((r.load_reasons, r.load_reason_codes) for r in ran), t)
    if load:  # first: every ratio below must be read with this in mind
        out.append(t("summary.unreliable", reasons="; ".join(load)))
    if comp.mixed_workloads:
        out.append(t("summary.mixed", list="; ".join(comp.workloads)))
    grouped = len(comp.workloads) > 1 and not comp.mixed_workloads
    if grouped:
        out.append(t("summary.grouped", n=len(comp.workloads)))
    groups = [[r for r in ran if r.workload == w] for w in comp.workloads] if grouped else [ran]
    for group in [g for g in groups if g]:

        def tag(line: str, g: list[Row] = group) -> str:
            return t("summary.in_workload", workload=g[0].workload, line=line) if grouped else line

        out.extend(tag(line) for line in _fastest_lines(group, t))
        for r in group:
            base = baseline_for(comp, r)
            if (
                base is not None
                and ranked_median(base)
                and ranked_median(r)
                and r.label != base.label
                and base.ok
            ):
                out.append(tag(_speed_line(r, base, t)))
        out.extend(tag(line) for line in _ops_line(group, t))
        steps = sorted(
            (r for r in group if r.total_median_ms is not None), key=lambda r: r.total_median_ms or 0.0
        )
        if steps:  # --backward: the ratios above are of forward + backward (rank.py); listed here
            listed = ", ".join(f"{r.label} {fmt_ms(r.total_median_ms)}" for r in steps)
            out.append(tag(t("summary.backward", list=listed)))
    # over both passes: the tables show each variant's rich and lean figure, and the range the
    # sentence gives must hold every number they show (a lean pass can take longer than the rich
    # one when the machine was busier while it ran)
    infl = [(r, x) for r in ran for x in (r.profiler_inflation, r.lean_inflation) if x is not None]
    if infl and max(x for _, x in infl) >= INFLATION_NOTE:
        least, most = min(infl, key=lambda p: p[1]), max(infl, key=lambda p: p[1])
        out.append(
            t(
                # a trace shorter than the clean time is no profiler overhead: the machine was
                # busier while timing than while profiling (said so, not called overhead)
                "summary.inflation_below" if least[1] < 1.0 else "summary.inflation",
                low=fmt_ratio(least[1]),
                low_variant=least[0].label,
                high=fmt_ratio(most[1]),
                high_variant=most[0].label,
            )
        )
    source = time_source_line(comp.rows, t)
    if source is not None:
        out.append(source)
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
            pct=fmt_pct(r.pct_of_peak / 100 if r.pct_of_peak is not None else None),
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
    checked = [e for e in data.expectations if e.status in ("met", "not met")]  # not info
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
