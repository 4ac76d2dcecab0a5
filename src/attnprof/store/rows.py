"""The store's records: what a sweep hands the store for a job (ResultRow), one stored row as
`results`, `recommend` and the reports read it (StoredResult), and the filters of `attnprof
results`; with the column list the store's SELECT reads. The SQL lives in store/sqlite.py."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec

from attnprof.records import (
    Environment,
    MachineLoad,
    ReasonCode,
    RunResult,
    TimingSummary,
    WorkloadRecord,
    variant_label,
)
from attnprof.store.schema import LEGACY_STATUSES

__all__ = ["ADDED_DEFAULTS", "COLUMNS", "Filters", "ResultRow", "StoredResult", "now_iso"]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class ResultRow(msgspec.Struct, kw_only=True):
    """What the sweep hands the store for one finished job."""

    job_key: str
    workload: WorkloadRecord
    variant: str
    mode: str
    result: RunResult
    environment: Environment | None = None
    pytorch_choice: str | None = None
    log_tail: str | None = None
    worker: str | None = None
    wall_s: float | None = None
    started_at: str
    finished_at: str
    sweep_id: int | None = None


# The workload's fields, each a column of the results table and a field of StoredResult: the row
# is flat (one export column per field), so it declares them again; tests check the two agree.
_WORKLOAD_FIELDS = tuple(f.name for f in msgspec.structs.fields(WorkloadRecord))


# columns added in schema 4, as SQL literals for older stores read without upgrading
ADDED_DEFAULTS = {"mask": "''", "backward": "0", "phase": "'prefill'"}


class StoredResult(msgspec.Struct, kw_only=True):
    """One row of the results table, as `attnprof results` and `attnprof recommend` read it."""

    job_key: str
    variant: str
    mode: str
    batch: int
    heads: int
    kv_heads: int
    seq: int
    kv_seq: int
    head_dim: int
    dtype: str
    device: str
    causal: bool
    seed: int
    mask: str
    backward: bool
    phase: str
    status: str
    reason: str | None
    backend: str | None
    pytorch_choice: str | None
    median_ms: float | None
    iqr_ms: float | None
    n_samples: int | None
    gpu_ops_per_forward: float | None
    cpu_ops_per_forward: float | None
    peak_bytes: int | None
    estimate_bytes: int | None
    max_abs_err: float | None
    accuracy_ok: bool | None
    tflops: float | None
    trace_path: str | None
    device_name: str | None
    torch_version: str | None
    host: str | None
    worker: str | None
    wall_s: float | None
    started_at: str
    finished_at: str
    sweep_id: int | None
    log_tail: str | None
    samples_ms: list[float] | None = None
    # the run result's reason_code (no column of its own: read from the stored result's JSON)
    reason_code: ReasonCode | None = None
    # how busy the machine was while this job timed (the result's timing.load, no column of its
    # own): None where not recorded (older results, no timing, an SQLite without JSON functions)
    load: MachineLoad | None = None
    # --backward jobs: forward + backward timed as one call (the result's timing_total, no column
    # of its own); `median_ms` and `samples_ms` stay the forward's. None for forward-only jobs
    timing_total: TimingSummary | None = None

    def __post_init__(self) -> None:
        self.status = LEGACY_STATUSES.get(self.status, self.status)
        # a store from before schema 5, read without upgrading, holds "ok" for an incorrect result
        if self.status == "ok" and self.accuracy_ok is False:
            self.status = "incorrect"

    def workload(self) -> WorkloadRecord:
        return WorkloadRecord(**{name: getattr(self, name) for name in _WORKLOAD_FIELDS})

    @staticmethod
    def flat_columns(samples: bool = False) -> list[str]:
        """The keys of flat(), in the struct's order: exports of different stores line up."""
        named = {"load": "timing_unreliable", "timing_total": "total_median_ms"}  # flat: one value each
        cols = [named.get(c, c) for c in StoredResult.__struct_fields__]
        return cols if samples else [c for c in cols if c != "samples_ms"]

    def flat(self, *, samples: bool = False) -> dict[str, Any]:
        """A flat dict for csv/parquet/json export (samples only where asked: they are long)."""
        out = msgspec.structs.asdict(self)
        out["reason_code"] = self.reason_code.code if self.reason_code else None  # flat: the code
        # flat: whether the machine was busy while timing (None: not recorded)
        out["timing_unreliable"] = self.load.unreliable if self.load else None
        out["total_median_ms"] = self.timing_total.median_ms if self.timing_total else None
        return {c: out[c] for c in self.flat_columns(samples)}

    @property
    def label(self) -> str:
        """The variant as the harness names it: `naive`, or `naive:compile` for its twin."""
        return variant_label(self.variant, self.mode)


class Filters(msgspec.Struct, kw_only=True):
    """Filters for `attnprof results`: each list means "any of"; empty means no filter."""

    variant: list[str] = []
    status: list[str] = []
    dtype: list[str] = []
    seq: list[int] = []
    head_dim: list[int] = []
    batch: list[int] = []
    heads: list[int] = []
    device: list[str] = []
    causal: bool | None = None
    sweep_id: int | None = None


COLUMNS = [
    f
    for f in StoredResult.__struct_fields__
    if f not in ("device_name", "torch_version", "host", "samples_ms", "reason_code", "load", "timing_total")
]
