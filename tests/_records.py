"""Hand-made records for tests that render or store them without running anything."""

from __future__ import annotations

from typing import Any

from attnprof.records import Environment


def environment(**overrides: Any) -> Environment:
    """An Environment with placeholder identity fields; pass the ones a test looks at."""
    fields: dict[str, Any] = {
        "attnprof_version": "0",
        "torch_version": "2.13.0",
        "python": "3.11",
        "platform": "linux",
        "host": "h",
        "device": "cpu",
        "device_name": "CPU",
        "cpu_model": "x86",
        "threads": 2,
    }
    fields.update(overrides)
    return Environment(**fields)
