"""How a run measures: one RunOptions for `attnprof run`, its resume, and each sweep job.

A msgspec Struct, so the sweep reads it from its TOML `[run]` table and sends it to a worker as it
is (no copy of its fields under another name), and run.json's resume state keeps it. Not frozen:
a sweep's flags are set on the [run] table its TOML gave. Importing it imports no torch.
"""

from __future__ import annotations

import msgspec

__all__ = ["RunOptions", "default_time_budget"]


def default_time_budget(device: str) -> float:
    """Seconds of clean timing per variant when none is given: 1 s on CUDA, 0.5 s on a CPU (the
    default suite on a 2-core machine in well under a minute). `attnprof run` and `attnprof.run()`
    both read it, so the command and the library time alike."""
    return 1.0 if device.startswith("cuda") else 0.5


class RunOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    steps: tuple[int, int, int] = (1, 1, 3)
    profile: bool = True
    warmup_calls: int = 3
    time_budget_s: float = 1.0  # a sweep job's; run's default is default_time_budget(device)
    warmup_s: float = 0.1  # warm-up by time before clean timing (after the warm-up calls)
    min_samples: int = 10
    force: bool = False  # run a variant whose memory estimate is over the limit
    check_accuracy: bool = True
    # `attnprof run`: add the compiled twins of the built-ins it resolves. A sweep's jobs carry
    # their own compile flag (the grid's `compile` axis), so a sweep's [run] table refuses it.
    compile: bool = False
    measure_peak: bool = True
    # also write each profiled trace here in tensorboard_trace_handler's layout (worker = variant)
    tensorboard_dir: str | None = None
    # a user variant (file.py:function, module:function) first runs alone in a child process
    # (harness/isolate.py), so that its os._exit, segfault or hang cannot end the run
    isolate_user: bool = True
    variant_timeout_s: float = 0.0  # that trial's limit in seconds (0: none); `run --timeout`
