"""Inference phases: a serving trace's steps split into prefill, decode and mixed.

Where the phase comes from, first that applies:

1. **Step ranges that name it**: vLLM's ``execute_<tokens>_context_<C>(sq..sk..)_generation_<G>(..)``
   (C prefill and G decode requests in one step: prefill when G is 0, decode when C is 0, else
   mixed; the ``sq``/``sk`` sums, query and KV tokens, are read as recorded), and any
   record_function range or CPU op whose name says ``prefill`` / ``extend`` / ``context`` or
   ``decode`` / ``generation`` (SGLang's forward_extend / forward_decode, TensorRT-LLM's context /
   generation; record_function ranges only). A device op belongs to the innermost such range
   around its launch call (any thread of the launching process), else, with no launch, around
   its own start.
2. **Attention kernel families**, where no range names a phase: a paged / split-KV decode
   attention kernel (``paged_attention``, ``decode``, ``flash_decoding``, ``split_kv``) is decode,
   a prefill or variable-length one (``prefill``, ``varlen``, ``context``) is prefill. Only
   attention kernels get a phase this way; every other op is "unknown", and the record says so.

A mixed step runs both phases in the same kernels (vLLM's unified attention serves prefill and
decode requests in one launch), so its time is not split: it is reported as "mixed", with its
batch's composition. Per phase: the steps, device time, attention time and share (attention as
the share counts it), and the CPU ops with the most device time (launched-op attribution, a
graph replay's captured op included). Rates: the per-op model (attnprof.analysis.perf.op_model) over
the launching ops that have a formula and recorded inputs gives the phase's model FLOPs and
bytes and their achieved rates over those ops' device time; attention's bytes over its time
(``attention_tbps``, and its share of the HBM peak where the device's is known) is how decode
attention is judged: it streams the KV cache.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.links import Links, PointIndex
from attnprof.analysis.perf.op_model import OpCost, decode_inputs, known, model_op
from attnprof.analysis.perf.perf_model import roofs_for
from attnprof.analysis.records.result import Device, Phase, PhaseOp, Phases, StepBatch
from attnprof.trace.inputs import among
from attnprof.trace.model import Kind, Trace, unique, value_ids

__all__ = ["PHASES", "phase_of_kernel", "phase_of_range", "phases"]

PHASES = ("prefill", "decode", "mixed")
_VLLM = re.compile(
    r"^execute_(?P<tokens>\d+)_context_(?P<c>\d+)\((?P<cs>[^)]*)\)_generation_(?P<g>\d+)\((?P<gs>[^)]*)\)"
)
_PREFILL = re.compile(r"(?i)prefill|(^|_)extend($|_)|(^|_)context($|_)")
_DECODE = re.compile(r"(?i)decode|(^|_)generation($|_)")
_K_DECODE = re.compile(r"(?i)paged_?attention|decode|flash_decoding|split_?kv")
_K_PREFILL = re.compile(r"(?i)prefill|varlen|context")
_SUMS = re.compile(r"(sqsq|sqsk|sq|sk)(\d+)")
_TOP_OPS = 8


def phase_of_range(name: str) -> tuple[str, StepBatch | None] | None:
    """The phase a step range's name says, and a vLLM step's batch; None when it says none."""
    m = _VLLM.match(name)
    if m is not None:
        c, g = int(m.group("c")), int(m.group("g"))
        phase = "mixed" if c and g else "prefill" if c else "decode"
        cs, gs = _sums(m.group("cs")), _sums(m.group("gs"))
        return phase, StepBatch(
            tokens=int(m.group("tokens")),
            prefill_requests=c,
            prefill_query_tokens=cs.get("sq"),
            prefill_kv_tokens=cs.get("sk"),
            decode_requests=g,
            decode_query_tokens=gs.get("sq"),
            decode_kv_tokens=gs.get("sk"),
        )
    pre, dec = bool(_PREFILL.search(name)), bool(_DECODE.search(name))
    if pre == dec:
        return None
    return ("prefill" if pre else "decode"), None


def phase_of_kernel(name: str) -> str | None:
    """The phase an attention kernel's family says (decode first: "paged ... prefill" is rare)."""
    if _K_DECODE.search(name):
        return "decode"
    if _K_PREFILL.search(name):
        return "prefill"
    return None


def _sums(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in _SUMS.findall(text)}


def phases(
    trace: Trace,
    links: Links,
    work: npt.NDArray[np.bool_],
    attention: npt.NDArray[np.bool_],
    unique_names: list[str],
    name_idx: npt.NDArray[np.int64],
    device: Device,
    peak: tuple[float, float] | None = None,
) -> Phases:
    g = links.gpu_rows
    dur = trace.dur[g]
    # record_function ranges only: a CPU op named like a decode kernel's launcher is not a step
    rows = trace.own(trace.rows(Kind.ANNOTATION))
    said = {int(i): phase_of_range(trace.names[int(i)]) for i in unique(trace.name[rows]).tolist()}
    steps = rows[among(trace.name[rows], [i for i, p in said.items() if p is not None], len(trace.names))]
    phase = np.full(g.size, -1, np.int8)
    step_of = np.full(g.size, -1, np.int64)
    source = ""
    if steps.size:
        source = "step ranges"
        anchor = np.where(links.launch >= 0, links.launch, g)
        pid_of = _pids(trace)
        points = PointIndex(pid_of[trace.lane[anchor]], trace.ts[anchor])
        # the longest first, so that an inner range overwrites the one around it
        for r in steps[np.argsort(-trace.dur[steps], kind="stable")].tolist():
            p = said[int(trace.name[r])]
            assert p is not None
            inside = points.inside(
                int(pid_of[trace.lane[r]]), float(trace.ts[r]), float(trace.ts[r] + trace.dur[r])
            )
            phase[inside] = PHASES.index(p[0])
            step_of[inside] = r
    else:
        fam = [phase_of_kernel(n) for n in unique_names]
        by_k = np.array([PHASES.index(f) if f else -1 for f in fam], np.int8)
        k_phase = by_k[name_idx] if name_idx.size else np.zeros(0, np.int8)
        k_phase = np.where(attention & (trace.kind[g] == Kind.KERNEL), k_phase, -1).astype(np.int8)
        found = {int(x) for x in unique(k_phase[k_phase >= 0]).tolist()}
        if len(found) < 2:  # one phase alone (or none) is not a mix: nothing to split
            return Phases()
        phase, source = k_phase, "attention kernel families (other ops: unknown)"
    total = float(dur[work].sum())
    out: list[Phase] = []
    for i, name in enumerate(PHASES):
        sel = (phase == i) & work
        ids = [n for n in said if _said_phase(said, n) == name]
        step_rows = steps[among(trace.name[steps], ids, len(trace.names))]
        if not sel.any() and not step_rows.size:
            continue
        t = float(dur[sel].sum())
        att = float(dur[sel & attention].sum())
        batches = [b for r in step_rows.tolist() if (b := _batch(trace, r)) is not None]
        out.append(
            _rated(
                trace,
                links,
                sel,
                attention,
                dur,
                device,
                peak,
                phase=name,
                steps=int(step_rows.size),
                device_ops=int(sel.sum()),
                device_us=round(t, 3),
                pct=round(100.0 * t / total, 2) if total > 0 else None,
                attention_us=round(att, 3),
                attention_pct=round(100.0 * att / t, 2) if t > 0 else None,
                ops=_top_ops(trace, links, sel, dur),
                batches=batches[:20],
            )
        )
    unknown = work & (phase < 0)
    return Phases(
        source=source,
        phases=out,
        unknown_us=round(float(dur[unknown].sum()), 3),
        unknown_pct=round(100.0 * float(dur[unknown].sum()) / total, 2) if total > 0 else None,
    )


def _said_phase(said: dict[int, tuple[str, StepBatch | None] | None], name_id: int) -> str | None:
    p = said.get(name_id)
    return p[0] if p else None


def _pids(trace: Trace) -> npt.NDArray[np.int64]:
    """Per lane, an id of its process (lanes of one pid share it)."""
    pids: dict[str, int] = {}
    return np.array([pids.setdefault(p, len(pids)) for p, _ in trace.lanes], np.int64)


def _batch(trace: Trace, row: int) -> StepBatch | None:
    p = phase_of_range(trace.names[int(trace.name[row])])
    return p[1] if p else None


def _top_ops(trace: Trace, links: Links, sel: npt.NDArray[np.bool_], dur: np.ndarray) -> list[PhaseOp]:
    ops = links.cpu_op[sel]
    d = dur[sel]
    has = ops >= 0
    if not has.any():
        return []
    names = trace.name[ops[has]]
    uniq, inv = np.unique(names, return_inverse=True)
    inv = inv.reshape(-1)
    t = np.bincount(inv, weights=d[has], minlength=uniq.size)
    c = np.bincount(inv, minlength=uniq.size)
    return [
        PhaseOp(op=trace.names[int(uniq[i])], device_ops=int(c[i]), device_us=round(float(t[i]), 3))
        for i in np.argsort(-t, kind="stable")[:_TOP_OPS].tolist()
    ]


def _rated(
    trace: Trace,
    links: Links,
    sel: npt.NDArray[np.bool_],
    attention: npt.NDArray[np.bool_],
    dur: np.ndarray,
    device: Device,
    peak: tuple[float, float] | None,
    **fields: object,
) -> Phase:
    """The phase with the per-op model's figures over the ops that launched its device work."""
    ph = Phase(**fields)  # type: ignore[arg-type]
    idx = np.flatnonzero(sel & (links.cpu_op >= 0))
    # one decode and one formula per distinct (name, inputs): the launching ops and their keys
    # are matched as arrays, and only each distinct key is looked at in Python (a loop per
    # launching op is a loop per kernel where each op launches one)
    ops = links.cpu_op[idx]
    uniq, back = np.unique(ops, return_inverse=True)
    sig, distinct = value_ids(trace.inputs, uniq)
    key = trace.name[uniq].astype(np.int64) * (len(distinct) + 1) + (sig + 1)
    _, firsts, key_of = np.unique(key, return_index=True, return_inverse=True)
    by_key: list[OpCost | None] = []
    for j in firsts.tolist():
        name = trace.names[int(trace.name[uniq[j]])]
        s_id = int(sig[j])
        args = decode_inputs(distinct[s_id]) if s_id >= 0 and known(name) else None
        c = model_op(name, args) if args is not None else None
        # FLOPs or bytes not measured (op_varlen.py; a dtype of unknown size): the phase's
        # rates leave the op out, so both rates read the same ops
        by_key.append(c if c is not None and c.flops is not None and c.bytes is not None else None)
    key_of = key_of.reshape(-1)
    costs = dict(zip(uniq.tolist(), [by_key[k] for k in key_of.tolist()], strict=True))
    modelled = np.array([c is not None for c in by_key], bool)[key_of][back.reshape(-1)]
    if not modelled.any():
        return ph
    m_idx = idx[modelled]
    rows = {int(r) for r in links.cpu_op[m_idx].tolist()}
    t = float(dur[m_idx].sum())
    flops = sum(c.flops for r in rows if (c := costs[r]) is not None and c.flops is not None)
    nbytes = sum(c.bytes for r in rows if (c := costs[r]) is not None and c.bytes is not None)
    ph.modelled_us, ph.model_flops, ph.model_bytes = round(t, 3), float(flops), float(nbytes)
    if t > 0:
        ph.achieved_tflops = round(flops / t / 1e6, 3)
        ph.achieved_tbps = round(nbytes / t / 1e6, 4)
    a_idx = m_idx[attention[m_idx]]
    if a_idx.size:
        a_rows = {int(r) for r in links.cpu_op[a_idx].tolist()}
        a_t = float(dur[a_idx].sum())
        a_bytes = sum(c.bytes for r in a_rows if (c := costs[r]) is not None and c.bytes is not None)
        ph.attention_modelled_us = round(a_t, 3)
        if a_t > 0:
            tbps = a_bytes / a_t / 1e6
            ph.attention_tbps = round(tbps, 4)
            first = costs[min(a_rows)]
            bw = roofs_for(device, first, peak=peak)[1] if first is not None else None
            ph.attention_bw_pct = round(100.0 * tbps / bw, 1) if bw else None
    return ph
