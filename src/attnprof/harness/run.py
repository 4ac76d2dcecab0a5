"""Run variants on a workload: check, estimate, profile, time, verify, measure; record it all.

One variant at a time (run_variant) or a whole suite (run), which also writes <out>/run.json.
A variant that is unsupported, refused for memory, or fails at run time is recorded with its
reason and the others still run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import Interrupted, UserError
from attnprof.harness.memory import available_bytes, format_bytes
from attnprof.records import (
    RUN_SCHEMA,
    Environment,
    MemoryResult,
    ResumeState,
    RunRecord,
    RunResult,
    TimingSummary,
    encode_json,
    is_incorrect,
)

if TYPE_CHECKING:
    import torch

    from attnprof.variants.registry import Built, Variant
    from attnprof.workload import Inputs, Workload

__all__ = ["RunOptions", "default_out_dir", "prepare_out_dir", "run", "run_variant"]

Progress = Callable[[str, str], None]  # (variant label, stage)


@dataclass(frozen=True)
class RunOptions:
    steps: tuple[int, int, int] = (1, 1, 3)
    profile: bool = True
    warmup_calls: int = 3
    time_budget_s: float = 1.0
    warmup_s: float = 0.1  # warm-up by time before clean timing (after the warm-up calls)
    min_samples: int = 10
    force: bool = False
    check_accuracy: bool = True
    compile: bool = False
    measure_peak: bool = True
    # also write each profiled trace here in tensorboard_trace_handler's layout (worker = variant)
    tensorboard_dir: str | None = None


def default_out_dir() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("attnprof-runs") / stamp
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{stamp}-{n}")
    return path


def prepare_out_dir(out: Path) -> Path:
    """Create `out`, refusing one that already holds a run: an earlier run is never overwritten."""
    if (out / "run.json").exists() or (
        out.exists() and any((out / d).exists() for d in ("traces", "tables"))
    ):
        if b'"interrupted": true' in (
            (out / "run.json").read_bytes() if (out / "run.json").is_file() else b""
        ):
            raise UserError(f"{out} holds an interrupted run: finish it with attnprof run --resume {out}")
        raise UserError(f"{out} already holds an earlier run; pass a new --out DIR (nothing was overwritten)")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a directory")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def run_variant(
    workload: Workload,
    variant: Variant | str,
    *,
    out: Path | None = None,
    options: RunOptions | None = None,
    inputs: Inputs | None = None,
    reference: torch.Tensor | Callable[[], torch.Tensor] | None = None,
    peak_tflops: float | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Check, estimate, profile, time, verify and measure one variant. Never raises for a
    variant's own failure: that is recorded in the result's status and reason."""
    opts = options or RunOptions()
    result, built = _prepare(workload, variant, out, opts, inputs, reference, progress)
    if built is not None:
        if progress:
            progress(result.label, "timing")
        try:
            summary = _time_one(built, workload, opts)
        except Exception as exc:
            _record_failure(result, "timing", exc, workload.device)
        else:
            _apply_timing(result, summary, peak_tflops)
    return result


def _time_one(built: Built, workload: Workload, opts: RunOptions) -> TimingSummary:
    from attnprof.harness.timing import time_call

    return time_call(
        built.call,
        device=workload.device,
        budget_s=opts.time_budget_s,
        min_samples=opts.min_samples,
        warmup_s=opts.warmup_s,
    )


def _record_failure(result: RunResult, stage: str, exc: BaseException, device: str) -> None:
    result.status = "oom" if _is_oom(exc) else "error"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    result.reason = f"{result.label} failed during {stage}: {type(exc).__name__}: {first[:300]}"
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _apply_timing(result: RunResult, summary: TimingSummary, peak_tflops: float | None) -> None:
    result.timing = summary
    if summary.noisy:
        result.warnings.append(f"noisy timing: IQR is {summary.iqr_ms / summary.median_ms:.0%} of the median")
    seconds = summary.median_ms / 1e3
    # a wrong answer has no useful throughput: its time is kept, its TFLOP/s and % of peak are not
    if seconds > 0 and not is_incorrect(result.accuracy):
        result.tflops_useful = result.flops_useful / seconds / 1e12
        if peak_tflops:
            result.pct_of_peak = 100.0 * result.tflops_useful / peak_tflops
            if result.pct_of_peak > 100.0:
                result.warnings.append(
                    f"{result.pct_of_peak:.0f}% of peak: above 100% means the peak or the timing is wrong"
                )


def _prepare(
    workload: Workload,
    variant: Variant | str,
    out: Path | None,
    opts: RunOptions,
    inputs: Inputs | None,
    reference: torch.Tensor | Callable[[], torch.Tensor] | None,
    progress: Progress | None,
) -> tuple[RunResult, Built | None]:
    """Everything but the clean timing: check, estimate, build, warm up, profile, verify,
    measure memory. Returns the built call for timing, or None when the variant did not run."""
    import torch

    from attnprof.harness import accuracy, profile
    from attnprof.harness.memory import cuda_peak_bytes
    from attnprof.variants.registry import check, get_variant

    v = get_variant(variant) if isinstance(variant, str) else variant
    tag = f"{workload.tag}_{_safe(v.name)}_{v.mode}"
    estimate = v.estimate_bytes(workload)
    result = RunResult(
        variant=v.name,
        mode=v.mode,
        status="ok",
        description=v.description,
        layout=v.layout,
        tag=tag,
        flops_useful=workload.flops_useful(),
        flops_executed=workload.flops_executed(v.materialises),
        bytes_min=workload.bytes_min(),
        estimate_bytes=estimate,
    )
    note = progress or (lambda label, stage: None)

    decision = check(v, workload)
    if not decision.accepted:
        result.status, result.reason = "unsupported", decision.reason
        return result, None
    free = available_bytes(workload.device)
    need = estimate + (0 if inputs is not None else workload.io_bytes())
    if need > free and not opts.force:
        what = (
            f"materialises {v.score_tensors:g} score tensors of "
            f"{format_bytes(workload.score_bytes(4 if v.score_fp32 else None))}"
            if v.materialises
            else "fused, no score tensor"
        )
        result.status = "refused"
        result.reason = (
            f"{v.label}: needs an estimated {format_bytes(need)} ({what}) but only {format_bytes(free)} "
            f"is free on {workload.device}; shrink the shape or pass --force"
        )
        return result, None

    stage = "build"
    try:
        with torch.no_grad():
            if inputs is None:
                inputs = workload.make_inputs()
            note(v.label, "warm-up" if not v.compiled else "compiling")
            built = v.build(workload, inputs)
            stage = "warm-up"
            for _ in range(max(1, opts.warmup_calls)):
                output = built.call()
            _sync(workload.device)

            prof = None
            if opts.profile:
                stage = "profile"
                note(v.label, "profiling")
                with tempfile.TemporaryDirectory() as tmp:
                    base = out if out is not None else Path(tmp)
                    trace_path = base / "traces" / f"{tag}.json.gz"
                    table_path = base / "tables" / f"{tag}.txt"
                    prof = profile.profile_call(
                        built.call,
                        device=workload.device,
                        steps=opts.steps,
                        trace_path=trace_path,
                        table_path=table_path,
                        tensorboard_dir=Path(opts.tensorboard_dir) if opts.tensorboard_dir else None,
                        worker_name=tag,
                    )
                if out is not None:
                    result.trace = str(trace_path.relative_to(out))
                    result.table = str(table_path.relative_to(out))
                result.profile = prof.summary
            result.backend = _backend(v, prof.op_names if prof else set())

            if opts.check_accuracy:
                stage = "accuracy"
                if callable(reference):
                    ref = reference()
                elif reference is not None:
                    ref = reference
                else:
                    ref = accuracy.reference(workload, inputs)
                result.accuracy = accuracy.compare(built.to_bhsd(output), ref, workload.dtype)
                if accuracy.is_incorrect(result.accuracy):
                    result.warnings.append(result.accuracy.failure(workload.dtype))
            del output

            if opts.measure_peak:
                stage = "memory"
                if workload.device.startswith("cuda"):
                    result.memory = MemoryResult(
                        peak_bytes=cuda_peak_bytes(built.call, workload.device),
                        method="torch.cuda.max_memory_allocated above the allocation before the call",
                        estimate_bytes=estimate,
                    )
                else:
                    measured = prof is not None and prof.cpu_peak_bytes is not None
                    result.memory = MemoryResult(
                        peak_bytes=prof.cpu_peak_bytes if prof is not None else None,
                        method="profiler [memory] events: rise of Total Allocated inside attn_fwd"
                        if measured
                        else "not measured (profiling off)",
                        estimate_bytes=estimate,
                    )
    except Exception as exc:
        _record_failure(result, stage, exc, workload.device)
        return result, None
    return result, built


def _backend(v: Variant, op_names: set[str]) -> str | None:
    from attnprof.variants.sdpa import backend_from_ops

    if v.name.startswith("sdpa"):
        seen = backend_from_ops(op_names)
        if seen is None and op_names:
            seen = "math"  # the math path runs plain aten ops only
        return seen or v.backend
    if v.backend:
        return v.backend
    if v.compiled:
        return "inductor"  # the aten ops are fused into generated code
    return "aten" if v.family == "builtin" else "user"


@dataclass
class _Partial:
    """How far a run got: what run.json holds when it is interrupted."""

    prior: list[RunResult] = field(default_factory=list)  # finished before a resume
    chosen: list[Variant] = field(default_factory=list)
    prepared: list[tuple[RunResult, Built | None]] = field(default_factory=list)
    env: Environment | None = None


def run(
    workload: Workload,
    variants: Sequence[str | Variant] | None = None,
    *,
    out: Path | None = None,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    environment: Environment | None = None,
    resume: RunRecord | None = None,
) -> RunRecord:
    """Run `variants` (names, or Variant records used as given; default: every built-in, plus
    compiled twins with options.compile) on `workload`; write <out>/run.json, traces/ and
    tables/ when `out` is given.

    Interrupted (KeyboardInterrupt: Ctrl-C, or SIGTERM where the CLI maps it) with `out` given,
    it writes run.json for the variants that finished, marked interrupted with the rest pending,
    and raises Interrupted. `resume` (that record, read back from `out`) runs the pending ones
    and adds them to it."""
    opts = options or RunOptions()
    partial = _Partial(prior=list(resume.results) if resume else [])
    try:
        return _run_suite(workload, variants, out, opts, progress, environment, partial, resume is not None)
    except KeyboardInterrupt:
        if out is None or partial.env is None:
            raise
        finished = partial.prior + [r for r, b in partial.prepared if b is None]
        # prepared but not yet timed (timing runs last, interleaved): pending, not half-recorded
        done = {r.label for r in finished}
        pending = [v.source or v.label for v in partial.chosen if v.label not in done]
        record = _record(workload, partial.env, opts, finished)
        record.interrupted = True
        record.resume = ResumeState(pending=pending, options=dataclasses.asdict(opts))
        (out / "run.json").write_bytes(encode_json(record))
        raise Interrupted(
            f"interrupted: {len(finished)} of {len(finished) + len(pending)} variant(s) finished and are "
            f"in {out / 'run.json'}; finish the other {len(pending)} with: attnprof run --resume {out}"
        ) from None


def _record(workload: Workload, env: Environment, opts: RunOptions, results: list[RunResult]) -> RunRecord:
    return RunRecord(
        schema=RUN_SCHEMA,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        environment=env,
        workload=workload.to_record(),
        results=results,
        causal_alignment=workload.causal_alignment,
        steps=opts.steps,
    )


def _run_suite(
    workload: Workload,
    variants: Sequence[str | Variant] | None,
    out: Path | None,
    opts: RunOptions,
    progress: Progress | None,
    environment: Environment | None,
    partial: _Partial,
    resuming: bool,
) -> RunRecord:
    import torch

    from attnprof.harness.accuracy import reference as make_reference
    from attnprof.harness.env import environment as get_env
    from attnprof.harness.env import peak_for
    from attnprof.harness.timing import time_interleaved
    from attnprof.variants.registry import resolve_variants

    if variants and not any(isinstance(x, str) for x in variants):
        chosen = [x for x in variants if not isinstance(x, str)]
    else:
        chosen = resolve_variants([str(x) for x in variants] if variants else None, compile=opts.compile)
    if out is not None and not resuming:
        out = prepare_out_dir(out)
    env = environment or get_env(workload.device)
    peak, source = peak_for(env, workload.dtype)
    env.peak_tflops, env.peak_source = peak, source
    partial.chosen, partial.env = chosen, env

    inputs: Any = None
    cache: dict[str, Any] = {}

    def shared_reference() -> torch.Tensor:
        # computed once per workload, and only once some variant actually runs
        if "ref" not in cache:
            with torch.no_grad():
                cache["ref"] = make_reference(workload, inputs)
        return cache["ref"]

    prepared = partial.prepared
    for v in chosen:
        if inputs is None and v.capability(workload).accepted:
            fits = workload.io_bytes() <= available_bytes(workload.device) or opts.force
            if fits:
                with torch.no_grad():
                    inputs = workload.make_inputs()
        prepared.append(
            _prepare(
                workload, v, out, opts, inputs, shared_reference if inputs is not None else None, progress
            )
        )
        if progress and prepared[-1][1] is None:
            progress(v.label, "done")

    # Clean timing last, interleaved: one sample of each variant per round, so that background
    # load on a shared machine hits every variant alike instead of skewing their ratios.
    ready = {r.label: b for r, b in prepared if b is not None}
    if ready:
        if progress:
            progress(", ".join(ready), "timing (interleaved)")
        try:
            with torch.no_grad():
                summaries = time_interleaved(
                    {label: b.call for label, b in ready.items()},
                    device=workload.device,
                    budget_s=opts.time_budget_s * len(ready),
                    min_samples=opts.min_samples,
                    warmup_s=opts.warmup_s,
                )
        except Exception:
            # one variant failing only in timing: time them one by one to find and record it
            summaries = {}
            for r, b in prepared:
                if b is None:
                    continue
                try:
                    with torch.no_grad():
                        summaries[r.label] = _time_one(b, workload, opts)
                except Exception as exc:
                    _record_failure(r, "timing", exc, workload.device)
        for r, b in prepared:
            if b is not None and r.label in summaries:
                _apply_timing(r, summaries[r.label], peak)
            if progress and b is not None:
                progress(r.label, "done")
    record = _record(workload, env, opts, partial.prior + [r for r, _ in prepared])
    if out is not None:
        (out / "run.json").write_bytes(encode_json(record))
    return record
