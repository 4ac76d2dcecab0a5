"""Run variants on a workload: check, estimate, profile, time, verify, measure; record it all.

One variant at a time (run_variant: also each sweep job) or a whole suite (run), which also
writes <out>/run.json. A variant that is unsupported, refused for memory, or fails at run time is
recorded with its reason (in English, and as a reason code for the rejections) and the others
still run. `attnprof model` shares the pieces around the measurement: profile_into, peak_memory,
record_failure.
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from attnprof.errors import Interrupted, UserError
from attnprof.extras import require
from attnprof.harness.cuda import on_device, release_memory
from attnprof.harness.memory import available_bytes
from attnprof.harness.options import RunOptions, default_time_budget
from attnprof.outputs import write_atomic
from attnprof.reasons import english, reason
from attnprof.records import (
    RUN_SCHEMA,
    Environment,
    MemoryResult,
    ReasonCode,
    ResumeState,
    RunRecord,
    RunResult,
    Status,
    TimingSummary,
    encode_json,
    is_incorrect,
    variant_label,
)

if TYPE_CHECKING:
    from attnprof.harness.profile import ProfileOutcome
    from attnprof.harness.reference import Exact
    from attnprof.variants.registry import Built, Variant
    from attnprof.workload import Inputs, Workload

__all__ = [
    "RunOptions",
    "Shared",
    "default_out_dir",
    "memory_gate",
    "peak_memory",
    "prepare_out_dir",
    "profile_into",
    "ran_any",
    "record_failure",
    "reject",
    "run",
    "run_variant",
    "safe_name",
]

Progress = Callable[[str, str], None]  # (variant label, stage)


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


def safe_name(name: str) -> str:
    """`name` as a file name's part (trace and table files, tensorboard workers)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


class Shared:
    """The inputs and the fp64 reference of one workload, shared by the variants that run on it.

    Nothing is built up front: the inputs on first use by a variant that passed its checks (its
    capability, then its memory estimate, which counts whatever is still to be built here), the
    reference on first use by an accuracy check. A refused variant builds nothing.
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._inputs: Inputs | None = None
        self._exact: Exact | None = None
        # `attnprof run` keeps every prepared variant built until the interleaved timing at the
        # end: the largest working set (beyond what stays allocated) among them, which runs in
        # turn while a later variant's tensors are held (memory_gate)
        self.prepared_transient = 0

    def pending_bytes(self, *, accuracy: bool) -> int:
        w = self.workload
        need = 0 if self._inputs is not None else w.input_bytes()
        if accuracy and self._exact is None:
            need += w.reference_bytes()
        return need

    def inputs(self) -> Inputs:
        if self._inputs is None:
            self._inputs = self.workload.make_inputs()
        return self._inputs

    def exact(self) -> Exact:
        if self._exact is None:
            import torch

            from attnprof.harness.reference import exact

            with torch.no_grad():
                self._exact = exact(self.workload, self.inputs())
        return self._exact


def run_variant(
    workload: Workload,
    variant: Variant | str,
    *,
    out: Path | None = None,
    options: RunOptions | None = None,
    shared: Shared | None = None,
    peak_tflops: float | None = None,
    progress: Progress | None = None,
    memory_share: float = 1.0,
) -> RunResult:
    """Check, estimate, profile, time, verify and measure one variant. Never raises for a
    variant's own failure: that is recorded in the result's status and reason. `memory_share`:
    the share of the free memory the variant may plan to use (a sweep's workers share one RAM)."""
    opts = options or RunOptions()
    with on_device(workload.device):  # cuda:N current: its events, streams and SDPA checks
        result, prepared = _prepare(
            workload, variant, out, opts, shared or Shared(workload), progress, memory_share=memory_share
        )
        if prepared is not None:
            if progress:
                progress(result.label, "timing")
            # a slow variant's timing is as short here (a sweep's job, a user variant's trial
            # run) as in a run of several: without it a trial of a 1 s call took 16 calls
            slow = prepared.call_s > SLOW_CALL_S
            topts = opts
            if slow and opts.min_samples > SLOW_MIN_SAMPLES:
                topts = msgspec.structs.replace(opts, min_samples=SLOW_MIN_SAMPLES)
            try:
                summaries = _time(prepared.calls(), workload, topts, cold=not slow)
            except Exception as exc:
                record_failure(result, "timing", exc, workload.device)
            else:
                _apply_timing(result, summaries, peak_tflops)
                if slow:
                    result.warnings.append(
                        f"timed in {topts.min_samples} rounds with no cold-allocator rounds: one call "
                        f"takes {prepared.call_s:.1f} s here, so intervals are wide"
                    )
    return result


@dataclass
class Prepared:
    """A variant ready for clean timing: its forward and, with backward, its backward."""

    label: str
    built: Built
    backward: Callable[[Any], Any] | None = None
    call_s: float = 0.0  # the first warm-up call (forward, and backward with it), in seconds

    def calls(self) -> dict[str, Callable[[], Any] | tuple[Callable[[], Any], Callable[[Any], Any]]]:
        """Timing series: the forward; with backward also the backward alone (its forward
        runs untimed before each sample) and forward + backward as one call."""
        fwd = self.built.call
        if self.backward is None:
            return {self.label: fwd}
        bwd = self.backward
        return {
            self.label: fwd,
            f"{self.label}{_BWD}": (fwd, bwd),
            f"{self.label}{_TOTAL}": lambda: bwd(fwd()),
        }


_BWD, _TOTAL = "\x00bwd", "\x00total"


# A variant whose second warm-up call (the first may include compilation) takes longer than this
# is slow here (bf16 on a CPU without native bf16 matmul: 13 s for naive fwd+bwd at S=2048 on an
# AVX2 machine): it gets two warm-up calls and one profiled step with no schedule warm-up, the
# run's timing SLOW_MIN_SAMPLES rounds and no cold-allocator rounds, so that the run ends in
# minutes; its warnings say so.
SLOW_CALL_S = 1.0
SLOW_STEPS = (0, 0, 1)
SLOW_MIN_SAMPLES = 3


def _time(
    calls: dict[str, Any], workload: Workload, opts: RunOptions, *, cold: bool = True
) -> dict[str, TimingSummary]:
    from attnprof.harness.timing import COLD_SHARE, time_interleaved

    with _grad_mode(workload):
        return time_interleaved(
            calls,
            device=workload.device,
            budget_s=opts.time_budget_s * len(calls),
            min_samples=opts.min_samples,
            warmup_s=opts.warmup_s,
            cold_share=COLD_SHARE if cold else 0.0,
        )


def _grad_mode(workload: Workload) -> Any:
    import torch

    return torch.enable_grad() if workload.backward else torch.no_grad()


def record_failure(
    result: RunResult, stage: str, exc: BaseException, device: str, *, status: Status | None = None
) -> None:
    """A variant (or a model's implementation) that failed while running: oom or error (or the
    caller's `status`), with the exception's first line as the reason. An exception raised while
    handling Ctrl-C is the Ctrl-C, not a failure of the variant: re-raised as KeyboardInterrupt."""
    reraise_interrupt(exc)
    result.status = status or ("oom" if _is_oom(exc) else "error")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    result.reason = f"{result.label} failed during {stage}: {type(exc).__name__}: {first[:300]}"
    # after a sticky CUDA error empty_cache raises too; raising here, inside the caller's except,
    # would lose run.json and keep a poisoned sweep worker (harness/cuda.py)
    cleanup = release_memory(device)
    if cleanup is not None:
        result.warnings.append(
            f"the CUDA context is unusable after this error (empty_cache: {cleanup[:200]})"
        )


def reraise_interrupt(exc: BaseException) -> None:
    """Raise KeyboardInterrupt if `exc` was raised while a KeyboardInterrupt was being handled.
    torch.profiler does that: Ctrl-C landing while a profile starts leaves it uninitialised, and
    its __exit__ then raises "AssertionError: Profiler must be initialized ..." in the Ctrl-C's
    place, which a variant's `except Exception` would record as the variant's failure."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        seen.add(id(e))
        e = e.__cause__ or e.__context__


def noisy_warning(summary: TimingSummary, what: str = "") -> str | None:
    """The warning for a timing whose spread is large against its median, or None."""
    if not summary.noisy:
        return None
    return f"noisy {what}timing: IQR is {summary.iqr_ms / summary.median_ms:.0%} of the median"


def _tflops(flops: float, summary: TimingSummary | None) -> float | None:
    if summary is None or summary.median_ms <= 0:
        return None
    return flops / (summary.median_ms / 1e3) / 1e12


def _apply_timing(result: RunResult, summaries: dict[str, TimingSummary], peak_tflops: float | None) -> None:
    summary = summaries[result.label]
    result.timing = summary
    result.timing_bwd = summaries.get(result.label + _BWD)
    result.timing_total = summaries.get(result.label + _TOTAL)
    for what, s in (
        ("", summary),
        ("backward ", result.timing_bwd),
        ("forward+backward ", result.timing_total),
    ):
        warning = noisy_warning(s, what) if s is not None else None
        if warning:
            result.warnings.append(warning)
    # a wrong answer has no useful throughput: its time is kept, its TFLOP/s and % of peak are not
    if is_incorrect(result.accuracy):
        return
    result.tflops_useful = _tflops(result.flops_useful, summary)
    if result.timing_bwd is not None and not any(is_incorrect(a) for a in result.grad_accuracy.values()):
        result.tflops_useful_bwd = _tflops(result.flops_useful_bwd, result.timing_bwd)
        result.tflops_useful_total = _tflops(
            result.flops_useful + result.flops_useful_bwd, result.timing_total
        )
    if result.tflops_useful is not None and peak_tflops:
        result.pct_of_peak = 100.0 * result.tflops_useful / peak_tflops
        if result.pct_of_peak > 100.0:
            result.warnings.append(
                f"{result.pct_of_peak:.0f}% of peak: above 100% means the peak or the timing is wrong"
            )


def memory_gate(
    v: Variant, workload: Workload, shared: Shared, opts: RunOptions, *, share: float = 1.0
) -> ReasonCode | None:
    """The one memory gate, before anything is built: why `v` is refused, or None. Its need is
    its own estimate plus what `shared` has still to build (inputs, the fp64 reference); the limit
    is `share` of what is free on the device (1 for `attnprof run`, less for a sweep's workers,
    which share one RAM). --force (force = true) lets everything through."""
    if opts.force:
        return None
    from attnprof.harness.accuracy import compare_bytes
    from attnprof.harness.timing import L2_FLUSH_BYTES

    pending = shared.pending_bytes(accuracy=opts.check_accuracy)
    estimate = v.estimate_bytes(workload)
    check = compare_bytes(workload) if opts.check_accuracy else 0
    # while the others are timed in turn, this variant's retained tensors (its mask) stay
    # allocated: the largest transient working set among those prepared before it comes on top
    retained = max(0, shared.prepared_transient - (estimate - v.mask_cost(workload)))
    flush = L2_FLUSH_BYTES if workload.device.startswith("cuda") else 0
    need = estimate + pending + check + retained + flush
    free = available_bytes(workload.device)
    limit = int(free * share)
    if need <= limit:
        return None
    parts = [
        reason(
            "memory.scores",
            count=v.score_tensors,
            size_bytes=workload.score_bytes(4 if v.score_fp32 else None),
        )
        if v.materialises
        else reason("memory.fused")
    ]
    mask = v.mask_cost(workload)
    if mask:
        parts.append(reason("memory.mask", size_bytes=mask))
    if pending:
        parts.append(reason("memory.pending", size_bytes=pending))
    if check:
        parts.append(reason("memory.accuracy", size_bytes=check))
    if retained:
        parts.append(reason("memory.retained", size_bytes=retained))
    if flush:
        parts.append(reason("memory.flush", size_bytes=flush))
    if share >= 1.0:
        return reason(
            "memory", *parts, name=v.label, need_bytes=need, free_bytes=free, device=workload.device
        )
    return reason(
        "memory_share",
        *parts,
        name=v.label,
        need_bytes=need,
        limit_bytes=limit,
        share=share,
        free_bytes=free,
        device=workload.device,
    )


def reject(result: RunResult, status: Status, why: ReasonCode) -> None:
    """A variant (or a model's implementation) that does not run: its status, and its reason in
    English and as data."""
    result.status, result.reason, result.reason_code = status, english(why), why


@dataclass
class Profiled:
    """A profiled call: what the profiler showed, and where its trace is (under `out`, or in a
    temporary folder that lives as long as profile_into's context)."""

    outcome: ProfileOutcome
    trace_path: Path
    trace: str | None  # the trace and the table relative to `out`; None without `out`
    table: str | None
    lean_trace: str | None = None  # the lean pass's trace relative to `out`; None when not kept


class ProfileSettings(Protocol):
    """What profile_into reads of a run's options (RunOptions, the model's ModelOptions)."""

    @property
    def steps(self) -> tuple[int, int, int]: ...
    @property
    def tensorboard_dir(self) -> str | None: ...


@contextmanager
def profile_into(
    call: Callable[[], Any],
    opts: ProfileSettings,
    *,
    out: Path | None,
    tag: str,
    device: str,
    annotation: str | None = None,
    backward: Callable[[Any], Any] | None = None,
) -> Iterator[Profiled]:
    """Profile `call` (harness/profile.py) for opts.steps into <out>/traces/<tag>.json.gz (the
    rich pass), <out>/traces/<tag>.lean.json.gz (the lean pass) and <out>/tables/<tag>.txt, or
    into a temporary folder without `out`."""
    from attnprof.harness import profile

    with tempfile.TemporaryDirectory() as tmp:
        base = out if out is not None else Path(tmp)
        trace_path = base / "traces" / f"{tag}.json.gz"
        table_path = base / "tables" / f"{tag}.txt"
        prof = profile.profile_call(
            call,
            device=device,
            steps=opts.steps,
            trace_path=trace_path,
            table_path=table_path,
            tensorboard_dir=Path(opts.tensorboard_dir) if opts.tensorboard_dir else None,
            worker_name=tag,
            backward=backward,
            **({"annotation": annotation} if annotation else {}),
        )
        yield Profiled(
            outcome=prof,
            trace_path=trace_path,
            trace=str(trace_path.relative_to(out)) if out is not None else None,
            table=str(table_path.relative_to(out)) if out is not None else None,
            lean_trace=(
                str(prof.lean_trace_path.relative_to(out))
                if out is not None and prof.lean_trace_path is not None
                else None
            ),
        )


def peak_memory(
    step: Callable[[], Any],
    prof: ProfileOutcome | None,
    *,
    device: str,
    estimate: int,
    cuda_method: str,
    region: str,
) -> MemoryResult:
    """Peak memory of `step` above what was allocated before it: on CUDA measured by running it
    once more (described by `cuda_method`); on CPU from the profiled steps' [memory] events
    inside `region`."""
    if device.startswith("cuda"):
        from attnprof.harness.memory import cuda_peak_bytes

        return MemoryResult(
            peak_bytes=cuda_peak_bytes(step, device), method=cuda_method, estimate_bytes=estimate
        )
    measured = prof is not None and prof.cpu_peak_bytes is not None
    return MemoryResult(
        peak_bytes=prof.cpu_peak_bytes if prof is not None else None,
        method=f"profiler [memory] events: rise of Total Allocated inside {region}"
        if measured
        else "not measured (profiling off)",
        estimate_bytes=estimate,
    )


def _prepare(
    workload: Workload,
    variant: Variant | str,
    out: Path | None,
    opts: RunOptions,
    shared: Shared,
    progress: Progress | None,
    *,
    memory_share: float = 1.0,
) -> tuple[RunResult, Prepared | None]:
    """Everything but the clean timing: check, estimate, build, warm up, profile, verify,
    measure memory. Returns the prepared calls for timing, or None when the variant did not run."""

    from attnprof.harness import accuracy
    from attnprof.variants.registry import check, get_variant
    from attnprof.workload import BACKWARD_FLOP_FACTOR

    v = get_variant(variant) if isinstance(variant, str) else variant
    tag = f"{workload.tag}_{safe_name(v.name)}_{v.mode}"
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
        materialises=v.known_materialises,
    )
    if workload.backward:
        result.flop_convention = f"backward FLOPs = {BACKWARD_FLOP_FACTOR:g} x the forward's matmul FLOPs, FlashAttention's convention"
    note = progress or (lambda label, stage: None)

    decision = check(v, workload)
    if not decision.accepted:
        assert decision.reason_code is not None  # Decision.no records one
        reject(result, "unsupported", decision.reason_code)
        return result, None
    refused = memory_gate(v, workload, shared, opts, share=memory_share)
    if refused is not None:
        reject(result, "refused", refused)
        return result, None
    if v.family == "user" and opts.isolate_user:
        from attnprof.harness.isolate import trial

        note(v.label, "trial run (separate process)")
        failed = trial(workload, v, opts)
        if failed is not None:
            result.status, result.reason = failed.status, failed.reason  # type: ignore[assignment]
            return result, None

    stage = "build"
    try:
        with _grad_mode(workload):
            inputs = shared.inputs()
            note(v.label, "warm-up" if not v.compiled else "compiling")
            built = v.build(workload, inputs)
            if built.flops_executed is not None:
                result.flops_executed = built.flops_executed
            if workload.backward:
                result.flops_useful_bwd = BACKWARD_FLOP_FACTOR * result.flops_useful
                result.flops_executed_bwd = BACKWARD_FLOP_FACTOR * result.flops_executed
            result.mask_path = built.mask_path
            result.block_sparsity = built.block_sparsity
            if v.name.startswith("sdpa"):
                from attnprof.variants.sdpa import pytorch_choice

                result.backend_rules = dict(n.split(": ", 1) for n in built.notes if ": " in n)
                result.pytorch_choice = pytorch_choice(workload)
            backward = _backward_fn(workload, inputs, built)
            stage = "warm-up"
            # slow or not is read from the second call: the first may include torch.compile
            # (flex compiles on first use: 6 s here) or lazy initialisation, not the call itself
            call_s = 0.0
            for i in range(max(2, opts.warmup_calls)):
                t0 = time.perf_counter()
                output = built.call()
                if backward is not None:
                    backward(output)
                _sync(workload.device)
                if i == 1:
                    call_s = time.perf_counter() - t0
                    if call_s > SLOW_CALL_S:
                        break
            if call_s > SLOW_CALL_S:
                opts = msgspec.structs.replace(opts, steps=SLOW_STEPS)
                result.warnings.append(
                    f"one call takes {call_s:.1f} s here: 2 warm-up calls and 1 profiled step (profiler "
                    f"schedule {','.join(map(str, SLOW_STEPS))}, no schedule warm-up), so the run ends in minutes"
                )

            prof = None
            if opts.profile:
                stage = "profile"
                note(v.label, "profiling")
                with warnings.catch_warnings():
                    # a slow call's schedule has no warm-up step on purpose (its warning says so)
                    warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
                    with profile_into(
                        built.call, opts, out=out, tag=tag, device=workload.device, backward=backward
                    ) as profiled:
                        prof = profiled.outcome
                result.trace, result.table = profiled.trace, profiled.table
                result.lean_trace = profiled.lean_trace
                result.profile = prof.summary
                result.profile_steps = opts.steps  # SLOW_STEPS for a slow call
            result.backend = _backend(v, prof.op_names if prof else set())

            if opts.check_accuracy:
                stage = "accuracy"
                ref = shared.exact()
                result.accuracy = accuracy.compare(built.to_bhsd(output), ref.out, workload.dtype)
                if accuracy.is_incorrect(result.accuracy):
                    result.warnings.append(result.accuracy.failure(workload.dtype))
                if backward is not None and ref.grads is not None:
                    grads = backward(built.call())  # the warm-up's graph is spent
                    result.grad_accuracy = {
                        name: accuracy.compare(built.to_bhsd(g), r, workload.dtype)
                        for name, g, r in zip(("dq", "dk", "dv"), grads, ref.grads, strict=True)
                    }
                    for name, acc in result.grad_accuracy.items():
                        if accuracy.is_incorrect(acc):
                            result.warnings.append(f"{name}: {acc.failure(workload.dtype)}")
                result.settle_status()  # "incorrect" in run.json, as compare and the store say it
            del output

            if opts.measure_peak:
                stage = "memory"
                what = "forward + backward" if backward is not None else "the forward"

                def step() -> None:
                    o = built.call()
                    if backward is not None:
                        backward(o)

                result.memory = peak_memory(
                    step,
                    prof,
                    device=workload.device,
                    estimate=estimate,
                    cuda_method=f"torch.cuda.max_memory_allocated over {what}, above the allocation before it",
                    region="attn_fwd through attn_bwd" if backward is not None else "attn_fwd",
                )
    except Exception as exc:
        record_failure(result, stage, exc, workload.device)
        return result, None
    return result, Prepared(label=v.label, built=built, backward=backward, call_s=call_s)


def _backward_fn(workload: Workload, inputs: Inputs, built: Built) -> Callable[[Any], Any] | None:
    """With --backward: out -> (dq, dk, dv) of the variant's own leaves, for the fixed dL/dO
    (in the variant's layout). torch.autograd.grad, not .backward(): no .grad accumulates."""
    if not workload.backward:
        return None
    import torch

    leaves = built.leaves or inputs.leaves()
    grad_out = inputs.grad_out
    assert grad_out is not None
    if built.leaves is not None:
        # the variant's layout (e.g. [B, S, H, D]): dL/dO in the same layout as its output
        grad_out = built.to_bhsd(grad_out).contiguous()

    def backward(out: Any) -> Any:
        return torch.autograd.grad(out, leaves, grad_out)

    return backward


def ran_any(record: RunRecord) -> bool:
    """Whether any variant ran to the end (status ok or incorrect)."""
    return any(r.ran for r in record.results)


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
    prepared: list[tuple[RunResult, Prepared | None]] = field(default_factory=list)
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
    require("torch", "attnprof.run()")  # the plain install has none: one line naming [run]
    # no options: the command line's defaults (its time budget for this device)
    opts = options or RunOptions(time_budget_s=default_time_budget(workload.device))
    partial = _Partial(prior=list(resume.results) if resume else [])
    try:
        with on_device(workload.device):  # cuda:N current: its events, streams and SDPA checks
            return _run_suite(
                workload, variants, out, opts, progress, environment, partial, resume is not None
            )
    except KeyboardInterrupt:
        if out is None or partial.env is None:
            raise
        finished = partial.prior + [r for r, b in partial.prepared if b is None]
        # prepared but not yet timed (timing runs last, interleaved): pending, not half-recorded
        done = {r.label for r in finished}
        # as get_variant reads them back: a label, or a user variant's source (with :compile for its twin)
        pending = [
            variant_label(v.source, v.mode) if v.source else v.label
            for v in partial.chosen
            if v.label not in done
        ]
        record = _record(workload, partial.env, opts, finished)
        record.interrupted = True
        record.resume = ResumeState(pending=pending, options=msgspec.structs.asdict(opts))
        write_atomic(out / "run.json", encode_json(record))
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
        min_rounds=opts.min_samples,
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
    from attnprof.harness.env import cpu_dtype_note, peak_text, run_peak
    from attnprof.harness.env import environment as get_env
    from attnprof.variants.registry import resolve_variants

    if variants and not any(isinstance(x, str) for x in variants):
        chosen = [x for x in variants if not isinstance(x, str)]
    else:
        chosen = resolve_variants([str(x) for x in variants] if variants else None, compile=opts.compile)
    if out is not None and not resuming:
        out = prepare_out_dir(out)
    env = environment or get_env(workload.device)
    peak, prov = run_peak(env, workload.dtype)
    env.peak_tflops, env.peak_source, env.peak_provenance = peak, peak_text(prov), prov
    note = cpu_dtype_note(workload.device, workload.dtype)
    if note and note not in env.notes:
        env.notes.append(note)
    partial.chosen, partial.env = chosen, env

    shared = Shared(workload)
    prepared = partial.prepared
    for v in chosen:
        prepared.append(_prepare(workload, v, out, opts, shared, progress))
        if prepared[-1][1] is not None:
            transient = v.estimate_bytes(workload) - v.mask_cost(workload)
            shared.prepared_transient = max(shared.prepared_transient, transient)
        elif progress:
            progress(v.label, "done")

    # Clean timing last, interleaved: one sample of each variant per round, so that background
    # load on a shared machine hits every variant alike instead of skewing their ratios.
    ready = [(r, p) for r, p in prepared if p is not None]
    if ready:
        if progress:
            progress(", ".join(r.label for r, _ in ready), "timing (interleaved)")
        calls: dict[str, Any] = {}
        for _, p in ready:
            calls.update(p.calls())
        topts = msgspec.structs.replace(opts, time_budget_s=opts.time_budget_s * len(ready) / len(calls))
        slowest = max(ready, key=lambda rp: rp[1].call_s)
        slow = slowest[1].call_s > SLOW_CALL_S
        if slow and opts.min_samples > SLOW_MIN_SAMPLES:
            topts = msgspec.structs.replace(topts, min_samples=SLOW_MIN_SAMPLES)
        rounds = topts.min_samples  # the least rounds each variant is timed in (RunResult.min_rounds)
        try:
            summaries = _time(calls, workload, topts, cold=not slow)
        except Exception as exc:
            reraise_interrupt(exc)
            # one variant failing only in timing: time them one by one to find and record it
            summaries, rounds = {}, opts.min_samples
            for r, p in ready:
                try:
                    summaries.update(_time(p.calls(), workload, opts))
                except Exception as exc:
                    record_failure(r, "timing", exc, workload.device)
        for r, _ in ready:
            if r.label in summaries:
                _apply_timing(r, summaries, env.sound_peak)  # None for a busy machine's peak
                r.min_rounds = rounds
                if slow:
                    r.warnings.append(
                        f"timed in {topts.min_samples} interleaved rounds with no cold-allocator rounds: one "
                        f"call of {slowest[0].label} takes {slowest[1].call_s:.1f} s here, so intervals are wide"
                    )
            if progress:
                progress(r.label, "done")
    record = _record(workload, env, opts, partial.prior + [r for r, _ in prepared])
    if out is not None:
        write_atomic(out / "run.json", encode_json(record))
    return record
