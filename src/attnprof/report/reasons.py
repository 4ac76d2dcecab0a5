"""The harness's standard reasons for a variant that did not run, in the reader's language.

The harness writes its reasons in English (attnprof.variants: "sdpa-efficient: PyTorch implements
it for CUDA only; this run is on cpu"). Reports recognise the standard ones by pattern and say
them from the catalog (`harness.*` messages) with the same values; any other reason, such as
PyTorch's own warnings or an exception, is shown as the harness wrote it.
"""

from __future__ import annotations

import re

from attnprof.report.i18n import Translator

__all__ = ["HARNESS_REASONS", "translate_reason"]

_NAME = r"(?P<name>[\w.:+-]+)"
# (message id, pattern of the whole English reason); the groups are the message's fields
HARNESS_REASONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern))
    for key, pattern in (
        (
            "harness.cuda_only",
            rf"{_NAME}: PyTorch implements it for CUDA only; this run is on (?P<device>\S+)",
        ),
        (
            "harness.flash_cuda_only",
            rf"{_NAME}: FlashAttention kernels run on CUDA only; this run is on (?P<device>\S+)",
        ),
        (
            "harness.needs_half_cuda",
            rf"{_NAME} on CUDA needs fp16 or bf16; got (?P<dtype>\w+) \(use --dtype bf16\)",
        ),
        (
            "harness.needs_half",
            rf"{_NAME} needs fp16 or bf16; got (?P<dtype>\w+) \(use --dtype bf16\)",
        ),
        (
            "harness.bf16_capability",
            rf"{_NAME} in bf16 needs compute capability >= (?P<need>[\d.]+); this GPU is (?P<have>[\d.]+)",
        ),
        (
            "harness.capability",
            rf"{_NAME} needs compute capability >= (?P<need>[\d.]+); this GPU is (?P<have>[\d.]+)",
        ),
        ("harness.head_dim", rf"{_NAME} supports head_dim <= (?P<max>\d+); got (?P<got>\d+)"),
        ("harness.no_cudnn", rf"{_NAME} needs cuDNN, which this torch build cannot load"),
    )
)


def translate_reason(reason: str | None, t: Translator) -> str:
    """The reason in t's language when it is a standard one, else as the harness wrote it."""
    if not reason:
        return reason or ""
    for key, pattern in HARNESS_REASONS:
        m = pattern.fullmatch(reason.strip())
        if m is not None:
            return t(key, **m.groupdict())
    return reason
