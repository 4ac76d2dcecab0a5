"""Run one model with each attention implementation in turn; record it as a run directory.

For every implementation: check that the model accepts it (transformers' own check, and for
attnprof's pinned SDPA backends the same capability rules `attnprof run` uses), build a copy of
the model that shares the weights, warm it up, profile a few steps (harness/profile.py, each
step inside ``model_step``, each attention call inside ``attn_fwd/layer.N``), compare its output
with eager attention's in fp32 on the same weights (the reference: a bf16 eager run carries
bf16's own error), and measure peak memory. Then all implementations that ran are timed together,
interleaved (harness/timing.py), and each trace is analysed for attention's share of the step
(attnprof.analysis.breakdown.model_share) and for findings. The record is a `attnprof.run/1` RunRecord
with `model` set, written as run.json beside traces/ and tables/, so `attnprof compare` and
`attnprof report` read a model run as they read any run.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import first_line
from attnprof.harness.failures import reject
from attnprof.harness.measure import safe_name
from attnprof.models.analyse import MIN_SHARE_NOISE, analyse, fastest
from attnprof.models.options import ModelOptions
from attnprof.models.plan import (
    DEFAULT_IMPLEMENTATIONS,
    Plan,
    check_implementation,
    check_model,
    describe,
    origin,
)
from attnprof.models.step import share_weights, step_call, step_inputs, step_words, text_config
from attnprof.outputs import write_atomic
from attnprof.reasons import reason
from attnprof.records import (
    RUN_SCHEMA,
    ModelInfo,
    ModelResult,
    RunRecord,
    RunResult,
    encode_json,
)

if TYPE_CHECKING:
    import torch

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
Progress = Callable[[str, str], None]


@dataclass
class _Prepared:
    result: RunResult
    model: Any = None
    call: Callable[[], Any] | None = None
    trace_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
    inputs = step_inputs(loaded, batch, seq, opts.device, torch_dtype, opts.seed)
    env = environment(opts.device)
    tcfg = text_config(loaded.config)
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
        step=step_words(loaded, opts, batch, seq),
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
            variant=impl, status="ok", description=describe(impl), tag=f"{tag0}_{safe_name(impl)}"
        )
        result.model = ModelResult(implementation=impl, origin=origin(impl))  # type: ignore[arg-type]
        p = _Prepared(result=result)
        prepared.append(p)
        refused = check_implementation(impl, workload, base, explicit)
        if refused:
            reject(result, *refused)
            continue
        try:
            m: Any = share_weights(base)
            m.set_attn_implementation(impl)
        except Exception as exc:  # transformers' own reason (not installed, not supported, unknown)
            reject(
                result,
                "unsupported",
                reason("said", name=impl, detail=(first_line(exc) or type(exc).__name__)[:300]),
            )
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
            analyse(p.result, p.trace_path, workload.device)
        note(p.result.label, "done")
    fastest(info, [p.result for p in prepared])
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
        model, given = share_weights(base), inputs
    else:
        model = copy.deepcopy(base).float()  # the fp32 copy lives for this one step only
        given = {
            k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in inputs.items()
        }
    model.set_attn_implementation("eager")
    out = step_call(model, given, opts)().detach().double()
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
        call = step_call(p.model, inputs, opts)
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
                    analyse(p.result, p.trace_path, workload.device)
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
        return backend_from_ops(op_names)
    if impl.startswith("flex"):
        return "flex"
    if "naive" in impl or impl == "eager":
        return "aten"
    return None
