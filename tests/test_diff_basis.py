"""A CPU diff decides "changed" from both sides' shares of their own traced time (never a time
scaled to the clean median over an unscaled total), and its table shows every changed op or says
how many it leaves out. Rows are built as compare builds them from a CPU run's traces."""

from __future__ import annotations

from attnprof.compare.compare import OpStat, Row
from attnprof.compare.diff import diff_rows
from attnprof.report.i18n import Translator
from attnprof.report.tables import diff_table


def _cpu_row(label: str, times: dict[str, float], median_ms: float) -> Row:
    ops = [OpStat(name=n, category="gemm", family="gemm", count=1.0, time_us=us) for n, us in times.items()]
    return Row(
        label=label,
        kind="run",
        source="r",
        median_ms=median_ms,
        ops=ops,
        ops_lane="cpu",
        ops_time_us_per_forward=sum(times.values()),
    )


def test_shares_that_do_not_move_are_the_same_whatever_the_scales() -> None:
    # A's trace stretched 10x over its clean median, B's 2.5x: the shares are 50/50 on both sides
    a = _cpu_row("a", {"aten::mm": 50.0, "aten::softmax": 50.0}, median_ms=1.0)
    b = _cpu_row("b", {"aten::mm": 100.0, "aten::softmax": 100.0}, median_ms=0.5)
    d = diff_rows(a, b)
    assert d.basis == "clean" and d.changed == 0
    ks = {k.name: k for f in d.families for k in f.kernels}
    assert all(k.change == "same" and k.share_a == k.share_b == 0.5 for k in ks.values())
    # a share that falls from 35.7% to 11.9% is changed (it once read "same" and was left out)
    c = _cpu_row("c", {"aten::mm": 35.7, "aten::softmax": 64.3}, median_ms=1.0)
    e = _cpu_row("e", {"aten::mm": 11.9, "aten::softmax": 88.1}, median_ms=1.0)
    moved = {k.name: k.change for f in diff_rows(c, e).families for k in f.kernels}
    assert moved == {"aten::mm": "changed", "aten::softmax": "changed"}


def test_the_diff_table_shows_every_row_or_says_how_many_more() -> None:
    a = _cpu_row("a", {f"aten::op{i}": 10.0 for i in range(14)}, median_ms=1.0)
    b = _cpu_row("b", {f"aten::other{i}": 10.0 for i in range(14)}, median_ms=1.0)
    d = diff_rows(a, b)  # 14 removed, 14 added
    for lang in ("en", "id", "th"):
        table = diff_table(d, Translator(lang), top=12)
        assert len(table.rows) == 13  # 12 shown and one line for the rest
        assert "16" in table.rows[-1][0]
        whole = diff_table(d, Translator(lang), top=28)
        assert len(whole.rows) == 28  # every row: no "more" line


def _gpu_row(label: str, times: dict[str, float]) -> Row:
    ops = [OpStat(name=n, category="gemm", family="gemm", count=1.0, time_us=us) for n, us in times.items()]
    return Row(label=label, kind="run", source="r", ops=ops, ops_lane="gpu", gpu_ops_per_forward=len(ops),
               ops_time_us_per_forward=sum(times.values()))  # fmt: skip


def test_the_gpu_lane_decides_changed_by_shares_too() -> None:
    """GPU kernels follow the CPU's rule: B's trace twice as long in every kernel (a busier device
    or profiler) moves no share, so nothing "changed" although every time moved by half or more;
    a kernel whose share goes from 20% to 50% at equal counts is "changed"."""
    a = _gpu_row("a", {"gemm_kernel": 80.0, "softmax_kernel": 20.0})
    stretched = _gpu_row("b", {"gemm_kernel": 200.0, "softmax_kernel": 50.0})
    d = diff_rows(a, stretched)
    assert d.lane == "gpu" and d.changed == 0
    assert {k.change for f in d.families for k in f.kernels} == {"same"}
    moved = diff_rows(a, _gpu_row("c", {"gemm_kernel": 50.0, "softmax_kernel": 50.0}))
    changes = {k.name: k.change for f in moved.families for k in f.kernels}
    assert changes == {"gemm_kernel": "changed", "softmax_kernel": "changed"} and moved.changed == 2
