"""Sweeps: a grid of (configuration, variant) jobs run in isolated, reused workers, locally or on
Ray, each result stored in SQLite as it arrives so a killed sweep resumes where it stopped.

Importing this package imports no torch; the workers do.
"""

from __future__ import annotations

from attnprof.harness.options import RunOptions
from attnprof.sweep.grid import (
    GridSpec,
    JobSpec,
    RunSettings,
    SweepConfig,
    SweepSettings,
    expand,
    job_key,
    load_config,
)
from attnprof.sweep.run import SweepPlan, SweepSummary, make_executor, plan_sweep, run_sweep

__all__ = [
    "GridSpec",
    "JobSpec",
    "RunOptions",
    "RunSettings",
    "SweepConfig",
    "SweepPlan",
    "SweepSettings",
    "SweepSummary",
    "expand",
    "job_key",
    "load_config",
    "make_executor",
    "plan_sweep",
    "run_sweep",
]
