"""Ratio intervals and the loaded-machine check, on real runs: two identical kernels tie; a run
made while busy loops load every core is flagged unreliable and explains nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from attnprof.analysis.compare import compare
from attnprof.analysis.stats import ratio_interval
from attnprof.harness.run import RunOptions, run
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.workload import Workload


def test_ratio_interval_paired_and_unpaired() -> None:
    base = [1.0, 1.1, 0.9, 1.3, 1.0, 0.95, 1.2, 1.05]
    # paired: the same round-to-round load on both, twice as fast: the ratio is exact
    iv = ratio_interval(base, [x / 2 for x in base], paired=True)
    assert iv is not None and iv.low == pytest.approx(2.0) and iv.high == pytest.approx(2.0)
    assert iv.excludes_one
    # unpaired, the same spread: a wider interval around the same ratio
    un = ratio_interval(base, [x / 2 for x in reversed(base)], paired=False)
    assert un is not None and un.low < 2.0 < un.high and un.excludes_one
    # the same distribution twice, independent: a tie
    tie = ratio_interval(base, list(reversed(base)), paired=False)
    assert tie is not None and not tie.excludes_one
    assert ratio_interval([1.0, 2.0], base, paired=False) is None  # too few samples


@pytest.mark.skip(
    reason="sdpa and sdpa-flash are not identical calls: pinning costs a real 1-10% per call "
    "(measured intervals 0.985-0.992 at S=1024, 0.90-0.92 at S=256), so a tie is not guaranteed"
)
def test_identical_kernels_tie(tmp_path: Path) -> None:
    """sdpa (default dispatch) and sdpa-flash run the same CPU kernel: the interval of their
    ratio holds 1, so no report calls either faster. The shape is large enough for the kernel to
    dominate: at B1 H4 S256 D32 sdpa-flash measured 8-10% slower on an idle 2-core machine
    (interval 0.90-0.92), a real per-call cost of pinning the backend, not noise."""
    wl = Workload(batch=1, heads=8, seq=1024, head_dim=64)
    out = tmp_path / "r"
    run(
        wl,
        ["sdpa", "sdpa-flash"],
        out=out,
        options=RunOptions(profile=False, time_budget_s=0.6, min_samples=20),
    )
    comp = compare([out], baseline="sdpa", analyse=False)
    flash = comp.row("sdpa-flash")
    assert flash.speedup_low is not None and flash.speedup_high is not None
    assert flash.speedup_low <= 1.0 <= flash.speedup_high, (flash.speedup_low, flash.speedup_high)
    assert flash.tie
    data = build_report_data(out, expect=None, baseline="sdpa")
    en = summarize(data, Translator("en"))
    assert any(line.startswith("sdpa-flash and sdpa are tied in fp32") for line in en), en
    assert any(line.startswith("Fastest here, tied within noise: ") for line in en), en
    assert not any("faster than" in line for line in en), en


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """A busy loop per core, in subprocesses, for the length of the test."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_run_on_a_loaded_machine_is_flagged_unreliable(tmp_path: Path, busy_cores: None) -> None:
    wl = Workload(batch=1, heads=2, seq=128, head_dim=16)
    out = tmp_path / "r"
    record = run(
        wl,
        ["naive-inplace", "sdpa-math"],
        out=out,
        options=RunOptions(time_budget_s=0.3, min_samples=10),
    )
    load = record.results[0].timing.load  # type: ignore[union-attr]
    assert load is not None and load.unreliable
    assert load.other_cpu_share is not None and load.other_cpu_share > 0.25
    assert any(r.startswith("other processes used") for r in load.reasons)
    comp = compare([out])
    assert all(r.unreliable for r in comp.rows if r.ok)
    assert any(n.startswith("unreliable timing: other processes used") for n in comp.notes)
    data = build_report_data(out, expect=None)
    for lang, opening, because in (
        ("en", "This run's timing is unreliable: other processes used", " because "),
        ("id", "Pengukuran waktu run ini tidak dapat diandalkan: proses lain memakai", " karena "),
        ("th", "การจับเวลาของการรันนี้เชื่อถือไม่ได้: โปรเซสอื่นใช้", "เพราะ"),
    ):
        bullets = summarize(data, Translator(lang))
        assert bullets[0].startswith(opening), bullets[0]
        assert not any(because in b for b in bullets), bullets  # noise is not explained
