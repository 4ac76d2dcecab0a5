"""RunContext: what a run directory says about the traces in it, decoded once.

A run directory (`attnprof run --out DIR`, `attnprof model --out DIR`) holds run.json and the
traces of its variants. Everything downstream that needs the run's workload, device, CPU peak or
what a variant materialises (the analysis of one of its traces, compare's rows, the report)
takes one RunContext, built once from the decoded RunRecord, instead of reading run.json again.

Nothing here is guessed: a fact the record does not hold is None ("unknown"), and readers say
so. In particular `materialises` comes from the field the harness records per variant; a record
written before that field reads as unknown (never inferred from flops_executed, which cannot tell
a materialising variant from a fused one without a mask).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from attnprof.errors import UserError
from attnprof.records import RunRecord, decode_run
from attnprof.workload import Workload

__all__ = ["Peak", "RunContext", "VariantFacts"]


class Peak(msgspec.Struct, frozen=True, kw_only=True):
    """The CPU peak the harness measured (environment.peak_tflops), with where it came from in
    the words the roofline prints (its peak_source)."""

    tflops: float
    source: str


class VariantFacts(msgspec.Struct, frozen=True, kw_only=True):
    """One result of the run, as far as the analysis of its trace needs it."""

    label: str
    trace: str | None  # relative to the run directory ("traces/<tag>.json.gz"); None: not profiled
    lean_trace: str | None = None  # the lean pass's ("traces/<tag>.lean.json.gz"); None: not kept
    # the variant builds the full score matrix; None: not recorded (unknown)
    materialises: bool | None
    # forward FLOPs the variant computes, as it recorded them (flex: the blocks its BlockMask
    # keeps; SDPA given a dense mask: every block); None when not recorded
    flops_executed: float | None
    # flex: the share of its BlockMask's blocks skipped, as the harness recorded it; None: not
    # recorded (not a flex variant, or no BlockMask)
    block_sparsity: float | None = None


class RunContext(msgspec.Struct, frozen=True, kw_only=True):
    run_dir: str
    record: RunRecord
    workload: Workload  # the run's workload (a model run: one attention call inside a step)
    device: str  # cpu, cuda, cuda:1 ...: where the run ran
    device_name: str  # the environment's name for it (GPU model or CPU model)
    peak: Peak | None  # the run's own peak figure; None when it recorded none
    variants: tuple[VariantFacts, ...]

    @property
    def model_run(self) -> bool:
        """An `attnprof model` run: its workload is one attention call inside each traced model
        step, so it says nothing about the FLOPs of the step (no roofline from it)."""
        return self.record.model is not None

    @property
    def flop_workload(self) -> Workload | None:
        """The workload a roofline of this run's traces may use: None for a model run."""
        return None if self.model_run else self.workload

    def variant(self, label: str) -> VariantFacts | None:
        return next((v for v in self.variants if v.label == label), None)

    def for_trace(self, path: str | os.PathLike[str]) -> VariantFacts | None:
        """The result whose trace (rich or lean) is `path` (matched by file name), or None."""
        name = Path(path).name
        return next(
            (v for v in self.variants if name in {Path(x).name for x in (v.trace, v.lean_trace) if x}), None
        )

    @classmethod
    def from_record(cls, record: RunRecord, run_dir: str | Path) -> RunContext:
        """Raises UserError when the record's workload is not one attnprof can describe."""
        env = record.environment
        peak = None
        # a peak measured on a busy machine is recorded but no percentage is taken of it
        if env.sound_peak is not None and env.sound_peak > 0:
            how = f"({env.peak_source})" if env.peak_source else "(measured by the harness)"
            peak = Peak(tflops=float(env.sound_peak), source=f"run.json peak_tflops {how}")
        return cls(
            run_dir=str(run_dir),
            record=record,
            workload=Workload.from_record(record.workload),
            device=record.workload.device,
            device_name=env.device_name,
            peak=peak,
            variants=tuple(
                VariantFacts(
                    label=res.label,
                    trace=res.trace,
                    lean_trace=res.lean_trace,
                    materialises=res.materialises,
                    flops_executed=res.flops_executed or None,
                    block_sparsity=res.block_sparsity,
                )
                for res in record.results
            ),
        )

    @classmethod
    def load(cls, run_dir: str | Path) -> RunContext:
        """Decode <run_dir>/run.json. UserError when it is missing, unreadable or not a run record."""
        run_json = Path(run_dir) / "run.json"
        try:
            record = decode_run(run_json.read_bytes(), source=str(run_json))
        except OSError as exc:
            raise UserError(f"{run_json}: cannot read it ({exc.strerror or exc})") from None
        except msgspec.DecodeError as exc:  # ValidationError included
            raise UserError(f"{run_json}: not a valid attnprof run record ({exc})") from None
        return cls.from_record(record, run_json.parent)

    @classmethod
    def beside_trace(cls, path: str | os.PathLike[str]) -> RunContext | None:
        """The context of the run a trace belongs to when the trace is <run>/traces/<file>;
        None for a bare trace, or when run.json there cannot be read (analysing a trace must not
        fail because of a neighbouring file)."""
        p = Path(path)
        if p.parent.name != "traces" or not (p.parent.parent / "run.json").is_file():
            return None
        try:
            return cls.load(p.parent.parent)
        except (UserError, TypeError, ValueError):
            return None
