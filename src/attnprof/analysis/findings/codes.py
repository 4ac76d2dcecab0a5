"""The catalogue of finding codes, as data: every code a finding can carry (the analyser's rules
and compare's run-level checks alike), the most severe level it is given, whether it makes a
variant faster ("good"), slower or its figures untrustworthy ("bad"), or only informs
("neutral"), and the key of its sentence in the report catalogs (report/i18n/*.po).

A rule never declares a severity: it makes its finding with `finding()`, which gives it the
catalogue's level, or "info" when the rule says the finding is minor (an immaterial cost:
materiality.Cost.material; an order-only match; a stability upcast), never a higher one. tests/test_codes.py holds every code the rules and compare
emit to this table, and every key to the en, id and th catalogs. The summary's cause lists
(compare/causes.py GOOD_CODES, BAD_CODES) are read from `cause` and `effect` (CAUSE_CODES).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from attnprof.analysis.records.result import Finding
from attnprof.catalogs import english, load_catalog, placeholders

__all__ = ["CATALOGUE", "CAUSE_CODES", "MESSAGE_KEY", "FindingCode", "code_info", "finding"]

Effect = Literal["good", "bad", "neutral"]
Severity = Literal["info", "warning", "error"]


class FindingCode(msgspec.Struct, frozen=True, kw_only=True):
    code: str
    severity: Severity  # the most severe level a finding of this code is given
    effect: Effect
    where: Literal["analysis", "compare"]  # which layer emits it
    # its place among the causes a speed gap can be explained by (compare/causes.py), in the
    # order a reader should hear them; None: never named as the cause of a gap (its catalog
    # sentence `reason.<code>` exists exactly when this is set)
    cause: int | None = None

    @property
    def key(self) -> str:
        """Its sentence in the report catalogs (`<key>.generic` where evidence is missing)."""
        return f"finding.{self.code}"


def _c(
    code: str,
    severity: Severity,
    effect: Effect,
    where: Literal["analysis", "compare"] = "analysis",
    cause: int | None = None,
) -> FindingCode:
    return FindingCode(code=code, severity=severity, effect=effect, where=where, cause=cause)


CATALOGUE: tuple[FindingCode, ...] = (
    # the trace itself
    _c("TRACE_REPAIRED", "warning", "neutral"),
    _c("NO_GPU_ACTIVITY", "warning", "neutral"),
    _c("DEVICE_EVENTS_NOT_ANALYSED", "warning", "neutral"),
    _c("LEGACY_TRACE_FORMAT", "info", "neutral"),
    _c("UNATTRIBUTED_GPU_OPS", "info", "neutral"),
    # how attention and its GEMMs ran
    _c("FUSED_ATTENTION", "info", "good", cause=1),
    _c("UNFUSED_ATTENTION", "warning", "bad", cause=6),
    _c("CUDA_CORE_GEMM", "warning", "bad", cause=5),
    _c("FP32_UPCAST", "warning", "bad", cause=1),
    _c("MASK_REBUILT_EACH_CALL", "warning", "bad", cause=2),
    _c("SAFE_SOFTMAX", "info", "bad", cause=3),
    _c("TRANSPOSES_BEFORE_KERNEL", "info", "bad", cause=7),
    _c("OUT_OF_PLACE_COPY", "warning", "bad", cause=4),
    _c("LOW_OCCUPANCY_BY_DESIGN", "info", "neutral"),
    _c("OCCUPANCY_NOT_MEASURED", "info", "neutral"),
    # the device idle, and why: each idle cause that makes every step slower is a cause a speed
    # gap can be explained by (its evidence times it: compare/build.py cause_shares); one-time
    # set-up (init, a slow first launch) is not: the clean timing runs after the warm-up
    _c("GPU_IDLE_SYNC", "warning", "bad", cause=8),
    _c("GPU_IDLE_BLOCKING_COPY", "warning", "bad", cause=11),
    _c("GPU_IDLE_ALLOCATOR", "warning", "bad", cause=12),
    _c("GPU_IDLE_INIT", "warning", "bad"),
    _c("GPU_IDLE_SLOW_LAUNCH", "warning", "bad"),
    # the host is not blocked by a stream wait call, and a wait on work the trace does not hold
    # is not idle time it explains: both are info and say nothing about speed
    _c("GPU_IDLE_STREAM_WAIT", "info", "neutral"),
    _c("GPU_WAIT_UNRECORDED_WORK", "info", "neutral"),
    _c("GPU_STREAM_WAIT_UNRECORDED", "info", "neutral"),
    _c("LAUNCH_BOUND", "warning", "bad", cause=10),
    _c("GPU_IDLE_HOST_COMPUTE", "warning", "bad", cause=9),
    _c("GPU_IDLE_DATA_LOADING", "warning", "bad", cause=15),
    _c("GPU_IDLE_PYTHON", "warning", "bad", cause=16),
    _c("GPU_IDLE_UNRECORDED", "info", "neutral"),
    _c("CUDA_GRAPH", "info", "good", cause=2),
    # the roofline and the per-op model
    _c("ABOVE_PEAK", "error", "bad"),
    _c("MEMORY_BOUND_GEMM", "warning", "bad"),
    _c("ATTENTION_BELOW_ROOF", "warning", "bad"),
    _c("DECODE_BELOW_BANDWIDTH", "warning", "bad"),
    _c("OP_ABOVE_ROOF", "error", "bad"),
    # compare's run-level checks (compare/compare.py): correctness and the timing itself
    _c("INCORRECT_OUTPUT", "error", "bad", "compare"),
    _c("INCORRECT_GRADIENT", "error", "bad", "compare"),
    _c("PAGE_FAULTS", "warning", "bad", "compare"),
    _c("COLD_ALLOCATOR", "warning", "bad", "compare"),
    _c("TOTAL_BELOW_BACKWARD", "warning", "bad", "compare"),
)

_BY_CODE = {c.code: c for c in CATALOGUE}

# the evidence field that names a finding's sentence in the catalogs
MESSAGE_KEY = "message_key"

# effect -> the codes that can explain a speed gap, in their `cause` order
CAUSE_CODES: dict[Effect, tuple[str, ...]] = {
    e: tuple(
        c.code
        for c in sorted((c for c in CATALOGUE if c.effect == e and c.cause), key=lambda c: c.cause or 0)
    )
    for e in ("good", "bad")
}


def code_info(code: str) -> FindingCode | None:
    return _BY_CODE.get(code)


def finding(
    code: str, evidence: dict[str, Any] | None = None, *, variant: str = "", minor: bool = False
) -> Finding:
    """A finding of a catalogued code at the catalogue's severity ("info" when `minor`: the rule
    found it but it costs too little, or is too uncertain, for the catalogue's level).

    Its sentence is the catalogs' (report/i18n/*.po), never the rule's: `finding.<code>`, or
    `finding.<code>.<variant>` where the rule has several phrasings, filled from the evidence.
    The message is the English one (the JSON's); the evidence names the key (`message_key`), so
    that the reports and the terminal word the same sentence in the reader's language."""
    info = _BY_CODE.get(code)
    if info is None:
        raise KeyError(f"{code} is not in analysis/findings/codes.py CATALOGUE")
    key = f"{info.key}.{variant}" if variant else info.key
    ev = {**(evidence or {}), MESSAGE_KEY: key}
    catalog = load_catalog("en")
    generic = info.where == "compare" and f"{key}.generic" in catalog
    if key not in catalog or not (placeholders(catalog[key]) <= set(ev) or generic):
        # evidence without a field its sentence reads is a rule's bug; compare's checks may lack
        # a figure (a run record without it), and say their `<key>.generic` sentence then
        missing = placeholders(catalog.get(key, "")) - set(ev)
        raise KeyError(f"{key}: no such sentence in en.po, or its evidence lacks {sorted(missing)}")
    return Finding(code, "info" if minor else info.severity, english(key, ev), ev)
