"""What a command's flags mean, checked: a Workload from the workload flags, lists, positive
numbers, the profiler schedule, and the run directory a failed command leaves as it found it.
Every command's request (attnprof.api) reads its flags through these; no torch on import."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attnprof.device import resolve_device
from attnprof.errors import UserError
from attnprof.units import fmt_num
from attnprof.workload import (
    Workload,
    default_dtype,
    default_shape,
    parse_shape,
)

__all__ = [
    "build_workload",
    "check_strict",
    "check_tensorboard_dir",
    "parse_steps",
    "positive",
    "removed_if_empty",
    "split_list",
]


def parse_steps(text: str) -> tuple[int, int, int]:
    """--steps WAIT,WARMUP,ACTIVE: three integers, at least one active step."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise UserError(
            f"--steps {text!r} is not WAIT,WARMUP,ACTIVE: give three integers, e.g. --steps 1,1,3"
        )
    w, wu, a = (int(p) for p in parts)
    if a < 1:
        raise UserError("--steps needs at least one active step, e.g. --steps 1,1,3")
    return w, wu, a


def positive(value: float | None, flag: str, example: str) -> float | None:
    """A time or a count given on the line: finite and above zero (nan, inf, 0 and negatives mean
    nothing as seconds), else one line naming the flag. None (not given) passes."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag} must be a positive number, got {fmt_num(value, 'g')}: e.g. {flag} {example}")
    return value


def check_strict(strict: bool, expect: str | None) -> None:
    """--strict makes a failed --expect check exit 3: alone it would check nothing, silently."""
    if strict and not expect:
        raise UserError("--strict makes a failed --expect check exit 3: add --expect FILE, or drop --strict")


def check_tensorboard_dir(path: Path) -> None:
    """--tensorboard names a folder (made if missing): a file there would fail every variant."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--tensorboard {path} is a file: give a folder (it is created if missing)")


@contextmanager
def removed_if_empty(out: Path, *, existed: bool) -> Iterator[None]:
    """A run directory this command made is removed again (with its empty sub-folders) when the
    command fails or is interrupted before any file was written into it: a run that never got
    going leaves no empty directory behind. One that holds a file (run.json, a trace) is kept."""
    try:
        yield
    except BaseException:
        if not existed and out.is_dir() and not any(p.is_file() for p in out.rglob("*")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def split_list(values: list[str] | None, flag: str = "--variants") -> list[str]:
    """Accept both --variants a,b and --variants a --variants b. A flag given with nothing in it
    (`-v ","`) is an error, not "all of them": an empty selection must not run the whole suite."""
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    if values and not out:
        raise UserError(
            f"{flag} {','.join(values)!r} names nothing: give at least one name, e.g. {flag} naive"
        )
    return out


def build_workload(
    *,
    batch: int | None = None,
    heads: int | None = None,
    seq: int | None = None,
    head_dim: int | None = None,
    shape: str | None = None,
    kv_heads: int | None = None,
    kv_seq: int | None = None,
    dtype: str | None = None,
    device: str = "auto",
    causal: bool = True,
    seed: int = 0,
    mask: str | None = None,
    backward: bool = False,
    phase: str = "prefill",
    decode_queries: int | None = None,
) -> Workload:
    """A Workload from CLI values: explicit flags win over --shape, which wins over the device's
    default shape. Validation (one clear line per problem) happens in Workload itself.

    In decode the cache is --kv-seq long (default: --seq, or the shape's S) and the queries are
    --decode-queries (default 1)."""
    for name, value in (("--kv-heads", kv_heads), ("--kv-seq", kv_seq), ("--decode-queries", decode_queries)):
        if value is not None and value <= 0:
            raise UserError(f"{name} must be a positive integer, got {value}")
    phase = phase.strip().lower()
    if phase not in ("prefill", "decode"):
        raise UserError(f"unknown --phase {phase!r}: use prefill or decode")
    if decode_queries is not None and phase != "decode":
        raise UserError("--decode-queries applies to --phase decode only: add --phase decode")
    if mask is not None and not causal and mask.strip().lower() not in ("none", "full"):
        raise UserError(f"--no-causal and --mask {mask} contradict each other: give only --mask {mask}")
    dev = resolve_device(device)
    b, h, s, d = parse_shape(shape) if shape else default_shape(dev)
    b = batch if batch is not None else b
    h = heads if heads is not None else h
    s = seq if seq is not None else s
    d = head_dim if head_dim is not None else d
    if phase == "decode":
        kv_seq = kv_seq or s
        s = decode_queries or 1
    return Workload(
        batch=b,
        heads=h,
        seq=s,
        head_dim=d,
        kv_heads=kv_heads or 0,
        kv_seq=kv_seq or 0,
        dtype=dtype or default_dtype(dev),
        device=dev,
        causal=causal,
        seed=seed,
        mask=mask or "",
        backward=backward,
        phase=phase,
    )
