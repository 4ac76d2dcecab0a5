"""How each variant was measured where it differs from its run's default: the profiler schedule
(wait, warmup, active) and the least number of clean-timing rounds (a slow call is profiled with
0, 0, 1 and timed in 3 rounds: harness/prepare.py). compare decides which rows differ (Row.own_steps,
Row.own_min_rounds); this words it, once for the terminal, Markdown and HTML, so that no view
states the run's default for a variant measured otherwise."""

from __future__ import annotations

from collections.abc import Sequence

from attnprof.compare.records import Row
from attnprof.records import RunRecord
from attnprof.report.i18n import Translator

__all__ = ["rounds_value", "schedule_lines", "steps_value"]


def _steps(steps: Sequence[int]) -> str:
    return ", ".join(str(s) for s in steps)


def _by_value(rows: Sequence[Row], attr: str) -> dict[str, list[str]]:
    """Value as written -> the labels of the rows measured with it (rows at the default left out)."""
    out: dict[str, list[str]] = {}
    for r in rows:
        v = getattr(r, attr)
        if v is not None:
            out.setdefault(_steps(v) if attr == "own_steps" else str(v), []).append(r.label)
    return out


def steps_value(record: RunRecord, rows: Sequence[Row], t: Translator) -> str:
    """The environment's schedule entry: the run's default, and the variants profiled otherwise."""
    return _default_except(_steps(record.steps), _by_value(rows, "own_steps"), t)


def rounds_value(record: RunRecord, rows: Sequence[Row], t: Translator) -> str | None:
    """The environment's timing-rounds entry (None for a record from before it was kept)."""
    if record.min_rounds is None:
        return None
    return _default_except(str(record.min_rounds), _by_value(rows, "own_min_rounds"), t)


def _default_except(default: str, own: dict[str, list[str]], t: Translator) -> str:
    """The run's default, then each value some variants were measured with instead, and theirs."""
    if not own:
        return default
    return t(
        "measured.default_except",
        default=default,
        list="; ".join(f"{t.join(v)}: {k}" for k, v in own.items()),
    )


def schedule_lines(rows: Sequence[Row], t: Translator) -> list[str]:
    """One line per way of measuring that differs from its run's default, naming the variants."""
    steps: dict[tuple[str, str], list[str]] = {}
    rounds: dict[tuple[int, int], list[str]] = {}
    for r in rows:
        if r.own_steps is not None and r.run_steps is not None:
            steps.setdefault((_steps(r.own_steps), _steps(r.run_steps)), []).append(r.label)
        if r.own_min_rounds is not None and r.run_min_rounds is not None:
            rounds.setdefault((r.own_min_rounds, r.run_min_rounds), []).append(r.label)
    return [
        *(t("measured.steps", list=t.join(v), steps=k, default=d) for (k, d), v in steps.items()),
        *(t("measured.rounds", list=t.join(v), n=k, default=d) for (k, d), v in rounds.items()),
    ]
