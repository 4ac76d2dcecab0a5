"""--backward: forward + backward timed apart, gradients against fp64, regions attn_fwd/attn_bwd."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnprof.harness.run import RunOptions, run, run_variant
from attnprof.records import TimingSummary
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


WRONG_GRAD = '''
import torch
import torch.nn.functional as F


def wrong_grad(q, k, v, is_causal=False, scale=None):
    """The right output with the wrong gradients: dq = dL/dO, dk = dv = 0."""
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return out.detach() + (q - q.detach()) + 0.0 * (k + v)
'''


@pytest.fixture(scope="module")
def backward_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real --backward run with a sliding mask."""
    out = tmp_path_factory.mktemp("bwd") / "run"
    w = Workload(batch=1, heads=2, seq=64, head_dim=16, backward=True, mask="sliding=16")
    run(w, ["naive-inplace", "sdpa"], out=out, options=RunOptions(time_budget_s=0.05, min_samples=5))
    return out


@pytest.fixture(scope="module")
def wrong_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real --backward run (causal: a user variant takes is_causal, not masks): two correct
    variants and one whose output is right but whose gradients are not."""
    tmp = tmp_path_factory.mktemp("wrong")
    src = tmp / "wrong.py"
    src.write_text(WRONG_GRAD)
    out = tmp / "run"
    w = Workload(batch=1, heads=2, seq=64, head_dim=16, backward=True)
    variants = ["naive-inplace", "sdpa", f"{src}:wrong_grad"]
    # no trial run of the user variant in a child process (test_run_isolation's subject)
    run(w, variants, out=out, options=RunOptions(time_budget_s=0.05, min_samples=5, isolate_user=False))
    return out


def test_a_right_output_with_wrong_gradients_is_incorrect_everywhere(wrong_run: Path) -> None:
    """Its forward passes the check, so it was ranked, could be the baseline and win; with
    --backward a wrong gradient is a wrong answer: incorrect, INCORRECT_GRADIENT, never fastest."""
    from attnprof.compare.compare import INCORRECT, compare
    from attnprof.records import RunRecord
    from attnprof.report.data import build_report_data
    from attnprof.report.i18n import Translator
    from attnprof.report.summary import summarize

    rec = msgspec_load(wrong_run)
    wrong = next(r for r in rec.results if r.variant.endswith("wrong_grad"))
    assert wrong.accuracy is not None and wrong.accuracy.ok  # the output is right
    assert wrong.incorrect and set(wrong.failed_gradients()) >= {"dk", "dv"}
    assert not any(r.incorrect for r in rec.results if r is not wrong)  # must not fire on correct ones
    comp = compare([wrong_run])
    row = comp.row(wrong.label)
    assert row.status == INCORRECT and row.finding_codes[0] == "INCORRECT_GRADIENT"
    assert "incorrect gradient" in (row.reason or "")
    assert all(c != "INCORRECT_GRADIENT" for r in comp.rows if r is not row for c in r.finding_codes)
    bullets = summarize(build_report_data(wrong_run), Translator("en"))
    assert not any(b.startswith(f"Fastest here: {wrong.label}") for b in bullets)
    assert any(
        b.startswith(f"{wrong.label} gives the right output but incorrect gradients (") for b in bullets
    )
    assert isinstance(rec, RunRecord)


def msgspec_load(run_dir: Path):  # type: ignore[no-untyped-def]
    from attnprof.run_context import RunContext

    return RunContext.load(run_dir).record


def test_the_report_of_a_backward_run_says_what_was_measured(backward_run: Path) -> None:
    """The report of a --backward --mask sliding=16 run said "Causal mask: no", showed forward
    times only and never said the ratios were of the forward. Now: the mask and "forward and
    backward" in the environment, backward and forward + backward columns, and a bullet that
    says the speeds are the forward's and lists forward + backward per step."""
    from attnprof.report.data import build_report_data
    from attnprof.report.i18n import Translator
    from attnprof.report.markdown import render_markdown

    data = build_report_data(backward_run)
    md = render_markdown(data, Translator("en"))
    assert "- **Mask**: sliding=16" in md and "Causal mask" not in md
    assert "- **Measured**: forward and backward (--backward)" in md
    header = next(line for line in md.splitlines() if line.startswith("| Variant |"))
    assert "| Backward |" in header and "| Forward + backward |" in header
    line = next(
        b for b in md.splitlines() if "the speeds above are of forward + backward timed as one call" in b
    )
    # the speed column says which timing its ratios are of (compare/rank.py ranks by it)
    assert "Speed vs naive-inplace (per forward + backward)" in header
    listed = line.split("(clean medians): ")[1].rstrip(".").split(", ")
    rows = {r.label: r for r in data.comparison.rows if r.total_median_ms is not None}
    order = [x.split(" ")[0] for x in listed]
    assert order == sorted(order, key=lambda v: rows[v].total_median_ms or 0.0)
    for lang in ("id", "th"):
        text = render_markdown(data, Translator(lang))
        assert "sliding=16" in text and "--backward" in text


def test_a_forward_only_report_keeps_its_causal_row_and_no_backward_columns(tmp_path: Path) -> None:
    from attnprof.report.data import build_report_data
    from attnprof.report.i18n import Translator
    from attnprof.report.markdown import render_markdown

    out = tmp_path / "fwd"
    run(Workload(batch=1, heads=2, seq=32, head_dim=16), ["naive-inplace"], out=out,
        options=RunOptions(time_budget_s=0.02, min_samples=3))  # fmt: skip
    md = render_markdown(build_report_data(out), Translator("en"))
    assert "- **Causal mask**: yes" in md and "Measured" not in md
    assert "| Backward |" not in md and "forward alone" not in md


def test_compare_of_a_backward_run_says_its_table_is_the_forward(
    backward_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from attnprof.cli import main

    assert main(["compare", str(backward_run), "--no-color"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--backward: times are of the forward, speeds of forward + backward (one call) per step: " in out
    fwd = tmp_path / "fwd"
    run(Workload(batch=1, heads=2, seq=32, head_dim=16), ["naive-inplace"], out=fwd,
        options=RunOptions(time_budget_s=0.02, min_samples=3))  # fmt: skip
    assert main(["compare", str(fwd), "--no-color"]) == 0
    assert "--backward" not in capsys.readouterr().out


def _timing(ms: float) -> TimingSummary:
    samples = [ms * f for f in (0.98, 1.0, 1.0, 1.01, 1.02, 0.99, 1.0)]
    return TimingSummary(
        median_ms=ms, iqr_ms=ms / 50, mean_ms=ms, min_ms=min(samples), n=len(samples), threads=1,
        method="perf_counter", noisy=False, samples_ms=samples, rounds_paired=True,
    )  # fmt: skip


def test_forward_and_backward_below_the_backward_alone_is_flagged(tmp_path: Path) -> None:
    """A record whose one-call forward + backward is shorter than its backward alone (as a load
    burst between the two timings can make it): compare flags it, a sound one is not flagged."""
    import msgspec

    from _records import environment
    from attnprof.compare.compare import compare
    from attnprof.records import RunRecord, RunResult

    wl = Workload(batch=1, heads=2, seq=32, head_dim=16, backward=True).to_record()
    results = [
        RunResult(variant="odd", status="ok", timing=_timing(1.0), timing_bwd=_timing(3.0), timing_total=_timing(2.5)),
        RunResult(variant="sound", status="ok", timing=_timing(1.0), timing_bwd=_timing(2.0), timing_total=_timing(3.1)),
    ]  # fmt: skip
    rec = RunRecord(
        schema="attnprof.run/1", created="now", environment=environment(), workload=wl, results=results
    )
    (tmp_path / "run.json").write_bytes(msgspec.json.encode(rec))
    comp = compare([tmp_path], analyse=False)
    assert "TOTAL_BELOW_BACKWARD" in comp.row("odd").finding_codes
    assert "TOTAL_BELOW_BACKWARD" not in comp.row("sound").finding_codes
    # ranked by forward + backward (compare/rank.py): odd's 2.5 ms against sound's 3.1 ms
    assert comp.row("odd").ranked_by == "forward + backward"
    assert comp.row("sound").speedup == pytest.approx(2.5 / 3.1)
