"""Why a variant did not run, in the reader's language.

A result records its rejection as a reason code with its fields (RunResult.reason_code, see
attnprof.reasons); a report says it from the catalog's `harness.<code>` message with those fields.
Any other reason (an exception, PyTorch's own warnings) is shown as the harness wrote it.

Records written before reason codes (run.json and stores of older attnprof versions) carry only the
English sentence. For them alone the standard sentences are still recognised by pattern
(LEGACY_PATTERNS) and said from the catalog; nothing else parses English.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from attnprof.reasons import render
from attnprof.records import ReasonCode
from attnprof.report.i18n import Translator

__all__ = ["LEGACY_PATTERNS", "say_loads", "translate_reason"]

_NAME = r"(?P<name>[\w.:+-]+)"
# (code, pattern of the whole English reason) of the reasons older records hold without a code;
# the groups are the message's fields
LEGACY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (code, re.compile(pattern))
    for code, pattern in (
        ("cuda_only", rf"{_NAME}: PyTorch implements it for CUDA only; this run is on (?P<device>\S+)"),
        (
            "flash_cuda_only",
            rf"{_NAME}: FlashAttention kernels run on CUDA only; this run is on (?P<device>\S+)",
        ),
        ("needs_half_cuda", rf"{_NAME} on CUDA needs fp16 or bf16; got (?P<dtype>\w+) \(use --dtype bf16\)"),
        ("needs_half", rf"{_NAME} needs fp16 or bf16; got (?P<dtype>\w+) \(use --dtype bf16\)"),
        (
            "bf16_capability",
            rf"{_NAME} in bf16 needs compute capability >= (?P<need>[\d.]+); this GPU is (?P<have>[\d.]+)",
        ),
        (
            "capability",
            rf"{_NAME} needs compute capability >= (?P<need>[\d.]+); this GPU is (?P<have>[\d.]+)",
        ),
        ("head_dim", rf"{_NAME} supports head_dim <= (?P<max>\d+); got (?P<got>\d+)"),
        ("no_cudnn", rf"{_NAME} needs cuDNN, which this torch build cannot load"),
        # the load meter's (attnprof.harness.load), with their figures: _PCT is a share in %
        ("load_other", r"other processes used (?P<share_pct>\d+)% of the (?P<n>\d+) CPUs while timing"),
        ("load_steal", r"the hypervisor took (?P<share_pct>\d+)% of CPU time \(steal\) while timing"),
        ("load_spread", r"timing spread up to (?P<share_pct>\d+)% of the median \(IQR\)"),
        ("load_loadavg", r"load average (?P<load_float>[\d.]+) on (?P<n>\d+) CPUs"),
    )
)


def _legacy(reason: str) -> ReasonCode | None:
    for code, pattern in LEGACY_PATTERNS:
        m = pattern.fullmatch(reason.strip())
        if m is not None:
            return ReasonCode(code=code, args=dict(map(_field, m.groupdict().items())))
    return None


def _field(item: tuple[str, str]) -> tuple[str, str | int | float]:
    """A pattern's group as the code's field: `<f>_pct` a share in % (0.57 from "57"),
    `<f>_float` a number, `n` a count; the rest as written."""
    key, text = item
    if key.endswith("_pct"):
        return key[:-4], int(text) / 100
    if key.endswith("_float"):
        return key[:-6], float(text)
    return key, int(text) if key == "n" else text


def say_loads(loads: Iterable[tuple[Sequence[str], Sequence[ReasonCode]]], t: Translator) -> list[str]:
    """The load meter's reasons (harness/load.py) of several timings, each once, in t's
    language: loads are (English reasons, their codes) pairs, a MachineLoad's or a compared
    row's. From the codes; a record written before them holds only the English, which is read
    as an older record's reason is (LEGACY_PATTERNS)."""
    seen: dict[str, ReasonCode | None] = {}
    for reasons, codes in loads:
        paired = (
            zip(reasons, codes, strict=True) if len(codes) == len(reasons) else ((r, None) for r in reasons)
        )
        for text, code in paired:
            seen.setdefault(text, code)
    return [translate_reason(text, t, code) for text, code in seen.items()]


def translate_reason(reason: str | None, t: Translator, code: ReasonCode | None = None) -> str:
    """The reason in t's language: from its code; without one (an older record), from the
    standard English sentence it is; else as the harness wrote it."""
    if code is None and reason:
        code = _legacy(reason)
    if code is None:
        return reason or ""
    return render(code, lambda c: t(f"harness.{c}"))
