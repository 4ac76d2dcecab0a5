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
    timed = sorted((r for r in results if r.ran and r.timing), key=lambda r: r.timing.median_ms)  # type: ignore[union-attr]
    for r in results:
        if r.model is not None and r.model.attention_share is not None and r.timing is not None:
            r.model.attention_ms = r.model.attention_share * r.timing.median_ms
    if not timed:
        return
    info.fastest = timed[0].label
    if len(timed) > 1:
        from attnprof.analysis.stats import MIN_INTERVAL_SAMPLES, ratio_interval

        a, b = timed[0].timing, timed[1].timing
        assert a is not None and b is not None
        info.runner_up = timed[1].label
        info.margin = b.median_ms / a.median_ms - 1.0
        # a tie unless the paired bootstrap interval of the ratio excludes 1 (analysis/stats.py)
        ci = ratio_interval(b.samples_ms, a.samples_ms, paired=a.rounds_paired and b.rounds_paired)
        # too few rounds for a 95% interval: none is given (the view says so), and no tie claimed
        if ci is not None and ci.n >= MIN_INTERVAL_SAMPLES:
            info.margin_low, info.margin_high = ci.low - 1.0, ci.high - 1.0
            info.margin_within_noise = not ci.excludes_one
        load = a.load
        if load is not None and load.unreliable:
            info.timing_note = "the machine was busy while timing: " + "; ".join(load.reasons)
