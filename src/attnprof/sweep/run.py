"""Run a sweep: expand the grid, skip what the store already holds, run the rest, store each result.

Resume is exact because a job's identity is its key (configuration, variant, mode, device name)
and the store writes each result in one transaction under a UNIQUE key: after `kill -9` at any
moment, a job is either fully in the store or not at all, and the next run does the rest.
Jobs a worker was running when the sweep was killed are not in the store, so they run again.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from attnprof.errors import UserError
from attnprof.records import Environment, RunResult
from attnprof.store import ResultRow, Store, check_statuses
from attnprof.sweep.executor import Executor, Finished
from attnprof.sweep.grid import JobSpec, SweepConfig, check_variant_name, expand, job_key
from attnprof.sweep.jobs import JobRequest

__all__ = ["FAILURE_STATUSES", "SweepPlan", "SweepSummary", "make_executor", "plan_sweep", "run_sweep"]

# statuses counted as failures in the progress bar and summary; unsupported and refused are
# answers about the shape, not failures of the sweep
FAILURE_STATUSES = frozenset({"crashed", "timeout", "error", "oom"})


@dataclass
class SweepPlan:
    jobs: list[JobSpec]
    notes: list[str]
    keys: list[str]
    environments: dict[str, Environment]
    todo: list[JobRequest]
    already: int


@dataclass
class SweepSummary:
    store: Path
    total: int
    already: int
    ran: int = 0
    not_run: int = 0  # left to a concurrent sweep: stored by it meanwhile, or leased to it
    counts: Counter[str] = field(default_factory=Counter)
    slowest: list[tuple[float, str]] = field(default_factory=list)
    elapsed_s: float = 0.0
    sweep_id: int = 0

    @property
    def failures(self) -> int:
        return sum(n for s, n in self.counts.items() if s in FAILURE_STATUSES)


def make_executor(cfg: SweepConfig) -> Executor:
    s = cfg.sweep
    if s.executor == "local":
        from attnprof.sweep.local import LocalExecutor

        return LocalExecutor(device=cfg.grid.device, workers=s.workers)
    if s.executor == "ray":
        from attnprof.sweep.ray_exec import RayExecutor

        return RayExecutor(
            address=s.ray_address or None,
            device=cfg.grid.device,
            num_cpus=s.ray_num_cpus,
            max_in_flight=s.workers or None,
        )
    raise UserError(f"unknown executor {s.executor!r}: use local or ray")


# Loads a user variant as `attnprof run` does and exits 2 with its one-line reason when it cannot.
_CHECK_VARIANT = """
import sys
from attnprof.errors import UserError
from attnprof.variants.user import load_user_variant
try:
    load_user_variant(sys.argv[1])
except UserError as exc:
    print(str(exc).splitlines()[0], file=sys.stderr)
    sys.exit(2)
"""


def check_user_variants(cfg: SweepConfig) -> None:
    """Fail before the first job, with `attnprof run`'s one line, when a user variant's file or
    module cannot be imported or lacks the function: otherwise every one of its jobs would be
    stored as an error. Checked in a child process, so that a file that crashes the interpreter
    on import crashes that child, not the sweep (its jobs are then recorded as crashed). Module
    specs are checked only for the local executor: a Ray cluster may import what this machine
    cannot."""
    import subprocess
    import sys

    specs = [
        check_variant_name(name)
        for name in dict.fromkeys(cfg.grid.variants)
        if ":" in name and name.rsplit(":", 1)[1] != "compile"
    ]
    for spec in specs:
        if not spec.rsplit(":", 1)[0].endswith(".py") and cfg.sweep.executor != "local":
            continue
        try:
            p = subprocess.run(
                [sys.executable, "-c", _CHECK_VARIANT, spec], capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            continue  # an import that hangs: the job's own timeout records it
        if p.returncode == 2:
            reason = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "it cannot be loaded"
            raise UserError(f"variant {spec}: {reason} (checked before the first job; nothing was run)")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def plan_sweep(cfg: SweepConfig, executor: Executor, store: Store) -> SweepPlan:
    """Expand the grid and split it into done (in the store) and to-do, asking the executor for
    each device's identity (a worker's view: the parent may not even have the GPU)."""
    jobs, notes = expand(cfg)
    envs: dict[str, Environment] = {}
    for device in dict.fromkeys(j.workload.device for j in jobs):
        envs[device] = executor.probe(device)
    keys = [job_key(j, envs[j.workload.device].device_name) for j in jobs]
    retry = check_statuses(cfg.sweep.retry, "--retry")
    done = store.done_keys(keys)
    if retry:
        done -= store.done_keys(keys, statuses=retry)
    trace_dir = str(Path(cfg.sweep.keep_traces).resolve()) if cfg.sweep.keep_traces else None
    todo: list[JobRequest] = []
    seen: set[str] = set()
    for spec, key in zip(jobs, keys, strict=True):
        if key in done or key in seen:
            continue
        seen.add(key)
        todo.append(JobRequest(key=key, spec=spec, run=cfg.run, trace_dir=trace_dir))
    return SweepPlan(
        jobs=jobs, notes=notes, keys=keys, environments=envs, todo=todo, already=len(set(keys) & done)
    )


def _row(f: Finished, env: Environment, sweep_id: int) -> ResultRow:
    spec = f.request.spec
    if f.kind == "ok" and f.reply is not None:
        result = f.reply.result
        env = f.reply.environment
        choice = f.reply.pytorch_choice
        log_tail = None
    else:
        status = f.kind if f.kind in ("crashed", "timeout") else "error"
        last = [ln for ln in f.log_tail.strip().splitlines() if ln.strip()][-1:]
        reason = f.message.strip().splitlines()[-1] if f.message.strip() else status
        if last:
            reason += f"; last output: {last[0][:300]}"
        result = RunResult(variant=spec.variant, mode=spec.mode, status=status, reason=reason)  # type: ignore[arg-type]
        choice = None
        log_tail = f.log_tail or f.message or None
    return ResultRow(
        job_key=f.request.key,
        workload=spec.workload,
        variant=spec.variant,
        mode=spec.mode,
        result=result,
        environment=env,
        pytorch_choice=choice,
        log_tail=log_tail,
        worker=f.worker or None,
        wall_s=f.wall_s,
        started_at=_iso(f.started or time.time()),
        finished_at=_iso(f.finished or time.time()),
        sweep_id=sweep_id,
    )


OnStart = Callable[[SweepPlan], None]
OnResult = Callable[[ResultRow, SweepSummary], None]


def run_sweep(
    cfg: SweepConfig,
    *,
    executor: Executor | None = None,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
) -> SweepSummary:
    """Run every job of cfg's grid that the store does not hold yet; return what happened.

    Each result is stored (one transaction) as soon as it arrives, before on_result is called.
    """
    t0 = time.monotonic()
    store_path = Path(cfg.sweep.store)
    retry = set(check_statuses(cfg.sweep.retry, "--retry"))
    check_user_variants(cfg)  # before the store is opened or any job runs
    own_executor = executor is None
    ex = executor or make_executor(cfg)
    if cfg.grid.device == "auto":
        # the executor knows what "auto" means where the jobs run (a Ray cluster's GPUs, say)
        cfg = msgspec.structs.replace(cfg, grid=msgspec.structs.replace(cfg.grid, device=ex.device))
    try:
        with Store(store_path) as store:
            plan = plan_sweep(cfg, ex, store)
            summary = SweepSummary(
                store=store_path.resolve(), total=len(set(plan.keys)), already=plan.already
            )
            summary.sweep_id = store.begin_sweep(
                executor=ex.name,
                total_jobs=len(plan.todo),
                config=msgspec.to_builtins(cfg) | {"argv_pid": os.getpid()},
            )
            if on_start is not None:
                on_start(plan)

            # a lease outlives the job's own timeout; an owner that dies on this host loses it at once
            ttl_s = 2 * (cfg.sweep.timeout_s or 3600) + 60

            def should_run(req: JobRequest) -> bool:
                status = store.status_of(req.key)
                if status is not None and status not in retry:
                    return False  # stored meanwhile by a concurrent sweep
                # claimed here, just before it runs: a concurrent sweep then skips it (the claim
                # looks at the stored result again, in its own transaction)
                return store.claim(req.key, ttl_s=ttl_s, sweep_id=summary.sweep_id, rerun=retry)

            try:
                for f in ex.run(plan.todo, timeout_s=cfg.sweep.timeout_s or None, should_run=should_run):
                    if f.kind == "not_run":
                        summary.not_run += 1
                        continue
                    row = _row(f, plan.environments[f.request.spec.workload.device], summary.sweep_id)
                    store.record(row, replace=bool(retry))
                    summary.ran += 1
                    summary.counts[row.result.status] += 1
                    summary.slowest.append((f.wall_s, f"{f.request.spec.describe()} [{row.result.status}]"))
                    summary.slowest = sorted(summary.slowest, reverse=True)[:5]
                    if on_result is not None:
                        on_result(row, summary)
            finally:
                store.release_mine()  # interrupted or not: what we did not finish is free again
            store.end_sweep(summary.sweep_id)
    finally:
        if own_executor:
            ex.close()
    summary.elapsed_s = time.monotonic() - t0
    return summary
