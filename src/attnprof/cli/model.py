"""`attnprof model`: attention inside a real transformers model, each implementation in turn."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from attnprof.cli import app
from attnprof.cli.options import (
    Device,
    Dtype,
    JsonOut,
    NoColor,
    TensorboardDir,
    check_tensorboard_dir,
    parse_steps,
    positive,
    removed_if_empty,
    split_list,
)
from attnprof.device import resolve_device
from attnprof.extras import require

if TYPE_CHECKING:
    from attnprof.models.options import ModelOptions

__all__ = ["model_options"]


def model_options(
    *,
    attn: list[str] | None,
    phase: str | None,
    backward: bool,
    size: str | None,
    batch: int | None,
    seq: int | None,
    dtype: str | None,
    device: str,
    seed: int | None,
    steps: str | None,
    budget: float | None,
) -> ModelOptions:
    """The command line's ModelOptions: what it was not given is the library's default, so that
    `attnprof model` and `run_model(model, ModelOptions())` run the same thing."""
    from attnprof.models.options import ModelOptions

    lib = ModelOptions()
    return ModelOptions(
        implementations=split_list(attn) or None,
        phase=phase if phase is not None else lib.phase,
        backward=backward,
        size=size,
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=device,
        seed=seed if seed is not None else lib.seed,
        steps=parse_steps(steps) if steps is not None else lib.steps,
        time_budget_s=budget if budget is not None else lib.time_budget_s,
    )


@app.command("model")
def model_command(
    model: Annotated[
        str,
        typer.Argument(
            help="A preset (llama, qwen2, gpt2, bert, vit), a config.json or checkpoint folder, "
            "or a Hub id already in the local cache (nothing is downloaded)."
        ),
    ],
    attn: Annotated[
        list[str] | None,
        typer.Option(
            "--variants",
            "-v",
            "--attn",
            help="Attention implementations (comma-separated or repeated): eager, sdpa, flex_attention, "
            "flash_attention_2, attnprof-naive, attnprof-naive-inplace, attnprof-sdpa-MATH|FLASH|EFFICIENT|CUDNN. "
            "Default: all of them (flex_attention only when asked for on a CPU).",
        ),
    ] = None,
    # the defaults of --phase, --seed, --steps and --time-budget are ModelOptions' (one home):
    # None here means "the library's", filled in by model_options
    phase: Annotated[
        str | None,
        typer.Option(
            "--phase", help="prefill (the whole sequence; default) or decode (one token, KV cache)."
        ),
    ] = None,
    backward: Annotated[
        bool, typer.Option("--backward", help="A train step: forward, a loss, backward.")
    ] = False,
    size: Annotated[
        str | None, typer.Option("--size", help="Preset size: tiny, small (default) or base (for a GPU).")
    ] = None,
    batch: Annotated[int | None, typer.Option("-b", "--batch", help="Sequences per step.")] = None,
    seq: Annotated[
        int | None, typer.Option("-s", "--seq", help="Tokens per sequence (the KV cache for decode).")
    ] = None,
    dtype: Dtype = None,
    device: Device = "auto",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for the inputs (default 0).")] = None,
    steps: Annotated[
        str | None, typer.Option("--steps", help="Profiler schedule WAIT,WARMUP,ACTIVE (default 0,1,2).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option("--time-budget", help="Seconds of clean timing per implementation (default 0.2)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", "--output", help="Run directory (default ./attnprof-runs/<timestamp>)."),
    ] = None,
    tensorboard: TensorboardDir = None,
    json_out: JsonOut = False,
    no_color: NoColor = False,
) -> None:
    """Profile attention inside a Hugging Face transformers model: step time, attention's share,
    per-layer attention time, memory and output difference for each attention implementation."""
    require("torch", "attnprof model", extra="models")  # [models] brings torch with transformers
    from attnprof.harness.run import default_out_dir, prepare_out_dir
    from attnprof.models.harness import check_model, run_model
    from attnprof.models.load import require_transformers
    from attnprof.report.model_view import ModelProgress, render_model

    require_transformers()  # before anything else: the one-line install hint
    positive(budget, "--time-budget", "0.3")
    dev = resolve_device(device)
    opts = model_options(
        attn=attn,
        phase=phase,
        backward=backward,
        size=size,
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=dev,
        seed=seed,
        steps=steps,
        budget=budget,
    )
    plan = check_model(model, opts)  # bad input fails here, in one line, before any output
    if tensorboard is not None:
        check_tensorboard_dir(tensorboard)
    target = out if out is not None else default_out_dir()
    existed = target.exists()
    out_dir = prepare_out_dir(target)
    if tensorboard is not None:
        opts = dataclasses.replace(opts, tensorboard_dir=str(tensorboard / out_dir.name))
    what = "train step" if backward else opts.phase
    title = f"{model} ({what}, {plan.workload.dtype} on {dev})"
    reporter = ModelProgress(
        total=len(plan.implementations),
        title=title,
        workload=plan.workload,
        quiet=json_out,
        no_color=no_color,
    )
    with removed_if_empty(out_dir, existed=existed), reporter:
        record = run_model(model, opts, out=out_dir, progress=reporter)
    if json_out:
        from attnprof.records import encode_json

        sys.stdout.write(encode_json(record).decode() + "\n")
    else:
        render_model(record, out_dir, no_color=no_color)
    from attnprof.api.run import nothing_ran
    from attnprof.harness.run import ran_any

    if not ran_any(record):  # run.json is written; one line for why nothing ran, exit non-zero
        raise nothing_ran(record)
