"""`attnprof model`: attention inside a real transformers model, each implementation in turn."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated

import typer

from attnprof.cli import app
from attnprof.cli.options import (
    Device,
    Dtype,
    JsonOut,
    NoColor,
    Seed,
    TensorboardDir,
    check_tensorboard_dir,
    positive,
    removed_if_empty,
    split_list,
)
from attnprof.device import resolve_device
from attnprof.extras import require

__all__: list[str] = []


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
    phase: Annotated[
        str, typer.Option("--phase", help="prefill (the whole sequence) or decode (one token, KV cache).")
    ] = "prefill",
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
    seed: Seed = 0,
    steps: Annotated[str, typer.Option("--steps", help="Profiler schedule WAIT,WARMUP,ACTIVE.")] = "0,1,2",
    budget: Annotated[
        float | None, typer.Option("--time-budget", help="Seconds of clean timing per implementation.")
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
    from attnprof.cli.run import _parse_steps
    from attnprof.harness.run import default_out_dir, prepare_out_dir
    from attnprof.models.harness import ModelOptions, check_model, run_model
    from attnprof.models.load import require_transformers
    from attnprof.report.model_view import ModelProgress, render_model

    require_transformers()  # before anything else: the one-line install hint
    positive(budget, "--time-budget", "0.3")
    dev = resolve_device(device)
    names = split_list(attn) or None
    opts = ModelOptions(
        time_budget_s=budget if budget is not None else ModelOptions.time_budget_s,
        implementations=names,
        phase=phase,
        backward=backward,
        size=size,
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=dev,
        seed=seed,
        steps=_parse_steps(steps),
    )
    plan = check_model(model, opts)  # bad input fails here, in one line, before any output
    if tensorboard is not None:
        check_tensorboard_dir(tensorboard)
    target = out if out is not None else default_out_dir()
    existed = target.exists()
    out_dir = prepare_out_dir(target)
    if tensorboard is not None:
        opts = dataclasses.replace(opts, tensorboard_dir=str(tensorboard / out_dir.name))
    what = "train step" if backward else phase
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
    from attnprof.cli.run import nothing_ran
    from attnprof.harness.run import ran_any

    if not ran_any(record):  # run.json is written; one line for why nothing ran, exit non-zero
        raise nothing_ran(record)
