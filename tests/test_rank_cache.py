"""Per-trace summaries of a folder analysis (attnprof.analysis.ranks.rank_cache): a second look at a
folder reads the summaries, not the traces, until a file, an option or the code changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import trace
from attnprof.analysis.ranks import rank_cache
from attnprof.analysis.ranks.folder import analyze_folder
from attnprof.errors import UserError

SAMPLED = "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("ATTNPROF_CACHE", str(d))
    return d


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    f = tmp_path / "ranks"
    f.mkdir()
    for r in (0, 1):
        shutil.copy(trace(f"{SAMPLED}{r}"), f / f"rank-{r}.1.pt.trace.json.gz")
    return f


def _spoil_keeping_size_time_and_head(p: Path) -> None:
    """Garbage after the head, the same size and modification time: what only the cache can
    answer for (the trace itself would no longer decode)."""
    st = p.stat()
    data = bytearray(p.read_bytes())
    data[rank_cache.HEAD_BYTES :] = b"\0" * (len(data) - rank_cache.HEAD_BYTES)
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_second_look_reads_the_summaries_not_the_traces(cache: Path, folder: Path) -> None:
    first = [r.to_dict() for r in analyze_folder(folder, workers=1)]
    assert len(list(cache.glob("*.msgpack"))) == 2  # one summary per trace
    for p in folder.iterdir():
        assert p.stat().st_size > rank_cache.HEAD_BYTES
        _spoil_keeping_size_time_and_head(p)
    assert [r.to_dict() for r in analyze_folder(folder, workers=1)] == first
    assert [r.to_dict() for r in analyze_folder(folder, workers=2)] == first  # the pool too


def test_a_changed_file_is_read_again(cache: Path, folder: Path) -> None:
    analyze_folder(folder, workers=1)
    p = next(folder.iterdir())
    _spoil_keeping_size_time_and_head(p)
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 1_000_000_000))
    with pytest.raises(UserError):  # it was read again, and it is garbage now
        analyze_folder(folder, workers=1)


def test_a_changed_head_is_read_again_whatever_the_time(cache: Path, folder: Path) -> None:
    analyze_folder(folder, workers=1)
    p = next(folder.iterdir())
    st = p.stat()
    p.write_bytes(b"\0" * st.st_size)  # same size, same time, another head
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(UserError):
        analyze_folder(folder, workers=1)


def test_another_region_or_top_misses_the_cache(cache: Path, folder: Path) -> None:
    analyze_folder(folder, workers=1)
    for p in folder.iterdir():
        _spoil_keeping_size_time_and_head(p)
    with pytest.raises(UserError):
        analyze_folder(folder, workers=1, top=3)
    with pytest.raises(UserError):
        analyze_folder(folder, workers=1, region="ProfilerStep")


def test_a_damaged_summary_is_ignored_and_rewritten(cache: Path, folder: Path) -> None:
    first = [r.to_dict() for r in analyze_folder(folder, workers=1)]
    for s in cache.glob("*.msgpack"):
        s.write_bytes(b"not msgpack")
    assert [r.to_dict() for r in analyze_folder(folder, workers=1)] == first
    for p in folder.iterdir():
        _spoil_keeping_size_time_and_head(p)
    assert [r.to_dict() for r in analyze_folder(folder, workers=1)] == first


def test_cache_off_writes_nothing(tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNPROF_CACHE", "off")
    assert rank_cache.cache_dir() is None
    analyze_folder(folder, workers=1)
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_changes_nothing_but_speed(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("ATTNPROF_CACHE", str(blocker / "cache"))
    a = [r.to_dict() for r in analyze_folder(folder, workers=1)]
    monkeypatch.setenv("ATTNPROF_CACHE", "off")
    assert a == [r.to_dict() for r in analyze_folder(folder, workers=1)]


def test_the_cli_second_run_uses_the_cache(cache: Path, folder: Path) -> None:
    env = dict(os.environ, ATTNPROF_CACHE=str(cache))
    cmd = [sys.executable, "-m", "attnprof", "analyze", "--json", str(folder)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    for p in folder.iterdir():
        _spoil_keeping_size_time_and_head(p)
    second = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_a_folder_read_before_starts_no_ray(cache: Path, folder: Path) -> None:
    # every summary is kept: the Ray executor has nothing to send, so it never connects (the
    # address is nowhere; touching Ray, or lacking it, would fail)
    first = [r.to_dict() for r in analyze_folder(folder, workers=1)]
    again = analyze_folder(folder, executor="ray", ray_address="ray://127.0.0.1:1")
    assert [r.to_dict() for r in again] == first


def test_ray_batches_are_about_two_per_cpu_and_keep_the_order() -> None:
    from attnprof.analysis.ranks.ray_folder import TASKS_PER_CPU, batches

    paths = [Path(f"rank-{i}.json") for i in range(64)]
    got = batches(paths, cpus=2)
    assert len(got) == 2 * TASKS_PER_CPU and [p for b in got for p in b] == paths
    assert batches(paths[:3], cpus=16) == [[p] for p in paths[:3]]  # never an empty task
