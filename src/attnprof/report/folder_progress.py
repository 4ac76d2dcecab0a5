"""Progress of a folder's analysis, on stderr (`attnprof analyze DIR`): ranks done.

On a terminal: a rich bar of the traces analysed (those answered from their kept summaries are
counted done from the start), gone once every trace is in. On a pipe or a file: one line per
stage (analysing N traces, where; analysed; the ranks put side by side), so that a log shows
where the time went without a bar's control characters. A folder of fewer than MIN_TRACES
traces shows nothing. Fed by
attnprof.analysis.ranks.folder.analyze_folder's `progress` (its FolderProgress protocol).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["MIN_TRACES", "FolderProgressView"]

MIN_TRACES = 8  # a smaller folder is done in a second or two: no progress shown

_WHERE = {"local": "in a local pool of {n} process(es)", "ray": "in Ray tasks"}


class FolderProgressView:
    def __init__(self, folder: str, *, stream: IO[str] | None = None, no_color: bool = False) -> None:
        self.folder = folder
        self.out = stream or sys.stderr
        self.no_color = no_color
        self.t0 = time.perf_counter()
        self.t_reduce: float | None = None
        self.total = self.cached = self.done = 0
        self.bar: Any = None
        self.task: Any = None
        self.quiet = False

    def _line(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.out, flush=True)

    def start(self, *, traces: int, cached: int, executor: str, workers: int) -> None:
        self.total, self.cached, self.done = traces, cached, cached
        self.quiet = traces < MIN_TRACES
        todo = traces - cached
        where = _WHERE[executor].format(n=workers)
        kept = f", {cached} from their kept summaries" if cached else ""
        if self.quiet:
            return
        if not todo:
            self._line(f"analysing {self.folder}: all {traces} trace(s) from their kept summaries")
        elif self.out.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            from attnprof.report.console import make_console

            self.bar = Progress(
                TextColumn("ranks of {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(f"traces ({where}{kept})"),
                TimeElapsedColumn(),
                console=make_console(file=self.out, no_color=self.no_color, force_terminal=True),
                transient=True,
            )
            self.bar.start()
            # the folder's own name: a long path would squeeze the bar out of the line
            name = Path(self.folder).name or self.folder
            self.task = self.bar.add_task(name, total=traces, completed=cached)
            self.bar.refresh()  # drawn now, not at the refresh thread's next tick
        else:
            self._line(f"analysing {self.folder}: {traces} trace(s){kept}; {todo} to read {where}")

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)

    def reducing(self) -> None:
        self.t_reduce = time.perf_counter()
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        read = self.done - self.cached
        self._line(
            f"analysed {self.folder}: {self.done} of {self.total} trace(s) ({read} read) in "
            f"{self.t_reduce - self.t0:.1f} s; putting the ranks side by side"
        )

    def finished(self) -> None:
        """The folder is done (its line), or failed (the bar is taken down either way)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        if self.t_reduce is not None:
            self._line(f"ranks of {self.folder} side by side in {time.perf_counter() - self.t_reduce:.1f} s")
