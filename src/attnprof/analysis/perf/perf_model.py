"""The per-op performance model of a trace: every op with recorded inputs, its cost, its rate,
its roofline; and the whole trace through it (model FLOPs, MFU, bound shares).

- Which ops: every cpu_op recorded with input shapes (record_shapes=True) that op_model.py has a
  formula for. Its calls are grouped by (name, input dims, input types): one OpPerf each.
- Time of a call: on a trace with device activity, the GPU ops (kernels, memcpys, memsets; not
  waits) launched from the op's thread while the op ran, i.e. by the op or an op inside it
  (the launch's timestamp inside the op's range: the launching op's provenance, not a kernel
  name); a call that launched nothing is host-side work and not counted. On a CPU-only trace,
  the op's own duration.
- Nesting: aten::linear calls aten::addmm; both are modelled and both list the same kernels.
  `ops` lists both (the inner one marked nested); the summary counts the outermost modelled op
  of each nest only, so every kernel counts once.
- Roofs: attnprof.device.peak_for, by the device's name and the op's dtype (matrix ops against
  the dtype's tensor-core figure, vector ops against the fp32 vector figure); `--peak` replaces
  both roofs for every op; a device the table does not name gets rates and no percentage. An op
  is memory-bound when its intensity (FLOPs per byte) is below the ridge (peak FLOP/s over peak
  bytes/s), except decode-shaped attention, which is judged by bytes whatever its intensity.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from attnprof.analysis.perf.op_args import Args, flops_convention
from attnprof.analysis.perf.op_flex import computed_blocks
from attnprof.analysis.perf.op_model import OpCost, decode_inputs, known, model_op
from attnprof.analysis.records.perf_records import OpPerf, OpTime, PerfModel, Unmodelled
from attnprof.analysis.timeline.idle import union
from attnprof.device import peak_for, spec_device
from attnprof.trace.model import Kind, Trace, nesting_order, row_columns, top_sums, unique

if TYPE_CHECKING:
    from attnprof.analysis.attribution.links import Links
    from attnprof.analysis.records.result import Device

__all__ = ["Roofs", "perf_model", "roofs_for"]

Roofs = tuple[float | None, float | None, str | None]  # TFLOP/s, TB/s, where they come from
# ops are matched with their launches in chunks of this many: the binary searches' results are
# this size, not the recorded ops'
_CHUNK = 1 << 16


def roofs_for(
    device: Device,
    cost: OpCost,
    *,
    peak: tuple[float, float] | None = None,
    cpu_peak: tuple[float, str] | None = None,
) -> Roofs:
    """The roofs one op is judged against (see the module's docstring)."""
    if peak is not None:
        return peak[0], peak[1], "--peak"
    if device.kind == "gpu":
        tf, bw, src = peak_for(device.name, cost.dtype if cost.matrix else "fp32")
        return tf, bw, src
    if device.kind == "cpu" and cpu_peak is not None and cost.matrix:
        return cpu_peak[0], None, cpu_peak[1]
    return None, None, None


def _bound(cost: OpCost, tf: float | None, bw: float | None) -> str | None:
    if bw is None:
        return None
    if cost.decode or cost.flops == 0:
        return "memory"
    if tf is None or cost.flops is None or cost.bytes is None:
        return None  # a roof unknown, or FLOPs or bytes not measured: no side of the ridge
    ridge = tf * 1e12 / (bw * 1e12)  # FLOPs per byte where the two roofs meet
    return "compute" if cost.flops / cost.bytes >= ridge else "memory" if cost.bytes > 0 else "compute"


def perf_model(
    trace: Trace,
    links: Links,
    device: Device,
    *,
    work: np.ndarray,
    busy_us: float,
    peak: tuple[float, float] | None = None,
    cpu_peak: tuple[float, str] | None = None,
    block_sparsity: float | None = None,
) -> tuple[list[OpPerf], PerfModel]:
    """`work`: per GPU op (Links.gpu_rows order), whether it is device work (not a wait).
    `block_sparsity`: the share of BlockMask blocks a flex run skipped, as its run recorded it
    (op_flex.py): flex ops count only the computed blocks; None: their dense upper bound."""
    gpu_trace = bool(work.any())
    # the recorded inputs as columns (row, signature id): one lookup per row in a RowMap cost
    # a binary search each, a third of the analysis of a large trace
    rows, sig_of, distinct = row_columns(trace.inputs)
    nd = max(len(distinct), 1)
    # one decode and one formula per distinct (name, inputs)
    uniq, inv = _op_keys(trace, rows, sig_of, nd)
    cost_u: list[OpCost | None] = []
    args_u: dict[int, Args | None] = {}  # the decoded inputs per key, for the rows below
    for u, k in enumerate(uniq.tolist()):
        name_id, s = divmod(k, nd)
        name = trace.names[name_id]
        args = args_u[u] = decode_inputs(distinct[s]) if known(name) else None
        c = model_op(name, args) if args is not None else None
        if c is not None and block_sparsity is not None:
            c = computed_blocks(c, block_sparsity)
        cost_u.append(c)
    modelled = np.array([c is not None for c in cost_u], bool)[inv] if rows.size else np.zeros(0, bool)
    # a modelled op's cost is costs[its key]: no list of a reference per op (8 bytes each)
    costs = {u: c for u, c in enumerate(cost_u) if c is not None}
    m_rows, m_key = rows[modelled], inv[modelled]  # keys: indices into uniq
    del inv, modelled

    order = None
    if gpu_trace:
        order = _launch_order(trace, links, work)
        t_us, live = _launched(trace, links, order, m_rows)
        total = float(trace.dur[links.gpu_rows][work].sum())
    else:
        t_us = trace.dur[m_rows].astype(np.float64)
        live = np.ones(m_rows.size, bool)
        cpu_all = trace.rows(Kind.CPU_OP)
        total, busy_us = _cpu_time(trace, cpu_all)
    # one at a time: each old column is freed as its filtered one replaces it
    m_rows = m_rows[live]
    t_us = t_us[live]
    m_key = m_key[live]
    del live
    nested = _nested(trace, m_rows)

    # per distinct (name, inputs): calls, times, per-call rates
    ops: list[OpPerf] = []
    bound_time: dict[str | None, float] = defaultdict(float)
    flops_by_dtype: dict[str, float] = defaultdict(float)
    model_flops = modelled_us = upper_flops = unmeasured_us = 0.0
    for u, idx in _groups(m_key):
        name_id = int(uniq[u]) // nd
        cost = costs[u]
        t = t_us[idx]
        secs = np.maximum(t, 1e-9) * 1e-6
        timed = t > 0
        # the median of the per-call rates (as TraceLens reports them; for an even count the
        # mean of the two middle rates, not the rate of the mean of the two middle times)
        tflops = _median(cost.flops / secs[timed]) / 1e12 if timed.any() and cost.flops is not None else None
        tbps = _median(cost.bytes / secs[timed]) / 1e12 if timed.any() and cost.bytes is not None else None
        tf, bw, _src = roofs_for(device, cost, peak=peak, cpu_peak=cpu_peak)
        bound = _bound(cost, tf, bw)
        pct = None
        if bound == "compute" and tf and tflops is not None:
            pct = 100.0 * tflops / tf
        elif bound == "memory" and bw and tbps is not None:
            pct = 100.0 * tbps / bw
        args = args_u[u]
        time_sum = float(t.sum())
        is_nested = bool(nested[idx].all())
        ops.append(
            OpPerf(
                name=trace.names[name_id],
                input_dims=args.dims if args else [],
                input_types=args.types if args else [],
                count=int(idx.size),
                device_time_us=round(time_sum, 3) if gpu_trace else None,
                cpu_time_us=None if gpu_trace else round(time_sum, 3),
                flops=float(cost.flops) if cost.flops is not None else None,
                flops_basis=cost.basis,
                flops_convention=flops_convention(cost),
                bytes=float(cost.bytes) if cost.bytes is not None else None,
                tflops=_r(tflops),
                tbps=_r(tbps),
                intensity=_r(cost.flops / cost.bytes) if cost.bytes and cost.flops is not None else None,
                bound=bound,
                pct_of_bound=round(pct, 2) if pct is not None else None,
                formula=cost.formula,
                family=cost.family,
                dtype=cost.dtype,
                peak_tflops=tf,
                peak_tbps=bw,
                pct_time=round(100.0 * time_sum / total, 2) if total > 0 else None,
                nested=is_nested,
                decode=cost.decode,
            )
        )
        outer = ~nested[idx]
        if outer.any():
            n_out = int(outer.sum())
            modelled_us += float(t[outer].sum())
            bound_time[bound] += float(t[outer].sum())
            if cost.flops is None:
                unmeasured_us += float(t[outer].sum())
                continue
            model_flops += cost.flops * n_out
            if cost.basis == "dense upper bound":
                upper_flops += cost.flops * n_out
            if cost.matrix:
                flops_by_dtype[cost.dtype] += cost.flops * n_out
    ops.sort(key=lambda o: -(o.device_time_us if o.device_time_us is not None else o.cpu_time_us or 0.0))

    outer_rows = m_rows[~nested]
    del m_rows, t_us, m_key, nested
    unmod = None
    if order is not None:
        unmod = _unmodelled(trace, links, work, order, outer_rows, rows, total - modelled_us, total)
    if unmod is None:
        rest = max(total - modelled_us, 0.0)
        unmod = Unmodelled(
            time_us=round(rest, 3),
            pct=_pct(rest, total),
            no_op_us=0.0,
            no_shapes_us=0.0,
            not_modelled_us=round(rest, 3),
        )
    dtype = max(flops_by_dtype, key=lambda d: flops_by_dtype[d]) if flops_by_dtype else None
    s_tf = s_bw = s_src = None
    if dtype is not None:
        s_tf, s_bw, s_src = roofs_for(
            device, OpCost(0.0, 0.0, "", dtype, True, "gemm"), peak=peak, cpu_peak=cpu_peak
        )
    achieved = model_flops / (busy_us * 1e-6) / 1e12 if busy_us > 0 and model_flops > 0 else None
    notes = []
    if not trace.inputs:
        notes.append("no op has recorded input shapes (profile with record_shapes=True)")
    if unmeasured_us > 0:
        notes.append(
            f"FLOPs not measured for ops with {_pct(unmeasured_us, total)}% of the time (their "
            "lengths are tensor values the trace does not record): model FLOPs and MFU leave them out"
        )
    if upper_flops > 0:
        notes.append(
            f"{_pct(upper_flops, model_flops)}% of the model FLOPs are a dense upper bound (FlexAttention "
            "with its BlockMask sparsity not recorded): the achieved rate and MFU are upper bounds"
        )
    if dtype is not None and s_tf is None:
        notes.append(
            f"no {dtype} peak is known for {device.name or 'this device'!r}: rates without percentages"
        )
    summary = PerfModel(
        basis=(
            "device work: sum of GPU-op durations (waits excluded); achieved over the union of "
            "device-op intervals"
            if gpu_trace
            else "CPU-only trace: the modelled ops' own durations; achieved over the union of top-level cpu ops"
        ),
        device=device.name,
        model_flops=float(model_flops),
        modelled_time_us=round(modelled_us, 3),
        total_time_us=round(total, 3),
        busy_time_us=round(busy_us, 3),
        achieved_tflops=_r(achieved),
        dtype=dtype,
        peak_tflops=s_tf,
        peak_tbps=s_bw,
        peak_source=s_src,
        peak_kind=None
        if s_src is None
        else "flag"
        if peak is not None
        else "spec"
        if gpu_trace
        else "measured",
        peak_device=spec_device(device.name) if s_src is not None and peak is None and gpu_trace else None,
        mfu_pct=round(100.0 * achieved / s_tf, 2) if achieved is not None and s_tf else None,
        compute_bound_pct=_pct(bound_time.get("compute", 0.0), total),
        memory_bound_pct=_pct(bound_time.get("memory", 0.0), total),
        bound_unknown_pct=_pct(bound_time.get(None, 0.0), total),
        unmodelled=unmod,
        shapes_recorded=bool(trace.inputs),
        note="; ".join(notes),
        not_measured_time_us=round(unmeasured_us, 3),
        not_measured_pct=_pct(unmeasured_us, total) if unmeasured_us > 0 else None,
        upper_bound_flops=float(upper_flops),
    )
    return ops, summary


def _median(x: np.ndarray) -> float:
    """The median without np.median (whose first call imports numpy.ma: a small trace's whole
    analysis): the middle of the sorted values, the mean of the two middle ones for an even count."""
    v = np.sort(x)
    n = v.size
    return float(v[n // 2]) if n % 2 else float(0.5 * (v[n // 2 - 1] + v[n // 2]))


def _r(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")


def _pct(x: float, total: float) -> float | None:
    return round(100.0 * x / total, 2) if total > 0 else None


def _launch_order(trace: Trace, links: Links, work: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per lane: the launches of device work (GPU-op indices, launch timestamps), by time. A
    graph replay's kernel given its captured op (Links.captured, attnprof.analysis.replay.replay) is
    placed at that op's start on its lane: the capture's launch, which the replay repeats."""
    idx = np.flatnonzero(work & ((links.launch >= 0) | links.captured))
    lrows = np.where(links.captured[idx], links.cpu_op[idx], links.launch[idx])
    lanes = trace.lane[lrows]
    out = {}
    for lane in unique(lanes).tolist():
        on = lanes == lane
        sel = idx[on]
        ts = trace.ts[lrows[on]]
        o = np.argsort(ts, kind="stable")
        out[int(lane)] = (sel[o], ts[o])
    return out


def _launched(
    trace: Trace, links: Links, order: dict[int, tuple[np.ndarray, np.ndarray]], rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per op row: summed duration of the GPU ops launched while it ran on its lane (order:
    _launch_order), and whether it launched any. In chunks of rows: the binary searches' results
    are the chunk's size, not the trace's."""
    t = np.zeros(rows.size)
    live = np.zeros(rows.size, bool)
    if not rows.size:
        return t, live
    r_lane = trace.lane[rows]
    for lane, (sel, ts) in order.items():
        on = np.flatnonzero(r_lane == lane)
        if not on.size:
            continue
        cs = np.concatenate([[0.0], np.cumsum(trace.dur[links.gpu_rows[sel]])])
        for c in range(0, on.size, _CHUNK):
            part = on[c : c + _CHUNK]
            lo, hi = _inside(trace, rows[part], ts)
            t[part] = cs[hi] - cs[lo]
            live[part] = hi > lo
    return t, live


def _inside(trace: Trace, r: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the range [lo, hi) of the ascending launch times ts inside the row's op."""
    x = trace.ts[r]
    lo = np.searchsorted(ts, x, side="left")
    x += trace.dur[r]  # the op's end, in place: the same sum as ts + dur
    return lo, np.searchsorted(ts, x, side="right")


def _op_keys(trace: Trace, rows: np.ndarray, sig_of: np.ndarray, nd: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(name * nd + signature, return_inverse=True) over the rows, the inverse as int32
    (an index into the few distinct keys), in chunks of rows: np.unique's inverse over every
    recorded op made four int64 arrays of their size at once (this stage's peak). The key is
    int64: name id x distinct inputs may pass 2**31."""

    def key(c: int) -> np.ndarray:
        k = trace.name[rows[c : c + _CHUNK]].astype(np.int64)
        k *= nd
        k += sig_of[c : c + _CHUNK]
        return k

    chunks = range(0, rows.size, _CHUNK)
    uniq = unique(np.concatenate([unique(key(c)) for c in chunks])) if rows.size else np.zeros(0, np.int64)
    inv = np.empty(rows.size, np.int32)
    for c in chunks:
        inv[c : c + _CHUNK] = np.searchsorted(uniq, key(c))
    return uniq, inv


def _groups(keys: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(key, the positions that have it, ascending) per distinct key, in order of first
    appearance: a stable sort, not a dict of Python lists (an int object and a slot per op)."""
    o = np.argsort(keys, kind="stable")
    k = keys[o]
    cut = np.flatnonzero(k[1:] != k[:-1]) + 1
    starts = np.concatenate([[0], cut]).astype(np.int64) if k.size else np.zeros(0, np.int64)
    ends = np.append(starts[1:], k.size)
    for g in np.argsort(o[starts], kind="stable").tolist():
        yield int(k[starts[g]]), o[starts[g] : ends[g]]


def _nested(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per row: whether another of the rows (same lane) contains it."""
    out = np.zeros(rows.size, bool)
    lanes = trace.lane[rows]
    for lane in unique(lanes).tolist() if rows.size else []:
        on = np.flatnonzero(lanes == lane)
        r = rows[on]
        o = nesting_order(trace.ts[r], trace.dur[r])
        r = r[o]
        end = trace.ts[r]  # the ends in that order, read once (the same sum as ts + dur)
        end += trace.dur[r]
        reach = np.maximum.accumulate(end)
        inside = np.zeros(o.size, bool)
        inside[1:] = end[1:] <= reach[:-1]
        out[on[o]] = inside
    return out


def _cpu_time(trace: Trace, ops: np.ndarray) -> tuple[float, float]:
    """(sum over lanes of the union of cpu-op intervals, union over all lanes)."""
    total = 0.0
    for lane in unique(trace.lane[ops]).tolist() if ops.size else []:
        r = ops[trace.lane[ops] == lane]
        s, e = union(trace.ts[r], trace.ts[r] + trace.dur[r])
        total += float((e - s).sum())
    s, e = union(trace.ts[ops], trace.ts[ops] + trace.dur[ops]) if ops.size else (np.zeros(0), np.zeros(0))
    return total, float((e - s).sum())


def _unmodelled(
    trace: Trace,
    links: Links,
    work: np.ndarray,
    order: dict[int, tuple[np.ndarray, np.ndarray]],
    outer: np.ndarray,
    shaped_rows: np.ndarray,
    rest: float,
    total: float,
) -> Unmodelled:
    """Why the device work outside the outermost modelled ops is not modelled. order:
    _launch_order; shaped_rows: the rows with recorded inputs, ascending."""
    covered = np.zeros(links.gpu_rows.size, bool)
    o_lane = trace.lane[outer]
    for lane, (sel, ts) in order.items():
        r = outer[o_lane == lane]
        if not r.size:
            continue
        # a launch is covered when some op's [lo, hi) holds it: +1 at each lo, -1 at each hi
        mark = np.zeros(ts.size + 1, np.int32)
        for c in range(0, r.size, _CHUNK):
            lo, hi = _inside(trace, r[c : c + _CHUNK], ts)
            np.add.at(mark, lo, 1)
            np.add.at(mark, hi, -1)
        covered[sel[np.cumsum(mark[:-1]) > 0]] = True
    del o_lane
    dur = trace.dur[links.gpu_rows]
    left = work & ~covered
    del covered
    op = links.cpu_op
    no_op = left & (op < 0)
    has = left & (op >= 0)
    del left
    shaped = np.zeros(links.gpu_rows.size, bool)
    if has.any() and shaped_rows.size:
        # membership by binary search in the ascending rows: np.isin sorts both together
        x = op[has]
        at = np.minimum(np.searchsorted(shaped_rows, x), shaped_rows.size - 1)
        shaped[has] = shaped_rows[at] == x
        del x, at
    named = has & shaped
    top = [(trace.names[i], t) for i, t in top_sums(trace.name[op[named]], dur[named], 5)]
    return Unmodelled(
        time_us=round(max(rest, 0.0), 3),
        pct=_pct(max(rest, 0.0), total),
        no_op_us=round(float(dur[no_op].sum()), 3),
        no_shapes_us=round(float(dur[has & ~shaped].sum()), 3),
        not_modelled_us=round(float(dur[has & shaped].sum()), 3),
        top_not_modelled=[OpTime(name=n, time_us=round(t, 3)) for n, t in top],
    )
