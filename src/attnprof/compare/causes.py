"""What explains a speed gap: the typed causes of one row beating another, each sized against the
clean time gap, and which of them are large enough to name. The summary renders the resulting
record (records.py `Why`, on Row.why) and decides nothing.

A cause is evidence the two rows differ in, pointing the way the clean times do: a finding the
faster one has and the slower lacks (what it does right: `effect` "good" in analysis/findings/codes.py),
else one the slower has and the faster lacks (what it does wrong: "bad"), else fewer ops per
forward. Each is sized from the traces' time shares (the lean pass's when the run kept it:
Row.time_source) against the clean time gap and named only when it accounts for CAUSE_SHARE of
the gap or more; sized causes that all account for less are recorded as too small; one that
cannot be sized is not recorded at all.
"""

from __future__ import annotations

from attnprof.analysis.findings.codes import CAUSE_CODES
from attnprof.compare.rank import Speed
from attnprof.compare.records import FEWER_OPS, Cause, Row, Why

__all__ = [
    "BAD_CODES",
    "CAUSE_SHARE",
    "GOOD_CODES",
    "cause_ms",
    "explain",
    "extra_ops_ms",
    "opaque",
    "why_faster",
]

# findings that make a variant slower, in the order a reader should hear them, and those that
# make it faster: the catalogue's (analysis/findings/codes.py `cause` order)
BAD_CODES: tuple[str, ...] = CAUSE_CODES["bad"]
GOOD_CODES: tuple[str, ...] = CAUSE_CODES["good"]

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


def opaque(row: Row) -> bool:
    """Runs as compiled code (Row.compiled_region): its op counts and op-level findings cannot be
    set against an eager variant's."""
    return row.compiled_region


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
    forward (its time source's, in its ops' lane: build.py `_apply_times`) applied to the clean
    median. None without either."""
    traced = row.ops_time_us_per_forward
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


def extra_ops_ms(fast: Row, slow: Row) -> float | None:
    """What `slow`'s ops beyond `fast`'s cost, in clean ms: per op name, the part of slow's time
    in it that its calls beyond fast's count take (all of it for an op fast never runs)."""
    if not slow.ops:
        return None
    theirs = {o.name: o.count for o in fast.ops}
    extra = sum(
        o.time_us * max(0.0, o.count - theirs.get(o.name, 0.0)) / o.count for o in slow.ops if o.count > 0
    )
    return _clean_ms(slow, extra)


def explain(fast: Row, slow: Row) -> Why | None:
    """Why `fast` beats `slow` (module docstring), or None when no record says why. Never for a
    compiled (opaque) side, whose trace cannot show the ops or findings an eager one would."""
    if opaque(fast) or opaque(slow) or fast.median_ms is None or slow.median_ms is None:
        return None
    gap = slow.median_ms - fast.median_ms
    fast_codes, slow_codes = set(fast.finding_codes), set(slow.finding_codes)
    # credit what the faster one does right first ("computes attention in one fused kernel" says
    # more than "the other materialises the scores"), else what the slower one does wrong
    good = [Cause(c, cause_ms(fast, slow, c)) for c in GOOD_CODES if c in fast_codes and c not in slow_codes]
    bad = [Cause(c, cause_ms(slow, fast, c)) for c in BAD_CODES if c in slow_codes and c not in fast_codes]
    both_gpu = bool(fast.gpu_ops_per_forward and slow.gpu_ops_per_forward)
    n = fast.gpu_ops_per_forward if both_gpu else fast.cpu_ops_per_forward
    m = slow.gpu_ops_per_forward if both_gpu else slow.cpu_ops_per_forward
    fewer = [Cause(FEWER_OPS, extra_ops_ms(fast, slow))] if n is not None and m is not None and n < m else []

    def why(subject: Row, named: list[Cause] | None = None, small: list[Cause] | None = None) -> Why:
        return Why(
            fast=fast.label,
            slow=slow.label,
            subject=subject.label,
            subject_is_fast=subject is fast,
            named=named or [],
            small=small or [],
            largest_ms=max((c.ms or 0.0 for c in small or []), default=0.0),
            gap_ms=gap,
            ops_fast=n,
            ops_slow=m,
        )

    order = ((fast, good), (slow, bad), (fast, fewer))
    for subject, causes in order:
        named = [c for c in causes if c.ms is not None and c.ms >= CAUSE_SHARE * gap]
        if named:
            return why(subject, named=named)
    # nothing large enough: the causes that could be sized, recorded as too small (the slower
    # one's faults first: they are what a reader suspects)
    for subject, causes in (order[1], order[0], order[2]):
        small = [c for c in causes if c.ms is not None]
        if small:
            return why(subject, small=small)
    return None


def why_faster(fast: Row, slow: Row, sp: Speed) -> Why | None:
    """The explanation a claim gets, if any: only a claim beyond noise ("faster"), between rows of
    a reliable run, about the forward (the causes are sized against the forward's clean gap from
    the forward's trace: a claim about forward + backward or a model step gets none)."""
    if not sp.beyond_noise or fast.unreliable or slow.unreliable:
        return None
    if not fast.ranked_by == slow.ranked_by == "forward":
        return None
    return explain(fast, slow)
