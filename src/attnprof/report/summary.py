"""The short bullet summary: what matters in a run, in plain words, in the reader's language.

It states only what the records hold: speed ratios from the clean timings, reasons from the
trace findings (a finding the slower variant has and the faster lacks), op counts, memory,
accuracy, noise and expectations. A reason is given only where a finding supports it and the
time shares of the trace (the lean profiler pass's when the run kept it: Row.time_source) size
it at CAUSE_SHARE of the clean time gap or more; one that cannot be sized is not given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from attnprof.compare.compare import INCORRECT, Row, baseline_for
from attnprof.compare.rank import MIN_INTERVAL_SAMPLES, Speed, fastest, ranked_median, ranked_samples, speed
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

__all__ = [
    "BAD_CODES",
    "CAUSE_SHARE",
    "GOOD_CODES",
    "Why",
    "cause_ms",
    "incorrect_line",
    "load_reason",
    "opaque",
    "reasons",
    "summarize",
    "time_source_line",
]

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


def opaque(row: Row) -> bool:
    """Runs as compiled code (Row.compiled_region): its op counts and op-level findings cannot be
    set against an eager variant's."""
    return row.compiled_region


# the least part of the clean time gap a named cause must account for to be called *the* reason:
# a cause that could explain under a quarter of the gap is not why one variant is faster
CAUSE_SHARE = 0.25

# CPU (aten) op groups, or GPU kernel categories, in which each finding's cost lies, where the
# trace's op list shows it. The copy group (clone, copy_, _to_copy, ...) holds both the
# out-of-place copy and dtype conversions; _safe_softmax's cost is its guard passes; the
# transposes are views (layout group). Fused against unfused attention: the attention math
# itself (QK^T, softmax, PV; or the fused op or kernel doing all three), so that what the fused
# side saves there is the cause's size.
_ATTENTION_MATH = ("attention", "gemm", "softmax")
_COST_GROUPS: dict[str, tuple[str, ...]] = {
    "OUT_OF_PLACE_COPY": ("copy", "memcpy"),
    "FP32_UPCAST": ("copy", "memcpy"),
    "TRANSPOSES_BEFORE_KERNEL": ("layout",),
    "UNFUSED_ATTENTION": _ATTENTION_MATH,
    "FUSED_ATTENTION": _ATTENTION_MATH,
}
_SAFE_SOFTMAX_OPS = ("aten::_safe_softmax", "aten::isneginf", "aten::all", "aten::where", "aten::logical_not")
# "fewer ops" is sized from the ops themselves (_extra_ops_ms), not from a finding
FEWER_OPS = "fewer_ops"


class Cause(msgspec.Struct, frozen=True):
    """One cause named for a speed difference, and what it can account for: `ms` is the part of
    the clean time gap it explains (its trace time as a share of the trace time per forward,
    applied to the clean time; the other variant's own time in the same ops subtracted), None
    when the trace holds no time for it (a CUDA graph, views on a GPU): such a cause is never
    named."""

    code: str
    ms: float | None


def _traced_us(row: Row) -> float | None:
    """The trace time per forward the row's op times are shares of (its time source's, in its
    ops' lane: compare._apply_times)."""
    return row.ops_time_us_per_forward


def _cause_us(row: Row, code: str, names: frozenset[str]) -> float | None:
    """What `row` spends per traced forward on what `code` names, or None without a time for it."""
    if code in _COST_GROUPS and row.ops:
        if code == "TRANSPOSES_BEFORE_KERNEL" and row.ops_lane == "gpu":
            return None  # views cost no GPU time; what they cost on the host the trace cannot split
        return sum(o.time_us for o in row.ops if o.category in _COST_GROUPS[code])
    if code in ("MASK_REBUILT_EACH_CALL", "SAFE_SOFTMAX") and row.ops:
        return sum(o.time_us for o in row.ops if o.name in names)
    return None


def _cause_names(row: Row, code: str) -> frozenset[str]:
    """The op names a finding's evidence points at (the mask-building ops it counted)."""
    if code == "SAFE_SOFTMAX":
        return frozenset(_SAFE_SOFTMAX_OPS)
    out: set[str] = set()
    for f in row.findings:
        if f.code != code:
            continue
        ops = f.evidence.get("cpu_ops_per_instance")
        if isinstance(ops, dict):
            out.update(str(k) for k in ops)
        for k in f.evidence.get("gpu_mask_kernels") or []:
            if isinstance(k, dict) and "name" in k:
                out.add(str(k["name"]))
    if row.ops_lane == "gpu":  # kernels are listed by full name, the evidence by short name
        out |= {o.name for o in row.ops if o.short in out}
    return frozenset(out)


def _clean_ms(row: Row, us: float | None) -> float | None:
    """`us` of the row's traced forward in clean milliseconds: its share of the trace time per
    forward applied to the clean median. None without either."""
    traced = _traced_us(row)
    if us is None or not traced or row.median_ms is None:
        return None
    return us / traced * row.median_ms


def cause_ms(has: Row, lacks: Row, code: str) -> float | None:
    """The clean milliseconds per forward that finding `code` accounts for between `has` (which
    has it) and `lacks` (which has not). For a finding that makes a variant slower: has's cost
    in it less lacks's in the same ops. For one that makes it faster (GOOD_CODES): what lacks
    spends in those ops less what has spends there. Each side's time is a share of its own trace
    time per forward applied to its own clean median. None: unknown (not sized)."""
    if has.median_ms is None or lacks.median_ms is None:
        return None
    share = has.cause_shares.get(code)
    if share is not None:  # a finding whose evidence times its own cause
        return share * has.median_ms
    names = _cause_names(has, code)
    mine = _clean_ms(has, _cause_us(has, code, names))
    theirs = _clean_ms(lacks, _cause_us(lacks, code, names))
    if code in GOOD_CODES:
        return max(theirs - mine, 0.0) if mine is not None and theirs is not None else None
    return max(mine - (theirs or 0.0), 0.0) if mine is not None else None


def _extra_ops_ms(fast: Row, slow: Row) -> float | None:
    """What `slow`'s ops beyond `fast`'s cost, in clean ms: per op name, the part of slow's time
    in it that its calls beyond fast's count take (all of it for an op fast never runs)."""
    if not slow.ops:
        return None
    theirs = {o.name: o.count for o in fast.ops}
    extra = sum(
        o.time_us * max(0.0, o.count - theirs.get(o.name, 0.0)) / o.count for o in slow.ops if o.count > 0
    )
    return _clean_ms(slow, extra)


class Why(msgspec.Struct, frozen=True):
    """Why `fast` beats `slow`: the subject (the variant the reasons speak of) and the causes
    large enough to name (`named`); `small`: causes the two differ in that account for under
    CAUSE_SHARE of the gap (`largest_ms`: the most any of them can account for)."""

    subject: str
    named: str = ""
    small: str = ""
    largest_ms: float = 0.0
    gap_ms: float = 0.0


def reasons(fast: Row, slow: Row, t: Translator) -> Why | None:
    """Why `fast` beats `slow`, or None when no record says why.

    A reason is evidence the two differ in, pointing the way the clean times do: a finding the
    faster one has and the slower lacks (what it does right), else one the slower has and the
    faster lacks (what it does wrong), else fewer ops per forward. Each is sized from the traces'
    time shares (cause_ms, _extra_ops_ms) against the clean time gap and named only when it
    accounts for CAUSE_SHARE of the gap or more; sized causes that all account for less are
    said to be too small (Why.small); one that cannot be sized is not said at all. Never for a
    compiled (opaque) side, whose trace cannot show the ops or findings an eager one would."""
    if opaque(fast) or opaque(slow):
        return None
    assert fast.median_ms is not None and slow.median_ms is not None
    gap = slow.median_ms - fast.median_ms
    fast_codes, slow_codes = set(fast.finding_codes), set(slow.finding_codes)
    # credit what the faster one does right first ("computes attention in one fused kernel" says
    # more than "the other materialises the scores"), else what the slower one does wrong
    good = [Cause(c, cause_ms(fast, slow, c)) for c in GOOD_CODES if c in fast_codes and c not in slow_codes]
    bad = [Cause(c, cause_ms(slow, fast, c)) for c in BAD_CODES if c in slow_codes and c not in fast_codes]
    lane = (
        "gpu_ops_per_forward"
        if fast.gpu_ops_per_forward and slow.gpu_ops_per_forward
        else "cpu_ops_per_forward"
    )
    n, m = getattr(fast, lane), getattr(slow, lane)
    fewer = [Cause(FEWER_OPS, _extra_ops_ms(fast, slow))] if n is not None and m is not None and n < m else []

    def said(causes: list[Cause]) -> str:
        def one(c: Cause) -> str:
            if c.code == FEWER_OPS:
                return t("reason.fewer_ops", n=fmt_count(n), m=fmt_count(m))
            return t(f"reason.{c.code}")

        return t.join([one(c) for c in causes])

    order = ((fast, good), (slow, bad), (fast, fewer))
    for subject, causes in order:
        named = [c for c in causes if c.ms is not None and c.ms >= CAUSE_SHARE * gap]
        if named:
            return Why(subject.label, named=said(named))
    # nothing large enough: the causes that could be sized, said to be too small (the slower
    # one's faults first: they are what a reader suspects)
    for subject, causes in (order[1], order[0], order[2]):
        small = [c for c in causes if c.ms is not None]
        if small:
            return Why(
                subject.label, small=said(small), largest_ms=max(c.ms or 0.0 for c in small), gap_ms=gap
            )
    return None


def _ci(sp: Speed, t: Translator) -> str:
    """The 95% interval in the direction the sentence states the ratio (slower over faster)."""
    assert sp.low is not None and sp.high is not None
    low, high = (sp.low, sp.high) if sp.ratio >= 1 else (1 / sp.high, 1 / sp.low)
    return t("summary.ci", low=fmt_ratio(low), high=fmt_ratio(high))


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
    # causes are sized against the forward's clean gap from the forward's trace: a claim about
    # another timing (forward + backward, a model step) gets no "because" from them
    sized = fast.ranked_by == slow.ranked_by == "forward"
    why = None if (fast.unreliable or slow.unreliable or not sized) else reasons(fast, slow, t)
    head = dict(fast=fast.label, slow=slow.label, ratio=fmt_ratio(ratio), dtype=dtype, ci=ci)
    if why is None:
        return t("summary.faster", **head)
    if why.named:
        return t("summary.faster_because", **head, subject=why.subject, reasons=why.named)
    # every cause the two differ in is too small for the gap: say so, name none as the reason
    return t(
        "summary.faster_small",
        **head,
        subject=why.subject,
        reasons=why.small,
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


def incorrect_line(r: Row, t: Translator) -> str:
    """Why a row is out of every ranking: its non-finite values, else its error and tolerance;
    with --backward, the gradients that failed where the output did not."""
    if r.accuracy_ok is not False and r.failed_gradients:
        return t(
            "summary.incorrect_grad",
            variant=r.label,
            grads=", ".join(r.failed_gradients),
            err=fmt_err(max(r.grad_max_abs_err.get(g, 0.0) for g in r.failed_gradients)),
        )
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


def load_reason(reason: str, t: Translator) -> str:
    """One of the load meter's reasons in the reader's language (as written when unknown)."""
    for key, pattern in _LOAD_REASONS:
        m = pattern.fullmatch(reason)
        if m:
            return t(key, **{k: localize(v) for k, v in m.groupdict().items()})
    return reason


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
    load = list(dict.fromkeys(x for r in ran for x in r.load_reasons))
    if load:  # first: every ratio below must be read with this in mind
        out.append(t("summary.unreliable", reasons="; ".join(load_reason(x, t) for x in load)))
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
