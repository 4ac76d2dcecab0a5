"""Progress of loading one large trace, on stderr (`attnprof analyze BIG.json`).

On a terminal: a rich bar of the bytes read (against the raw JSON size) with the events decoded
so far, gone once the trace is loaded. On a pipe or a file: one line per stage (loading, loaded,
analysed), so that a log shows where the time went without a bar's control characters. Traces
under PROGRESS_MIN bytes show nothing: they load in about a second. Fed by the loader's
PROGRESS hook (attnprof.trace.load).
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

__all__ = ["PROGRESS_MIN", "LoadProgress"]

PROGRESS_MIN = 64 << 20


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"  # decimal, as rich's bar counts them


class LoadProgress:
    def __init__(
        self, name: str, raw_bytes: int, *, stream: IO[str] | None = None, no_color: bool = False
    ) -> None:
        self.name, self.raw = name, raw_bytes
        self.out = stream or sys.stderr
        self.t0 = time.perf_counter()
        self.t_loaded: float | None = None
        self.bar: Any = None
        self.task: Any = None
        if self.out.isatty():
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

            from attnprof.report.console import make_console

            self.bar = Progress(
                TextColumn("loading {task.description}"),
                BarColumn(),
                DownloadColumn(),
                TextColumn("{task.fields[events]:,} events"),
                TimeElapsedColumn(),
                console=make_console(stderr=True, no_color=no_color),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task(name, total=raw_bytes, events=0)
        else:
            print(f"loading {name}: {_mb(raw_bytes)} of JSON", file=self.out, flush=True)

    def __call__(self, nbytes: int, events: int, done: bool) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=nbytes, events=events)
        if done:
            self.t_loaded = time.perf_counter()
            if self.bar is not None:
                self.bar.stop()
            print(
                f"loaded {self.name}: {events:,} events, {_mb(nbytes)} in "
                f"{self.t_loaded - self.t0:.1f} s; analysing",
                file=self.out,
                flush=True,
            )

    def finished(self) -> None:
        """The analysis is done (its line), or failed (the bar is taken down either way)."""
        if self.bar is not None and self.t_loaded is None:
            self.bar.stop()
        if self.t_loaded is not None:
            print(
                f"analysed {self.name} in {time.perf_counter() - self.t_loaded:.1f} s",
                file=self.out,
                flush=True,
            )
