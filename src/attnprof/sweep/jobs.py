"""What one job is on the wire, and how a worker (local process or Ray task) executes it.

The executor-side code sends a JobRequest and gets a JobReply back; both are msgspec Structs, so
they cross a pipe or Ray's object store as plain JSON-able data. execute() runs in the worker:
it hands the job to the harness's run_variant, exactly what `attnprof run` does for one variant
(one check, one memory gate: over this worker's share of the free memory the job is "refused",
nothing runs), with the job's RunOptions as the sweep's [run] table gave them.

Worker-side caches (one process runs many jobs): the environment per device, PyTorch's own
backend choice per workload, and the last workload's inputs and fp64 reference (built only when a
job runs), so the jobs of one configuration do not each rebuild them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.harness.options import RunOptions
from attnprof.records import Environment, RunResult
from attnprof.sweep.grid import JobSpec

if TYPE_CHECKING:
    from attnprof.harness.run import Shared
    from attnprof.workload import Workload

__all__ = ["JobReply", "JobRequest", "execute", "poisoned", "probe"]

# Fraction of the free memory a job may plan to use. The rest is headroom for the allocator,
# the profiler and (on CPU) the other workers of the pool, which share one RAM.
MEMORY_FRACTION = 0.8


class JobRequest(msgspec.Struct, kw_only=True):
    key: str
    spec: JobSpec
    run: RunOptions
    trace_dir: str | None = None  # keep the job's trace under this folder
    memory_fraction: float = MEMORY_FRACTION


class JobReply(msgspec.Struct, kw_only=True):
    result: RunResult
    environment: Environment
    pytorch_choice: str | None = None
    recycle: bool = False  # the process should not run more jobs (poisoned CUDA context)


_env_cache: dict[str, Environment] = {}
_choice_cache: dict[Any, str | None] = {}
_last_inputs: dict[str, Any] = {}


def probe(device: str) -> Environment:
    """The environment a job on `device` runs in (cached per process)."""
    if device not in _env_cache:
        from attnprof.harness.env import environment

        _env_cache[device] = environment(device)
    return _env_cache[device]


def _pytorch_choice(wl: Workload) -> str | None:
    key = wl.to_record()
    if key not in _choice_cache:
        try:
            from attnprof.variants.sdpa import pytorch_choice

            _choice_cache[key] = pytorch_choice(wl)
        except Exception:  # no SDPA backend at all for this shape: nothing to compare with
            _choice_cache[key] = None
    return _choice_cache[key]


def _shared(wl: Workload) -> Shared:
    """The workload's inputs and reference, built on first use and kept for all the jobs of one
    configuration (the jobs of a configuration run back to back)."""
    from attnprof.harness.run import Shared

    rec = wl.to_record()
    if _last_inputs.get("key") != rec:
        _last_inputs.clear()
        _last_inputs.update(key=rec, shared=Shared(wl))
    return _last_inputs["shared"]  # type: ignore[no-any-return]


def execute(req: JobRequest) -> JobReply:
    """Run one job in this process; never raises for the variant's own failure."""
    from attnprof.errors import UserError
    from attnprof.harness.run import run_variant
    from attnprof.variants.registry import get_variant
    from attnprof.workload import Workload

    spec = req.spec
    wl = Workload.from_record(spec.workload)
    env = probe(wl.device)
    try:
        # once per job: a user variant's module is imported here, in the worker, never in the sweep
        v = get_variant(spec.variant, compiled=spec.compile)
    except UserError as exc:
        result = RunResult(variant=spec.variant, mode=spec.mode, status="error", reason=str(exc))
        return JobReply(result=result, environment=env)
    # the job already runs in a worker process of its own (the pool sees its crash or timeout):
    # no trial run of a user variant in a further one
    options = msgspec.structs.replace(req.run, isolate_user=False)
    if options.tensorboard_dir:
        options = msgspec.structs.replace(
            options, tensorboard_dir=str(Path(options.tensorboard_dir) / spec.slug())
        )
    out = Path(req.trace_dir) / spec.slug() if req.trace_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    # the harness checks the variant, then the memory estimate against this job's share of the
    # free memory, before it builds anything (a CPU-only variant at S=65536 must not build a
    # 4 GiB mask to say so); the inputs and the reference only for a variant that runs
    result = run_variant(
        wl, v, out=out, options=options, shared=_shared(wl), memory_share=req.memory_fraction
    )
    # PyTorch's own backend choice, beside every answer about the shape but a memory refusal
    choice = None if result.status == "refused" else _pytorch_choice(wl)
    if out is not None:
        # the store keeps absolute paths: a store outlives the directory the sweep ran in
        if result.trace:
            result.trace = str((out / result.trace).resolve())
        if result.table:
            result.table = str((out / result.table).resolve())
        if result.lean_trace:
            result.lean_trace = str((out / result.lean_trace).resolve())
    return JobReply(
        result=result, environment=env, pytorch_choice=choice, recycle=poisoned(wl.device, result)
    )


def poisoned(device: str, result: RunResult) -> bool:
    """Whether this worker process must be replaced after `result`: a CUDA job that failed with
    a sticky error (the context then fails every later job), said by the error itself or found by
    a synchronize that raises (harness/cuda.py)."""
    if not device.startswith("cuda") or result.status not in ("error", "oom"):
        return False
    from attnprof.harness.cuda import is_sticky, unusable

    text = " ".join([result.reason or "", *result.warnings])
    return is_sticky(text) or "cuda context is unusable" in text.lower() or unusable(device)
