"""`attnprof model`'s request: the model, its options (the library's ModelOptions, with what the
command line was not given left at the library's default, so that `attnprof model` and
`run_model(model, ModelOptions())` run the same thing) and the run directory, checked before
any model is built (attnprof.models.plan.check_model: every error a run can raise for its input).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnprof.harness.prepare import Progress
    from attnprof.models.options import ModelOptions
    from attnprof.models.plan import Plan
    from attnprof.records import RunRecord

__all__ = ["ModelFlags", "ModelRequest", "model_options"]


@dataclass(frozen=True, kw_only=True)
class ModelFlags:
    """The flags of `attnprof model`, as the command got them (None: not given)."""

    model: str
    attn: list[str] | None = None
    phase: str | None = None
    backward: bool = False
    size: str | None = None
    batch: int | None = None
    seq: int | None = None
    dtype: str | None = None
    device: str = "auto"
    seed: int | None = None
    steps: str | None = None
    budget: float | None = None
    out: Path | None = None
    tensorboard: Path | None = None


def model_options(flags: ModelFlags, *, device: str) -> ModelOptions:
    """The command line's ModelOptions: what it was not given is the library's default."""
    from attnprof.api.flags import parse_steps, split_list
    from attnprof.models.options import ModelOptions

    lib = ModelOptions()
    return ModelOptions(
        implementations=split_list(flags.attn) or None,
        phase=flags.phase if flags.phase is not None else lib.phase,
        backward=flags.backward,
        size=flags.size,
        batch=flags.batch,
        seq=flags.seq,
        dtype=flags.dtype,
        device=device,
        seed=flags.seed if flags.seed is not None else lib.seed,
        steps=parse_steps(flags.steps) if flags.steps is not None else lib.steps,
        time_budget_s=flags.budget if flags.budget is not None else lib.time_budget_s,
    )


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """A model run, checked (build it with from_flags)."""

    model: str
    options: ModelOptions
    plan: Plan  # what will run, resolved by check_model
    out: Path

    @classmethod
    def from_flags(cls, flags: ModelFlags) -> ModelRequest:
        from attnprof.api.flags import check_tensorboard_dir, positive
        from attnprof.device import resolve_device
        from attnprof.harness.run import default_out_dir
        from attnprof.models.load import require_transformers
        from attnprof.models.plan import check_model

        require_transformers()  # before anything else: the one-line install hint
        positive(flags.budget, "--time-budget", "0.3")
        opts = model_options(flags, device=resolve_device(flags.device))
        plan = check_model(flags.model, opts)  # bad input fails here, in one line, before any output
        out = flags.out if flags.out is not None else default_out_dir()
        if flags.tensorboard is not None:
            check_tensorboard_dir(flags.tensorboard)
            opts = dataclasses.replace(opts, tensorboard_dir=str(flags.tensorboard / out.name))
        return cls(model=flags.model, options=opts, plan=plan, out=out)

    @property
    def title(self) -> str:
        what = "train step" if self.options.backward else self.options.phase
        return f"{self.model} ({what}, {self.plan.workload.dtype} on {self.options.device})"

    @contextmanager
    def prepared(self) -> Iterator[Callable[[Progress | None], RunRecord]]:
        """The run directory made (or refused) before anything is shown, and the run to call
        inside it; a directory this made is removed again when the run fails before writing."""
        from attnprof.api.flags import removed_if_empty
        from attnprof.harness.run import prepare_out_dir
        from attnprof.models.harness import run_model

        existed = self.out.exists()
        out_dir = prepare_out_dir(self.out)
        with removed_if_empty(out_dir, existed=existed):
            yield lambda progress: run_model(self.model, self.options, out=out_dir, progress=progress)

    def execute(self, progress: Progress | None = None) -> RunRecord:
        """Run every implementation (see prepared); run.json is written however the run ends."""
        with self.prepared() as go:
            return go(progress)
