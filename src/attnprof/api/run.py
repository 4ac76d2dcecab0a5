"""`attnprof run`'s request: its flags checked once, for a new run and for a resumed one.

A new run: the workload flags make a Workload (attnprof.api.flags.build_workload), the variant
names resolve before anything runs, an expectations file loads before the run (a bad one fails
then, not after minutes of timing), and --strict without --expect is refused (it would check
nothing). --tensorboard writes the profiler's traces, so it cannot go with --no-profile.

A resumed run (`--resume DIR`): the run being resumed fixes its workload, variants and options
(run.json: the workload and resume.options, attnprof.harness.options.RunOptions). A flag that
changes what is measured is therefore refused when it is given with a value other than that
run's, in one line naming it (exit 2): finishing the run with another seed, mask or schedule
would mix two measurements in one run.json. A flag equal to the run's value is accepted (it
changes nothing). The flags that belong to this invocation (--json, --no-color) apply; --expect
and --strict apply to the resumed run's result, as to a new run's.

A flag is "given" when it differs from the CLI's default: typer cannot tell `--seed 0` from no
--seed, so a flag given with its default value is read as not given (and so not refused).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from attnprof.errors import AttnprofError, UserError

if TYPE_CHECKING:
    from attnprof.harness.options import RunOptions
    from attnprof.harness.prepare import Progress
    from attnprof.records import RunRecord
    from attnprof.variants.base import Variant
    from attnprof.workload import Workload

__all__ = ["RunFlags", "RunRequest", "check_resume", "not_one_correct", "nothing_ran"]


@dataclass(frozen=True, kw_only=True)
class RunFlags:
    """The flags of `attnprof run`, as the command got them (None: not given)."""

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
    resume: Path | None = None


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """A run to make or to finish, checked (build it with from_flags)."""

    workload: Workload
    variants: list[Variant]
    options: RunOptions
    out: Path  # the run directory (made by execute)
    expect: str | None = None
    strict: bool = False
    resumed: RunRecord | None = None  # the interrupted run this request finishes
    notes: tuple[str, ...] = field(default=())  # one line each, for stderr before the run

    @classmethod
    def from_flags(cls, flags: RunFlags) -> RunRequest:
        """The request, or UserError naming the first flag that is wrong or cannot apply."""
        from attnprof.api.flags import check_strict

        check_strict(flags.strict, flags.expect)
        req = _resumed(flags) if flags.resume is not None else _new(flags)
        if flags.expect:  # a bad expectations file fails before the run, not after it
            from attnprof.compare.expect import load_expectations

            load_expectations(flags.expect)
        return req

    @contextmanager
    def prepared(self) -> Iterator[Callable[[Progress | None], RunRecord]]:
        """The run directory made (or refused: one holding an earlier run) before anything is
        shown, and the run to call inside it; run.json is written however the run ends. A new
        directory this made is removed again when the run fails before writing a file."""
        from attnprof.api.flags import removed_if_empty
        from attnprof.harness.run import prepare_out_dir, run

        if self.resumed is not None:
            resumed = self.resumed
            yield lambda progress: run(
                self.workload, self.variants, out=self.out, options=self.options, progress=progress,
                resume=resumed,
            )  # fmt: skip
            return
        existed = self.out.exists()
        out_dir = prepare_out_dir(self.out)
        with removed_if_empty(out_dir, existed=existed):
            yield lambda progress: run(
                self.workload, self.variants, out=out_dir, options=self.options, progress=progress
            )

    def execute(self, progress: Progress | None = None) -> RunRecord:
        """Run (or finish) the variants (see prepared)."""
        with self.prepared() as go:
            return go(progress)


def _new(flags: RunFlags) -> RunRequest:
    import msgspec

    from attnprof.api.flags import build_workload, check_tensorboard_dir, parse_steps, positive, split_list
    from attnprof.harness.env import cpu_dtype_note
    from attnprof.harness.options import RunOptions, default_time_budget
    from attnprof.harness.run import default_out_dir
    from attnprof.variants.registry import resolve_variants

    workload = build_workload(
        batch=flags.batch, heads=flags.heads, seq=flags.seq, head_dim=flags.head_dim, shape=flags.shape,
        kv_heads=flags.kv_heads, kv_seq=flags.kv_seq, dtype=flags.dtype, device=flags.device,
        causal=flags.causal, seed=flags.seed, mask=flags.mask, backward=flags.backward, phase=flags.phase,
        decode_queries=flags.decode_queries,
    )  # fmt: skip
    names = split_list(flags.variants)
    positive(flags.budget, "--time-budget", "0.5")
    positive(flags.timeout, "--timeout", "60")
    opts = RunOptions(
        steps=parse_steps(flags.steps),
        profile=not flags.no_profile,
        force=flags.force,
        compile=flags.compile,
        time_budget_s=flags.budget if flags.budget is not None else default_time_budget(workload.device),
        variant_timeout_s=flags.timeout or 0.0,
    )
    chosen = resolve_variants(names or None, compile=flags.compile)  # fails early on unknown names
    notes = [
        # say why a variant got no compiled twin rather than leaving it out silently
        f"--compile adds no twin of {v.name}: {v.no_twin_reason or 'not compilable'}"
        for v in chosen
        if flags.compile and not v.compiled and not v.can_compile
    ]
    out = flags.out if flags.out is not None else default_out_dir()
    if flags.tensorboard is not None:
        if flags.no_profile:
            raise UserError("--tensorboard writes the profiler's traces: it cannot go with --no-profile")
        check_tensorboard_dir(flags.tensorboard)
        opts = msgspec.structs.replace(opts, tensorboard_dir=str(flags.tensorboard / out.name))
    if note := cpu_dtype_note(workload.device, workload.dtype):
        notes.append(note)
    return RunRequest(
        workload=workload, variants=chosen, options=opts, out=out, expect=flags.expect, strict=flags.strict,
        notes=tuple(notes),
    )  # fmt: skip


def _resumed(flags: RunFlags) -> RunRequest:
    """The pending variants of an interrupted run, with its workload and options; the flags that
    would change them are refused (check_resume)."""
    import msgspec

    from attnprof.harness.options import RunOptions
    from attnprof.records import decode_run
    from attnprof.variants.registry import resolve_variants
    from attnprof.workload import Workload

    assert flags.resume is not None
    path = flags.resume / "run.json"
    if not path.is_file():
        raise UserError(
            f"--resume {flags.resume}: no run.json there (an interrupted run writes one); pass its --out DIR"
        )
    record = decode_run(path.read_bytes(), source=str(path))
    if not record.interrupted or record.resume is None or not record.resume.pending:
        raise UserError(f"--resume {flags.resume}: that run finished; nothing to resume")
    check_resume(record, flags, run_json=path)
    # what this attnprof knows of the saved options (a newer one may have saved more)
    saved = {k: v for k, v in record.resume.options.items() if k in RunOptions.__struct_fields__}
    return RunRequest(
        workload=Workload.from_record(record.workload),
        variants=resolve_variants(record.resume.pending),
        options=msgspec.convert(saved, type=RunOptions),
        out=flags.resume,
        expect=flags.expect,
        strict=flags.strict,
        resumed=record,
    )


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


# the flags run.json replaces outright: any value given is refused (the resume has them all)
_REPLACED = {
    "variants": "--variants", "batch": "--batch", "heads": "--heads", "seq": "--seq",
    "head_dim": "--head-dim", "shape": "--shape", "kv_heads": "--kv-heads", "kv_seq": "--kv-seq",
    "dtype": "--dtype", "out": "--out", "budget": "--time-budget", "mask": "--mask",
    "decode_queries": "--decode-queries", "timeout": "--timeout", "tensorboard": "--tensorboard",
}  # fmt: skip

_DEFAULTS = {f.name: f.default for f in fields(RunFlags)}


def check_resume(record: RunRecord, flags: RunFlags, *, run_json: Path) -> None:
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


def _compared(flags: RunFlags) -> dict[str, tuple[str, object]]:
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
