"""--backward: forward + backward timed apart, gradients against fp64, regions attn_fwd/attn_bwd."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnprof.harness.run import RunOptions, run, run_variant
from attnprof.workload import BACKWARD_FLOP_FACTOR, Workload

FAST = RunOptions(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1, warmup_s=0.0)
W = Workload(batch=1, heads=4, kv_heads=2, seq=32, head_dim=16, backward=True, seed=2)


def _check_grads(res) -> None:  # type: ignore[no-untyped-def]
    assert res.status == "ok", res.reason
    assert set(res.grad_accuracy) == {"dq", "dk", "dv"}
    for name, acc in res.grad_accuracy.items():
        assert acc.ok and acc.nan_count == 0, (res.label, name, acc)
    assert res.timing and res.timing_bwd and res.timing_total
    assert res.flops_useful_bwd == BACKWARD_FLOP_FACTOR * res.flops_useful
    assert res.tflops_useful_bwd is not None and res.tflops_useful_total is not None
    assert "2.5 x the forward's" in (res.flop_convention or "")


@pytest.mark.parametrize("name", ["naive", "naive-inplace", "sdpa", "sdpa-math", "sdpa-flash"])
@pytest.mark.parametrize("mask", ["causal", "sliding=7", "padding=20", "alibi"])
def test_backward_gradients_within_tolerance(name: str, mask: str) -> None:
    _check_grads(run_variant(W.replace(mask=mask), name, options=FAST))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_backward_in_half_precision(dtype: str) -> None:
    for name in ("naive-inplace", "sdpa-flash"):
        _check_grads(run_variant(W.replace(dtype=dtype), name, options=FAST))


def test_compiled_twin_backward() -> None:
    w = Workload(batch=1, heads=2, seq=16, head_dim=16, backward=True)
    _check_grads(run_variant(w, "naive-inplace:compile", options=FAST))


def test_flex_backward_on_cpu_is_rejected_with_the_reason() -> None:
    res = run_variant(W, "flex", options=FAST)
    assert res.status == "unsupported"
    assert "no backward on cpu" in (res.reason or "") and "--backward" in (res.reason or "")


def test_profile_splits_forward_from_backward_and_memory_includes_saved(tmp_path: Path) -> None:
    w = Workload(batch=1, heads=4, kv_heads=2, seq=256, head_dim=16, backward=True)
    rec = run(
        w,
        ["naive-inplace", "sdpa-flash"],
        out=tmp_path / "r",
        options=RunOptions(time_budget_s=0.02, min_samples=3),
    )
    naive, flash = rec.results
    for r in rec.results:
        assert r.status == "ok", r.reason
        assert r.profile and r.profile.forwards == 3 and r.profile.backwards == 3
        assert (r.profile.cpu_ops_per_backward or 0) > 0
        assert r.memory and "attn_fwd through attn_bwd" in r.memory.method
        with gzip.open(tmp_path / "r" / (r.trace or "")) as fh:
            trace = json.loads(fh.read())
        names = [e.get("name") for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
        assert names.count("attn_fwd") == 3 and names.count("attn_bwd") == 3
    # naive keeps the probabilities for its backward and makes score-sized gradients
    assert naive.memory and naive.memory.peak_bytes and naive.memory.peak_bytes >= 2 * w.score_bytes()
    assert flash.memory and flash.memory.peak_bytes is not None
    assert flash.memory.peak_bytes < w.score_bytes()
    assert rec.workload.backward is True
    # the analyser splits them: --region attn_bwd counts the backward's FLOPs (2.5x)
    import subprocess
    import sys

    for region, factor in (("attn_fwd", 1.0), ("attn_bwd", BACKWARD_FLOP_FACTOR)):
        p = subprocess.run(
            [sys.executable, "-m", "attnprof", "analyze", str(tmp_path / "r" / (flash.trace or "")),
             "--region", region, "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        assert data["roofline"]["region"] == region
        assert data["roofline"]["flops_useful"] == pytest.approx(factor * w.flops_useful())
