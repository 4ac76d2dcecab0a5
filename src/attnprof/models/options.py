"""What `attnprof model` is asked to run: ModelOptions (the command's options, and run_model's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ModelOptions"]


@dataclass(frozen=True)
class ModelOptions:
    implementations: Sequence[str] | None = None  # None: every default implementation
    phase: str = "prefill"
    backward: bool = False
    size: str | None = None
    batch: int | None = None
    seq: int | None = None
    dtype: str | None = None
    device: str = "cpu"
    seed: int = 0
    # wait 0, warm-up 1, active 2: the call before profiling already warmed the model up, and a
    # model step is long enough that two active steps show its structure
    steps: tuple[int, int, int] = (0, 1, 2)
    warmup_calls: int = 1
    time_budget_s: float = 0.2  # clean timing per implementation (interleaved with the others)
    min_samples: int = 3
    profile: bool = True
    # also write each trace here as tensorboard_trace_handler does (worker = the implementation's tag)
    tensorboard_dir: str | None = None
