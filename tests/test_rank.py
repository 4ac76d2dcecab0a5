"""compare/rank.py is the one rule for ties, intervals and which timing ranks: a variant is tied
with the fastest only if nothing beats it beyond noise, a 95% interval needs enough samples, and
run's terminal table ranks (and warns) as compare and report do."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from attnprof.compare.compare import Row, compare
from attnprof.compare.rank import MIN_INTERVAL_SAMPLES, fastest, speed
from attnprof.harness.run import RunOptions, run
from attnprof.records import MachineLoad, decode_run
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.run_view import render_run
from attnprof.report.summary import summarize
from attnprof.report.tables import comparison_table
from attnprof.workload import Workload


def _row(label: str, samples: list[float]) -> Row:
    """A run row as compare builds it, with samples taken apart (not paired by round)."""
    ordered = sorted(samples)
    return Row(label=label, kind="run", source="r", median_ms=ordered[len(ordered) // 2], samples_ms=samples)


def test_a_variant_beaten_by_another_is_not_tied_for_fastest() -> None:
    """noisy is the fastest by median but so noisy that neither steady variant is beyond noise
    from it; steady is faster than slow beyond noise, so slow is not 'tied for fastest'."""
    noisy = _row("noisy", [0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4])
    steady = _row("steady", [1.0 + i * 0.0001 for i in range(11)])
    slow = _row("slow", [1.1 + i * 0.0001 for i in range(11)])
    rows = [noisy, steady, slow]
    for r in rows:
        assert speed(r, noisy) is not None
    s = speed(slow, noisy)
    assert s is not None and s.claim == "tie"  # against the fastest alone it would be tied
    beaten = speed(steady, slow)
    assert beaten is not None and beaten.claim == "faster"
    top = fastest(rows)
    assert top is not None and top.fastest is noisy
    assert [r.label for r in top.tied] == ["steady"]  # slow is beaten by steady: not tied
    # and with nothing beating it, slow is tied again
    top = fastest([noisy, slow])
    assert top is not None and [r.label for r in top.tied] == ["slow"]


def test_too_few_samples_give_a_range_never_a_95_interval() -> None:
    a = _row("a", [1.0, 1.1, 1.2])
    b = _row("b", [2.0, 2.1, 2.3])
    a.paired_rounds = b.paired_rounds = True  # one run's rounds: paired, per-round ratios
    sp = speed(a, b)
    assert sp is not None and sp.claim == "too_few" and sp.low is None and sp.high is None
    assert sp.n == 3 < MIN_INTERVAL_SAMPLES
    assert sp.range_low == pytest.approx(min(2.0 / 1.0, 2.1 / 1.1, 2.3 / 1.2))
    assert sp.range_high == pytest.approx(max(2.0 / 1.0, 2.1 / 1.1, 2.3 / 1.2))
    enough = speed(
        _row("a", [1.0 + i * 0.01 for i in range(6)]), _row("b", [2.0 + i * 0.01 for i in range(6)])
    )
    assert enough is not None and enough.claim == "faster" and enough.low is not None


@pytest.fixture(scope="module")
def three_rounds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rank") / "r"
    opts = RunOptions(profile=False, time_budget_s=0.0, min_samples=3, warmup_s=0.0)
    run(Workload(batch=1, heads=2, seq=64, head_dim=16), ["naive-inplace", "sdpa"], out=out, options=opts)
    return out


def test_a_three_round_run_makes_no_95_claim_in_any_language(three_rounds: Path) -> None:
    comp = compare([three_rounds], analyse=False)
    sdpa = comp.row("sdpa")
    assert len(sdpa.samples_ms) == 3
    assert sdpa.speedup_claim == "too_few" and sdpa.speedup_low is None
    assert sdpa.speedup_range_low is not None and sdpa.speedup_range_high is not None
    data = build_report_data(three_rounds, expect=None)
    en = summarize(data, Translator("en"))
    assert "Too few samples to tell whether naive-inplace is slower than sdpa." in en
    line = next(x for x in en if "apart" in x)
    assert "too few to tell" in line and "95% interval needs 6" in line and "faster" not in line
    for lang in ("en", "id", "th"):
        cells = [row[4] for row in comparison_table(data, Translator(lang)).rows]
        assert not any("95" in str(c) for c in cells)
    en_cells = [str(row[4]) for row in comparison_table(data, Translator("en")).rows]
    assert any("too few samples to tell (range " in c for c in en_cells), en_cells


def test_run_table_of_an_unreliable_run_says_so_first(
    three_rounds: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record of a run timed on a busy machine (its load verdict set, as the harness writes
    it): run's terminal output opens with the reason, above the table."""
    record = decode_run((three_rounds / "run.json").read_bytes(), source="run.json")
    load = MachineLoad(
        wall_s=1.0,
        cpus=2,
        own_cpu_share=0.5,
        other_cpu_share=0.9,
        steal_share=None,
        loadavg_1m=8.0,
        max_spread=1.19,
        unreliable=True,
        reasons=["other processes used 90% of the 2 CPUs while timing"],
    )
    results = [
        msgspec.structs.replace(r, timing=msgspec.structs.replace(r.timing, load=load)) if r.timing else r
        for r in record.results
    ]
    busy = three_rounds.parent / "busy"
    busy.mkdir(exist_ok=True)
    record = msgspec.structs.replace(record, results=results)
    (busy / "run.json").write_bytes(msgspec.json.encode(record))
    capsys.readouterr()
    render_run(record, busy, no_color=True)
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.strip()]
    assert lines[0].startswith("unreliable: other processes used 90%")
    # the ranking follows rank.py: 3 rounds are too few for a tie or a win beyond 'fastest'
    assert "fastest" in out and "?" in out and "too few samples to tell" in out
