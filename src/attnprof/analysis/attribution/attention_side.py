"""Which device ops are memory work, not compute: the fills, memsets, memcpys, casts, copies and
KV-cache writes that an attention op also runs (issue 28).

Provenance (attnprof.analysis.attribution.provenance) makes a device op attention because an
attention op launched or encloses it; that holds for what the op computes, not for the buffers
it zeroes or the KV cache it writes: in a vLLM capture, 24 FillFunctor kernels inside
`vllm::unified_attention_with_output` were 38% of the device time and called attention. Such an
op gets a kind (SIDE_KINDS) here, and provenance counts it as attention-side memory instead.

A device op's kind is what the most direct of these says (among the ops around a launch, the
first kind in SIDE_KINDS order):
1. the device op itself: a memset or memcpy event;
2. its kernel name (KERNEL_KINDS): vLLM's reshape_and_cache* / concat_and_cache*, FlashInfer's
   AppendPagedKVCache (cache writes), FillFunctor / fill_ (fills), ROCm's rocclr fill / copy
   buffer kernels (hipMemset / hipMemcpy as kernels);
3. an op that launched or encloses it on its thread (OP_KINDS): the cache-write ops
   (vllm::unified_kv_cache_update, _C_cache_ops::reshape_and_cache_flash, ...), aten's
   fill_ / zero_ / zeros / full ..., aten::_to_copy / to / type_as (casts), aten::copy_ / clone /
   contiguous / index_copy_ / cat (copies): a cast runs aten::copy_ inside aten::_to_copy, so
   the enclosing op, not only the launching one, tells it;
4. the kernel's category "copy" (kernel_rules: direct_copy, transpose, permute, ...).
Everything else (GEMMs, softmax, elementwise math, reductions, attention and unknown kernels) is
compute: -1.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.classify import CAT_INDEX
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.matching import first_match, register
from attnprof.analysis.attribution.regions import inside
from attnprof.trace.model import Kind, Trace

__all__ = ["KERNEL_KINDS", "OP_KINDS", "SIDE_KINDS", "memory_kinds"]

# the kinds, in the order that decides a device op that several say (a cache write is a copy
# too; a fill inside a cast is a fill); the JSON keys of share.attention_side.kinds
SIDE_KINDS = ("cache write", "fill", "memset", "memcpy", "cast", "copy")

# kernel names, first match wins; each row has a test with a real name (tests/test_attention_side.py)
KERNEL_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "cache write",
        re.compile(r"(?i)reshape_and_cache|concat_and_cache|AppendPaged\w*KVCache|append_paged_kv_cache"),
    ),
    # not masked_fill (mask building is compute): fill_ only where no word part comes before it
    ("fill", re.compile(r"FillFunctor|(?<![A-Za-z_])fill_|rocclr_fill")),
    ("memset", re.compile(r"(?i)memset")),
    ("memcpy", re.compile(r"(?i)memcpy|rocclr_copy")),
)

# CPU op names, first match wins
OP_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cache write", re.compile(r"(?i)(reshape|concat)_and_cache|append_paged_kv_cache|kv_cache_update")),
    (
        "fill",
        re.compile(
            r"^aten::(fill_|zero_|zeros|zeros_like|ones|ones_like|full|full_like|new_zeros|new_ones|new_full)$"
        ),
    ),
    ("cast", re.compile(r"^aten::(_to_copy|to|type_as)$")),
    ("copy", re.compile(r"^aten::(copy_|clone|contiguous|index_copy_?|cat)$")),
)

register(p for _, p in KERNEL_KINDS + OP_KINDS)

I8 = npt.NDArray[np.int8]


def memory_kinds(trace: Trace, links: Links, gpu_cat: npt.NDArray[np.int16]) -> I8:
    """Per GPU op (Links.gpu_rows), the index into SIDE_KINDS of what memory work it is, -1 for
    compute (module docstring: the device op, its name, the ops around its launch, its category)."""
    g = links.gpu_rows
    n = g.size
    kind = np.full(n, -1, np.int8)
    if n == 0:
        return kind
    index = {k: i for i, k in enumerate(SIDE_KINDS)}

    def per_name(table: tuple[tuple[str, re.Pattern[str]], ...]) -> I8:
        """Per unique name (trace.names), the kind the table says, -1 for none: once per name."""
        return np.array([index.get(first_match(table, s) or "", -1) for s in trace.names], np.int8)

    name_kind, op_kind = per_name(KERNEL_KINDS), per_name(OP_KINDS)

    by_op = np.full(n, len(SIDE_KINDS), np.int8)  # the first kind an op around the launch says
    anchor = np.where(links.cpu_op >= 0, links.cpu_op, links.launch)
    anchored = anchor >= 0
    if anchored.any():
        cpu = trace.rows(Kind.CPU_OP)
        cpu_kind = op_kind[trace.name[cpu]]
        a_rows = anchor[anchored]
        for k in range(len(SIDE_KINDS) - 1, -1, -1):  # the last write is the first kind
            ops = cpu[cpu_kind == k]
            if ops.size:
                hit = np.zeros(n, bool)
                hit[anchored] = inside(trace, ops, a_rows)
                by_op[hit] = k

    g_kind = trace.kind[g]
    by_event = np.full(n, len(SIDE_KINDS), np.int8)
    by_event[g_kind == Kind.MEMSET] = index["memset"]
    by_event[g_kind == Kind.MEMCPY] = index["memcpy"]
    by_name = name_kind[trace.name[g]]
    by_name = np.where(by_name >= 0, by_name, len(SIDE_KINDS)).astype(np.int8)
    by_cat = np.where(gpu_cat == CAT_INDEX["copy"], index["copy"], len(SIDE_KINDS)).astype(np.int8)
    # the most direct evidence first: the event, its name, the ops around it, its category
    for said in (by_cat, by_op, by_name, by_event):
        kind = np.where(said < len(SIDE_KINDS), said, kind).astype(np.int8)
    return kind
