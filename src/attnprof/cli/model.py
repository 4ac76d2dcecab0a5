"""`attnprof model`: attention inside a real transformers model, each implementation in turn."""

from __future__ import annotations

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
    TensorboardDir,
)
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
    from attnprof.api.model import ModelFlags, ModelRequest
    from attnprof.api.run import nothing_ran
    from attnprof.harness.run import ran_any
    from attnprof.report.model_view import ModelProgress, render_model

    flags = ModelFlags(
        model=model, attn=attn, phase=phase, backward=backward, size=size, batch=batch, seq=seq,
        dtype=dtype, device=device, seed=seed, steps=steps, budget=budget, out=out, tensorboard=tensorboard,
    )  # fmt: skip
    req = ModelRequest.from_flags(flags)
    reporter = ModelProgress(
        total=len(req.plan.implementations),
        title=req.title,
        workload=req.plan.workload,
        quiet=json_out,
        no_color=no_color,
    )
    with req.prepared() as go, reporter:  # the directory is checked before the header shows
        record = go(reporter)
    if json_out:
        from attnprof.records import encode_json

        sys.stdout.write(encode_json(record).decode() + "\n")
    else:
        render_model(record, req.out, no_color=no_color)
    if not ran_any(record):  # run.json is written; one line for why nothing ran, exit non-zero
        raise nothing_ran(record)
