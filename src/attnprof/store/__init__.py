"""The results store: SQLite (WAL), versioned schema, one transaction per job result."""

from __future__ import annotations

from attnprof.store.schema import SCHEMA_VERSION, STATUSES, check_statuses
from attnprof.store.sqlite import (
    DEFAULT_STORE,
    Filters,
    ResultRow,
    Store,
    StoredResult,
    is_store_file,
    now_iso,
)

__all__ = [
    "DEFAULT_STORE",
    "SCHEMA_VERSION",
    "STATUSES",
    "Filters",
    "ResultRow",
    "Store",
    "StoredResult",
    "check_statuses",
    "is_store_file",
    "now_iso",
]
