"""`attnprof analyze DIR`: folders of per-rank traces and the cross-rank view.

Synthetic per-rank traces are written in the test (tensorboard_trace_handler's names), with
figures chosen so that every number of the view can be worked out by hand; the two real ranks
of a shared trace folder are read through links (never copied).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import trace
from attnprof.analysis import analyze
from attnprof.analysis.ranks.folder import analyze_folder, find_runs
from attnprof.errors import UserError
from attnprof.report.i18n import Translator, load_catalog
from attnprof.report.ranks_report import slowest_line
from attnprof.units import number_locale

ATTNPROF = [sys.executable, "-c", "from attnprof.cli import main; main()"]
GEMM = "ampere_sgemm_128x64_nn"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)"
SAMPLED = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-"


def _write(
    path: Path,
    steps: list[tuple[float, float]],
    kernels: list[tuple[str, float, float, int]],
    rank: int | None,
) -> None:
    events: list[dict[str, object]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i + 1}",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": d,
        }
        for i, (ts, d) in enumerate(steps)
    ]
    events += [
        {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": stream, "ts": ts, "dur": d, "args": {}}
        for n, ts, d, stream in kernels
    ]
    doc: dict[str, object] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 3}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """run_a: ranks 0, 1 (two files, slower steps, more NCCL), 2 (rank from the name); run_b: one rank."""
    a = tmp_path / "job" / "run_a"
    # rank 0: two 100 us steps; GEMM and NCCL overlap on two streams: busy 60 + 20 of a 120 us window
    _write(
        a / "host0_11.1700000000001.pt.trace.json",
        [(0, 100), (100, 100)],
        [(GEMM, 0, 40, 7), (NCCL, 20, 40, 13), (FLASH, 100, 20, 7)],
        rank=0,
    )
    # rank 1: one 150 us step per file, two files (two profiling cycles)
    for stamp in ("1700000000002", "1700000000003"):
        _write(
            a / f"host1_12.{stamp}.pt.trace.json.gz",
            [(0, 150)],
            [(GEMM, 0, 40, 7), (NCCL, 50, 100, 13), (FLASH, 160, 20, 7)],
            rank=1,
        )
    for p in a.glob("*.gz"):  # really gzip, as the handler writes with use_gzip=True
        p.write_bytes(gzip.compress(p.read_bytes()))
    # rank 2: no distributedInfo; the rank is read from the worker name
    _write(a / "node_rank-2.1700000000004.pt.trace.json", [(0, 100)], [(GEMM, 0, 50, 7)], rank=None)
    _write(tmp_path / "job" / "run_b" / "w.1700000000005.pt.trace.json", [(0, 10)], [(GEMM, 0, 5, 7)], rank=0)
    (tmp_path / "job" / "notes.txt").write_text("not a trace")
    return tmp_path / "job"


def test_runs_are_grouped_by_folder(folder: Path) -> None:
    runs = find_runs(folder)
    assert [p.name for p in runs] == ["run_a", "run_b"]
    assert len(runs[folder / "run_a"]) == 4


def test_cross_rank_view_worked_out_by_hand(folder: Path) -> None:
    run_a, run_b = analyze_folder(folder, workers=1)
    view = run_a.cross_rank
    ranks = {r.rank: r for r in view.ranks}
    assert list(ranks) == ["0", "1", "2"]
    r0, r1, r2 = ranks["0"], ranks["1"], ranks["2"]
    assert (r0.steps, r0.step_time_us) == (2, 100.0)
    assert (r0.window_us, r0.busy_us, r0.idle_us, r0.gpu_time_us) == (120.0, 80.0, 40.0, 100.0)
    assert (r0.comm_pct, r0.attention_pct) == (40.0, 20.0)
    assert len(r1.files) == 2 and (r1.steps, r1.step_time_us) == (2, 150.0)  # two files added up
    assert (r1.window_us, r1.busy_us, r1.idle_us, r1.gpu_time_us) == (360.0, 320.0, 40.0, 320.0)
    assert (r1.comm_pct, r1.attention_pct) == (62.5, 12.5)
    assert (r2.comm_pct, r2.attention_pct, r2.idle_us) == (0.0, 0.0, 0.0)
    s = view.slowest
    assert s is not None and s.basis == "step_time"
    assert (s.rank, s.value_us, s.median_us, s.pct_over_median) == ("1", 150.0, 100.0, 50.0)
    assert (s.fastest_us, s.pct_over_fastest) == (100.0, 50.0)
    nccl = next(f for f in view.families if f.family == "NCCL")
    assert nccl.per_rank_us == {"0": 40.0, "1": 200.0, "2": 0.0}
    assert (nccl.max_rank, nccl.spread_pct) == ("1", 250.0)  # (200 - 0) / 80
    gemm = next(f for f in view.families if f.family == "cuBLAS sgemm")
    assert gemm.per_rank_us == {"0": 40.0, "1": 80.0, "2": 50.0}
    assert len(run_a.traces) == 4 and all(t.schema == "attnprof.analysis/1" for t in run_a.traces)
    # one rank: nothing to compare, and the view says so instead of naming a slowest rank
    assert run_b.cross_rank.slowest is None and "one rank" in (run_b.cross_rank.note or "")


def test_without_steps_ranks_are_compared_by_the_device_window(tmp_path: Path) -> None:
    _write(tmp_path / "a.1.pt.trace.json", [], [(GEMM, 0, 10, 7)], rank=0)
    _write(tmp_path / "b.2.pt.trace.json", [], [(GEMM, 0, 30, 7)], rank=1)
    (run,) = analyze_folder(tmp_path, workers=1)
    s = run.cross_rank.slowest
    assert s is not None and (s.basis, s.rank, s.pct_over_fastest) == ("gpu_window", "1", 200.0)
    assert "active window" in (run.cross_rank.note or "")


def test_parallel_processes_give_the_same_result_as_one(folder: Path) -> None:
    serial = [r.to_dict() for r in analyze_folder(folder, workers=1)]
    parallel = [r.to_dict() for r in analyze_folder(folder, workers=2)]
    assert serial == parallel


def test_real_two_rank_folder_agrees_with_each_trace_analysis(tmp_path: Path) -> None:
    for r in (0, 1):
        src = trace(f"{SAMPLED}{r}")
        os.symlink(src, tmp_path / src.name)  # a link, not a copy of the shared trace
    (run,) = analyze_folder(tmp_path, workers=1)
    ranks = {r.rank: r for r in run.cross_rank.ranks}
    assert list(ranks) == ["0", "1"]  # from distributedInfo
    for r in ("0", "1"):
        alone = analyze(trace(f"{SAMPLED}{r}")).to_dict()
        comm = next(c for c in alone["categories"] if c["category"] == "communication")
        assert ranks[r].comm_pct == comm["pct_time"]  # same GPU-op time basis as the categories
        assert ranks[r].steps == alone["regions"][0]["instances"]
        assert 0 < ranks[r].busy_us <= ranks[r].window_us


def test_cli_prints_the_view_and_json(folder: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    p = subprocess.run(
        [*ATTNPROF, "analyze", str(folder)], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, p.stderr
    assert max(len(line) for line in p.stdout.splitlines()) <= 100
    assert "slowest rank: 1, mean step time 150 µs: +50.0% over the median" in p.stdout
    assert "NCCL" in p.stdout and "one rank: nothing to compare" in p.stdout
    p = subprocess.run(
        [*ATTNPROF, "analyze", "--json", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "attnprof.folder/1" and len(d["runs"]) == 2
    view = d["runs"][0]["cross_rank"]
    assert view["slowest"]["rank"] == "1" and [r["rank"] for r in view["ranks"]] == ["0", "1", "2"]
    # a folder and a file together: one item per argument, in order
    one = next((folder / "run_b").iterdir())
    p = subprocess.run(
        [*ATTNPROF, "analyze", "--json", str(one), str(folder)], capture_output=True, timeout=120
    )
    items = json.loads(p.stdout)
    assert [i["schema"] for i in items] == ["attnprof.analysis/1", "attnprof.folder/1"]


def _folder_view(folder: Path, *flags: str) -> str:
    """`attnprof analyze FOLDER` as a pipe prints it (100 columns)."""
    env = {**os.environ, "COLUMNS": "100"}
    p = subprocess.run(
        [*ATTNPROF, "analyze", *flags, str(folder)], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def _squeezed(text: str) -> str:
    """Without whitespace: a sentence the view wrapped at 100 columns still matches."""
    return "".join(text.split())


def _english_clauses(view: str, folder: Path) -> list[str]:
    """The clauses of the English view's prose lines (not its tables, which start with a space),
    of three words or more, the folder's name left out."""
    prose = [line.replace(str(folder), "") for line in view.splitlines() if line and not line[0].isspace()]
    clauses = [c.strip() for line in prose for c in re.split(r"[.;:,()]\s*", line)]
    return [c for c in clauses if len(re.findall(r"[A-Za-z]{2,}", c)) >= 3]


def _headers(view: str) -> set[str]:
    """The headers of the view's tables: the line above each rule."""
    lines = view.splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip().startswith("─")]
    return {h for i in rules for h in re.split(r"\s{2,}", lines[i - 1].strip()) if len(h) > 1}


@pytest.mark.parametrize("lang", ["id", "th"])
def test_a_folder_s_terminal_view_speaks_the_readers_language(tmp_path: Path, lang: str) -> None:
    """Issue 30: `analyze DIR --lang id|th` was refused (the folder's terminal view was English
    only). Two real ranks of a shared folder (links): the view in the catalog's words, the ones
    the folder's --html page and --md file say, its numbers in the reader's locale, and none of
    the English view's sentences or headers left; English unchanged."""
    for r in (0, 1):
        src = trace(f"{SAMPLED}{r}")
        os.symlink(src, tmp_path / src.name)
    en = _folder_view(tmp_path)
    assert _folder_view(tmp_path, "--lang", "en") == en
    assert "slowest rank: 1, mean step time 619 ms: +0.3% over the median (617 ms)" in " ".join(en.split())
    assert "busy: union of GPU op intervals;" in en and "Collectives across ranks" in en

    text = _folder_view(tmp_path, "--lang", lang)
    cat, flat = load_catalog(lang), _squeezed(text)
    sentences = (
        "ranks.h.ranks",
        "ranks.legend",
        "ranks.h.families",
        "ranks.spread_legend",
        "coll.h.collectives",
    )
    for key in (*sentences, "coll.legend"):
        assert _squeezed(cat[key]) in flat, key
    for key in (
        "ranks.col.rank",
        "ranks.col.steps",
        "ranks.col.step",
        "ranks.col.family",
        "ranks.col.max_on",
    ):
        assert cat[key] in text, key
    (run,) = analyze_folder(tmp_path, workers=1)
    with number_locale(lang):
        summary = Translator(lang)("ranks.summary", folder=str(tmp_path), files=2, ranks=2)
        slowest = slowest_line(run, Translator(lang))  # the page's sentence, figures and all
    assert text.startswith(summary + "\n") and _squeezed(slowest) in flat
    if lang == "id":  # CLDR: a decimal comma
        assert "+0,3%" in slowest and "55,2" in text and "1,22 s" in text and "55.2" not in text
    else:
        assert "+0.3%" in slowest and "55.2" in text
    clauses = _english_clauses(en, tmp_path)
    left = [c for c in clauses if _squeezed(c) in flat]
    assert len(clauses) > 20 and not left, left
    assert _headers(text) and not _headers(en) & _headers(text)
    assert "trace(s)" not in text and "rank(s)" not in text and "left out to fit" not in text


def test_a_folder_s_notes_speak_the_readers_language(folder: Path) -> None:
    """What the view cannot compare (one rank) in the catalog's words; JSON stays English."""
    text = _folder_view(folder, "--lang", "th")
    assert load_catalog("th")["ranks.note.one_rank"] in text and "one rank: nothing to compare" not in text
    (_, run_b) = analyze_folder(folder, workers=1)
    assert (
        run_b.cross_rank.note == load_catalog("en")["ranks.note.one_rank"] == "one rank: nothing to compare"
    )


def test_a_folder_without_traces_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(UserError, match="no trace files"):
        find_runs(tmp_path)
    p = subprocess.run([*ATTNPROF, "analyze", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("lang", ["en", "th"])
def test_html_page_shows_the_same_view(folder: Path, tmp_path: Path, lang: str) -> None:
    out = tmp_path / "ranks.html"
    p = subprocess.run(
        [*ATTNPROF, "analyze", "--html", str(out), "--lang", lang, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    assert f'<html lang="{lang}">' in page and "<script" not in page and "http" not in page
    assert "+50.0%" in page and "150 µs" in page and "NCCL" in page and "250.0" in page
    assert page.count('<tr class="slower">') == 1  # rank 1, the slowest of run_a
    assert "host1_12.1700000000002.pt.trace.json.gz" in page
    if lang == "th":
        assert "ช้าที่สุด" in page


def test_html_needs_a_folder(tmp_path: Path) -> None:
    f = tmp_path / "one.json"
    _write(f, [(0, 10)], [(GEMM, 0, 5, 7)], rank=0)
    p = subprocess.run(
        [*ATTNPROF, "analyze", "--html", str(tmp_path / "x.html"), str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "give a folder" in p.stderr and not (tmp_path / "x.html").exists()


def test_a_run_directory_s_traces_are_not_ranks(cpu_run: tuple[Path, object]) -> None:
    """`attnprof analyze RUN/traces` (one trace per variant, and its lean twin) is not a rank
    folder: called ranks, the slowest variant became a "straggler". One line says what to run."""
    run_dir = cpu_run[0]
    for folder in (run_dir / "traces", run_dir):
        with pytest.raises(UserError, match=r"traces of an attnprof run .*attnprof compare"):
            find_runs(folder)
    p = subprocess.run(
        [sys.executable, "-c", "from attnprof.cli import main; main()", "analyze", str(run_dir / "traces")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
