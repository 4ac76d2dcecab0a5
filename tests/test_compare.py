"""attnprof compare: rows, baselines and kernel diffs on a live CPU run and on real GPU traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from _paths import trace
from attnprof.cli import main
from attnprof.compare.compare import Comparison, compare
from attnprof.compare.diff import diff_rows
from attnprof.errors import UserError
from attnprof.records import PeakProvenance, decode_run
from attnprof.units import fmt_bytes, fmt_count, fmt_interval, fmt_ms, fmt_ratio, short_name

A100_UNFUSED = "harryjmoss__particle_transformer"
H100_FLASH = "AMD-AGI__TraceLens__tests__traces__h100"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def comp(cpu_run: tuple[Path, object]) -> Comparison:
    return compare([cpu_run[0]], diff=True)


def comp_peak(comp: Comparison) -> PeakProvenance | None:
    """The peak provenance of the comparison's one run."""
    (src,) = comp.sources
    return decode_run((Path(src) / "run.json").read_bytes()).environment.peak_provenance


def test_rows_join_timing_and_trace_analysis(comp: Comparison) -> None:
    rows = {r.label: r for r in comp.rows}
    assert comp.baseline == "naive-inplace"
    assert rows["naive-inplace"].speedup == pytest.approx(1.0)
    naive, inplace = rows["naive"], rows["naive-inplace"]
    for r in (naive, inplace):
        assert r.ok and r.median_ms and r.median_ms > 0 and r.samples_ms
        assert r.forwards == 3  # schedule (1, 1, 3): three active steps
        assert r.gpu_ops_per_forward == 0 and r.memcpy_per_forward == 0
        assert r.timeline_lane == "cpu" and r.timeline
        assert r.cpu_category_time_us.get("gemm", 0) > 0
    # the out-of-place masked_fill clones the scores: 9 more aten ops (DOMAIN.md section 2)
    assert naive.cpu_ops_per_forward == 45 and inplace.cpu_ops_per_forward == 36
    assert "OUT_OF_PLACE_COPY" in naive.finding_codes
    assert "OUT_OF_PLACE_COPY" not in inplace.finding_codes
    flash = rows["sdpa-flash"]
    assert "FUSED_ATTENTION" in flash.finding_codes and flash.cpu_category_time_us.get("attention", 0) > 0
    # CUDA-only variants are rows with their reason, not silently dropped
    eff = rows["sdpa-efficient"]
    assert eff.status == "unsupported" and eff.reason and "CUDA" in eff.reason
    # throughput and % of peak both come from the clean timing, never one from the profiled trace
    prov = comp_peak(comp)
    if prov is not None and prov.busy:  # this machine was busy measuring its peak: no % of it
        assert all(r.tflops_useful and r.pct_of_peak is None for r in (naive, inplace, flash))
        return
    for r in (naive, inplace, flash):
        assert r.tflops_useful and r.pct_of_peak
        peak_tflops = r.tflops_useful / r.pct_of_peak
        assert peak_tflops == pytest.approx(inplace.tflops_useful / inplace.pct_of_peak)  # type: ignore[operator]


def test_cpu_diff_names_the_clone(comp: Comparison) -> None:
    rows = {r.label: r for r in comp.rows}
    d = diff_rows(rows["naive-inplace"], rows["naive"])
    assert d.lane == "cpu" and d.ops_b - d.ops_a == pytest.approx(9)
    kernels = {k.name: k for fam in d.families for k in fam.kernels}
    assert kernels["aten::clone"].change == "added"
    # out-of-place masked_fill is clone + masked_fill_: the in-place op is in both, as often. Its
    # change may still read "changed": at equal counts that follows its share of the traced time,
    # which a loaded machine moves by 10 points (the profiler inflates CPU ops unevenly)
    fill_ = kernels["aten::masked_fill_"]
    assert kernels["aten::masked_fill"].change == "added" and fill_.change in ("same", "changed")
    assert fill_.count_a == fill_.count_b > 0
    # one run and --diff: every variant against the baseline
    assert {(x.a, x.b) for x in comp.diffs} >= {("naive-inplace", "naive"), ("naive-inplace", "sdpa-math")}


def test_a_cpu_diff_of_timed_runs_is_in_clean_time(comp: Comparison) -> None:
    """Issue 9: a diff's times are each side's clean median split by its ops' traced shares, not
    the profiler's inflated times (a traced +7.9 ms stood beside a 0.5 ms clean gap); a diff
    of traces alone keeps the trace's times and says so."""
    rows = {r.label: r for r in comp.rows}
    a, b = rows["naive-inplace"], rows["naive"]
    d = diff_rows(a, b)
    assert d.basis == "clean"
    for row, total in ((a, d.time_a_us), (b, d.time_b_us)):
        assert row.median_ms and row.ops_time_us_per_forward
        traced_share = sum(o.time_us for o in row.ops) / row.ops_time_us_per_forward
        assert total == pytest.approx(row.median_ms * 1e3 * traced_share)
        assert total <= row.median_ms * 1e3 * (1 + 1e-9)  # never more than the clean time
    k = {k.name: k for fam in d.families for k in fam.kernels}["aten::bmm"]
    bmm_a = next(o for o in a.ops if o.name == "aten::bmm")
    assert k.time_a_us == pytest.approx(bmm_a.time_us / a.ops_time_us_per_forward * a.median_ms * 1e3)  # type: ignore[operator]
    traces = compare([trace(H100_FLASH), trace(A100_UNFUSED)], diff=True)
    assert traces.diffs and all(x.basis == "traced" for x in traces.diffs)


def test_gpu_traces_attention_collapses_into_one_fused_family() -> None:
    comp = compare([trace(A100_UNFUSED), trace(H100_FLASH)], diff=True)
    a100, h100 = comp.rows
    assert a100.kind == h100.kind == "trace" and a100.median_ms is None and a100.speedup is None
    assert a100.fused_families == [] and "UNFUSED_ATTENTION" in a100.finding_codes
    assert h100.fused_families == ["PyTorch flash (FA2)"] and "FUSED_ATTENTION" in h100.finding_codes
    assert h100.tensor_core_share == pytest.approx(1.0)
    assert h100.occupancy_theoretical is not None and h100.occupancy_limiter == "registers"
    (d,) = comp.diffs
    assert (d.a, d.b, d.lane) == (a100.label, h100.label, "gpu")
    first = d.families[0]  # attention leads the diff
    assert first.family == "PyTorch flash (FA2)" and first.count_a == 0 and first.count_b == 4
    assert {k.change for k in first.kernels} == {"added"}
    fams = {f.family: f for f in d.families}
    # the unfused pieces are gone: no softmax kernel and no fp16 cuBLAS GEMM in the fused trace
    assert fams["softmax"].count_a == 10 and fams["softmax"].count_b == 0
    assert fams["softmax"].delta_us < 0
    assert d.ops_b < d.ops_a and d.removed > 0 and d.added > 0


def test_mixed_run_and_trace_and_baseline(cpu_run: tuple[Path, object]) -> None:
    comp = compare([cpu_run[0], trace(H100_FLASH)], baseline="sdpa-math")
    assert comp.baseline == "sdpa-math"
    labels = [r.label for r in comp.rows]
    assert labels[-1].startswith(H100_FLASH) and "naive" in labels
    math = comp.row("sdpa-math")
    naive = comp.row("naive")
    assert math.median_ms is not None and naive.median_ms is not None
    assert naive.speedup == pytest.approx(math.median_ms / naive.median_ms)
    with pytest.raises(UserError, match="not among the compared rows: naive, "):
        compare([cpu_run[0]], baseline="nope", analyse=False)


def test_two_runs_diff_pairs_variants(cpu_run: tuple[Path, object]) -> None:
    run = cpu_run[0]
    comp = compare([run, run / "run.json"], diff=True)
    # the same directory twice: labels are made unique, pairs are per variant, nothing changes
    assert len({r.label for r in comp.rows}) == len(comp.rows)
    assert comp.diffs and all(d.added == d.removed == d.changed == 0 for d in comp.diffs)


def test_cli_json_and_terminal(cpu_run: tuple[Path, object], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(cpu_run[0]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "attnprof.compare/1" and data["baseline"] == "naive-inplace"
    assert {r["label"] for r in data["rows"]} >= {"naive", "sdpa-flash"}

    assert main(["compare", str(cpu_run[0]), str(trace(H100_FLASH)), "--diff", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert not ANSI.search(out)
    assert max(len(line) for line in out.splitlines()) <= 100
    # faster, slower or a tie: which depends on the machine's load, the words are there either way
    assert "naive-inplace" in out and re.search(r"faster|slower|tie \(", out) and "PyTorch flash (FA2)" in out
    assert "Not run" in out and "sdpa-efficient (unsupported)" in out


def test_trace_times_are_shown_against_the_clean_time_not_beside_it(
    cpu_run: tuple[Path, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 9: trace-derived times are shares of the clean time, never absolute times that
    contradict it. A run's trace table shows trace/clean; a trace alone its profiled time; a
    CPU run no GPU columns."""
    assert main(["compare", str(cpu_run[0]), "--no-color"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Per forward, from the trace") :]
    # the notes under it may quote the load meter ("... of CPU time (steal)"): the table alone
    table = table.split("\n  note: ", 1)[0]
    assert "trace/clean (rich/lean)" in table and "CPU time" not in table and "GPU" not in table
    assert re.search(r"naive-inplace\s+\d[\d.,]*x / \d[\d.,]*x", table)
    assert main(["compare", str(trace(H100_FLASH)), "--no-color"]) == 0
    gpu = capsys.readouterr().out
    assert "CPU time (profiled)" in gpu and "GPU time" in gpu and "trace/clean" not in gpu


def test_terminal_colours_relative_speed() -> None:
    from io import StringIO

    from attnprof.compare.compare import Row
    from attnprof.report.console import make_console
    from attnprof.report.terminal import render_comparison

    rows = [
        Row(label="base", kind="run", source="r", median_ms=2.0, speedup=1.0),
        # the claims compare/rank.py made from their samples: beyond noise both ways
        Row(
            label="quick",
            kind="run",
            source="r",
            median_ms=1.0,
            speedup=2.0,
            speedup_claim="faster",
            speedup_low=1.9,
            speedup_high=2.1,
        ),
        Row(
            label="slow",
            kind="run",
            source="r",
            median_ms=8.0,
            speedup=0.25,
            speedup_claim="slower",
            speedup_low=0.24,
            speedup_high=0.26,
        ),
    ]
    buf = StringIO()
    console = make_console(file=buf, force_terminal=True)  # colour codes, as on a terminal
    render_comparison(console, Comparison(baseline="base", rows=rows, sources=["r"]))
    out = buf.getvalue()
    assert re.search(r"\x1b\[32m *2\.0x faster", out) and re.search(r"\x1b\[31m *4\.0x slower", out)


def test_bad_inputs_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tmp_path / "missing")]) == 2
    assert main(["compare", str(tmp_path)]) == 2  # a folder without run.json
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    assert main(["compare", str(bad)]) == 0  # an unreadable trace is a row with a note, not a crash
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("attnprof: error: ") for line in err)


def test_units() -> None:
    assert (fmt_ms(0.0453), fmt_ms(7.239), fmt_ms(1955.0)) == ("45.3 µs", "7.24 ms", "1.96 s")
    # a value that rounds up to the next unit is written in it, not as 1e+03 of the smaller one
    assert (fmt_ms(999.99), fmt_ms(0.99999), fmt_ms(999.4)) == ("1 s", "1 ms", "999 ms")
    assert (fmt_bytes(512), fmt_bytes(288 * 1024), fmt_bytes(3 * 1024**3)) == ("512 B", "288 KiB", "3 GiB")
    assert (fmt_ratio(1.04), fmt_ratio(3.7), fmt_count(5.0), fmt_count(None)) == ("1.04", "3.7", "5", "-")
    name = (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>, false>(pytorch_flash::Params)"
    )
    # one short_name for the analysis JSON (width 60) and the reports' narrower columns: inner
    # template arguments folded first, then cut with an ellipsis
    assert short_name(name, 66) == "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<…>, false>"
    assert short_name(name, 46) == "pytorch_flash::flash_fwd_kernel<Flash_fwd_ker…"
    assert short_name("aten::bmm") == "aten::bmm"
    assert short_name("Memcpy DtoD (Device -> Device)", 46) == "Memcpy DtoD (Device -> Device)"


def test_compiled_regions_are_not_compared_op_by_op() -> None:
    """flex's trace is one generated region: no kernel diff against an eager variant, no reason
    drawn from its ops or findings, and the comparison says so."""
    from attnprof.analysis.records.result import Finding
    from attnprof.compare.causes import explain
    from attnprof.compare.compare import OpStat, Row, diffs_for

    ops = [OpStat(name="aten::bmm", category="gemm", family="gemm", count=2, time_us=10)]
    eager = Row(label="naive-inplace", kind="run", source="r", variant="naive-inplace", median_ms=2.0,
                ops=ops, ops_lane="cpu", cpu_ops_per_forward=36,
                findings=[Finding("UNFUSED_ATTENTION", "info", "")])  # fmt: skip
    flex = Row(label="flex", kind="run", source="r", variant="flex", backend="flex", median_ms=1.0,
               ops=ops[:0], ops_lane="cpu", cpu_ops_per_forward=4)  # fmt: skip
    plain = Row(
        label="naive", kind="run", source="r", variant="naive", median_ms=2.5, ops=ops, ops_lane="cpu"
    )
    comp = Comparison(baseline="naive-inplace", rows=[eager, flex, plain], sources=["r"])
    diffs = diffs_for(comp, ["run"])
    assert [(d.a, d.b) for d in diffs] == [("naive-inplace", "naive")]  # the eager pair only
    assert any(n.startswith("flex runs as compiled code") for n in comp.notes)
    assert explain(flex, eager) is None  # "materialises the scores" is no evidence here


def test_cpu_diff_shows_an_op_whose_share_moved_at_equal_count() -> None:
    """Equal counts, but copy_ went from 10% to 60% of the traced forward: "changed", not hidden;
    the same op at the same share with inflated absolute times stays "same"."""
    from attnprof.compare.compare import OpStat, Row
    from attnprof.compare.diff import diff_rows

    def row(label: str, copy_us: float, bmm_us: float) -> Row:
        ops = [
            OpStat(name="aten::copy_", category="copy", family="copy", count=1, time_us=copy_us),
            OpStat(name="aten::bmm", category="gemm", family="gemm", count=2, time_us=bmm_us),
        ]
        return Row(label=label, kind="run", source="r", ops=ops, ops_lane="cpu")

    d = diff_rows(row("a", 10, 90), row("b", 60, 40))
    changes = {k.name: k.change for f in d.families for k in f.kernels}
    assert changes == {"aten::copy_": "changed", "aten::bmm": "changed"} and d.changed == 2
    same = diff_rows(row("a", 10, 90), row("c", 30, 270))  # 3x inflated, the same shares
    assert {k.change for f in same.families for k in f.kernels} == {"same"}


def test_an_interval_prints_enough_digits_to_show_its_width() -> None:
    # fmt_ratio alone wrote 1.69-1.72 as [1.7-1.7]: an interval that reads as no width at all
    assert fmt_interval(1.7, 1.69, 1.72) == "1.69–1.72"
    assert fmt_interval(1.7, 1.701, 1.704) == "1.701–1.704"
    # must not: ends that already read apart, or that are equal, keep fmt_ratio's digits
    assert fmt_interval(1.2, 1.19, 1.31) == "1.19–1.31"
    assert fmt_interval(3.0, 2.5, 3.5) == "2.5–3.5"
    assert fmt_interval(1.7, 1.7, 1.7) == "1.7–1.7"
    # a slower row's interval, inverted: 1/0.58 .. 1/0.59 read apart too
    low, high = fmt_interval(0.585, 0.58, 0.59).split("–")
    assert low != high
