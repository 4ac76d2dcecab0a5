"""Kernel classification: a kernel name's category, family, tensor-core use, precision and
direction, by the first matching rule of the ordered table in kernel_rules.py (its docstring
says why the order is what it is; DOMAIN.md section 4).

Attention and softmax kernels also get a direction (_DIRECTION): "bwd-aux" for the backward
helpers (attention pre/post-processing), "bwd" for names saying bwd / backward / bprop
(fmha_cutlassB), else "fwd". Memcpy and memset events are classified by their event kind, not
by a rule. Precision is read from the name separately (_PRECISION) and is None when the name
does not say. Classification runs once per unique name, never per event. `first_match`
(matching.py, re-exported here) is the one ordered matcher of every name table in the analysis. An aten op's coarse group is
cpu_groups.py `cpu_category` (re-exported here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from attnprof.analysis.attribution.cpu_groups import cpu_category
from attnprof.analysis.attribution.kernel_rules import RULES, Rule
from attnprof.analysis.attribution.matching import first_match, register

__all__ = [
    "CATEGORIES",
    "CAT_INDEX",
    "RULES",
    "Classification",
    "Rule",
    "classify",
    "cpu_category",
    "device_event_category",
    "first_match",
    "precision_of",
]

CATEGORIES = (
    "attention",
    "gemm",
    "conv",
    "quantize",
    "softmax",
    "elementwise",
    "reduction",
    "norm",
    "mask",
    "copy",
    "memcpy",
    "memset",
    "communication",
    "triton",
    "sync",
    "other",
)
# a category's position in CATEGORIES: the pipeline's per-op category codes (int16 columns)
CAT_INDEX = {c: i for i, c in enumerate(CATEGORIES)}


@dataclass(frozen=True)
class Classification:
    category: str
    family: str
    tensor_cores: bool | None
    precision: str | None
    # attention and softmax kernels: "fwd", "bwd" (the gradient kernels) or "bwd-aux" (backward
    # pre/post-processing that does no matrix multiply); None for every other category
    direction: str | None = None


# direction of attention and softmax kernels, first match wins; no match: forward
_DIRECTION: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bwd-aux", next(r.pattern for r in RULES if r.family == "attention backward pre/post-processing")),
    ("bwd", re.compile(r"(?i)bwd|backward|bprop|fmha_cutlassB|dgrad")),
)

# first match wins; order matters (bf16 before fp16: "bf16" contains "f16")
_PRECISION: tuple[tuple[str, re.Pattern[str]], ...] = (
    # fp4 / fp8 first: an fp8 GEMM's name often says its bf16 output too ("bmm_Bfloat16_E2m1E2m1")
    ("fp4", re.compile(r"(?i)e2m1|mxfp4|nvfp4|fp4")),
    ("fp8", re.compile(r"(?i)fp8(?!kv)|e4m3|e5m2|float8|mxfp8")),
    ("bf16", re.compile(r"(?i)bf16|bfloat16")),
    ("fp16", re.compile(r"(?i)(?<![a-z0-9])(f16|fp16)|half|__half|\bh(884|1688|16816)|_f16")),
    # "_s8" in lower case only: "S8_" in a mangled name is a substitution, not int8
    ("int8", re.compile(r"(?i:int8|i8816|i16832)|_s8")),
    ("tf32", re.compile(r"(?i)tf32|(?<![hb])s1688gemm(?!_(fp16|bf16))")),
    ("fp64", re.compile(r"(?i)dgemm|double|f64")),
    ("fp32", re.compile(r"(?i)f32|fp32|float|sgemm|_scudnn_|sm\d+_xmma_gemm_f32")),
)

_FALLBACK = ("other", "other", None)


# other accelerators' device events (Kind.DEVICE: MTIA's mtia_ccp_events) by name: DMA is a
# copy, waits and event records are "sync" (the device waits, it does not compute)
_DEVICE_EVENT = (
    ("memcpy", re.compile(r"(?i)dma|memcpy")),
    ("sync", re.compile(r"(?i)wait|event_record|sync|barrier")),
)


register([r.pattern for r in RULES] + [p for _, p in _PRECISION + _DIRECTION + _DEVICE_EVENT])


def device_event_category(name: str) -> str:
    """Category of another accelerator's device event; the kernel rules when no rule names it."""
    return first_match(_DEVICE_EVENT, name) or classify(name).category


def precision_of(name: str) -> str | None:
    return first_match(_PRECISION, name)


@lru_cache(maxsize=65536)
def classify(name: str) -> Classification:
    """Category, family, tensor-core use and precision of one kernel name."""
    rule = first_match(((r, r.pattern) for r in RULES), name)
    category, family, tensor_cores = (rule.category, rule.family, rule.tensor_cores) if rule else _FALLBACK
    direction = None
    if category in ("attention", "softmax"):
        direction = first_match(_DIRECTION, name) or "fwd"
    return Classification(category, family, tensor_cores, precision_of(name), direction)
