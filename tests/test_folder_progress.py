"""Progress of a folder's analysis (report/folder_progress.py, fed by analyze_folder): on a pipe one
line per stage with the traces read and those answered from their summaries; nothing for a
small folder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from attnprof.analysis.ranks.folder import analyze_folder
from attnprof.report.folder_progress import MIN_TRACES, FolderProgressView

KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _folder(root: Path, ranks: int) -> Path:
    folder = root / f"r{ranks}"
    folder.mkdir()
    for r in range(ranks):
        events = [
            {"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": 13, "ts": 10.0 + r, "dur": 50.0 - r}
        ]
        (folder / f"rank-{r}.1.pt.trace.json").write_text(
            json.dumps({"traceEvents": events, "distributedInfo": {"rank": r}})
        )
    return folder


class _Counting(FolderProgressView):
    def __init__(self, folder: str, stream: io.StringIO) -> None:
        super().__init__(folder, stream=stream)
        self.advances: list[int] = []

    def advance(self, n: int) -> None:
        self.advances.append(n)
        super().advance(n)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_pipe_gets_one_line_per_stage(tmp_path: Path, workers: int) -> None:
    folder = _folder(tmp_path, MIN_TRACES)
    out = io.StringIO()
    view = _Counting(str(folder), out)
    analyze_folder(folder, workers=workers, progress=view)
    view.finished()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"analysing {folder}: {MIN_TRACES} trace(s); {MIN_TRACES} to read in ")
    assert "local pool of" in lines[0]
    assert lines[1].startswith(
        f"analysed {folder}: {MIN_TRACES} of {MIN_TRACES} trace(s) ({MIN_TRACES} read) in "
    )
    assert lines[2].startswith(f"ranks of {folder} side by side in ")
    assert sum(view.advances) == MIN_TRACES and view.done == MIN_TRACES


def test_summaries_kept_count_as_done_from_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNPROF_CACHE", str(tmp_path / "cache"))
    folder = _folder(tmp_path, MIN_TRACES)
    analyze_folder(folder, workers=1)
    out = io.StringIO()
    view = _Counting(str(folder), out)
    analyze_folder(folder, workers=1, progress=view)
    assert (
        out.getvalue().splitlines()[0]
        == f"analysing {folder}: all {MIN_TRACES} trace(s) from their kept summaries"
    )
    assert view.advances == [] and view.done == MIN_TRACES


def test_a_small_folder_shows_nothing(tmp_path: Path) -> None:
    folder = _folder(tmp_path, MIN_TRACES - 1)
    out = io.StringIO()
    view = FolderProgressView(str(folder), stream=out)
    analyze_folder(folder, workers=1, progress=view)
    view.finished()
    assert out.getvalue() == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_instead_of_the_first_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path, MIN_TRACES)
    out = _Tty()
    view = FolderProgressView(str(folder), stream=out, no_color=True)
    analyze_folder(folder, workers=1, progress=view)
    view.finished()
    text = out.getvalue()
    assert f"ranks of {folder.name}" in text and f"0/{MIN_TRACES}" in text  # the bar, drawn at its start
    assert "analysing" not in text  # the pipe's first line
    assert f"analysed {folder}: {MIN_TRACES} of {MIN_TRACES} trace(s)" in text and view.bar is None
