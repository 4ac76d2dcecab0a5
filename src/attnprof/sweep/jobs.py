"""What one job is on the wire, and how a worker (local process or Ray task) executes it.

The executor-side code sends a JobRequest and gets a JobReply back; both are msgspec Structs, so
they cross a pipe or Ray's object store as plain JSON-able data. execute() runs in the worker:
it checks the memory estimate first (over the limit: "skipped", nothing runs), then hands the job
to the harness's run_variant, exactly what `attnprof run` does for one variant.

Worker-side caches (one process runs many jobs): the environment per device, PyTorch's own
backend choice per workload, and the last workload's inputs and fp64 reference (built only when a
job runs), so the jobs of one configuration do not each rebuild them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from attnprof.records import Environment, RunResult
from attnprof.records import variant_label as _label_of
from attnprof.sweep.grid import JobSpec, RunSettings

if TYPE_CHECKING:
    from attnprof.harness.run import Shared
    from attnprof.variants.registry import Variant
    from attnprof.workload import Workload

__all__ = ["JobReply", "JobRequest", "execute", "probe", "variant_label"]

# Fraction of the free memory a job may plan to use. The rest is headroom for the allocator,
# the profiler and (on CPU) the other workers of the pool, which share one RAM.
MEMORY_FRACTION = 0.8


class JobRequest(msgspec.Struct, kw_only=True):
    key: str
    spec: JobSpec
    run: RunSettings
    trace_dir: str | None = None  # keep the job's trace under this folder
    memory_fraction: float = MEMORY_FRACTION


class JobReply(msgspec.Struct, kw_only=True):
    result: RunResult
    environment: Environment
    pytorch_choice: str | None = None
    recycle: bool = False  # the process should not run more jobs (poisoned CUDA context)


def variant_label(spec: JobSpec) -> str:
    """The harness's name for the variant: its compiled twin is `name:compile`."""
    return _label_of(spec.variant, "compile" if spec.compile else "eager")


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


def _skip_reason(v: Variant, wl: Workload, fraction: float) -> tuple[str, int] | None:
    from attnprof.harness.memory import available_bytes, format_bytes

    need = v.estimate_bytes(wl) + _shared(wl).pending_bytes(accuracy=True)
    limit = int(available_bytes(wl.device) * fraction)
    if need <= limit:
        return None
    return (
        f"{v.label}: memory estimate {format_bytes(need)} is over the limit {format_bytes(limit)} "
        f"({fraction:.0%} of what is free on {wl.device}); not run",
        need,
    )


def execute(req: JobRequest) -> JobReply:
    """Run one job in this process; never raises for the variant's own failure."""
    from attnprof.errors import UserError
    from attnprof.harness.run import RunOptions, run_variant
    from attnprof.records import MemoryResult
    from attnprof.variants.registry import check, get_variant
    from attnprof.workload import Workload

    spec = req.spec
    mode: Literal["eager", "compile"] = "compile" if spec.compile else "eager"
    wl = Workload.from_record(spec.workload)
    env = probe(wl.device)
    try:
        # once per job: a user variant's module is imported here, in the worker, never in the sweep
        v = get_variant(variant_label(spec))
    except UserError as exc:
        result = RunResult(variant=spec.variant, mode=mode, status="error", reason=str(exc))
        return JobReply(result=result, environment=env)
    if not check(v, wl).accepted:
        # the harness records it as unsupported with the variant's own reason, before it builds
        # any input (a CPU-only variant at S=65536 must not build a 4 GiB mask to say so)
        result = run_variant(wl, v, options=RunOptions(profile=False, check_accuracy=False))
        return JobReply(result=result, environment=env, pytorch_choice=_pytorch_choice(wl))
    skip = _skip_reason(v, wl, req.memory_fraction)
    if skip is not None:
        reason, need = skip
        result = RunResult(
            variant=spec.variant,
            mode=mode,
            status="skipped",
            reason=reason,
            memory=MemoryResult(peak_bytes=None, method="not run", estimate_bytes=need),
            estimate_bytes=need,
        )
        return JobReply(result=result, environment=env)

    choice = _pytorch_choice(wl)
    s = req.run
    # RunSettings is the sweep's name for RunOptions' measurement fields
    settings = msgspec.structs.asdict(s)
    if settings.get("tensorboard_dir"):
        settings["tensorboard_dir"] = str(Path(settings["tensorboard_dir"]) / spec.slug())
    options = RunOptions(**settings, compile=spec.compile)
    out = Path(req.trace_dir) / spec.slug() if req.trace_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    # the harness builds the inputs and the reference only for a variant that passed its checks
    result = run_variant(wl, v, out=out, options=options, shared=_shared(wl))
    if out is not None:
        # the store keeps absolute paths: a store outlives the directory the sweep ran in
        if result.trace:
            result.trace = str((out / result.trace).resolve())
        if result.table:
            result.table = str((out / result.table).resolve())
    recycle = False
    if wl.device.startswith("cuda") and result.status == "error":
        text = (result.reason or "").lower()
        # after these the CUDA context is unusable for every later job in this process
        recycle = any(
            s in text for s in ("cuda error", "illegal memory access", "device-side assert", "cublas")
        )
    return JobReply(result=result, environment=env, pytorch_choice=choice, recycle=recycle)
