"""`attnprof run` and `attnprof list`."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from attnprof.cli import app
from attnprof.cli.options import (
    Backward,
    Batch,
    Causal,
    DecodeQueries,
    Device,
    Dtype,
    HeadDim,
    Heads,
    JsonOut,
    KvHeads,
    KvSeq,
    Mask,
    NoColor,
    Phase,
    Seed,
    Seq,
    Shape,
    TensorboardDir,
    Variants,
    build_workload,
    check_tensorboard_dir,
    positive,
    removed_if_empty,
    split_list,
)
from attnprof.errors import AttnprofError, UserError
from attnprof.extras import require
from attnprof.records import RunRecord

if TYPE_CHECKING:
    from attnprof.api.run import ResumeFlags

__all__: list[str] = []


def _parse_steps(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise UserError(
            f"--steps {text!r} is not WAIT,WARMUP,ACTIVE: give three integers, e.g. --steps 1,1,3"
        )
    w, wu, a = (int(p) for p in parts)
    if a < 1:
        raise UserError("--steps needs at least one active step, e.g. --steps 1,1,3")
    return w, wu, a


@app.command("run")
def run_command(
    variants: Variants = None,
    batch: Batch = None,
    heads: Heads = None,
    seq: Seq = None,
    head_dim: HeadDim = None,
    shape: Shape = None,
    kv_heads: KvHeads = None,
    kv_seq: KvSeq = None,
    dtype: Dtype = None,
    device: Device = "auto",
    causal: Causal = True,
    mask: Mask = None,
    backward: Backward = False,
    phase: Phase = "prefill",
    decode_queries: DecodeQueries = None,
    seed: Seed = 0,
    compile: Annotated[
        bool, typer.Option("--compile", help="Add a torch.compile twin of each eager variant.")
    ] = False,
    steps: Annotated[str, typer.Option("--steps", help="Profiler schedule WAIT,WARMUP,ACTIVE.")] = "1,1,3",
    out: Annotated[
        Path | None,
        # every command's output is -o, --output or --out (run and model: a run directory)
        typer.Option("--out", "-o", "--output", help="Run directory (default ./attnprof-runs/<timestamp>)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Run variants even when their memory estimate exceeds what is free."),
    ] = False,
    budget: Annotated[
        float | None, typer.Option("--time-budget", help="Seconds of clean timing per variant.")
    ] = None,
    no_profile: Annotated[bool, typer.Option("--no-profile", help="Time only; no traces.")] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds a user variant's trial run (alone, in a separate process, before the run) may "
            "take before it is killed and recorded as timeout (default: no limit).",
        ),
    ] = None,
    tensorboard: TensorboardDir = None,
    json_out: JsonOut = False,
    expect: Annotated[
        str | None,
        typer.Option("--expect", help="Expectations TOML (or a built-in name) to check the run against."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="With --expect: exit 3 on any mismatch.")] = False,
    no_color: NoColor = False,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Finish the interrupted run in DIR (its run.json says what is left)."),
    ] = None,
) -> None:
    """Run attention variants: profile (traces + key_averages tables), time, check, measure."""
    require("torch", "attnprof run")
    from attnprof.harness.options import default_time_budget
    from attnprof.harness.run import RunOptions, default_out_dir, prepare_out_dir, ran_any, run
    from attnprof.report.run_view import ProgressReporter, render_run
    from attnprof.variants.registry import resolve_variants

    if resume is not None:
        from attnprof.api.run import ResumeFlags

        flags = ResumeFlags(
            variants=variants, batch=batch, heads=heads, seq=seq, head_dim=head_dim, shape=shape,
            kv_heads=kv_heads, kv_seq=kv_seq, dtype=dtype, out=out, budget=budget, mask=mask,
            decode_queries=decode_queries, timeout=timeout, tensorboard=tensorboard, device=device,
            causal=causal, backward=backward, phase=phase, seed=seed, compile=compile, steps=steps,
            force=force, no_profile=no_profile, strict=strict, expect=expect,
        )  # fmt: skip
        _resume(resume, flags, json_out=json_out, no_color=no_color)
        return
    workload = build_workload(
        batch=batch,
        heads=heads,
        seq=seq,
        head_dim=head_dim,
        shape=shape,
        kv_heads=kv_heads,
        kv_seq=kv_seq,
        dtype=dtype,
        device=device,
        causal=causal,
        seed=seed,
        mask=mask,
        backward=backward,
        phase=phase,
        decode_queries=decode_queries,
    )
    names = split_list(variants)
    positive(budget, "--time-budget", "0.5")
    positive(timeout, "--timeout", "60")
    opts = RunOptions(
        steps=_parse_steps(steps),
        profile=not no_profile,
        force=force,
        compile=compile,
        time_budget_s=budget if budget is not None else default_time_budget(workload.device),
        variant_timeout_s=timeout or 0.0,
    )
    chosen = resolve_variants(names or None, compile=compile)  # fails early on unknown names
    if compile:  # say why a variant got no compiled twin rather than leaving it out silently
        for v in chosen:
            if not v.compiled and not v.can_compile:
                sys.stderr.write(
                    f"note: --compile adds no twin of {v.name}: {v.no_twin_reason or 'not compilable'}\n"
                )
    if expect:  # a bad expectations file fails before the run, not after it
        from attnprof.compare.expect import load_expectations

        load_expectations(expect)
    if tensorboard is not None:
        if no_profile:
            raise UserError("--tensorboard writes the profiler's traces: it cannot go with --no-profile")
        check_tensorboard_dir(tensorboard)
    target = out if out is not None else default_out_dir()
    existed = target.exists()
    out_dir = prepare_out_dir(target)
    if tensorboard is not None:
        opts = msgspec.structs.replace(opts, tensorboard_dir=str(tensorboard / out_dir.name))
    from attnprof.harness.env import cpu_dtype_note

    note = cpu_dtype_note(workload.device, workload.dtype)
    if note:  # before the wait it explains, on stderr (stdout may be --json)
        sys.stderr.write(f"note: {note}\n")
    reporter = ProgressReporter(total=len(chosen), workload=workload, quiet=json_out, no_color=no_color)
    with removed_if_empty(out_dir, existed=existed), reporter:
        record = run(workload, chosen, out=out_dir, options=opts, progress=reporter)
    if json_out:
        from attnprof.records import encode_json

        sys.stdout.write(encode_json(record).decode() + "\n")
    else:
        render_run(record, out_dir, no_color=no_color)
    if not ran_any(record):
        # run.json is written; say in one line why nothing ran and exit non-zero
        raise nothing_ran(record)
    if line := not_one_correct(record):
        raise AttnprofError(line)
    if expect:
        _check_expectations(out_dir, expect, strict=strict, no_color=no_color)


def _resume(run_dir: Path, flags: ResumeFlags, *, json_out: bool, no_color: bool) -> None:
    """Run the variants an interrupted run left pending, with its workload and options; the
    flags that would change them are refused (attnprof.api.run.check_resume), and --expect /
    --strict check the finished run."""
    from attnprof.api.run import check_resume
    from attnprof.harness.run import RunOptions, run
    from attnprof.records import decode_run
    from attnprof.report.run_view import ProgressReporter, render_run
    from attnprof.variants.registry import resolve_variants
    from attnprof.workload import Workload

    path = run_dir / "run.json"
    if not path.is_file():
        raise UserError(
            f"--resume {run_dir}: no run.json there (an interrupted run writes one); pass its --out DIR"
        )
    record = decode_run(path.read_bytes(), source=str(path))
    if not record.interrupted or record.resume is None or not record.resume.pending:
        raise UserError(f"--resume {run_dir}: that run finished; nothing to resume")
    check_resume(record, flags, run_json=path)
    if flags.expect:  # a bad expectations file fails before the run, not after it
        from attnprof.compare.expect import load_expectations

        load_expectations(flags.expect)
    # what this attnprof knows of the saved options (a newer one may have saved more)
    saved = {k: v for k, v in record.resume.options.items() if k in RunOptions.__struct_fields__}
    opts = msgspec.convert(saved, type=RunOptions)
    workload = Workload.from_record(record.workload)
    chosen = resolve_variants(record.resume.pending)
    reporter = ProgressReporter(total=len(chosen), workload=workload, quiet=json_out, no_color=no_color)
    with reporter:
        final = run(workload, chosen, out=run_dir, options=opts, progress=reporter, resume=record)
    if json_out:
        from attnprof.records import encode_json

        sys.stdout.write(encode_json(final).decode() + "\n")
    else:
        render_run(final, run_dir, no_color=no_color)
    if line := not_one_correct(final):
        raise AttnprofError(line)
    if flags.expect:
        _check_expectations(run_dir, flags.expect, strict=flags.strict, no_color=no_color)


def _check_expectations(run_dir: Path, expect: str, *, strict: bool, no_color: bool) -> None:
    # checking is compare's, printing the report's: the command joins the two
    from attnprof.compare.expect import check_expectations, enforce
    from attnprof.report.terminal import print_expectations

    results = check_expectations(run_dir, expect)
    print_expectations(results, no_color=no_color)
    enforce(results, strict=strict)


def nothing_ran(record: RunRecord) -> AttnprofError:
    """All refused or unsupported: the input asks for what this machine cannot do (exit 2);
    any failure: exit 1. The message names the first reason and how many variants there were."""
    results = record.results
    first = next((r.reason for r in results if r.reason), None) or "no variant was selected"
    counts = ", ".join(f"{n} {status}" for status, n in Counter(r.status for r in results).items())
    text = f"no variant ran ({counts}): {first}"
    if all(r.status in ("refused", "unsupported") for r in results):
        return UserError(text)
    return AttnprofError(text)


def not_one_correct(record: RunRecord) -> str | None:
    """One line when variants ran and every one gave an incorrect output (NaN, inf or beyond
    tolerance): no speed of the run means anything then, so the run exits 1, run.json written."""
    ran = [r for r in record.results if r.ran]
    if not ran or any(not r.incorrect for r in ran):
        return None
    first = ran[0]
    why = first.warnings[0] if first.warnings else "incorrect"
    return (
        f"no variant gave a correct output ({len(ran)} incorrect; {first.label}: {why}): nothing to compare"
    )


@app.command("list")
def list_command(
    dtype: Dtype = None,
    device: Device = "auto",
    shape: Shape = None,
    json_out: JsonOut = False,
    no_color: NoColor = False,
) -> None:
    """Every variant, whether it can run here, and why not when it cannot."""
    require("torch", "attnprof list")
    from attnprof.report.run_view import render_list
    from attnprof.variants.registry import list_variants

    workload = build_workload(shape=shape, dtype=dtype, device=device)
    render_list(workload, list_variants(workload), json_out=json_out, no_color=no_color)
