"""What a model run's traces and timings say: attention's share of a step by the per-layer ranges
and by the analyser (and whether they agree), per-layer times, findings, and the fastest
implementation with its margin."""

from __future__ import annotations

from pathlib import Path

from attnprof.records import LayerAttention, ModelInfo, RunResult

__all__ = ["MIN_SHARE_NOISE", "analyse", "fastest"]


# two shares measured from two or three profiled steps: never call a difference below 2 points real
MIN_SHARE_NOISE = 0.02


def analyse(result: RunResult, trace_path: Path | None, device: str) -> None:
    """Shares, per-layer times and findings from the exported (rich) trace. Not the lean one,
    although it stretches ops less: the analyser's share counts unfused attention by its
    GEMM -> softmax -> GEMM chains, which it confirms by their shapes, and only the rich pass
    records shapes (without them a bf16 eager model's analyser share read 0 against 19%). Both
    shares come from one trace, so their agreement check compares like with like."""
    from attnprof.analysis import analyze
    from attnprof.analysis.breakdown.model_share import BWD_RANGE, FWD_RANGE, model_shares
    from attnprof.trace.load import load_trace

    assert trace_path is not None and result.model is not None
    mr = result.model
    trace = load_trace(trace_path)
    shares = model_shares(trace)
    mr.time_source = "gpu" if shares.device_time else "cpu"
    if shares.steps:
        ann, ana = shares.shares("annotated"), shares.shares("analyser")
        mr.attention_share = sum(ann) / len(ann)
        mr.analyser_share = sum(ana) / len(ana)
        mr.share_noise = max(max(ann) - min(ann), max(ana) - min(ana))
        mr.share_gap = min(abs(a - b) for a, b in zip(ann, ana, strict=True))
        mr.shares_agree = mr.share_gap <= max(mr.share_noise, MIN_SHARE_NOISE)
        mr.step_us_profiled = sum(shares.step_us) / shares.steps
        if not mr.shares_agree:
            result.warnings.append(
                f"attention share {mr.attention_share:.1%} from the per-layer ranges, {mr.analyser_share:.1%} "
                f"from the analyser's classification: in every profiled step they differ by at least "
                f"{mr.share_gap:.1%}, more than the noise ({max(mr.share_noise, MIN_SHARE_NOISE):.1%})"
            )
    layers: dict[int, LayerAttention] = {}
    for name, times in shares.layers.items():
        fwd, bwd = FWD_RANGE.match(name), BWD_RANGE.match(name)
        n = int((fwd or bwd).group(1))  # type: ignore[union-attr]
        entry = layers.setdefault(n, LayerAttention(layer=n, fwd_us=0.0))
        mean = sum(times) / len(times)
        if fwd:
            entry.fwd_us = mean
            entry.calls_per_step = sum(shares.calls[name]) / len(times)
        else:
            entry.bwd_us = mean
    mr.layers = [layers[k] for k in sorted(layers)]
    if not mr.layers and shares.steps:
        result.warnings.append(
            "no attn_fwd/layer.N range in the trace: this model does not call attention through transformers' AttentionInterface"
        )
    analysis = analyze(trace_path, region=None, top=0)
    mr.findings = [f"{f.code}: {f.message}" for f in analysis.findings]


def fastest(info: ModelInfo, results: list[RunResult]) -> None:
    """The fastest implementation and its margin over the runner-up, by compare/rank.py's rule
    (what the run table and compare use): ranked by the step's median, only implementations that
    ran and gave a correct answer, the margin's 95% interval from the step samples (paired by
    round where they were interleaved) only with MIN_INTERVAL_SAMPLES on each side, a tie where
    the interval holds 1."""
    from attnprof.compare.rank import fastest as ranked_fastest
    from attnprof.compare.rank import ranked_median, speed
    from attnprof.compare.records import Row

    for r in results:
        if r.model is not None and r.model.attention_share is not None and r.timing is not None:
            r.model.attention_ms = r.model.attention_share * r.timing.median_ms
    rows = [
        Row(
            label=r.label,
            kind="run",
            source="",
            status=r.status,
            median_ms=r.timing.median_ms,
            samples_ms=list(r.timing.samples_ms),
            paired_rounds=r.timing.rounds_paired,
            ranked_by="step",
        )
        for r in results
        if r.ran and r.timing is not None
    ]
    top = ranked_fastest(rows)
    if top is None:
        return
    info.fastest = top.fastest.label
    others = sorted((r for r in rows if r.ok and r is not top.fastest), key=lambda r: ranked_median(r) or 0.0)
    if others:
        runner = others[0]
        info.runner_up = runner.label
        sp = speed(top.fastest, runner)  # the runner-up's step over the fastest's
        assert sp is not None
        info.margin = sp.ratio - 1.0
        # too few rounds for a 95% interval: none is given (the view says so), and no tie claimed
        if sp.low is not None and sp.high is not None:
            info.margin_low, info.margin_high = sp.low - 1.0, sp.high - 1.0
            info.margin_within_noise = sp.claim == "tie"
    best = next(r for r in results if r.label == top.fastest.label and r.timing is not None)
    load = best.timing.load if best.timing else None
    if load is not None and load.unreliable:
        info.timing_note = "the machine was busy while timing: " + "; ".join(load.reasons)
