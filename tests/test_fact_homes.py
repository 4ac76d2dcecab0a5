"""Facts with one home (docs/architecture.md, "Where each fact is computed"): a threshold is
defined once, and no module decides the same thing with a literal of its own. Read from the
source (ast), importing nothing."""

from __future__ import annotations

import ast
from pathlib import Path

from _paths import REPO
from attnprof.records import Accuracy, ModelInfo, RunResult, TimingSummary

SRC = REPO / "src" / "attnprof"


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(SRC.rglob("*.py"))]


def _defined(name: str) -> list[str]:
    """The modules that assign `name` at module level."""
    out = []
    for path, tree in _modules():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(str(path.relative_to(SRC)))
    return out


def test_materiality_has_one_home() -> None:
    """MATERIAL_SHARE was 0.01 (a fraction: 1% of a scope's time makes a finding about named ops
    a warning) in materiality.py and 10.0 (a percent: the device time a per-op model finding's
    shapes must take for it to be made at all) in perf_findings.py: two thresholds under one name.
    perf_findings.py names its own (SHAPES_PCT, SHAPE_PCT)."""
    assert _defined("MATERIAL_SHARE") == ["analysis/findings/materiality.py"]
    assert _defined("SHAPES_PCT") == ["analysis/findings/perf_findings.py"]


def test_notable_has_one_home_and_no_view_compares_with_a_literal_of_its_own() -> None:
    """compare/rank.py NOTABLE (1.1) is the one "about the same" threshold of two timings; the
    model view coloured its x-fastest column at 1.05 of its own."""
    assert _defined("NOTABLE") == ["compare/rank.py"]
    copies = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for c in node.comparators:
                    if isinstance(c, ast.Constant) and c.value in (1.05, 1.1):
                        copies.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert copies == []


def _step(label: str, status: str, samples: list[float]) -> RunResult:
    ms = sorted(samples)[len(samples) // 2]
    t = TimingSummary(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=min(samples), n=len(samples),
                      threads=1, method="interleaved", noisy=False, samples_ms=samples,
                      rounds_paired=True)  # fmt: skip
    acc = Accuracy(max_abs_err=0.5 if status == "incorrect" else 0.0, max_rel_err=None, nan_count=0,
                   inf_count=0, tolerance=1e-3, ok=status != "incorrect")  # fmt: skip
    return RunResult(variant=label, status="ok", timing=t, accuracy=acc)


def test_who_is_fastest_in_a_model_run_is_compare_ranks_rule() -> None:
    """models/analyse.py sorted every implementation that ran by its median, a wrong answer
    included: an incorrect implementation could be "fastest". It now asks compare/rank.py (the
    run table's and compare's rule): correct implementations only, the margin and its interval
    from rank's `speed`."""
    from attnprof.models.analyse import fastest

    info = ModelInfo(name="m", source="preset", kind="causal-lm", model_class="M", model_type="m")
    results = [
        _step("wrong", "incorrect", [1.0] * 8),
        _step("sdpa", "ok", [2.0, 2.1, 2.0, 2.05, 2.0, 2.1, 2.0, 2.05]),
        _step("eager", "ok", [3.0, 3.1, 3.0, 3.05, 3.0, 3.1, 3.0, 3.05]),
    ]
    for r in results:
        r.settle_status()
    assert results[0].status == "incorrect"
    fastest(info, results)
    assert (info.fastest, info.runner_up) == ("sdpa", "eager")
    assert info.margin is not None and abs(info.margin - (3.05 / 2.05 - 1.0)) < 1e-9
    assert info.margin_low is not None and info.margin_low > 0 and info.margin_within_noise is False
