"""CUDA/HIP graph replays attributed to the CPU ops that captured them.

A replayed kernel has one launch, the graph launch (cudaGraphLaunch / hipGraphLaunch), and no CPU
op, shapes or module of its own. vLLM and SGLang can write a capture trace beside the execution
trace: the CPU ops, ranges and launch calls recorded while each graph was captured (a capture
runs no kernels, so it records launches only). ``attach`` matches every replay to the graph it
replays and gives each replayed device op the capture's launching CPU op:

1. Captured graphs: on each thread of the capture trace, the launch calls (kernel launches,
   async copies and sets) between a ``*StreamBeginCapture`` and the next ``*StreamEndCapture``,
   in order. A launch's kernel is the name its call records (ROCm's runtime events carry it as
   ``kernel``); where the call names none (CUDA), the position alone matches it.
2. Replays: the device ops of each graph launch of the execution trace, by start time.
3. Matching, by kernel-name sequence (a capture trace records no graph id): a replay matches a
   captured graph of the same length whose every position has the same kernel name (or no name
   on the capture side; a copy matches a copy, a set a set). **Tolerance**: grid and block sizes
   are not compared for the match, so a kernel that differs only in its launch configuration
   still matches; such ops are counted (``config_differs``). Among matching graphs the one whose
   launch configurations agree most wins, then the first after the graph matched last (capture
   order: the layers of a piecewise model replay in the order they were captured). A replay with
   no match keeps its graph launch and no CPU op. **Graph ids**: where the execution trace
   records them (kernel args "graph id" and "graph node id", CUPTI's graphId and graphNodeId,
   the same in every replay of one graph), a replay of a graph already matched takes that
   match through its ids: each op its node's captured CPU op, whatever order its ops ran in
   (several streams) and whichever ops a lost buffer dropped; only a graph's first replay is
   matched by names (``replays_by_graph_id`` counts the others).
4. Import: the capture trace's CPU ops and ranges on the threads that captured a matched graph
   are appended to the execution trace (rows from ``Trace.imported_from`` on, lanes named
   ``<pid> (capture)``, names, shapes, recorded inputs and dtype conversions kept, Python frames
   too, the capture's clock), and
   ``Trace.op_link`` names each replayed op's captured CPU op. attnprof.analysis.attribution.links.link reads
   that column first, so whatever reads a launch link (provenance, per-op shapes) works for a
   replay as for an eager kernel; idle and time windows never see the imported rows, and
   regions read the capture's ranges only to place replayed kernels in their captured layer
   (attnprof.analysis.attribution.regions, rule "capture").

Without a capture trace, or for unmatched replays, the kernels stay attributed to their graph
launch; the analysis says what share of the device time that is (``graphs`` in the JSON).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.devices import is_launch
from attnprof.analysis.attribution.frames import frames_of
from attnprof.analysis.attribution.links import GRAPH_LAUNCHES, Links, launch_ops, link
from attnprof.analysis.attribution.rank_names import rank_in_name
from attnprof.analysis.records.result import GraphReplays, ReplayedKernel
from attnprof.errors import UserError
from attnprof.trace.model import Kind, Trace, unique
from attnprof.units import fmt_us, short_name

__all__ = ["CAPTURE_NAME", "Captured", "attach", "captured_graphs", "find_pair", "graph_replays"]

I64 = npt.NDArray[np.int64]

_BEGIN = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")
_END = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
_MEMCPY, _MEMSET = "<memcpy>", "<memset>"
# the file names vLLM writes for its capture traces (capture_traces/graph_capture_rank_N.*)
CAPTURE_NAME = re.compile(r"graph_capture|capture_trace")
# kinds imported from a capture trace: the host side that explains a launch (ops, ranges, Python
# frames and nn.Module frames)
_HOST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON)


@dataclass
class Captured:
    """One captured graph: its launch calls in order, in the capture trace's rows."""

    lane: int
    start: float
    launches: I64  # launch rows, by start
    labels: list[str | None]  # kernel name, _MEMCPY / _MEMSET, or None (a kernel, name not recorded)
    grid: I64  # blocks per grid, -1 unknown
    block: I64  # threads per block, -1 unknown
    ops: I64  # the launching CPU op of each launch, -1 none


def captured_graphs(cap: Trace) -> list[Captured]:
    rt = cap.rows(Kind.RUNTIME, Kind.DRIVER)
    rt = rt[np.lexsort((cap.ts[rt], cap.lane[rt]))]
    names = cap.names
    uniq = {int(i) for i in unique(cap.name[rt]).tolist()}
    begin = {i for i in uniq if _BEGIN.search(names[i])}
    end = {i for i in uniq if _END.search(names[i])}
    launch = {i for i in uniq if is_launch(names[i]) and names[i] not in GRAPH_LAUNCHES}
    out: list[Captured] = []
    open_at: dict[int, list[int]] = {}  # lane -> launch rows of the capture open on it
    start: dict[int, float] = {}
    for r, n, lane in zip(rt.tolist(), cap.name[rt].tolist(), cap.lane[rt].tolist(), strict=True):
        if n in begin:
            open_at[lane], start[lane] = [], float(cap.ts[r])
        elif n in end and lane in open_at:
            rows = np.array(open_at.pop(lane), np.int64)
            out.append(_graph(cap, lane, start[lane], rows))
        elif n in launch and lane in open_at:
            open_at[lane].append(r)
    return out


def _graph(cap: Trace, lane: int, start: float, rows: I64) -> Captured:
    labels: list[str | None] = []
    grid, block = np.full(rows.size, -1, np.int64), np.full(rows.size, -1, np.int64)
    for k, r in enumerate(rows.tolist()):
        named = cap.launch_kernels.get(r)
        call = cap.names[int(cap.name[r])]
        if named is not None:
            labels.append(named[0])
            grid[k], block[k] = named[1], named[2]
        elif "Memcpy" in call or "memcpy" in call:
            labels.append(_MEMCPY)
        elif "Memset" in call or "memset" in call:
            labels.append(_MEMSET)
        else:
            labels.append(None)
    return Captured(lane, start, rows, labels, grid, block, launch_ops(cap, rows))


def _replays(trace: Trace) -> list[tuple[int, I64]]:
    """(graph launch row, its device ops as event rows by start) per graph launch, in launch order."""
    links = link(trace)
    g = links.graph & (links.launch >= 0)
    if not g.any():
        return []
    rows, launches = links.gpu_rows[g], links.launch[g]
    order = np.lexsort((trace.ts[rows], launches))
    rows, launches = rows[order], launches[order]
    cut = np.flatnonzero(np.diff(launches)) + 1
    groups = [(int(ls[0]), rs) for ls, rs in zip(np.split(launches, cut), np.split(rows, cut), strict=True)]
    return sorted(groups, key=lambda x: float(trace.ts[x[0]]))


def _labels(trace: Trace, rows: I64) -> tuple[list[str], I64, I64]:
    kinds = trace.kind[rows]
    labels = [
        _MEMCPY if k == Kind.MEMCPY else _MEMSET if k == Kind.MEMSET else trace.names[int(n)]
        for k, n in zip(kinds.tolist(), trace.name[rows].tolist(), strict=True)
    ]
    grid, block = np.full(rows.size, -1, np.int64), np.full(rows.size, -1, np.int64)
    pos = np.searchsorted(trace.kernel_rows, rows)
    is_k = (pos < trace.kernel_rows.size) & (
        trace.kernel_rows[np.minimum(pos, trace.kernel_rows.size - 1)] == rows
    )
    if trace.kernel_rows.size:
        grid[is_k] = trace.grid_blocks[pos[is_k]]
        block[is_k] = trace.block_threads[pos[is_k]]
    return labels, grid, block


def _graph_key(trace: Trace, rows: I64) -> tuple[int, I64] | None:
    """(graph id, node id per op) of one replay when every op records both, one graph id and
    distinct node ids; else None (names alone then match it)."""
    if trace.graph_id.size != trace.kernel_rows.size or not trace.kernel_rows.size:
        return None
    pos = np.searchsorted(trace.kernel_rows, rows)
    ok = (pos < trace.kernel_rows.size) & (
        trace.kernel_rows[np.minimum(pos, trace.kernel_rows.size - 1)] == rows
    )
    if not ok.all():
        return None  # a copy or set: no ids recorded for it
    gid, node = trace.graph_id[pos], trace.graph_node[pos]
    if (gid < 0).any() or (node < 0).any() or unique(gid).size != 1 or unique(node).size != node.size:
        return None
    return int(gid[0]), node.astype(np.int64)


def _fits(labels: list[str], graph: Captured) -> bool:
    if len(labels) != len(graph.labels):
        return False
    return all(
        c == e or (c is None and e not in (_MEMCPY, _MEMSET))
        for c, e in zip(graph.labels, labels, strict=True)
    )


def attach(trace: Trace, cap: Trace, *, capture: str) -> Trace:
    """The execution trace with each matched replayed device op linked to its captured CPU op
    (a new Trace; the summary is in its metadata["replay"])."""
    graphs = captured_graphs(cap)
    replays = _replays(trace)
    n0 = trace.n_events
    link_to_cap = np.full(n0, -1, np.int64)  # exec row -> capture CPU-op row
    matched = matched_ops = unmatched_ops = config_differs = by_graph_id = 0
    last = -1
    # graph id -> (the captured graph its first replay matched, node id -> position in it)
    by_gid: dict[int, tuple[int, dict[int, int]]] = {}
    by_key: dict[tuple[str | None, ...], list[int]] = {}
    for i, gr in enumerate(graphs):
        by_key.setdefault(tuple(gr.labels), []).append(i)
    for _launch, rows in replays:
        ids = _graph_key(trace, rows)
        if ids is not None and ids[0] in by_gid:
            gi, pos_of = by_gid[ids[0]]
            pos = np.array([pos_of.get(int(n), -1) for n in ids[1].tolist()], np.int64)
            ok = pos >= 0
            link_to_cap[rows[ok]] = graphs[gi].ops[pos[ok]]
            matched += 1
            by_graph_id += 1
            matched_ops += int(ok.sum())
            unmatched_ops += int((~ok).sum())
            last = gi
            continue
        labels, grid, block = _labels(trace, rows)
        exact = by_key.get(tuple(labels), [])
        cands = exact or [i for i, gr in enumerate(graphs) if None in gr.labels and _fits(labels, gr)]
        if not cands:
            unmatched_ops += int(rows.size)
            continue
        best, best_key = -1, None
        for i in cands:
            gr = graphs[i]
            known = (gr.grid >= 0) & (grid >= 0) & (gr.block >= 0) & (block >= 0)
            same = known & (gr.grid == grid) & (gr.block == block)
            # most agreeing launch configurations, then capture order after the last match
            key = (int(same.sum()) - int((known & ~same).sum()), -((i - last - 1) % len(graphs)))
            if best_key is None or key > best_key:
                best, best_key = i, key
        gr = graphs[best]
        known = (gr.grid >= 0) & (grid >= 0) & (gr.block >= 0) & (block >= 0)
        config_differs += int((known & ((gr.grid != grid) | (gr.block != block))).sum())
        link_to_cap[rows] = gr.ops
        matched += 1
        matched_ops += int(rows.size)
        last = best
        if ids is not None:
            by_gid[ids[0]] = (best, {int(n): k for k, n in enumerate(ids[1].tolist())})
    merged = _import(trace, cap, link_to_cap, {gr.lane for gr in graphs})
    attributed = int((merged.op_link >= 0).sum())
    merged.metadata = dict(trace.metadata)
    merged.metadata["replay"] = {
        "capture": capture,
        "graphs_captured": len(graphs),
        "graph_launches": len(replays),
        "replays_matched": matched,
        "replays_unmatched": len(replays) - matched,
        "unmatched_ops": unmatched_ops,
        "matched_ops": matched_ops,
        "attributed_ops": attributed,
        "config_differs": config_differs,
        "replays_by_graph_id": by_graph_id,
        "imported_rows": merged.n_events - n0,
        "names_recorded": bool(graphs) and all(lab is not None for gr in graphs for lab in gr.labels),
    }
    return merged


def _import(trace: Trace, cap: Trace, link_to_cap: I64, lanes: set[int]) -> Trace:
    """trace with the capture's host rows on the given lanes appended, and op_link set."""
    host = np.flatnonzero(np.isin(cap.kind, [int(k) for k in _HOST_KINDS]) & np.isin(cap.lane, list(lanes)))
    host = cap.own(host.astype(np.int64))
    n0 = trace.n_events
    new_index = np.full(cap.n_events, -1, np.int64)
    new_index[host] = n0 + np.arange(host.size)
    names = list(trace.names)
    name_ids = {n: i for i, n in enumerate(names)}
    name_map = np.array([name_ids.setdefault(n, len(name_ids)) for n in cap.names], np.int32)
    names = list(name_ids)
    lanes_list = list(trace.lanes)
    lane_ids = {ln: i for i, ln in enumerate(lanes_list)}
    lane_map = np.array(
        [lane_ids.setdefault((f"{p} (capture)", t), len(lane_ids)) for p, t in cap.lanes], np.int32
    )
    lanes_list = list(lane_ids)
    cats = list(trace.categories)
    cat_ids = {c: i for i, c in enumerate(cats)}
    cat_map = np.array([cat_ids.setdefault(c, len(cat_ids)) for c in cap.categories], np.int32)
    cats = list(cat_ids)
    none = np.full(host.size, -1, np.int64)

    def cat_col(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a, b.astype(a.dtype)])

    op_link = np.full(n0 + host.size, -1, np.int64)
    if trace.op_link.size:
        op_link[:n0] = trace.op_link
    has = link_to_cap >= 0
    op_link[:n0][has] = new_index[link_to_cap[has]]
    shift = {int(r): int(new_index[r]) for r in host.tolist()}
    return dataclasses.replace(
        trace,
        names=names,
        lanes=lanes_list,
        categories=cats,
        kind=cat_col(trace.kind, cap.kind[host]),
        name=cat_col(trace.name, name_map[cap.name[host]]),
        ts=cat_col(trace.ts, cap.ts[host]),
        dur=cat_col(trace.dur, cap.dur[host]),
        lane=cat_col(trace.lane, lane_map[cap.lane[host]]),
        # ids of another trace would collide with this one's: none are kept
        corr=cat_col(trace.corr, none),
        ext=cat_col(trace.ext, none),
        seq=cat_col(trace.seq, none),
        cat=cat_col(trace.cat, cat_map[cap.cat[host]]),
        shapes={**trace.shapes, **{shift[r]: v for r, v in cap.shapes.items() if r in shift}},
        conversions={**trace.conversions, **{shift[r]: v for r, v in cap.conversions.items() if r in shift}},
        inputs={**trace.inputs, **{shift[r]: v for r, v in cap.inputs.items() if r in shift}},
        op_link=op_link,
        imported_from=n0 if trace.imported_from < 0 else trace.imported_from,
    )


def find_pair(folder: Path) -> tuple[Path, Path] | None:
    """(execution trace, capture trace) in a folder laid out as vLLM writes it (the execution
    trace, and the capture trace under capture_traces/ or named graph_capture*); None when the
    folder holds no capture trace. Capture traces of several ranks go with the one execution
    trace whose name says its rank (rank_1 with graph_capture_rank_1); anything else with several
    of either is refused: which pairs with which is not recorded."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    files = [p for p in files if p.name != "execution_details.json"]
    caps = [p for p in files if CAPTURE_NAME.search(p.name) or "capture_traces" in p.parts]
    if not caps:
        return None
    execs = [p for p in files if p not in caps]
    if len(execs) == 1 and len(caps) > 1:
        # capture traces of several ranks (graph_capture_rank_N): the one of the execution
        # trace's rank, where its name says it
        rank = rank_in_name(execs[0].name)
        mine = [p for p in caps if rank is not None and rank_in_name(p.name) == rank]
        if len(mine) == 1:
            return execs[0], mine[0]
    if len(caps) != 1 or len(execs) != 1:
        ranks = sorted({rank_in_name(p.name) or "?" for p in caps})
        raise UserError(
            f"{folder}: {len(execs)} execution and {len(caps)} capture traces (capture ranks "
            f"{', '.join(ranks)}), and no name pairs them by rank: give one of each "
            "(attnprof analyze EXEC_TRACE --capture CAPTURE_TRACE)"
        )
    return execs[0], caps[0]


MATCHED_BY = (
    "kernel-name sequence per graph (grid and block not compared; ties: the most agreeing launch "
    "configurations, then capture order)"
)
MATCHED_BY_IDS = "; later replays of a graph by its recorded graph id and node ids"


def _graphs_replayed(trace: Trace, links: Links, replayed: npt.NDArray[np.bool_]) -> int | None:
    """Distinct graphs the replayed kernels belong to, by their recorded graph ids; None when
    none of them records one."""
    if trace.graph_id.size != trace.kernel_rows.size or not trace.kernel_rows.size:
        return None
    rows = links.gpu_rows[replayed]
    pos = np.searchsorted(trace.kernel_rows, rows)
    ok = (pos < trace.kernel_rows.size) & (
        trace.kernel_rows[np.minimum(pos, trace.kernel_rows.size - 1)] == rows
    )
    gid = trace.graph_id[pos[ok]]
    gid = gid[gid >= 0]
    return int(unique(gid).size) if gid.size else None


def graph_replays(
    trace: Trace, links: Links, work: npt.NDArray[np.bool_], device_us: float
) -> tuple[GraphReplays, list[str]]:
    """The graphs record of the analysis and its warning: replayed device ops (work only, as the
    share counts them), those with a captured CPU op, and the device time left with only the
    graph launch as its source."""
    g = links.graph & work
    dur = trace.dur[links.gpu_rows]
    rep = trace.metadata.get("replay") or {}
    got = g & links.captured
    un_us = float(dur[g & ~links.captured].sum())
    out = GraphReplays(
        replayed_ops=int(g.sum()),
        replayed_us=round(float(dur[g].sum()), 3),
        attributed_ops=int(got.sum()),
        unattributed_us=round(un_us, 3),
        unattributed_pct=round(100.0 * un_us / device_us, 2) if device_us > 0 else None,
        capture=rep.get("capture"),
        graphs_captured=int(rep.get("graphs_captured", 0)),
        graph_launches=int(rep.get("graph_launches", 0)),
        replays_matched=int(rep.get("replays_matched", 0)),
        replays_unmatched=int(rep.get("replays_unmatched", 0)),
        config_differs=int(rep.get("config_differs", 0)),
        imported_rows=int(rep.get("imported_rows", 0)),
        matched_by=(MATCHED_BY + (MATCHED_BY_IDS if rep.get("replays_by_graph_id") else "")) if rep else "",
        replays_by_graph_id=int(rep.get("replays_by_graph_id", 0)),
        graphs_replayed=_graphs_replayed(trace, links, g),
    )
    out.kernels = _replayed_kernels(trace, links, got, dur)
    notes: list[str] = []
    pct = f"{out.unattributed_pct:.1f}%" if out.unattributed_pct is not None else "unknown"
    if out.replayed_ops and out.capture is None:
        notes.append(
            f"{out.replayed_ops} device ops ({fmt_us(out.replayed_us)}, {pct} of device time) ran as "
            "graph replays with no CPU op but their graph launch: attention by launching op, "
            "per-op shapes and modules do not cover them (give the capture trace: --capture FILE)"
        )
    elif out.capture is not None:
        text = (
            f"{out.replays_matched} of {out.graph_launches} graph replays matched a graph of the "
            f"capture trace {out.capture} ({out.graphs_captured} captured) by kernel-name "
            "sequence"
            + (
                f" ({out.replays_by_graph_id} of them by the graph id of an earlier match)"
                if out.replays_by_graph_id
                else ""
            )
            + f": {out.attributed_ops} of {out.replayed_ops} replayed device ops have their "
            f"captured CPU op; {fmt_us(out.unattributed_us)} ({pct} of device time) has only its "
            "graph launch"
        )
        if out.config_differs:
            text += (
                f"; {out.config_differs} matched ops ran with a grid or block other than the "
                "capture's (matched by name)"
            )
        notes.append(text)
    return out, notes


def _replayed_kernels(
    trace: Trace, links: Links, got: npt.NDArray[np.bool_], dur: np.ndarray
) -> list[ReplayedKernel]:
    """The replayed kernels with a captured op, per (kernel, op), the top 20 by time, each with
    the Python frame and module of its first one."""
    idx = np.flatnonzero(got & (trace.kind[links.gpu_rows] == Kind.KERNEL))
    if not idx.size:
        return []
    width = len(trace.names) + 1
    keys = trace.name[links.gpu_rows[idx]].astype(np.int64) * width + trace.name[links.cpu_op[idx]]
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    t = np.bincount(inv, weights=dur[idx], minlength=uniq.size)
    c = np.bincount(inv, minlength=uniq.size)
    top = np.argsort(-t, kind="stable")[:20]
    heads = idx[first[top]]
    frame, module = frames_of(trace, links.cpu_op[heads])
    return [
        ReplayedKernel(
            name=short_name(trace.names[int(trace.name[links.gpu_rows[h]])]),
            op=trace.names[int(trace.name[links.cpu_op[h]])],
            frame=fr,
            module=mo,
            count=int(c[k]),
            time_us=round(float(t[k]), 3),
        )
        for k, h, fr, mo in zip(top.tolist(), heads.tolist(), frame, module, strict=True)
    ]
