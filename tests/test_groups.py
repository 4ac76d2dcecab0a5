"""The per-group array operations (trace/groups.py) against loops over each group, on random
ranges with ties; and the CPU evidence of a region, gathered over all instances at once, against
the evidence of each instance alone, on real traces (the groups keep instances apart)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from _paths import trace
from attnprof.analysis.attribution.cpu_ops import cpu_evidence
from attnprof.analysis.attribution.links import link
from attnprof.analysis.attribution.regions import Region, find_region
from attnprof.trace.groups import enclosing_before, group_cummax, held
from attnprof.trace.load import load_trace


def _ranges(rng: np.random.Generator, n: int, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    start = rng.integers(0, 40, n).astype(np.float64)  # small integers: many equal times
    return rng.integers(0, groups, n), start, start + rng.integers(0, 15, n)


@pytest.mark.parametrize("groups", [4, 40])  # searched group by group; by ranks, all at once
@pytest.mark.parametrize("seed", range(25))
def test_held_is_a_loop_over_the_ranges_of_each_points_group(seed: int, groups: int) -> None:
    rng = np.random.default_rng(seed)
    g, s, e = _ranges(rng, int(rng.integers(0, 40 * groups)), groups)
    pg, ps, pe = _ranges(rng, 50, groups + 1)  # the last group has no ranges
    want = [
        any(g[i] == a and s[i] <= b and e[i] >= c for i in range(g.size))
        for a, b, c in zip(pg, ps, pe, strict=True)
    ]
    assert held(g, s, e, pg, ps, pe).tolist() == want
    points = [
        any(g[i] == a and s[i] <= b <= e[i] for i in range(g.size)) for a, b in zip(pg, ps, strict=True)
    ]
    assert held(g, s, e, pg, ps).tolist() == points


@pytest.mark.parametrize("seed", range(10))
def test_group_cummax_restarts_at_each_group(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = np.sort(rng.integers(0, 6, 60))
    v = rng.normal(size=60).round(1)
    want = []
    for i in range(60):
        want.append(v[i] if i == 0 or g[i] != g[i - 1] else max(want[-1], v[i]))
    assert group_cummax(v, g).tolist() == want


@pytest.mark.parametrize("seed", range(15))
def test_enclosing_before_is_the_nearest_range_around_within_the_window(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g, s, e = _ranges(rng, 120, 3)
    o = np.lexsort((-(e - s), s, g))
    g, s, e = g[o], s[o], e[o]
    first = np.searchsorted(g, g)  # each group's first position
    q = np.arange(g.size)
    want = []
    for p in q.tolist():
        j = next(
            (j for j in range(p - 1, max(p - 8, -1), -1) if j >= first[p] and s[j] <= s[p] and e[j] >= e[p]),
            -1,
        )
        want.append(j)
    assert enclosing_before(s, e, q, first[q], 7).tolist() == want


_MODULES = "nn.Module|Attention|attention|ProfilerStep"  # nested instances, many of them


@pytest.mark.parametrize(
    ("prefix", "region"),
    [
        ("AMD-AGI__TraceLens__tests__traces__mi300__Qwen", _MODULES),  # upcasts, stability, fused, masks
        ("CodingPlatelets__SwitchTransformers", _MODULES),  # 376 instances: clones, unfused chains
        ("tugot17__tokenomics", _MODULES),  # fused calls and their transposes
        ("facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-1", None),
    ],
)
def test_cpu_evidence_over_all_instances_is_that_of_each_alone(prefix: str, region: str | None) -> None:
    tr = load_trace(trace(prefix))
    reg = find_region(tr, link(tr), region)
    assert len(reg.instances) > 1
    whole = cpu_evidence(tr, reg)
    parts = [cpu_evidence(tr, Region(reg.name, reg.selector, [inst])) for inst in reg.instances]
    for field in (
        "conversions",
        "upcasts_confirmed",
        "mask_instances",
        "safe_softmax",
        "transposes_before_fused",
        "fused_calls",
        "unfused_sequences",
    ):
        assert getattr(whole, field) == sum(getattr(p, field) for p in parts), field
    for field in ("upcast_rows", "stability_rows", "sdpa_upcast_rows", "oop_clones"):
        assert getattr(whole, field) == [x for p in parts for x in getattr(p, field)], field
    for field in ("conversion_types", "mask_ops", "fused_ops"):
        assert getattr(whole, field) == sum((getattr(p, field) for p in parts), Counter()), field
    assert whole.dtypes_known == any(p.dtypes_known for p in parts)


@pytest.mark.parametrize("kind", ["cuda", "cpu"])
@pytest.mark.parametrize(
    "prefix",
    ["harryjmoss__particle_transformer", "AMD-AGI__TraceLens__tests__traces__mi300__resnet_act"],
)  # launches from one thread; from two (forward, backward)
def test_costs_of_op_groups_are_each_groups_cost_of_ops(kind: str, prefix: str) -> None:
    """rules.py's per-chain costs at once, against cost_of_ops of each group of CPU ops alone
    (nested and overlapping ops, groups of one thread or several), on a real trace."""
    from types import SimpleNamespace

    from attnprof.analysis.attribution.classify import CATEGORIES, classify
    from attnprof.analysis.findings.context import Context
    from attnprof.analysis.findings.materiality import cost_of_ops, costs_of_op_groups
    from attnprof.trace.model import Kind

    tr = load_trace(trace(prefix))
    ctx = Context.__new__(Context)
    ctx.trace, ctx.links = tr, link(tr)
    names = tr.name[ctx.links.gpu_rows]
    ctx.gpu_cat = np.array(
        [CATEGORIES.index(classify(tr.names[int(i)]).category) for i in names.tolist()], np.int16
    )
    ctx.device = SimpleNamespace(kind=kind)  # the device kind and the basis are all cost_of_ops reads
    ctx.region_stat = SimpleNamespace(cpu_time_us_per_instance=1.0, gpu_time_us_per_instance=1.0, instances=1)
    ops = tr.rows(Kind.CPU_OP)
    rng = np.random.default_rng(1)
    # the longest ops (those that hold launches) and random ones; repeats: a row in two groups
    rows = np.concatenate([ops[np.argsort(tr.dur[ops])[-150:]], rng.choice(ops, 150)])
    group = rng.integers(0, 40, rows.size)
    got = costs_of_op_groups(ctx, rows, group, 41)  # group 40: none
    want = [cost_of_ops(ctx, rows[group == k]).us for k in range(41)]
    assert got[40] == 0 and sum(w > 0 for w in want) > 20
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_first_true_is_the_first_candidate_that_passes(seed: int) -> None:
    from attnprof.analysis.attribution.cpu_ops import _first_true

    rng = np.random.default_rng(seed)
    mask = rng.random((30, 6)) < 0.6
    keys = rng.integers(0, 4, (30, 6, 2))
    calls: list[tuple[int, int]] = []

    def test(a: int, b: int) -> bool:
        calls.append((a, b))
        return (a + b) % 3 == 0

    want = [next((j for j in range(6) if mask[i, j] and test(*keys[i, j].tolist())), -1) for i in range(30)]
    calls.clear()
    assert _first_true(mask, keys, test).tolist() == want
    assert len(calls) == len(set(calls))  # once per distinct key
