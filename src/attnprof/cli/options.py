"""Workload options shared by `run` and other commands, as typer declares them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# the flags' meaning is the api's (one home: attnprof.api.flags); the CLI only declares them
from attnprof.api.flags import (
    build_workload,
    check_tensorboard_dir,
    parse_steps,
    positive,
    removed_if_empty,
    split_list,
)

__all__ = [
    "Backward",
    "Batch",
    "Causal",
    "DecodeQueries",
    "Device",
    "Dtype",
    "HeadDim",
    "Heads",
    "JsonOut",
    "KvHeads",
    "KvSeq",
    "Mask",
    "NoColor",
    "Phase",
    "Seed",
    "Seq",
    "Shape",
    "Variants",
    "build_workload",
    "check_tensorboard_dir",
    "parse_steps",
    "positive",
    "removed_if_empty",
    "split_list",
]

Batch = Annotated[int | None, typer.Option("-b", "--batch", help="Batch size.")]
Heads = Annotated[int | None, typer.Option("-H", "--heads", help="Query heads.")]
Seq = Annotated[int | None, typer.Option("-s", "--seq", help="Query length.")]
HeadDim = Annotated[int | None, typer.Option("-d", "--head-dim", help="Head dimension.")]
Shape = Annotated[str | None, typer.Option("--shape", help="B,H,S,D in one go, e.g. 8,16,1024,64.")]
KvHeads = Annotated[int | None, typer.Option("--kv-heads", help="Key/value heads (GQA); default = heads.")]
KvSeq = Annotated[int | None, typer.Option("--kv-seq", help="Key/value length; default = seq.")]
Dtype = Annotated[
    str | None, typer.Option("--dtype", help="fp32, fp16 or bf16 (default: bf16 on CUDA, fp32 on CPU).")
]
Device = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
Causal = Annotated[bool, typer.Option("--causal/--no-causal", help="Causal mask (default on).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed for the inputs.")]
Mask = Annotated[
    str | None,
    typer.Option(
        "--mask",
        help="causal, none, sliding=W, prefix=P, document=N, padding=L1,L2,..., alibi or bias "
        "(default: causal; --no-causal = none).",
    ),
]
Backward = Annotated[
    bool, typer.Option("--backward", help="Forward and backward (dQ, dK, dV); regions attn_fwd and attn_bwd.")
]
Phase = Annotated[
    str,
    typer.Option(
        "--phase", help="prefill (Sq = --seq) or decode (Sq = --decode-queries against a --kv-seq cache)."
    ),
]
DecodeQueries = Annotated[
    int | None, typer.Option("--decode-queries", help="New queries per decode step (default 1).")
]
Variants = Annotated[
    list[str] | None,
    typer.Option(
        "--variants",
        "--variant",
        "-v",
        help="Variants (comma-separated or repeated); file.py:func or module:func for your own.",
    ),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
NoColor = Annotated[bool, typer.Option("--no-color", help="No colours in the output.")]
# run and model write their traces in tensorboard_trace_handler's layout the same way
TensorboardDir = Annotated[
    Path | None,
    typer.Option(
        "--tensorboard",
        metavar="DIR",
        help="Also write the traces as torch.profiler.tensorboard_trace_handler does, under "
        "DIR/<run name>/ (TensorBoard, HTA and `attnprof analyze DIR` read that layout).",
    ),
]
