"""`attnprof run` and `attnprof list`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

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
)
from attnprof.errors import AttnprofError
from attnprof.extras import require

__all__: list[str] = []


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
    from attnprof.api.run import RunFlags, RunRequest, not_one_correct, nothing_ran
    from attnprof.harness.run import ran_any
    from attnprof.report.run_view import ProgressReporter, render_run

    flags = RunFlags(
        variants=variants, batch=batch, heads=heads, seq=seq, head_dim=head_dim, shape=shape,
        kv_heads=kv_heads, kv_seq=kv_seq, dtype=dtype, out=out, budget=budget, mask=mask,
        decode_queries=decode_queries, timeout=timeout, tensorboard=tensorboard, device=device,
        causal=causal, backward=backward, phase=phase, seed=seed, compile=compile, steps=steps,
        force=force, no_profile=no_profile, strict=strict, expect=expect, resume=resume,
    )  # fmt: skip
    req = RunRequest.from_flags(flags)
    for note in req.notes:  # before the wait they explain, on stderr (stdout may be --json)
        sys.stderr.write(f"note: {note}\n")
    reporter = ProgressReporter(
        total=len(req.variants), workload=req.workload, quiet=json_out, no_color=no_color
    )
    with req.prepared() as go, reporter:  # the directory is checked before the header shows
        record = go(reporter)
    if json_out:
        from attnprof.records import encode_json

        sys.stdout.write(encode_json(record).decode() + "\n")
    else:
        render_run(record, req.out, no_color=no_color)
    if not ran_any(record):
        # run.json is written; say in one line why nothing ran and exit non-zero
        raise nothing_ran(record)
    if line := not_one_correct(record):
        raise AttnprofError(line)
    if req.expect:
        _check_expectations(req.out, req.expect, strict=req.strict, no_color=no_color)


def _check_expectations(run_dir: Path, expect: str, *, strict: bool, no_color: bool) -> None:
    # checking is compare's, printing the report's: the command joins the two
    from attnprof.compare.expect import check_expectations, enforce
    from attnprof.report.terminal import print_expectations

    results = check_expectations(run_dir, expect)
    print_expectations(results, no_color=no_color)
    enforce(results, strict=strict)


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
