"""`attnprof run --resume DIR`: the flags of the resuming command against the run it resumes.

The run being resumed fixes its workload, variants and options (run.json: the workload and
resume.options, attnprof.harness.options.RunOptions). A flag that changes what is measured is
therefore refused when it is given with a value other than that run's, in one line naming it
(exit 2): finishing the run with another seed, mask or schedule would mix two measurements in
one run.json. A flag equal to the run's value is accepted (it changes nothing). The flags that
belong to this invocation (--json, --no-color) apply; --expect and --strict apply to the
resumed run's result (the CLI checks the finished run against them, as a plain run does).

A flag is "given" when it differs from the CLI's default: typer cannot tell `--seed 0` from no
--seed, so a flag given with its default value is read as not given (and so not refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from attnprof.errors import UserError

if TYPE_CHECKING:
    from attnprof.records import RunRecord

__all__ = ["ResumeFlags", "check_resume"]


@dataclass(frozen=True, kw_only=True)
class ResumeFlags:
    """The measuring flags of `attnprof run`, as the command got them (None: not given)."""

    variants: list[str] | None = None
    batch: int | None = None
    heads: int | None = None
    seq: int | None = None
    head_dim: int | None = None
    shape: str | None = None
    kv_heads: int | None = None
    kv_seq: int | None = None
    dtype: str | None = None
    out: Path | None = None
    budget: float | None = None
    mask: str | None = None
    decode_queries: int | None = None
    timeout: float | None = None
    tensorboard: Path | None = None
    # flags with a default: their default means "not given"
    device: str = "auto"
    causal: bool = True
    backward: bool = False
    phase: str = "prefill"
    seed: int = 0
    compile: bool = False
    steps: str = "1,1,3"
    force: bool = False
    no_profile: bool = False
    strict: bool = False
    expect: str | None = None


# the flags run.json replaces outright: any value given is refused (the resume has them all)
_REPLACED = {
    "variants": "--variants", "batch": "--batch", "heads": "--heads", "seq": "--seq",
    "head_dim": "--head-dim", "shape": "--shape", "kv_heads": "--kv-heads", "kv_seq": "--kv-seq",
    "dtype": "--dtype", "out": "--out", "budget": "--time-budget", "mask": "--mask",
    "decode_queries": "--decode-queries", "timeout": "--timeout", "tensorboard": "--tensorboard",
}  # fmt: skip

_DEFAULTS = {f.name: f.default for f in fields(ResumeFlags)}


def check_resume(record: RunRecord, flags: ResumeFlags, *, run_json: Path) -> None:
    """UserError (one line) when a flag given with --resume would change what the resumed run
    measures; else nothing (the flags that remain apply: --expect, --strict)."""
    given = [flag for name, flag in _REPLACED.items() if getattr(flags, name) is not None]
    saved = _saved(record)
    for name, (flag, value) in _compared(flags).items():
        if value != _DEFAULTS[name] and not _same(name, value, saved[name]):
            given.append(flag)
    if given:
        raise UserError(
            f"--resume takes the workload, variants and options from {run_json}: "
            f"drop {', '.join(given)} (or start a new run with them)"
        )


def _compared(flags: ResumeFlags) -> dict[str, tuple[str, object]]:
    return {
        "device": ("--device", flags.device),
        "causal": ("--no-causal", flags.causal),
        "backward": ("--backward", flags.backward),
        "phase": ("--phase", flags.phase),
        "seed": ("--seed", flags.seed),
        "compile": ("--compile", flags.compile),
        "steps": ("--steps", flags.steps),
        "force": ("--force", flags.force),
        "no_profile": ("--no-profile", flags.no_profile),
    }


def _saved(record: RunRecord) -> Mapping[str, object]:
    """The run's own values of the compared flags, in the flags' terms."""
    w = record.workload
    opts = record.resume.options if record.resume is not None else {}
    steps = opts.get("steps", (1, 1, 3))
    return {
        "device": w.device,
        "causal": w.causal,
        "backward": w.backward,
        "phase": w.phase,
        "seed": w.seed,
        "compile": bool(opts.get("compile", False)),
        "steps": ",".join(str(int(n)) for n in steps),  # type: ignore[attr-defined]
        "force": bool(opts.get("force", False)),
        "no_profile": not bool(opts.get("profile", True)),
    }


def _same(name: str, given: object, saved: object) -> bool:
    if name == "device":  # --device cuda names the run's cuda:0
        return given == saved or str(saved).split(":")[0] == given
    if name == "steps":
        return ",".join(p.strip() for p in str(given).split(",")) == saved
    return given == saved
