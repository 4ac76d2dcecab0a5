"""No Python loop of the analysis runs per event, kernel or op (issue 29), checked by counting:
each shared trace is replicated 1x and 3x (benchmarks/loop_audit.py), and the Python lines each
analysis function executes must not grow with the events added. The functions that still do are
listed in KNOWN with why; the list may only shrink: a function that stops growing must leave it
(the test says so), and one that starts growing fails. Beside it, brute-force checks of the loops
replaced by array code give the same answers."""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict

import numpy as np
import pytest

from _paths import REPO, TRACES, trace
from attnprof.analysis.attribution.links import _flow_correlation
from attnprof.trace.load import load_trace
from attnprof.trace.model import Trace

sys.path.insert(0, str(REPO / "benchmarks"))
from loop_audit import growth

# function (file:name, as loop_audit prints it, without the line) -> why it still grows
KNOWN: dict[str, str] = {
    # unfused GEMM -> softmax -> GEMM chains: every softmax of a thread at once, but one call
    # per region instance and thread (after the instance's backward ops are set aside)
    "analysis/attribution/cpu_ops.py:_lane_chains": "per region instance and thread",
    # a region instance (an attention call, a step) is an object (Instance, InstanceStat,
    # IdleBreakdown): built, summarised and averaged one by one; no loop runs per op inside
    "analysis/attribution/regions.py:find_region": "per instance: its ops, device ops, backward",
    "analysis/breakdown/region_stats.py:region_stats": "per instance: an InstanceStat each",
    "analysis/breakdown/region_stats.py:<listcomp>": "the first instance's first 500 ops (capped)",
    "analysis/breakdown/region_stats.py:<genexpr>": "per instance: the idle means",
    "analysis/timeline/idle.py:<dictcomp>": "per instance window: its causes",
    # launches no op holds walk back over the ops before them, 64 steps at most: copies put more
    # ops before them, up to that bound
    "analysis/attribution/links.py:_containing": "per thread, up to 64 walk-back steps (bounded)",
}


def _function(key: str) -> str:
    return key.rsplit(":", 1)[0]


SHARED = sorted(p.name for p in TRACES.glob("*.json.gz"))


@pytest.fixture(scope="module")
def grown() -> dict[str, list[tuple[str, str]]]:
    """function -> [(trace, lines 1x -> 3x)], over every shared trace."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name in SHARED:
        _, over = growth(TRACES / name, 3)
        for key, a, b in over:
            out[_function(key)].append((name[:50], f"{a} -> {b}"))
    return out


def test_no_analysis_function_grows_with_the_events_unless_known(
    grown: dict[str, list[tuple[str, str]]],
) -> None:
    new = {f: v for f, v in grown.items() if f not in KNOWN}
    assert not new, f"Python loops that grow with the trace (lines at 1x -> 3x): {new}"


def test_every_known_loop_still_grows_somewhere(grown: dict[str, list[tuple[str, str]]]) -> None:
    gone = sorted(set(KNOWN) - set(grown))
    assert not gone, f"these no longer grow with the trace: remove them from KNOWN: {gone}"


def test_the_count_sees_a_loop_per_event() -> None:
    """The audit itself: a loop over every event, as the flow lookup was, is over the limit."""
    from loop_audit import PER_EVENT, SLACK, count_lines

    tr = load_trace(trace("pytorch__benchmark__trace2"))

    def per_event() -> None:
        for _ in tr.ts.tolist():
            pass

    counts = count_lines(per_event, "/tests/")
    assert sum(counts.values()) > SLACK + PER_EVENT * tr.n_events


def _flow_correlation_by_hand(tr: Trace, rows: np.ndarray, start: bool) -> np.ndarray:
    sel = (tr.flow_start == start) & ~tr.flow_fwdbwd
    table = {
        (int(lane), float(ts)): int(fid)
        for lane, ts, fid in zip(tr.flow_lane[sel], tr.flow_ts[sel], tr.flow_id[sel], strict=True)
    }
    return np.array([table.get((int(tr.lane[r]), float(tr.ts[r])), -1) for r in rows.tolist()], np.int64)


@pytest.mark.parametrize(
    ("prefix", "start"),
    [
        # device events without correlation ids, found by their flows' ends and starts
        ("facebookresearch__HolisticTraceAnalysis__tests__data__mtia_inference_trace", False),
        ("facebookresearch__HolisticTraceAnalysis__tests__data__mtia_inference_trace", True),
        ("pytorch__kineto__tb_plugin__samples__resnet50", False),
    ],
)
def test_flow_correlation_is_the_table_lookup(prefix: str, start: bool) -> None:
    tr = load_trace(trace(prefix))
    rows = np.arange(tr.n_events, dtype=np.int64)
    want = _flow_correlation_by_hand(tr, rows, start)
    assert (want >= 0).sum() > 100
    np.testing.assert_array_equal(_flow_correlation(tr, rows, start=start), want)


def test_flow_correlation_takes_the_last_flow_of_a_shared_lane_and_time() -> None:
    tr = load_trace(trace("pytorch__benchmark__trace2"))
    sel = np.flatnonzero(~tr.flow_start & ~tr.flow_fwdbwd)
    assert sel.size >= 3
    # two flows moved onto the lane and time of a third: the last of the three in the file wins
    tr.flow_lane[sel[:3]] = tr.flow_lane[sel[0]]
    tr.flow_ts[sel[:3]] = tr.flow_ts[sel[0]]
    tr.flow_id[sel[:3]] = [7, 8, 9]
    row = np.flatnonzero(tr.lane == tr.flow_lane[sel[0]])[:1]
    tr.ts[row] = tr.flow_ts[sel[0]]
    assert _flow_correlation(tr, row)[0] == 9 == _flow_correlation_by_hand(tr, row, False)[0]
    tr.ts[row] = np.nan  # a time that equals nothing
    assert _flow_correlation(tr, row)[0] == -1 == _flow_correlation_by_hand(tr, row, False)[0]


@pytest.mark.parametrize("seed", range(20))
def test_top_sums_is_a_counters_most_common(seed: int) -> None:
    from collections import Counter

    from attnprof.trace.model import top_sums

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    keys = rng.integers(0, 12, n)
    weights = rng.choice([0.5, 1.0, 2.0, 0.1, 0.2], n)  # sums that tie, and 0.1 + 0.2 rounding
    c: Counter[int] = Counter()
    for key, w in zip(keys.tolist(), weights.tolist(), strict=True):
        c[key] += w
    assert top_sums(keys, weights, 5) == c.most_common(5)
    assert top_sums(keys, weights) == c.most_common()


@pytest.mark.parametrize("seed", range(10))
def test_rows_in_spans_are_those_some_span_of_their_lane_holds(seed: int) -> None:
    from attnprof.analysis.findings.precision_findings import _in_spans

    tr = load_trace(trace("pytorch__benchmark__trace2"))
    rng = np.random.default_rng(seed)
    rows = rng.choice(tr.n_events, 60, replace=False).astype(np.int64)
    lanes = np.unique(tr.lane[rows]).tolist()
    lo, hi = float(tr.ts[rows].min()), float(tr.ts[rows].max())
    spans = []
    for _ in range(int(rng.integers(0, 12))):
        a = float(rng.uniform(lo, hi))
        spans.append((int(rng.choice(lanes)), a, a + float(rng.uniform(0, (hi - lo) / 4))))
    want = [
        any(lane == int(tr.lane[r]) and s <= tr.ts[r] <= e for lane, s, e in spans) for r in rows.tolist()
    ]
    assert _in_spans(tr, rows, spans).tolist() == want


@pytest.mark.parametrize("seed", range(20))
def test_chains_counted_over_sequences_at_once_are_the_sum_of_each(seed: int) -> None:
    from attnprof.analysis.attribution.cpu_ops import count_gemm_softmax_gemm

    rng = np.random.default_rng(seed)
    seqs = [
        rng.choice(3, int(rng.integers(0, 30)), p=[0.5, 0.2, 0.3]) for _ in range(int(rng.integers(1, 12)))
    ]
    each = sum(count_gemm_softmax_gemm(s == 0, s == 1, window=3) for s in seqs)
    sizes = np.array([len(s) for s in seqs])
    allof = np.concatenate(seqs)
    assert count_gemm_softmax_gemm(allof == 0, allof == 1, window=3, starts=np.cumsum(sizes) - sizes) == each


def test_gpu_unfused_count_over_instances_is_the_sum_per_instance() -> None:
    """rules.py's GPU-order count (a trace without CPU ops) over all instances at once, against
    the count of each instance alone, on a real trace's GPU ops and classes."""
    from attnprof.analysis.attribution.classify import CATEGORIES, classify
    from attnprof.analysis.attribution.cpu_ops import count_gemm_softmax_gemm
    from attnprof.analysis.attribution.links import link
    from attnprof.analysis.findings.context import Context, gpu_unfused_count

    tr = load_trace(trace("harryjmoss__particle_transformer"))  # GEMM, softmax, GEMM kernels
    g = link(tr).gpu_rows
    uniq, inv = np.unique(tr.name[g], return_inverse=True)
    classes = [classify(tr.names[int(i)]) for i in uniq.tolist()]
    ctx = Context.__new__(Context)
    ctx.gpu_cat = np.array([CATEGORIES.index(classes[i].category) for i in inv.tolist()], np.int16)
    ctx.gpu_class, ctx.gpu_name_idx = classes, inv.astype(np.int64)
    assert (ctx.gpu_cat == CATEGORIES.index("softmax")).sum() >= 10
    rng = np.random.default_rng(0)
    cuts = np.cumsum(rng.integers(2, 9, g.size // 2))  # short ones: windows of 6 reach past them
    cuts = np.concatenate([[0], cuts[cuts < g.size], [g.size]])
    in_time = np.argsort(tr.ts[g], kind="stable")
    seqs = [in_time[a:b] for a, b in itertools.pairwise(cuts)] + [np.zeros(0, np.int64)]

    def one(idx: np.ndarray) -> int:
        cats = ctx.gpu_cat[idx]
        bwd = np.array([classes[int(i)].direction in ("bwd", "bwd-aux") for i in ctx.gpu_name_idx[idx]], bool)
        soft = (cats == CATEGORIES.index("softmax")) & ~bwd
        return count_gemm_softmax_gemm(cats == CATEGORIES.index("gemm"), soft, window=6)

    want = sum(one(s) for s in seqs)
    assert want > 0
    assert gpu_unfused_count(ctx, seqs) == want


@pytest.mark.parametrize(
    "prefix", ["CodingPlatelets__SwitchTransformers", "AMD-AGI__TraceLens__tests__traces__mi300__Qwen"]
)
def test_top_cpu_ops_are_a_counter_updated_instance_by_instance(prefix: str) -> None:
    from collections import Counter

    from attnprof.analysis.attribution.links import link
    from attnprof.analysis.attribution.regions import find_region
    from attnprof.analysis.breakdown.region_stats import _top_cpu_ops

    tr = load_trace(trace(prefix))
    insts = find_region(tr, link(tr), "nn.Module|Attention|attention|ProfilerStep").instances[:200]
    assert len(insts) > 10
    c: Counter[str] = Counter()
    for inst in insts:
        u, n = np.unique(tr.name[inst.cpu_ops], return_counts=True)
        c.update({tr.names[int(a)]: int(b) for a, b in zip(u.tolist(), n.tolist(), strict=True)})
    assert [(tr.names[a], b) for a, b in _top_cpu_ops(tr, insts)] == c.most_common(15)
