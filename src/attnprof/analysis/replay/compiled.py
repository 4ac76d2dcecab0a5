"""Compiled code: the device ops torch.compile's generated code launched, and what each fused
kernel stands for.

- **Compiled ranges**: the ranges torch.compile records around its generated code, innermost
  first: inductor's ``## Call CompiledFxGraph <hash> ##`` (a user_annotation), else dynamo's
  ``Torch-Compiled Region: F/G`` or AOTAutograd's ``CompiledFunction`` (CPU ops).
- **Which range a device op belongs to**: the innermost compiled range on its launching thread
  that contains its anchor: the start of its launching CPU op (attnprof.analysis.attribution.links, a graph
  replay's captured op included: its ranges were imported from the capture trace with it), else
  of its launch call. Every device op so placed is compiled code, extern GEMMs the generated code
  calls included. Each listed kernel names the user's Python frame and nn.Module around its
  first launch, where the trace recorded frames (attnprof.analysis.attribution.frames).
- **By name only**: an inductor kernel (``triton_poi_fused_...``) no compiled range holds (a
  trace recorded without the ranges, a graph replay without its capture) counts as compiled code
  by its name, and the record says how much (``name_only_us``).
- **Fused ops**: inductor names a kernel ``triton_<kind>_fused_<op>_<op>..._<n>`` (kind: poi
  pointwise, red reduction, per persistent reduction, tem template, for foreach; ``cpp_`` on CPU)
  from the aten ops it fuses. ``fused_ops`` splits that list, the longest known aten name first
  (``_to_copy``, ``native_layer_norm``: ATEN_NAMES), each unknown piece as one op. A kernel
  named ``triton_poi_fused_0`` records no ops (``[]``): unknown, not none.

Eager-chain findings (unfused attention, copies, dtype upcasts) read aten CPU ops and kernels of
the copy category; a fused kernel is neither (its category is triton), so it never fires them by
itself: the rules see what it fuses only through the ops it was launched from.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.frames import frames_of
from attnprof.analysis.attribution.links import Links, PointIndex
from attnprof.analysis.records.result import Compiled, CompiledGraph, CompiledKernel
from attnprof.trace.model import Kind, Trace, unique
from attnprof.units import short_name

__all__ = ["ATEN_NAMES", "INDUCTOR_KERNEL", "compiled_code", "fused_ops"]

INDUCTOR_KERNEL = re.compile(
    r"^(?:triton|cpp)_(?:(?P<kind>poi|red|per|tem|for|spl)_)?fused_(?P<ops>.*?)_?\d*$"
)
_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split scan",
}
_RANGE = re.compile(r"CompiledFxGraph|^Torch-Compiled Region|^CompiledFunction")
_FX = re.compile(r"CompiledFxGraph")
# aten op names with underscores inside, which a split at "_" would cut: tried longest first
ATEN_NAMES = frozenset(
    {
        "_to_copy",
        "_softmax",
        "_log_softmax",
        "_safe_softmax",
        "_unsafe_index",
        "_unsafe_view",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional",
        "_native_batch_norm_legit_no_training",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_group_norm",
        "native_batch_norm",
        "native_dropout",
        "constant_pad_nd",
        "index_put",
        "index_add",
        "index_select",
        "scatter_add",
        "scatter_reduce",
        "slice_scatter",
        "select_scatter",
        "embedding_dense_backward",
        "convolution_backward",
        "max_pool2d_with_indices",
        "avg_pool2d",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "_softmax_backward_data",
        "masked_fill",
        "clamp_min",
        "clamp_max",
        "var_mean",
        "new_zeros",
        "new_ones",
        "new_empty",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "logical_and",
        "logical_or",
        "logical_not",
        "scaled_dot_product_attention",
        "flex_attention",
        "flex_attention_backward",
        "moe_forward",
    }
)
_LONGEST = max(len(n.split("_")) for n in ATEN_NAMES)
_TOP = 20


def fused_ops(name: str) -> tuple[str, list[str]] | None:
    """(kernel kind, the aten ops its name lists) for an inductor kernel name, else None."""
    m = INDUCTOR_KERNEL.match(name)
    if m is None:
        return None
    kind = _KINDS.get(m.group("kind") or "", "kernel")
    parts = m.group("ops").split("_") if m.group("ops") else []
    ops: list[str] = []
    i = 0
    while i < len(parts):
        for j in range(min(len(parts), i + _LONGEST), i, -1):
            piece = "_".join(parts[i:j])
            if piece in ATEN_NAMES:
                ops.append(piece)
                i = j
                break
        else:
            if parts[i]:  # "" is the leading "_" of an op not in ATEN_NAMES: keep it with the next
                ops.append(parts[i])
            elif i + 1 < len(parts):
                parts[i + 1] = "_" + parts[i + 1]
            i += 1
    return kind, ops


def compiled_code(
    trace: Trace,
    links: Links,
    work: npt.NDArray[np.bool_],
    unique_names: list[str],
    name_idx: npt.NDArray[np.int64],
    device_us: float,
) -> Compiled:
    g = links.gpu_rows
    dur = trace.dur[g]
    n = g.size
    graph = _placed(trace, links)
    anchors = np.where(links.cpu_op >= 0, links.cpu_op, links.launch)
    parsed = [fused_ops(nm) for nm in unique_names]
    is_inductor = np.array([p is not None for p in parsed], bool)[name_idx] if n else np.zeros(0, bool)
    in_range = (graph >= 0) & work
    by_name = ~in_range & is_inductor & work & (trace.kind[g] == Kind.KERNEL)
    compiled = in_range | by_name
    total = float(dur[compiled].sum())

    def pct(x: float) -> float | None:
        return round(100.0 * x / device_us, 2) if device_us > 0 else None

    graphs: list[CompiledGraph] = []
    for r in unique(graph[in_range]).tolist():
        sel = in_range & (graph == r)
        t = float(dur[sel].sum())
        graphs.append(
            CompiledGraph(
                name=_range_name(trace.names[int(trace.name[r])]),
                device_ops=int(sel.sum()),
                time_us=round(t, 3),
                pct=pct(t),
            )
        )
    # one range per graph name: the ranges of one graph called many times are one graph
    merged: dict[str, CompiledGraph] = {}
    for cg in graphs:
        if cg.name in merged:
            m = merged[cg.name]
            m.device_ops += cg.device_ops
            m.time_us = round(m.time_us + cg.time_us, 3)
            m.pct = pct(m.time_us)
        else:
            merged[cg.name] = cg
    kernels: list[CompiledKernel] = []
    k_sel = compiled & (trace.kind[g] == Kind.KERNEL)
    if k_sel.any():
        counts = np.bincount(name_idx[k_sel], minlength=len(unique_names))
        times = np.bincount(name_idx[k_sel], weights=dur[k_sel], minlength=len(unique_names))
        for i in np.argsort(-times, kind="stable")[:_TOP].tolist():
            if not counts[i]:
                continue
            sel = k_sel & (name_idx == i)
            rows = graph[sel & in_range]
            p = parsed[i]
            first = int(np.flatnonzero(sel)[0])
            frame, module = frames_of(trace, np.array([anchors[first]], np.int64))
            kernels.append(
                CompiledKernel(
                    name=short_name(unique_names[i]),
                    kind=p[0] if p else None,
                    fused_ops=p[1] if p else None,
                    graph=_range_name(trace.names[int(trace.name[rows[0]])]) if rows.size else None,
                    frame=frame[0],
                    module=module[0],
                    count=int(counts[i]),
                    time_us=round(float(times[i]), 3),
                    by="range" if rows.size == int(sel.sum()) else "name" if not rows.size else "range, name",
                )
            )
    name_only = float(dur[by_name].sum())
    return Compiled(
        time_us=round(total, 3),
        pct=pct(total),
        name_only_us=round(name_only, 3),
        ranges=int(unique(graph[in_range]).size),
        graphs=sorted(merged.values(), key=lambda x: -x.time_us),
        kernels=kernels,
    )


def _range_name(name: str) -> str:
    return name.removeprefix("## Call ").removesuffix(" ##").strip()


def _placed(trace: Trace, links: Links) -> npt.NDArray[np.int64]:
    """Per GPU op, the row of the innermost compiled range holding its anchor, -1 where none."""
    g = links.gpu_rows
    out = np.full(g.size, -1, np.int64)
    ids = [i for i, nm in enumerate(trace.names) if _RANGE.search(nm)]
    if not ids or not g.size:
        return out
    rows = trace.rows(Kind.ANNOTATION, Kind.CPU_OP)
    ranges = rows[np.isin(trace.name[rows], ids)]
    anchor = np.where(links.cpu_op >= 0, links.cpu_op, links.launch)
    has = np.flatnonzero(anchor >= 0)
    if not has.size or not ranges.size:
        return out
    a_rows = anchor[has]
    a_lane, a_ts = trace.lane[a_rows], trace.ts[a_rows]
    # inductor's own graph range first, then the wider dynamo / AOT ranges; the longest first
    # within each, so that an inner range overwrites the one around it
    fx = np.array([bool(_FX.search(trace.names[int(trace.name[r])])) for r in ranges.tolist()])
    order = np.lexsort((-trace.dur[ranges], fx))
    points = PointIndex(a_lane.astype(np.int64), a_ts)
    for r in ranges[order].tolist():
        out[has[points.inside(int(trace.lane[r]), float(trace.ts[r]), float(trace.ts[r] + trace.dur[r]))]] = r
    return out
