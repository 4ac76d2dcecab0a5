"""Run variants on a workload: check, estimate, profile, time, verify, measure; record it all.

One variant at a time (run_variant: also each sweep job) or a whole suite (run), which also
writes <out>/run.json. A variant that is unsupported, refused for memory, or fails at run time is
recorded with its reason (in English, and as a reason code for the rejections) and the others
still run. This module is the orchestration; its pieces have their own homes: the shared inputs
(shared.py), the memory gate (gate.py), a variant made ready for timing (prepare.py), the clean
timing and what it puts on a result (timed.py), profiling and peak memory (measure.py) and
failures (failures.py). `attnprof model` shares profile_into, peak_memory, record_failure and
reject; their names stay importable from here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.errors import Interrupted, UserError
from attnprof.extras import require
from attnprof.harness.cuda import on_device
from attnprof.harness.failures import record_failure, reject, reraise_interrupt
from attnprof.harness.gate import memory_gate
from attnprof.harness.measure import peak_memory, profile_into, safe_name
from attnprof.harness.options import RunOptions, default_time_budget
from attnprof.harness.prepare import SLOW_CALL_S, SLOW_MIN_SAMPLES, SLOW_STEPS, Progress, prepare
from attnprof.harness.shared import Shared
from attnprof.harness.timed import Prepared, apply_timing, time_calls
from attnprof.outputs import write_atomic
from attnprof.records import (
    RUN_SCHEMA,
    Environment,
    ResumeState,
    RunRecord,
    RunResult,
    encode_json,
    variant_label,
)

if TYPE_CHECKING:
    from attnprof.variants.registry import Variant
    from attnprof.workload import Workload

__all__ = [
    "SLOW_CALL_S",
    "SLOW_MIN_SAMPLES",
    "SLOW_STEPS",
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
        result, prepared = prepare(
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
                summaries = time_calls(prepared.calls(), workload, topts, cold=not slow)
            except Exception as exc:
                record_failure(result, "timing", exc, workload.device)
            else:
                apply_timing(result, summaries, peak_tflops)
                if slow:
                    result.warnings.append(
                        f"timed in {topts.min_samples} rounds with no cold-allocator rounds: one call "
                        f"takes {prepared.call_s:.1f} s here, so intervals are wide"
                    )
    return result


def ran_any(record: RunRecord) -> bool:
    """Whether any variant ran to the end (status ok or incorrect)."""
    return any(r.ran for r in record.results)


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
        prepared.append(prepare(workload, v, out, opts, shared, progress))
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
            summaries = time_calls(calls, workload, topts, cold=not slow)
        except Exception as exc:
            reraise_interrupt(exc)
            # one variant failing only in timing: time them one by one to find and record it
            summaries, rounds = {}, opts.min_samples
            for r, p in ready:
                try:
                    summaries.update(time_calls(p.calls(), workload, opts))
                except Exception as exc:
                    record_failure(r, "timing", exc, workload.device)
        for r, _ in ready:
            if r.label in summaries:
                apply_timing(r, summaries, env.sound_peak)  # None for a busy machine's peak
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
