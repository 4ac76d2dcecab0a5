"""The cross-rank collectives in words and tables: the terminal, the Markdown file and the HTML
page, in en, id and th (report/collectives_report.py), on small synthetic rank folders built
here: every figure shown is one the record holds."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnprof.analysis.ranks.folder import FolderRun, analyze_folder
from attnprof.report.i18n import Translator

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
NELEMS = 1 << 22  # bf16: 8 MiB per all-reduce


def _folder(root: Path, *, straggler: int | None, sizes: bool = True) -> Path:
    """Four ranks, eight all-reduces of group "0" with their Seq; the straggler arrives 80 us
    after the others, the rest 5 us apart; the transfer takes 150 us once the last one joins."""
    folder = root / f"f{straggler}{sizes}"
    folder.mkdir()
    for r in range(4):
        events = []
        for s in range(8):
            base = 1000.0 * s
            late = straggler if straggler is not None else s % 4
            start = base + (80 if r == late else 5 * r)
            args: dict[str, object] = {"Collective name": "allreduce", "Process Group Name": "0", "Seq": s}
            if sizes:
                args.update(
                    {"In msg nelems": NELEMS, "Out msg nelems": NELEMS, "dtype": "BFloat16", "Group size": 4}
                )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": ALLREDUCE,
                    "pid": 0,
                    "tid": 13,
                    "ts": start,
                    "dur": base + 230 - start,
                    "args": args,
                }
            )
        doc = {"traceEvents": events, "distributedInfo": {"rank": r, "world_size": 4}}
        (folder / f"rank-{r}.1.pt.trace.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FolderRun]:
    root = tmp_path_factory.mktemp("coll_view")
    return {
        "straggler": analyze_folder(_folder(root, straggler=2), workers=1)[0],
        "turns": analyze_folder(_folder(root, straggler=None, sizes=False), workers=1)[0],
    }


# 8 MiB over the 150 us transfer: algbw 55.9 GB/s, busbw x 2 (4 - 1) / 4 = 83.9 GB/s
ALGBW, BUSBW = "55.9", "83.9"


def test_the_record_holds_the_figures_the_views_show(runs: dict[str, FolderRun]) -> None:
    view = runs["straggler"].cross_rank.collectives
    assert view is not None
    c = view.collectives[0]
    assert f"{c.algbw_gbps:.3g}" == ALGBW and f"{c.bus_bandwidth_gbps:.3g}" == BUSBW


def test_the_terminal_names_the_straggler_basis_and_bandwidth(runs: dict[str, FolderRun]) -> None:
    from attnprof.report.console import make_console
    from attnprof.report.ranks_view import render_folder

    buf = io.StringIO()
    render_folder(runs["straggler"], console=make_console(file=buf, width=100, no_color=True))
    out = " ".join(buf.getvalue().split())  # the terminal wraps sentences at 100 columns
    assert "Collectives across ranks" in out
    assert "by process group and sequence number" in out
    assert "Straggler: rank 2, last to arrive in 8 of the 8 collectives" in out and "chance alone: 25%" in out
    assert BUSBW in out and ALGBW in out  # the bandwidth table's whole row fits in 100 columns
    assert "not measured" not in out


def test_no_straggler_and_no_sizes_are_said_so(runs: dict[str, FolderRun]) -> None:
    from attnprof.report.console import make_console
    from attnprof.report.ranks_view import render_folder

    buf = io.StringIO()
    render_folder(runs["turns"], console=make_console(file=buf, width=100, no_color=True))
    out = " ".join(buf.getvalue().split())  # the terminal wraps sentences at 100 columns
    assert "No straggler" in out and "Straggler:" not in out
    assert "Bus bandwidth not measured for 8 of 8 collectives: the message size is not recorded" in out
    assert "Bus bandwidth by group and kind" not in out


@pytest.mark.parametrize(
    ("lang", "heading", "straggler"),
    [
        ("en", "Collectives across ranks", "Straggler: rank 2"),
        ("id", "Kolektif antar-proses", "Proses tertinggal: proses 2"),
        ("th", "คอลเลกทีฟข้ามแรงก์", "แรงก์ที่ล่าช้า: แรงก์ 2"),
    ],
)
def test_markdown_and_html_in_each_language(
    runs: dict[str, FolderRun], lang: str, heading: str, straggler: str
) -> None:
    from attnprof.report.ranks_report import render_ranks_html, render_ranks_markdown

    t = Translator(lang)
    md = render_ranks_markdown([runs["straggler"]], t, folder="f")
    page = render_ranks_html([runs["straggler"]], t, folder="f")
    for text in (md, page):
        assert heading in text and straggler in text and BUSBW in text
        assert t("coll.legend")[:30] in text
    assert f"### {heading}" in md and "| allreduce | 0 | 0 | 4 | 2 |" in md
    assert "<script" not in page


def test_the_cli_writes_markdown_of_a_folder_and_refuses_it_for_one_trace(tmp_path: Path) -> None:
    folder = _folder(tmp_path, straggler=1)
    out = tmp_path / "ranks.md"
    cmd = [sys.executable, "-m", "attnprof", "analyze"]
    p = subprocess.run([*cmd, "--md", str(out), "--lang", "id", str(folder)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "Proses tertinggal: proses 1" in out.read_text()
    one = folder / "rank-0.1.pt.trace.json"
    p = subprocess.run([*cmd, "--md", str(tmp_path / "x.md"), str(one)], capture_output=True, text=True)
    assert p.returncode == 2 and "--md writes the cross-rank view of a folder" in p.stderr
    assert not (tmp_path / "x.md").exists()
