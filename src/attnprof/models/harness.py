"""Run one model with each attention implementation in turn; record it as a run directory.

For every implementation: check that the model accepts it (transformers' own check, and for
attnprof's pinned SDPA backends the same capability rules `attnprof run` uses), build a copy of
the model that shares the weights, warm it up, profile a few steps (harness/profile.py, each
step inside ``model_step``, each attention call inside ``attn_fwd/layer.N``), compare its output
with eager attention's in fp32 on the same weights (the reference: a bf16 eager run carries
bf16's own error), and measure peak memory. Then all implementations that ran are timed together,
interleaved (harness/timing.py), and each trace is analysed for attention's share of the step
(attnprof.analysis.model_share) and for findings. The record is a `attnprof.run/1` RunRecord
with `model` set, written as run.json beside traces/ and tables/, so `attnprof compare` and
`attnprof report` read a model run as they read any run.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import UserError
from attnprof.harness.failures import reject
from attnprof.harness.measure import safe_name
from attnprof.outputs import write_atomic
from attnprof.reasons import reason
from attnprof.records import (
    RUN_SCHEMA,
    LayerAttention,
    ModelInfo,
    ModelResult,
    ReasonCode,
    RunRecord,
    RunResult,
    Status,
    encode_json,
)

if TYPE_CHECKING:
    import torch

    from attnprof.models.load import Loaded
    from attnprof.workload import Workload

__all__ = [
    "DEFAULT_IMPLEMENTATIONS",
    "MIN_SHARE_NOISE",
    "STEP_ANNOTATION",
    "ModelOptions",
    "Plan",
    "check_model",
    "run_model",
]

STEP_ANNOTATION = "model_step"
# two shares measured from two or three profiled steps: never call a difference below 2 points real
MIN_SHARE_NOISE = 0.02
TRANSFORMERS_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")
Progress = Callable[[str, str], None]


def _default_implementations() -> tuple[str, ...]:
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    return (*TRANSFORMERS_IMPLEMENTATIONS, *VARIANT_IMPLEMENTATIONS)


DEFAULT_IMPLEMENTATIONS = _default_implementations()


def _known_implementations() -> list[str]:
    """attnprof's and transformers' implementation names (those registered in its
    AttentionInterface: a newer transformers knows more), so a typo is caught before a model is
    built instead of failing every layer with transformers' long message."""
    names = ["eager", *DEFAULT_IMPLEMENTATIONS]
    try:
        from transformers import AttentionInterface

        names += [str(k) for k in AttentionInterface._global_mapping]
    except (ImportError, AttributeError):  # an older or newer transformers: attnprof's list
        pass
    return list(dict.fromkeys(names))


# implementations left out of the default list on a CPU, with the reason (they run when asked for)
_CPU_SLOW = {"flex_attention": reason("cpu_slow", name="flex_attention")}


@dataclass(frozen=True)
class ModelOptions:
    implementations: Sequence[str] | None = None  # None: every default implementation
    phase: str = "prefill"
    backward: bool = False
    size: str | None = None
    batch: int | None = None
    seq: int | None = None
    dtype: str | None = None
    device: str = "cpu"
    seed: int = 0
    # wait 0, warm-up 1, active 2: the call before profiling already warmed the model up, and a
    # model step is long enough that two active steps show its structure
    steps: tuple[int, int, int] = (0, 1, 2)
    warmup_calls: int = 1
    time_budget_s: float = 0.2  # clean timing per implementation (interleaved with the others)
    min_samples: int = 3
    profile: bool = True
    # also write each trace here as tensorboard_trace_handler does (worker = the implementation's tag)
    tensorboard_dir: str | None = None


@dataclass
class _Prepared:
    result: RunResult
    model: Any = None
    call: Callable[[], Any] | None = None
    trace_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _output(out: Any) -> torch.Tensor:
    for name in ("logits", "last_hidden_state"):
        t = getattr(out, name, None)
        if t is not None:
            return t
    return out[0]


def _text_config(config: Any) -> Any:
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _shapes(loaded: Loaded, opts: ModelOptions) -> tuple[int, int]:
    from attnprof.models.presets import get_preset

    preset = get_preset(loaded.name) if loaded.source == "preset" else None
    size = loaded.size or "small"
    batch = opts.batch if opts.batch is not None else (preset.batch[size] if preset else 1)
    if loaded.kind == "vision":
        cfg = loaded.config
        if opts.seq is not None:
            raise UserError(
                "--seq does not apply to a vision model: its sequence is (image_size / patch_size)^2 + 1"
            )
        seq = (cfg.image_size // cfg.patch_size) ** 2 + 1
    else:
        seq = opts.seq if opts.seq is not None else (preset.seq[size] if preset else 128)
        limit = getattr(_text_config(loaded.config), "max_position_embeddings", None)
        if limit and seq + 1 > limit:
            raise UserError(
                f"--seq {seq} exceeds this model's max_position_embeddings ({limit}); pass a smaller --seq"
            )
    for name, value in (("--batch", batch), ("--seq", seq)):
        if value < 1:
            raise UserError(f"{name} must be a positive integer, got {value}")
    return batch, seq


def _attention_workload(loaded: Loaded, opts: ModelOptions, batch: int, seq: int, dtype: str) -> Workload:
    from attnprof.workload import Workload

    cfg = _text_config(loaded.config)
    heads = int(cfg.num_attention_heads)
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    decode = opts.phase == "decode"
    if loaded.kind == "encoder":
        mask = "padding=" + ",".join(str(n) for n in _padded_lengths(batch, seq))
    else:
        mask = "causal" if loaded.kind == "causal-lm" else "none"
    # the workload fields of `attnprof run` (mask, backward, phase) describe the same call
    return Workload(
        mask=mask,
        backward=opts.backward,
        phase=opts.phase,
        batch=batch,
        heads=heads,
        kv_heads=kv,
        seq=1 if decode else seq,
        kv_seq=seq + 1 if decode else seq,
        head_dim=head_dim,
        dtype=dtype,
        device=opts.device,
        causal=loaded.kind == "causal-lm",
        seed=opts.seed,
    )


def _padded_lengths(batch: int, seq: int) -> list[int]:
    """Real tokens per sequence of an encoder's padded batch: seq - b * seq / (2 * batch)."""
    return [seq - (b * seq) // (2 * batch) for b in range(batch)]


def _inputs(
    loaded: Loaded, batch: int, seq: int, device: str, dtype: torch.dtype, seed: int
) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    cfg = loaded.config
    if loaded.kind == "vision":
        px = torch.randn(batch, cfg.num_channels, cfg.image_size, cfg.image_size, generator=gen)
        return {"pixel_values": px.to(device=device, dtype=dtype)}
    vocab = int(_text_config(cfg).vocab_size)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    if loaded.kind == "encoder":
        lengths = _padded_lengths(batch, seq)
        mask = torch.zeros(batch, seq, dtype=torch.long)
        for b, n in enumerate(lengths):
            mask[b, :n] = 1
        return {"input_ids": ids, "attention_mask": mask.to(device)}
    return {"input_ids": ids}


def _share_weights(base: Any) -> Any:
    """A copy of the module tree (own config, own attention choice) with the same tensors."""
    memo: dict[int, Any] = {id(p): p for p in base.parameters()}
    memo.update({id(b): b for b in base.buffers()})
    return copy.deepcopy(base, memo)


def _step_call(model: Any, inputs: dict[str, Any], opts: ModelOptions) -> Callable[[], torch.Tensor]:
    import torch

    if opts.phase == "decode":
        import inspect

        ids = inputs["input_ids"]
        with torch.no_grad():
            first = model(input_ids=ids, use_cache=True)
        cache = getattr(first, "cache", None) or first.past_key_values
        nxt = ids[:, -1:]
        # transformers 5.2x renames past_key_values to cache
        key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

        def decode() -> torch.Tensor:
            with torch.no_grad():
                out = model(input_ids=nxt, use_cache=True, **{key: cache})
            cache.crop(-1)  # back to the prefill length: every step sees the same cache
            return _output(out)

        return decode
    if opts.backward:

        def train() -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            with torch.enable_grad():
                out = _output(model(**inputs))
                out.float().square().mean().backward()
            return out.detach()

        return train

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return _output(model(**inputs))

    return forward


def _step_words(loaded: Loaded, opts: ModelOptions, batch: int, seq: int) -> str:
    what = {"causal-lm": "tokens", "encoder": "tokens (padded batch)", "vision": "patches + class token"}
    if opts.phase == "decode":
        return (
            f"decode: one token per sequence against a KV cache of {seq} (cache cropped back after each step)"
        )
    base = f"forward over {batch} x {seq} {what[loaded.kind]}"
    if opts.backward:
        return base + ", loss = mean square of the output, backward (no optimizer step)"
    return base


def _check(impl: str, workload: Workload, base: Any, explicit: bool) -> tuple[Status, ReasonCode] | None:
    """(status, reason) when `impl` cannot run here, else None."""
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    if not explicit and workload.device == "cpu" and impl in _CPU_SLOW:
        return "skipped", _CPU_SLOW[impl]
    if impl in VARIANT_IMPLEMENTATIONS:
        from attnprof.variants.registry import check, get_variant

        variant = get_variant(VARIANT_IMPLEMENTATIONS[impl])
        decision = check(variant, workload)
        if not decision.accepted:
            assert decision.reason_code is not None  # Decision.no records one
            return "unsupported", reason("in_model", decision.reason_code, name=impl)
    return None


def _origin(impl: str) -> str:
    return "attnprof" if impl.startswith("attnprof-") else "transformers"


def _describe(impl: str) -> str:
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    if impl in VARIANT_IMPLEMENTATIONS:
        from attnprof.variants.registry import get_variant

        return f"attnprof {get_variant(VARIANT_IMPLEMENTATIONS[impl]).description}, via AttentionInterface"
    return f"transformers attn_implementation={impl!r}"


@dataclass
class Plan:
    """What run_model will run, checked before anything heavy happens."""

    loaded: Loaded
    batch: int
    seq: int
    workload: Workload  # one attention call inside the model
    implementations: list[str]


def check_model(model: str, opts: ModelOptions) -> Plan:
    """Resolve MODEL and check the options: every UserError a run can raise for its input, raised
    before a model is built (the CLI calls this before it starts its progress display)."""
    from attnprof.models.attention import canonical
    from attnprof.models.load import load
    from attnprof.workload import DTYPES

    if opts.phase not in ("prefill", "decode"):
        raise UserError(f"unknown --phase {opts.phase!r}: use prefill or decode")
    if opts.phase == "decode" and opts.backward:
        raise UserError("--backward with --phase decode: a decode step is inference only; drop one of them")
    loaded = load(model, opts.size)
    if opts.phase == "decode" and loaded.kind != "causal-lm":
        kind = "an encoder" if loaded.kind == "encoder" else "a vision model"
        raise UserError(f"--phase decode needs a decoder with a KV cache; {model} is {kind}")
    cuda = opts.device.startswith("cuda")
    dtype_name = opts.dtype or ("bf16" if cuda else "fp32")
    if str(dtype_name).lower() not in DTYPES:
        raise UserError(f"unknown dtype {dtype_name!r}: use one of fp32, fp16, bf16")
    batch, seq = _shapes(loaded, opts)
    workload = _attention_workload(loaded, opts, batch, seq, dtype_name)
    impls = list(dict.fromkeys(canonical(i) for i in (opts.implementations or DEFAULT_IMPLEMENTATIONS)))
    if not impls:
        raise UserError("--attn is empty: name at least one implementation, e.g. --attn eager,sdpa")
    known = _known_implementations()
    unknown = [i for i in impls if i not in known and "/" not in i]  # owner/repo: a Hub kernel
    if unknown:
        raise UserError(
            f"unknown --attn {', '.join(unknown)}: use one of {', '.join(known)} "
            "(or a Hub kernel as owner/repo)"
        )
    return Plan(loaded, batch, seq, workload, impls)


def run_model(
    model: str,
    options: ModelOptions | None = None,
    *,
    out: Path | None = None,
    progress: Progress | None = None,
) -> RunRecord:
    """Run `model` (a preset, a config or checkpoint path, or a cached Hub id) with each attention
    implementation; write <out>/run.json, traces/ and tables/ when `out` is given."""
    from attnprof.harness.cuda import on_device

    opts = options or ModelOptions()
    with on_device(opts.device):  # cuda:N current: its events, streams and SDPA checks
        return _run_model(model, opts, out=out, progress=progress)


def _run_model(model: str, opts: ModelOptions, *, out: Path | None, progress: Progress | None) -> RunRecord:
    import torch

    from attnprof.harness.env import environment
    from attnprof.harness.run import prepare_out_dir
    from attnprof.models.attention import layer_ranges, register_variants
    from attnprof.models.load import require_transformers

    tf = require_transformers()
    plan = check_model(model, opts)
    loaded, batch, seq, workload = plan.loaded, plan.batch, plan.seq, plan.workload
    torch_dtype = workload.torch_dtype
    explicit = opts.implementations is not None
    impls = plan.implementations
    register_variants()
    if out is not None:
        out = prepare_out_dir(out)
    note = progress or (lambda label, stage: None)

    note(model, "building the model")
    base = loaded.build(dtype=torch_dtype, device=opts.device, seed=opts.seed)
    inputs = _inputs(loaded, batch, seq, opts.device, torch_dtype, opts.seed)
    env = environment(opts.device)
    tcfg = _text_config(loaded.config)
    info = ModelInfo(
        name=model,
        source=loaded.source,
        kind=loaded.kind,
        model_class=type(base).__name__,
        model_type=str(loaded.config.model_type),
        size=loaded.size,
        phase=opts.phase,  # type: ignore[arg-type]
        backward=opts.backward,
        batch=batch,
        seq=seq,
        layers=int(getattr(tcfg, "num_hidden_layers", 0) or 0),
        hidden=int(getattr(tcfg, "hidden_size", 0) or 0),
        parameters=sum(p.numel() for p in base.parameters()),
        padding=[int(n) for n in inputs["attention_mask"].sum(-1).tolist()]
        if "attention_mask" in inputs
        else [],
        transformers_version=str(tf.__version__),
        step=_step_words(loaded, opts, batch, seq),
    )
    tag0 = (
        f"{safe_name(Path(model).stem if loaded.source in ('config', 'checkpoint') else model)}_{opts.phase}"
    )
    tag0 += "-train" if opts.backward else ""
    tag0 += f"_{batch}_{seq}"

    # the reference every implementation (eager included) is compared with: eager attention in
    # fp32 on the same weights; in fp32 that is eager's own output (no extra step)
    reference: dict[str, torch.Tensor] = {}

    def eager_output(given: torch.Tensor | None = None) -> torch.Tensor:
        if given is not None and torch_dtype == torch.float32:
            reference.setdefault("ref", given.detach().double())
        if "ref" not in reference:
            reference["ref"] = _reference_output(base, inputs, opts)
        return reference["ref"]

    prepared: list[_Prepared] = []
    for impl in impls:
        result = RunResult(
            variant=impl, status="ok", description=_describe(impl), tag=f"{tag0}_{safe_name(impl)}"
        )
        result.model = ModelResult(implementation=impl, origin=_origin(impl))  # type: ignore[arg-type]
        p = _Prepared(result=result)
        prepared.append(p)
        refused = _check(impl, workload, base, explicit)
        if refused:
            reject(result, *refused)
            continue
        try:
            m: Any = _share_weights(base)
            m.set_attn_implementation(impl)
        except Exception as exc:  # transformers' own reason (not installed, not supported, unknown)
            reject(result, "unsupported", reason("said", name=impl, detail=_first_line(exc)))
            continue
        p.model = m

    models = [p.model for p in prepared if p.model is not None]
    with layer_ranges(*models, backward=opts.backward):
        for p in prepared:
            if p.model is not None:
                _prepare(p, inputs, opts, workload, out, eager_output, note)
        ready = {p.result.label: p for p in prepared if p.call is not None}
        if ready:
            from attnprof.harness.timed import noisy_warning
            from attnprof.harness.timing import time_interleaved

            note(", ".join(ready), "timing (interleaved)")
            summaries = time_interleaved(
                {k: c for k, c in ((k, p.call) for k, p in ready.items()) if c is not None},
                device=opts.device,
                budget_s=opts.time_budget_s * len(ready),
                min_samples=opts.min_samples,
                warmup_s=0.05,
            )
            for label, s in summaries.items():
                r = ready[label].result
                r.timing = s
                warning = noisy_warning(s)
                if warning:
                    r.warnings.append(warning)
    for p in prepared:
        if p.trace_path is not None:
            note(p.result.label, "analysing the trace")
            _analyse(p, workload.device)
        note(p.result.label, "done")
    _fastest(info, [p.result for p in prepared])
    record = RunRecord(
        schema=RUN_SCHEMA,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        environment=env,
        workload=workload.to_record(),
        results=[p.result for p in prepared],
        causal_alignment="bottom-right (KV cache)" if opts.phase == "decode" else workload.causal_alignment,
        steps=opts.steps,
        model=info,
    )
    if out is not None:
        write_atomic(out / "run.json", encode_json(record))
    return record


def _reference_output(base: Any, inputs: dict[str, Any], opts: ModelOptions) -> torch.Tensor:
    """One step of eager attention in fp32 on `base`'s weights (upcast, so only the arithmetic
    differs), as fp64. A bf16 eager run is no reference: it carries bf16's own error, and an
    implementation as far from the truth as eager is would look exact against it."""
    import torch

    dtype = next(base.parameters()).dtype
    if dtype == torch.float32:
        model, given = _share_weights(base), inputs
    else:
        model = copy.deepcopy(base).float()  # the fp32 copy lives for this one step only
        given = {
            k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in inputs.items()
        }
    model.set_attn_implementation("eager")
    out = _step_call(model, given, opts)().detach().double()
    del model
    return out


def _is_unsupported(exc: BaseException) -> bool:
    text = str(exc)
    return "No available kernel" in text or "No viable backend" in text or "not supported" in text.lower()


def _prepare(
    p: _Prepared,
    inputs: dict[str, Any],
    opts: ModelOptions,
    workload: Workload,
    out: Path | None,
    eager_output: Callable[..., torch.Tensor],
    note: Progress,
) -> None:
    import torch

    from attnprof.harness import accuracy
    from attnprof.harness.failures import record_failure
    from attnprof.harness.measure import peak_memory, profile_into

    r = p.result
    stage = "build"
    try:
        call = _step_call(p.model, inputs, opts)
        stage = "warm-up"
        note(r.label, "warm-up")
        for _ in range(max(1, opts.warmup_calls)):
            output = call()
        if opts.device.startswith("cuda"):
            torch.cuda.synchronize(opts.device)
        stage = "accuracy"
        if r.variant == "eager":  # in fp32 eager's own output is the reference: no extra step
            eager_output(output)
        r.accuracy = accuracy.compare(output, eager_output(), workload.dtype)
        r.settle_status()  # one vocabulary: "incorrect" when it differs from eager beyond tolerance
        del output
        prof = None
        if opts.profile:
            stage = "profile"
            note(r.label, "profiling")
            assert r.tag is not None
            with profile_into(
                call, opts, out=out, tag=r.tag, device=opts.device, annotation=STEP_ANNOTATION
            ) as profiled:
                prof = profiled.outcome
                r.trace, r.table, r.lean_trace = profiled.trace, profiled.table, profiled.lean_trace
                p.trace_path = profiled.trace_path
                if out is None:  # analyse now, before the temporary folder goes
                    _analyse(p, workload.device)
                    p.trace_path = None
            r.profile = prof.summary
        r.backend = _backend(r.variant, prof.op_names if prof else set())
        stage = "memory"
        r.memory = peak_memory(
            call,
            prof,
            device=opts.device,
            estimate=0,
            cuda_method="torch.cuda.max_memory_allocated above the allocation before the step",
            region=STEP_ANNOTATION,
        )
        p.call = call
    except Exception as exc:
        record_failure(r, stage, exc, opts.device, status="unsupported" if _is_unsupported(exc) else None)
        p.call = None


def _backend(impl: str, op_names: set[str]) -> str | None:
    from attnprof.variants.sdpa import backend_from_ops

    if "sdpa" in impl:
        return backend_from_ops(op_names) or ("math" if op_names else None)
    if impl.startswith("flex"):
        return "flex"
    if "naive" in impl or impl == "eager":
        return "aten"
    return None


def _analyse(p: _Prepared, device: str) -> None:
    """Shares, per-layer times and findings from the exported (rich) trace. Not the lean one,
    although it stretches ops less: the analyser's share counts unfused attention by its
    GEMM -> softmax -> GEMM chains, which it confirms by their shapes, and only the rich pass
    records shapes (without them a bf16 eager model's analyser share read 0 against 19%). Both
    shares come from one trace, so their agreement check compares like with like."""
    from attnprof.analysis import analyze
    from attnprof.analysis.model_share import BWD_RANGE, FWD_RANGE, model_shares
    from attnprof.trace.load import load_trace

    assert p.trace_path is not None and p.result.model is not None
    mr = p.result.model
    trace = load_trace(p.trace_path)
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
            p.result.warnings.append(
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
        p.result.warnings.append(
            "no attn_fwd/layer.N range in the trace: this model does not call attention through transformers' AttentionInterface"
        )
    analysis = analyze(p.trace_path, region=None, top=0)
    mr.findings = [f"{f.code}: {f.message}" for f in analysis.findings]


def _fastest(info: ModelInfo, results: list[RunResult]) -> None:
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
