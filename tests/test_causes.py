"""A "because" names a cause only when it is large enough: a finding whose trace time accounts
for under a quarter of the clean time gap is not called the reason (compare/causes.py; the
summary words its record), and the
structural ones (a fused kernel, fewer ops) are sized the same way. Real runs at a small shape;
the clean times are then set so the gap is known, since the rule is about the gap and the trace,
not about how fast this machine happened to be."""

from __future__ import annotations

import statistics
import textwrap

import msgspec
import pytest
import torch

from attnprof.compare.causes import CAUSE_SHARE, cause_ms, explain, extra_ops_ms
from attnprof.compare.compare import Row, against_baseline
from attnprof.compare.records import Cause
from attnprof.harness.run import RunOptions, run
from attnprof.report.data import ReportData, build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.workload import Workload

# S=512 makes naive's out-of-place copy of the scores (2x512x512 floats, 2 MiB) a visible op, and
# a forward long enough (milliseconds) that the scheduler's preemptions on a loaded machine fall
# across its ops roughly by their length instead of swamping one op of a sub-millisecond forward
SMALL = Workload(batch=1, heads=2, seq=512, head_dim=16)
# round-to-round noise that both rows share: the ratio's interval is then tight and excludes 1
_NOISE = [1.0 + 0.02 * ((7 * i) % 10 - 4.5) / 4.5 for i in range(10)]

# two user variants, each with an out-of-place copy the trace shows (OUT_OF_PLACE_COPY fires)
# that is far too small to be why it is slow. twice_small_copy: slow for a reason no finding
# names (attention computed twice). sleepy_small_copy: slow for a reason no op shows (it sleeps
# 50 ms inside the forward): neither its copy, its few extra ops nor its unfused attention is why
SLOW = textwrap.dedent(
    """
    import time

    import torch

    _MASKS = {}

    def _attention(q, k, v, is_causal, scale):
        sq, sk = q.shape[-2], k.shape[-2]
        if (sq, sk) not in _MASKS:  # built once, on the warm-up call
            _MASKS[sq, sk] = torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(sk - sq + 1)
        s = torch.matmul(q, k.transpose(-2, -1)).mul_(scale or q.shape[-1] ** -0.5)
        if is_causal:
            s.masked_fill_(_MASKS[sq, sk], float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v)

    def _small_copy():
        torch.zeros(4).masked_fill(torch.zeros(4, dtype=torch.bool), 0.0)

    def twice_small_copy(q, k, v, is_causal=False, scale=None):
        outs = [_attention(q, k, v, is_causal, scale) for _ in range(2)]
        _small_copy()
        return outs[0]

    def sleepy_small_copy(q, k, v, is_causal=False, scale=None):
        out = _attention(q, k, v, is_causal, scale)
        _small_copy()
        time.sleep(0.05)
        return out
    """
)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> ReportData:
    tmp = tmp_path_factory.mktemp("causes")
    (tmp / "slow.py").write_text(SLOW)
    variants = [
        "naive",
        "naive-inplace",
        "sdpa",
        f"{tmp / 'slow.py'}:twice_small_copy",
        f"{tmp / 'slow.py'}:sleepy_small_copy",
    ]
    # one intra-op thread: on a loaded machine a parallel op waits for a descheduled worker, which
    # stretches ops next to a sleep far more than the sleep; on one thread they stretch alike
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(
            SMALL,
            variants,
            out=tmp / "run",
            # no trial run of the user variants in a child process each (isolation is
            # test_run_isolation's subject): two fewer imports of torch
            options=RunOptions(time_budget_s=0.05, min_samples=5, steps=(1, 1, 5), isolate_user=False),
        )
    finally:
        torch.set_num_threads(threads)
    return build_report_data(tmp / "run")


def _timed(row: Row, ms: float) -> Row:
    """The real row (its trace, findings and op times) with a clean time of `ms` per forward,
    from noise both rows share, timed on a quiet machine."""
    samples = [ms * x for x in _NOISE]
    return msgspec.structs.replace(
        row, samples_ms=samples, median_ms=statistics.median(samples), unreliable=False
    )


def _only(data: ReportData, fast: Row, slow: Row) -> ReportData:
    against_baseline([fast, slow], fast)  # the claim and its Why, as compare makes them
    comp = msgspec.structs.replace(data.comparison, rows=[fast, slow], baseline=fast.label, diffs=[])
    return msgspec.structs.replace(data, comparison=comp, expectations=[])


def _codes(causes: list[Cause]) -> list[str]:
    return [c.code for c in causes]


def _share(row: Row, categories: tuple[str, ...]) -> float:
    """The share of the row's traced forward (its lean trace's) in ops of these categories."""
    assert row.time_source == "lean" and row.ops_time_us_per_forward
    return sum(o.time_us for o in row.ops if o.category in categories) / row.ops_time_us_per_forward


def test_a_cause_that_accounts_for_the_gap_is_named(small_run: ReportData) -> None:
    """naive's copy of the scores is a larger share of its traced forward than naive-inplace's
    copies are of theirs: at the clean times where that difference is half the gap, it accounts
    for more than a quarter of it, and is named."""
    inplace, naive = small_run.comparison.row("naive-inplace"), small_run.comparison.row("naive")
    c_fast, c_slow = _share(inplace, ("copy", "memcpy")), _share(naive, ("copy", "memcpy"))
    assert c_fast < c_slow < 0.5, (c_fast, c_slow)  # the clone of the scores, as the finding says
    # c_slow * S - c_fast * 1 = (S - 1) / 2: the copy accounts for half of the gap
    slow_ms = (0.5 - c_fast) / (0.5 - c_slow)
    fast, slow = _timed(inplace, 1.0), _timed(naive, slow_ms)
    assert "OUT_OF_PLACE_COPY" in slow.finding_codes and "OUT_OF_PLACE_COPY" not in fast.finding_codes
    cause = cause_ms(slow, fast, "OUT_OF_PLACE_COPY")
    assert cause == pytest.approx(0.5 * (slow_ms - 1.0)), cause
    why = explain(fast, slow)
    assert why is not None and why.subject == "naive"
    assert _codes(why.named) == ["OUT_OF_PLACE_COPY"] and not why.small
    bullets = summarize(_only(small_run, fast, slow), Translator("en"))
    line = next(b for b in bullets if b.startswith("naive-inplace is "))
    assert line.endswith("because naive copies the scores in its out-of-place masked_fill."), line


def test_a_cause_too_small_for_the_gap_is_not_named(small_run: ReportData) -> None:
    """sleepy_small_copy has OUT_OF_PLACE_COPY and naive-inplace has not, but four copied numbers
    cannot explain a variant twice as slow: no "because", a sentence that says so instead."""
    fast = _timed(small_run.comparison.row("naive-inplace"), 1.0)
    slow = _timed(small_run.comparison.row("sleepy_small_copy"), 2.0)
    assert "OUT_OF_PLACE_COPY" in slow.finding_codes and "OUT_OF_PLACE_COPY" not in fast.finding_codes
    cause = cause_ms(slow, fast, "OUT_OF_PLACE_COPY")
    assert cause is not None and cause < CAUSE_SHARE * 1.0, cause
    why = explain(fast, slow)
    assert why is not None and not why.named
    assert _codes(why.small) == ["OUT_OF_PLACE_COPY"]
    data = _only(small_run, fast, slow)
    for lang, because, small in (
        ("en", " because ", "too little to explain it"),
        ("id", " karena ", "terlalu kecil untuk menjelaskannya"),
        ("th", " เพราะ ", "น้อยเกินกว่าจะอธิบาย"),
    ):
        line = next(b for b in summarize(data, Translator(lang)) if b.startswith("naive-inplace "))
        assert because not in line and small in line, (lang, line)


def test_fewer_ops_are_named_only_when_their_time_accounts_for_the_gap(small_run: ReportData) -> None:
    """twice_small_copy runs attention twice: the ops it runs beyond naive-inplace's take about
    half its traced forward, which accounts for a gap of half its time, and are named (its tiny
    copy is not). sleepy_small_copy's few extra ops take almost none of its forward: against the
    same gap they are too small, and no "because" is given."""
    fast = _timed(small_run.comparison.row("naive-inplace"), 1.0)
    twice = _timed(small_run.comparison.row("twice_small_copy"), 2.0)
    assert (fast.cpu_ops_per_forward or 0) < (twice.cpu_ops_per_forward or 0)
    extra = extra_ops_ms(fast, twice)
    assert extra is not None and extra >= CAUSE_SHARE * 1.0, extra
    why = explain(fast, twice)
    assert why is not None and why.subject == "naive-inplace"
    # the copy is far too small to be named beside it
    assert _codes(why.named) == ["fewer_ops"], why
    assert (why.ops_fast, why.ops_slow) == (fast.cpu_ops_per_forward, twice.cpu_ops_per_forward)

    sleepy = _timed(small_run.comparison.row("sleepy_small_copy"), 2.0)
    assert (fast.cpu_ops_per_forward or 0) < (sleepy.cpu_ops_per_forward or 0)
    extra = extra_ops_ms(fast, sleepy)
    assert extra is not None and extra < CAUSE_SHARE * 1.0, extra
    why = explain(fast, sleepy)
    assert why is not None and not why.named and "fewer_ops" not in _codes(why.small)


def test_a_fused_kernel_is_named_only_when_what_it_saves_accounts_for_the_gap(small_run: ReportData) -> None:
    """sdpa computes attention in one fused op. Against naive-inplace, whose forward is mostly its
    matmuls and softmax, the time fusion saves (naive-inplace's attention math less sdpa's fused
    op, each its traced share of its clean time) is most of the gap: named. Against
    sleepy_small_copy, slow because it sleeps, the same saving is a sliver of the gap: not named,
    and no other cause either."""
    sdpa = _timed(small_run.comparison.row("sdpa"), 1.0)
    assert "FUSED_ATTENTION" in sdpa.finding_codes
    math = ("attention", "gemm", "softmax")
    inplace = small_run.comparison.row("naive-inplace")
    # its matmuls and softmax are most of its forward (a third at least, even on a loaded machine)
    assert _share(inplace, math) > 0.3
    slow = _timed(inplace, 20.0)
    saved = cause_ms(sdpa, slow, "FUSED_ATTENTION")
    assert saved == pytest.approx(max(_share(inplace, math) * 20.0 - _share(sdpa, math) * 1.0, 0.0))
    assert saved >= CAUSE_SHARE * ((slow.median_ms or 0) - (sdpa.median_ms or 0))
    why = explain(sdpa, slow)
    assert why is not None and why.subject == "sdpa" and _codes(why.named) == ["FUSED_ATTENTION"]

    sleepy = _timed(small_run.comparison.row("sleepy_small_copy"), 20.0)
    assert "FUSED_ATTENTION" not in sleepy.finding_codes
    saved = cause_ms(sdpa, sleepy, "FUSED_ATTENTION")
    assert saved is not None and saved < CAUSE_SHARE * ((sleepy.median_ms or 0) - (sdpa.median_ms or 0))
    why = explain(sdpa, sleepy)
    assert why is None or not why.named
    line = next(
        b for b in summarize(_only(small_run, sdpa, sleepy), Translator("en")) if b.startswith("sdpa is ")
    )
    assert " because " not in line and "fused kernel" not in line, line


def _synthetic(label: str, ms: float, copy_us: float, *, unreliable: bool = False) -> Row:
    """A run row whose traced forward is 100 µs, `copy_us` of it in copies, timed at `ms`."""
    from attnprof.analysis.records.result import Finding
    from attnprof.compare.records import OpStat

    ops = [
        OpStat(name="aten::clone", category="copy", family="copy", count=1, time_us=copy_us),
        OpStat(name="aten::bmm", category="gemm", family="gemm", count=2, time_us=100 - copy_us),
    ]
    findings = [Finding("OUT_OF_PLACE_COPY", "warning", "")] if copy_us > 10 else []
    samples = [ms * x for x in _NOISE]
    return Row(label=label, kind="run", source="r", variant=label, median_ms=statistics.median(samples),
               samples_ms=samples, paired_rounds=True, ops=ops, ops_lane="cpu", ops_time_us_per_forward=100,
               cpu_ops_per_forward=3, findings=findings, unreliable=unreliable)  # fmt: skip


def test_compare_records_why_only_for_a_claim_it_may_explain() -> None:
    """compare (not the summary) records why the faster row wins: on a reliable run with a gap
    beyond noise the copy that accounts for it is named in Row.why; the same rows on a busy
    machine, or at times whose ratio is a tie, get no Why at all."""
    base = _synthetic("base", 1.0, 5)
    slow = _synthetic("slow", 2.0, 60)  # 60% of 2 ms in copies against 5% of 1 ms: most of the gap
    against_baseline([base, slow], base)
    assert slow.speedup_claim == "slower" and slow.why is not None, slow
    assert (slow.why.fast, slow.why.slow, slow.why.subject) == ("base", "slow", "slow")
    assert _codes(slow.why.named) == ["OUT_OF_PLACE_COPY"]
    assert slow.why.named[0].ms == pytest.approx(0.6 * slow.median_ms - 0.05 * base.median_ms)  # type: ignore[operator]
    busy = _synthetic("slow", 2.0, 60, unreliable=True)
    against_baseline([base, busy], base)
    assert busy.speedup_claim == "slower" and busy.why is None
    tie = _synthetic("slow", 1.0, 60)
    against_baseline([base, tie], base)
    assert tie.speedup_claim == "tie" and tie.why is None


@pytest.mark.parametrize(
    ("code", "named"),
    [
        ("GPU_IDLE_ALLOCATOR", True),
        ("GPU_IDLE_DATA_LOADING", True),
        ("GPU_WAIT_UNRECORDED_WORK", False),  # neutral: not idle time the trace explains
        ("GPU_IDLE_SLOW_LAUNCH", False),  # one-time set-up: the clean timing runs after the warm-up
    ],
)
def test_an_idle_cause_is_named_by_its_catalogue_place(code: str, named: bool) -> None:
    """The idle causes that make a step slower (analysis/findings/codes.py `cause`) are named when their
    time accounts for the gap; a wait on work the trace does not contain (neutral) and one-time
    set-up never are."""
    from attnprof.analysis.records.result import Finding

    base = _synthetic("base", 1.0, 5)
    slow = _synthetic("slow", 2.0, 5)
    slow.findings = [Finding(code, "warning", "")]
    slow.cause_shares = {code: 0.6}  # its idle time: 60% of the traced forward, most of the gap
    against_baseline([base, slow], base)
    assert slow.speedup_claim == "slower"
    got = _codes(slow.why.named) if slow.why is not None else []
    assert (code in got) is named, got
