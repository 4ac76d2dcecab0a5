"""Measuring a prepared call: its profile into a run's traces/ and tables/ (or a temporary
folder), and its peak memory. Shared by a variant's preparation (harness/prepare.py) and the
model harness (models/)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from attnprof.records import MemoryResult

if TYPE_CHECKING:
    from attnprof.harness.profile import ProfileOutcome

__all__ = ["ProfileSettings", "Profiled", "peak_memory", "profile_into", "safe_name"]


def safe_name(name: str) -> str:
    """`name` as a file name's part (trace and table files, tensorboard workers)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)


@dataclass
class Profiled:
    """A profiled call: what the profiler showed, and where its trace is (under `out`, or in a
    temporary folder that lives as long as profile_into's context)."""

    outcome: ProfileOutcome
    trace_path: Path
    trace: str | None  # the trace and the table relative to `out`; None without `out`
    table: str | None
    lean_trace: str | None = None  # the lean pass's trace relative to `out`; None when not kept


class ProfileSettings(Protocol):
    """What profile_into reads of a run's options (RunOptions, the model's ModelOptions)."""

    @property
    def steps(self) -> tuple[int, int, int]: ...
    @property
    def tensorboard_dir(self) -> str | None: ...


@contextmanager
def profile_into(
    call: Callable[[], Any],
    opts: ProfileSettings,
    *,
    out: Path | None,
    tag: str,
    device: str,
    annotation: str | None = None,
    backward: Callable[[Any], Any] | None = None,
) -> Iterator[Profiled]:
    """Profile `call` (harness/profile.py) for opts.steps into <out>/traces/<tag>.json.gz (the
    rich pass), <out>/traces/<tag>.lean.json.gz (the lean pass) and <out>/tables/<tag>.txt, or
    into a temporary folder without `out`."""
    from attnprof.harness import profile

    with tempfile.TemporaryDirectory() as tmp:
        base = out if out is not None else Path(tmp)
        trace_path = base / "traces" / f"{tag}.json.gz"
        table_path = base / "tables" / f"{tag}.txt"
        prof = profile.profile_call(
            call,
            device=device,
            steps=opts.steps,
            trace_path=trace_path,
            table_path=table_path,
            tensorboard_dir=Path(opts.tensorboard_dir) if opts.tensorboard_dir else None,
            worker_name=tag,
            backward=backward,
            **({"annotation": annotation} if annotation else {}),
        )
        yield Profiled(
            outcome=prof,
            trace_path=trace_path,
            trace=str(trace_path.relative_to(out)) if out is not None else None,
            table=str(table_path.relative_to(out)) if out is not None else None,
            lean_trace=(
                str(prof.lean_trace_path.relative_to(out))
                if out is not None and prof.lean_trace_path is not None
                else None
            ),
        )


def peak_memory(
    step: Callable[[], Any],
    prof: ProfileOutcome | None,
    *,
    device: str,
    estimate: int,
    cuda_method: str,
    region: str,
) -> MemoryResult:
    """Peak memory of `step` above what was allocated before it: on CUDA measured by running it
    once more (described by `cuda_method`); on CPU from the profiled steps' [memory] events
    inside `region`."""
    if device.startswith("cuda"):
        from attnprof.harness.memory import cuda_peak_bytes

        return MemoryResult(
            peak_bytes=cuda_peak_bytes(step, device), method=cuda_method, estimate_bytes=estimate
        )
    measured = prof is not None and prof.cpu_peak_bytes is not None
    return MemoryResult(
        peak_bytes=prof.cpu_peak_bytes if prof is not None else None,
        method=f"profiler [memory] events: rise of Total Allocated inside {region}"
        if measured
        else "not measured (profiling off)",
        estimate_bytes=estimate,
    )
