"""Which device ops are attention: by where they came from first, by their names second.

A list of kernel names always lags the ecosystem (every serving stack brings its own paged,
Triton or assembly attention kernels); what the trace records about a kernel's origin does not.
Each device op gets the first rule of RULES that holds (RULE_NAMES; -1 when none does):

1. "launching op": the CPU op that launched it is an attention op (ATTENTION_OPS: aten's SDPA
   ops and their backward, flash_attn, FlashInfer, xformers, vLLM, SGLang, aiter attention ops);
2. "enclosing op": an attention op encloses the launching op (or, without one, the launch) on
   its thread: the math kernels inside aten::scaled_dot_product_attention, a paged-attention
   kernel launched inside vllm::unified_attention;
3. "named op or range": a CPU op or record_function range whose name says attention
   (SAYS_ATTENTION: FooAttention.forward, self_attn, mylib::my_attention ...) encloses it,
   except the projection GEMMs (PROJECTION_OPS: q/k/v/o projections live inside an attention
   module but are not attention);
4. "python frame or module": a python_function frame (with_stack=True) on the launching thread
   whose name says attention encloses it: "nn.Module: Qwen2Attention_0",
   "vllm/attention/layer.py(300): forward", "<built-in function scaled_dot_product_attention>";
5. "gpu range": a device op with no launch lies inside a gpu_user_annotation range whose name
   says attention (graph replays keep their device-side ranges);
6. "kernel name": its name is an attention kernel's (attnprof.analysis.attribution.classify) and no rule
   above holds: the fallback, listed as such (graph replays without a capture, lost launches);
7. "dataflow": its op belongs to a GEMM -> softmax -> GEMM chain confirmed by shapes
   (attnprof.analysis.attribution.cpu_ops.unfused_chains), or to that chain's backward ops;
8. "kv-cache write": attention-side memory only, never attention (below).

Attention work only: a device op that rules 1-5 would place under an attention op but that is
memory work (attnprof.analysis.attribution.attention_side: fills, memsets, memcpys, casts,
copies, KV-cache writes) is not attention; Provenance.side keeps the rule that placed it there
and Provenance.side_kind its kind, for the share's separate "attention-side memory" part. The
kernel-name and dataflow rules are not moved: an attention kernel's name and a confirmed chain
say attention of themselves. A KV-cache write is attention-side memory wherever it runs (rule
"kv-cache write": a KV cache serves attention only): vLLM launches reshape_and_cache_flash from
vllm::unified_kv_cache_update, beside the attention op, not inside it; its kind comes from its
op's name or, without one, its kernel's.

Rules 3 and 4 (a name that merely says attention: a module, a range, a frame) claim only the
device ops that the kernel-name rules leave without a category of their own (other, triton): a
serving stack's unknown kernel inside vllm/attention/..., not the RoPE, norms, residual adds and
copies an attention module also runs (HF's BertAttention holds its output LayerNorm).
Rules 2-4 hold what an op, range or frame encloses, less the collectives and the projection
GEMMs: GEMM kernels not launched by an activation GEMM op (ACTIVATION_GEMMS: the Q K^T and P V
products use bmm / matmul / baddbmm / einsum; the q, k, v, o projections use linear / addmm / mm
or a library's own quantised GEMM op), and anything inside aten::linear.

The launching op is Links.cpu_op: Trace.op_link where another module filled it (a graph replay
matched to its capture, attnprof.analysis.replay.replay), else the External id, else containment of
the launch (attnprof.analysis.attribution.links). Rules 1-3 treat an op linked by any of these alike: its
anchor is the CPU op's start on the CPU op's thread. Names of ops are matched once per name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.attention_side import SIDE_KINDS
from attnprof.analysis.attribution.links import Links
from attnprof.analysis.attribution.matching import first_match, register
from attnprof.analysis.attribution.regions import backward_ops, inside
from attnprof.trace.model import Kind, Trace

__all__ = [
    "ACTIVATION_GEMMS",
    "ATTENTION_OPS",
    "PROJECTION_OPS",
    "RULE_NAMES",
    "SAYS_ATTENTION",
    "Provenance",
    "attention_provenance",
    "is_attention_op",
    "says_attention",
]

RULE_NAMES = (
    "launching op",
    "enclosing op",
    "named op or range",
    "python frame or module",
    "gpu range",
    "kernel name",
    "dataflow",
    # attention-side memory only (Provenance.side), never attention: a KV-cache write
    "kv-cache write",
)
NAME_RULE = RULE_NAMES.index("kernel name")
DATAFLOW_RULE = RULE_NAMES.index("dataflow")
KV_CACHE_RULE = RULE_NAMES.index("kv-cache write")

# attention ops by framework, as (label, pattern) data, first match wins; each label has a test
# with a real op name (tests/test_provenance.py)
ATTENTION_OPS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "aten SDPA",
        re.compile(
            r"^aten::_?scaled_dot_product\w*|^aten::_(flash|efficient|cudnn)_attention\w*"
            r"|^aten::_native_multi_head_attention|^aten::_fused_sdp_choice"
        ),
    ),
    (
        "aten SDPA backward",
        re.compile(
            r"ScaledDotProduct\w*Backward\d*|(Flash|Efficient|Cudnn)Attention\w*Backward\d*"
            r"|^aten::_scaled_dot_product\w*_backward"
        ),
    ),
    ("flash_attn", re.compile(r"^flash_attn\w*::|^FlashAttn\w*Func|^_?flash_attn_\w+")),
    ("FlashInfer", re.compile(r"(?i)^flashinfer\w*::\w*(prefill|decode|attention|mla|merge_state|cascade)")),
    ("xformers", re.compile(r"^xformers\w*::\w*(attention|fmha|flash)|^xformers_flash\w*::")),
    ("vLLM", re.compile(r"^(vllm|_C|_rocm_C|_vllm_fa\d_C)::\w*(attention|attn|mla)\w*")),
    ("SGLang", re.compile(r"^(sglang|sgl_kernel)::\w*(attention|attn|mla|merge_state)\w*")),
    ("aiter", re.compile(r"^aiter::\w*(fmha|mha|attention|attn|pa_|paged)\w*")),
    ("flex attention", re.compile(r"flex_attention|FlexAttention")),
)

register(p for _, p in ATTENTION_OPS)

# any other op or range whose name says attention (rule 3): a module's forward, a custom op, a
# record_function range; "attn" as a word part (self_attn, attn_fwd), "sdpa", "mha"
SAYS_ATTENTION = re.compile(
    r"(?i)attention|(?<![a-z])attn(?![a-z])|_attn|attn_|sdpa|(?<![a-z])f?mha(?![a-z])"
)

# the projection GEMMs (q, k, v, o) that run inside an attention module: not attention
PROJECTION_OPS = frozenset({"aten::linear", "aten::addmm", "aten::mm", "aten::_addmm_activation"})
# the GEMM ops of attention itself (scores and the weighted sum of values)
ACTIVATION_GEMMS = frozenset({"aten::bmm", "aten::matmul", "aten::baddbmm", "aten::einsum"})


def is_attention_op(name: str) -> str | None:
    """The label of the ATTENTION_OPS entry an op name matches, else None."""
    return first_match(ATTENTION_OPS, name)


def says_attention(name: str) -> bool:
    return bool(SAYS_ATTENTION.search(name))


I8 = npt.NDArray[np.int8]
B = npt.NDArray[np.bool_]


@dataclass
class Provenance:
    rule: I8  # per GPU op (index into Links.gpu_rows): index into RULE_NAMES, -1 = not attention
    backward: B  # per GPU op: launched from inside a backward op (its attention time is bwd)
    # per GPU op: the rule (RULE_NAMES) that placed this memory work under an attention op, -1
    # where none did (then it is not attention-side memory); and its attention_side.SIDE_KINDS
    side: I8
    side_kind: I8

    @property
    def attention_side(self) -> B:
        return np.asarray(self.side >= 0)

    @property
    def attention(self) -> B:
        return np.asarray(self.rule >= 0)


def _name_id(trace: Trace, name: str) -> int:
    try:
        return trace.names.index(name)
    except ValueError:
        return -1


def _names_where(trace: Trace, pred: Callable[[str], object]) -> B:
    """Per unique name (trace.names), whether pred(name) holds: computed once per name."""
    return np.array([bool(pred(n)) for n in trace.names], dtype=np.bool_)


def attention_provenance(
    trace: Trace,
    links: Links,
    by_name: B,
    chain_gpu: npt.NDArray[np.int64],
    never: B,
    gemm: B | None = None,
    unplaced: B | None = None,
    memory: I8 | None = None,
) -> Provenance:
    """The rule that makes each device op attention. by_name: per GPU op, whether its kernel name
    is an attention kernel's; chain_gpu: the GPU ops of confirmed unfused chains; never: the GPU
    ops no enclosing op or range can make attention (collectives: FSDP gathers an attention
    module's weights inside its range, and that is communication); gemm: the GEMM kernels
    (their launching op tells a projection from an attention product); unplaced: the device
    ops the kernel-name rules leave in no category of their own (other, triton), the only ones
    a name that merely says attention may claim (rules 3 and 4); memory: per GPU op, its
    attention_side.SIDE_KINDS index, -1 for compute (the ops rules 1-5 may not make attention)."""
    n = links.gpu_rows.size
    rule = np.full(n, -1, np.int8)
    if n == 0:
        return Provenance(rule, np.zeros(0, bool), rule.copy(), rule.copy())
    att_name = _names_where(trace, is_attention_op)
    says_name = _names_where(trace, says_attention) & ~att_name
    proj_name = _names_where(trace, lambda s: s in PROJECTION_OPS)

    cpu = trace.rows(Kind.CPU_OP)
    ann = trace.rows(Kind.ANNOTATION)
    op = links.cpu_op
    has_op = op >= 0
    # the anchor: the launching CPU op where known (by any means), else the launch itself
    anchor = np.where(has_op, op, links.launch)
    anchored = anchor >= 0
    a_rows = anchor[anchored]

    launched_by = np.zeros(n, bool)
    launched_by[has_op] = att_name[trace.name[op[has_op]]]
    rule[launched_by] = 0

    # rules 2 and 3 hold what an op or range encloses, less the projection GEMMs (launched by a
    # projection op, or inside aten::linear: nn.MultiheadAttention's fast path runs its in- and
    # out-projections inside aten::_native_multi_head_attention) and the collectives
    excluded = never.copy()
    excluded[has_op] |= proj_name[trace.name[op[has_op]]]
    if gemm is not None:
        act_name = _names_where(trace, lambda s: s in ACTIVATION_GEMMS)
        activation = np.zeros(n, bool)
        activation[has_op] = act_name[trace.name[op[has_op]]]
        excluded |= gemm & ~activation
    linear = cpu[trace.name[cpu] == _name_id(trace, "aten::linear")]
    if linear.size:
        excluded[anchored] |= inside(trace, linear, a_rows)

    enclosed = np.zeros(n, bool)
    enclosed[anchored] = inside(trace, cpu[att_name[trace.name[cpu]]], a_rows)
    rule[(rule < 0) & enclosed & ~excluded] = 1

    # rule 3: ops and ranges that merely say attention
    saying = np.concatenate([cpu[says_name[trace.name[cpu]]], ann[says_name[trace.name[ann]]]])
    named = np.zeros(n, bool)
    named[anchored] = inside(trace, saying, a_rows)
    # rules 3 and 4 claim only what the names leave unplaced: an attention module also runs
    # RoPE, norms, residual adds and copies that are not attention (BertAttention holds the
    # output LayerNorm), while an unknown kernel inside vllm/attention/... is attention
    # (and confirm what a kernel's name already says: no caveat then)
    broad = ~excluded & ((unplaced if unplaced is not None else np.ones(n, bool)) | by_name)
    rule[(rule < 0) & named & broad] = 2

    # rule 4: Python frames and nn.Module frames (with_stack) that say attention
    # every frame, the capture trace's imported ones too: a replayed kernel anchors at its captured op
    py = trace.rows(Kind.PYTHON)
    py = py[says_name[trace.name[py]] | att_name[trace.name[py]]] if py.size else py
    if py.size:
        framed = np.zeros(n, bool)
        framed[anchored] = inside(trace, py, a_rows)
        rule[(rule < 0) & framed & broad] = 3

    # rule 5: unlaunched device ops inside an attention-named gpu_user_annotation range
    gpu_ann = trace.rows(Kind.GPU_ANNOTATION)
    gpu_ann = gpu_ann[(att_name | says_name)[trace.name[gpu_ann]]] if gpu_ann.size else gpu_ann
    free = np.flatnonzero((links.launch < 0) & ~has_op & (rule < 0) & ~never)
    if gpu_ann.size and free.size:
        rows = links.gpu_rows[free]
        # the range and the kernels it holds sit on the device's lanes: match by process (device)
        pid = np.array([p for p, _ in trace.lanes], dtype=object)
        k_pid, a_pid = pid[trace.lane[rows]], pid[trace.lane[gpu_ann]]
        t = trace.ts[rows]
        hit = np.zeros(free.size, bool)
        for r, p in zip(gpu_ann.tolist(), a_pid.tolist(), strict=True):
            s, e = trace.ts[r], trace.ts[r] + trace.dur[r]
            hit |= (k_pid == p) & (t >= s) & (t <= e)
        rule[free[hit]] = RULE_NAMES.index("gpu range")

    chain = np.zeros(n, bool)
    chain[chain_gpu] = True
    # memory work an attention op runs is not attention (the fills, casts and KV-cache writes of
    # vllm::unified_attention_with_output); a name or a confirmed chain that says attention
    # keeps it
    side = np.full(n, -1, np.int8)
    side_kind = np.full(n, -1, np.int8)
    if memory is not None:
        moved = (memory >= 0) & (rule >= 0) & ~by_name & ~chain
        side[moved] = rule[moved]
        side_kind[moved] = memory[moved]
        rule[moved] = -1
        cache = (memory == SIDE_KINDS.index("cache write")) & (side < 0) & (rule < 0) & ~by_name & ~chain
        side[cache] = KV_CACHE_RULE
        side_kind[cache] = memory[cache]

    rule[(rule < 0) & by_name] = NAME_RULE
    rule[(rule < 0) & chain] = DATAFLOW_RULE

    backward = np.zeros(n, bool)
    if anchored.any():
        backward[anchored] = inside(trace, backward_ops(trace, cpu), a_rows)
    return Provenance(rule, backward, side, side_kind)
