"""Where the CPU time went, for a trace with no device time: the share by CPU self time.

A CPU-only trace (oneDNN / MKL models) has no kernels to sum; its cost is in its ops. Each CPU
op's self time (its duration less that of the ops directly inside it, attnprof.analysis.attribution.regions
`cpu_nesting`, on every thread) goes to one group:

- attention: attention ops and every op inside one (attnprof.analysis.attribution.provenance: aten SDPA and
  friends, ops and record_function ranges whose name says attention, projection ops excepted),
  and the ops of confirmed GEMM -> softmax -> GEMM chains with the ops inside them;
- otherwise by the op's coarse group (attnprof.analysis.attribution.classify `cpu_category`): conv, gemm,
  norm, elementwise, communication (c10d / gloo / nccl ops), memory (copies), other (layout
  views, reductions, softmax, masks, allocation and everything else).

ProfilerStep#N ops of legacy traces are ranges, not work: they are left out.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.classify import cpu_category
from attnprof.analysis.attribution.provenance import PROJECTION_OPS, is_attention_op, says_attention
from attnprof.analysis.attribution.regions import backward_ops, cpu_nesting, inside
from attnprof.analysis.records.result import AttentionShare, CommShare, Share, TimeShare
from attnprof.trace.model import Kind, Trace, unique

__all__ = ["CPU_BASIS", "cpu_share"]

CPU_BASIS = (
    "CPU self time (an op's duration less that of the ops directly inside it), every thread: the "
    "trace has no device time; attention is attention ops and the ops inside them, and the ops of "
    "GEMM -> softmax -> GEMM chains confirmed by their shapes"
)
_COMM = re.compile(r"^(c10d|gloo|nccl)\w*::|all_?reduce|all_?gather|reduce_?scatter|broadcast_")
_STEP = re.compile(r"^ProfilerStep#\d+$")
_GROUP_OF = {"conv": "conv", "gemm": "gemm", "norm": "norm", "elementwise": "elementwise", "copy": "memory"}


def cpu_share(trace: Trace, chain_ops: npt.NDArray[np.int64]) -> Share | None:
    """The share by CPU self time; None when the trace has no CPU op time either."""
    cpu = trace.own(trace.rows(Kind.CPU_OP))  # not a capture trace's imported ops
    names = trace.names
    step = np.array([bool(_STEP.match(n)) for n in names], dtype=np.bool_)
    cpu = cpu[~step[trace.name[cpu]]] if cpu.size else cpu
    if cpu.size == 0:
        return None
    _, self_us = cpu_nesting(trace, cpu)
    total = float(self_us.sum())
    if total <= 0:
        return None

    # attention: inside an attention op, an op or range that says attention, or a chain op
    att_name = np.array([is_attention_op(n) is not None for n in names], dtype=np.bool_)
    says = np.array([says_attention(n) and n not in PROJECTION_OPS for n in names], dtype=np.bool_)
    ann = trace.own(trace.rows(Kind.ANNOTATION))
    holders = np.concatenate([cpu[(att_name | says)[trace.name[cpu]]], ann[says[trace.name[ann]]], chain_ops])
    is_att = inside(trace, holders, cpu) if holders.size else np.zeros(cpu.size, bool)
    proj = np.array([n in PROJECTION_OPS for n in names], dtype=np.bool_)[trace.name[cpu]]
    is_att &= ~proj | np.isin(cpu, chain_ops)

    # each distinct name's group once, then read per op through the name ids (an object array
    # built per op was a Python loop over every CPU op)
    group_of_name = np.full(len(names), "other", dtype=object)
    for i in unique(trace.name[cpu]).tolist():
        n = names[int(i)]
        group_of_name[int(i)] = (
            "communication" if _COMM.search(n) else _GROUP_OF.get(cpu_category(n), "other")
        )
    group = group_of_name[trace.name[cpu]]
    group[is_att] = "attention"

    def part(g: str) -> TimeShare:
        t = float(self_us[group == g].sum())
        return TimeShare(time_us=round(t, 3), pct=round(100.0 * t / total, 2))

    att = part("attention")
    bwd = inside(trace, backward_ops(trace, cpu), cpu) & (group == "attention")
    bwd_us = round(float(self_us[bwd].sum()), 3)
    return Share(
        device_time_us=0.0,
        attention=AttentionShare(
            time_us=att.time_us,
            pct=att.pct,
            fused_us=0.0,
            unfused_us=0.0,
            fwd_us=round(att.time_us - bwd_us, 3),
            bwd_us=bwd_us,
            unfused_bwd_us=0.0,
        ),
        gemm=part("gemm"),
        conv=part("conv"),
        communication=CommShare(
            **msgspec.structs.asdict(part("communication")), exposed_us=None, hidden_pct=None
        ),
        memory=part("memory"),
        other=part("other"),
        basis=CPU_BASIS,
        norm=part("norm"),
        elementwise=part("elementwise"),
        cpu_self_time_us=round(total, 3),
    )
