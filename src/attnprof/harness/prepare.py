"""A variant made ready for clean timing: check, estimate, build, warm up, profile, verify,
measure memory. Everything of a variant's run but the timing, which harness/run.py does last
(interleaved across a suite's variants)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.harness.failures import record_failure, reject
from attnprof.harness.gate import memory_gate
from attnprof.harness.measure import peak_memory, profile_into, safe_name
from attnprof.harness.options import RunOptions
from attnprof.harness.shared import Shared
from attnprof.harness.timed import Prepared, grad_mode
from attnprof.records import RunResult

if TYPE_CHECKING:
    from attnprof.variants.registry import Built, Variant
    from attnprof.workload import Inputs, Workload

__all__ = ["SLOW_CALL_S", "SLOW_MIN_SAMPLES", "SLOW_STEPS", "Progress", "prepare"]

Progress = Callable[[str, str], None]  # (variant label, stage)


# A variant whose second warm-up call (the first may include compilation) takes longer than this
# is slow here (bf16 on a CPU without native bf16 matmul: 13 s for naive fwd+bwd at S=2048 on an
# AVX2 machine): it gets two warm-up calls and one profiled step with no schedule warm-up, the
# run's timing SLOW_MIN_SAMPLES rounds and no cold-allocator rounds, so that the run ends in
# minutes; its warnings say so.
SLOW_CALL_S = 1.0
SLOW_STEPS = (0, 0, 1)
SLOW_MIN_SAMPLES = 3


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def prepare(
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
        with grad_mode(workload):
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
            result.backend = _backend(v, prof.op_names if prof else set(), result.pytorch_choice)

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


def _backend(v: Variant, op_names: set[str], choice: str | None = None) -> str | None:
    """The backend that ran. SDPA: from the aten ops the profile saw (plain `sdpa` runs whatever
    PyTorch's dispatch picks: flash, cuDNN or efficient on CUDA, by build and GPU); without a
    profile, the pinned backend, or for plain `sdpa` the dispatch's own pick (`choice`, from
    torch._fused_sdp_choice, the function that dispatch calls)."""
    from attnprof.variants.sdpa import backend_from_ops

    if v.name.startswith("sdpa"):
        return backend_from_ops(op_names) or v.backend or choice
    if v.backend:
        return v.backend
    if v.compiled:
        return "inductor"  # the aten ops are fused into generated code
    return "aten" if v.family == "builtin" else "user"
