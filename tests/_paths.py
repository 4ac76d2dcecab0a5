"""Paths the tests share: the real traces live beside the repository, never inside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
EXPECTED_COUNTS = REPO.parent / "shared" / "checks" / "expected_counts.jsonl"


def trace(prefix: str) -> Path:
    """The one shared trace whose file name starts with prefix."""
    found = sorted(TRACES.glob(f"{prefix}*.json.gz"))
    if len(found) != 1:
        raise LookupError(f"{len(found)} traces in {TRACES} start with {prefix!r}")
    return found[0]
