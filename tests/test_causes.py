"""A "because" names a cause only when it is large enough: a finding whose trace time accounts
for under a quarter of the clean time gap is not called the reason (report/summary.py). Real
runs at a small shape; the clean times are then set so the gap is known, since the rule is about
the gap and the trace, not about how fast this machine happened to be."""

from __future__ import annotations

import statistics
import textwrap

import msgspec
import pytest

from attnprof.compare.compare import Row
from attnprof.harness.run import RunOptions, run
from attnprof.report.data import ReportData, build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.summary import CAUSE_SHARE, cause_ms, reasons, summarize
from attnprof.workload import Workload

# S=256 makes naive's out-of-place copy of the scores (2x256x256 floats, 512 KiB) a visible op
SMALL = Workload(batch=1, heads=2, seq=256, head_dim=16)
# round-to-round noise that both rows share: the ratio's interval is then tight and excludes 1
_NOISE = [1.0 + 0.02 * ((7 * i) % 10 - 4.5) / 4.5 for i in range(10)]

# slow for a reason no finding names (attention computed twice), with an out-of-place copy the
# trace shows (OUT_OF_PLACE_COPY fires) that is far too small to be why
TWICE = textwrap.dedent(
    """
    import torch

    _MASKS = {}

    def twice_small_copy(q, k, v, is_causal=False, scale=None):
        sq, sk = q.shape[-2], k.shape[-2]
        if (sq, sk) not in _MASKS:  # built once, on the warm-up call
            _MASKS[sq, sk] = torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(sk - sq + 1)
        mask = _MASKS[sq, sk] if is_causal else None
        scale = scale or q.shape[-1] ** -0.5
        outs = []
        for _ in range(2):
            s = torch.matmul(q, k.transpose(-2, -1)).mul_(scale)
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            outs.append(torch.matmul(torch.softmax(s, dim=-1), v))
        torch.zeros(4).masked_fill(torch.zeros(4, dtype=torch.bool), 0.0)
        return outs[0]
    """
)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> ReportData:
    tmp = tmp_path_factory.mktemp("causes")
    (tmp / "twice.py").write_text(TWICE)
    variants = ["naive", "naive-inplace", f"{tmp / 'twice.py'}:twice_small_copy"]
    run(SMALL, variants, out=tmp / "run", options=RunOptions(time_budget_s=0.05, min_samples=5))
    return build_report_data(tmp / "run")


def _timed(row: Row, ms: float) -> Row:
    """The real row (its trace, findings and op times) with a clean time of `ms` per forward,
    from noise both rows share, timed on a quiet machine."""
    samples = [ms * x for x in _NOISE]
    return msgspec.structs.replace(
        row, samples_ms=samples, median_ms=statistics.median(samples), unreliable=False
    )


def _only(data: ReportData, fast: Row, slow: Row) -> ReportData:
    comp = msgspec.structs.replace(data.comparison, rows=[fast, slow], baseline=fast.label, diffs=[])
    return msgspec.structs.replace(data, comparison=comp, expectations=[])


def test_a_cause_that_accounts_for_the_gap_is_named(small_run: ReportData) -> None:
    """naive's copy of the scores is a sizeable share of its traced forward: against a gap of a
    tenth of naive-inplace's time, it accounts for more than a quarter, and is named."""
    fast = _timed(small_run.comparison.row("naive-inplace"), 1.0)
    slow = _timed(small_run.comparison.row("naive"), 1.1)
    assert "OUT_OF_PLACE_COPY" in slow.finding_codes and "OUT_OF_PLACE_COPY" not in fast.finding_codes
    cause = cause_ms(slow, fast, "OUT_OF_PLACE_COPY")
    assert cause is not None and cause >= CAUSE_SHARE * 0.1, cause
    why = reasons(fast, slow, Translator("en"))
    assert why is not None and why.subject == "naive"
    assert why.named == "copies the scores in its out-of-place masked_fill" and not why.small
    bullets = summarize(_only(small_run, fast, slow), Translator("en"))
    line = next(b for b in bullets if b.startswith("naive-inplace is "))
    assert line.endswith("because naive copies the scores in its out-of-place masked_fill."), line


def test_a_cause_too_small_for_the_gap_is_not_named(small_run: ReportData) -> None:
    """twice_small_copy has OUT_OF_PLACE_COPY and naive-inplace has not, but four copied numbers
    cannot explain a variant twice as slow: no "because", a sentence that says so instead."""
    fast = _timed(small_run.comparison.row("naive-inplace"), 1.0)
    slow = _timed(small_run.comparison.row("twice_small_copy"), 2.0)
    assert "OUT_OF_PLACE_COPY" in slow.finding_codes and "OUT_OF_PLACE_COPY" not in fast.finding_codes
    cause = cause_ms(slow, fast, "OUT_OF_PLACE_COPY")
    assert cause is not None and cause < CAUSE_SHARE * 1.0, cause
    why = reasons(fast, slow, Translator("en"))
    assert why is not None and not why.named
    assert why.small == "copies the scores in its out-of-place masked_fill"
    data = _only(small_run, fast, slow)
    for lang, because, small in (
        ("en", " because ", "too little to explain it"),
        ("id", " karena ", "terlalu kecil untuk menjelaskannya"),
        ("th", " เพราะ ", "น้อยเกินกว่าจะอธิบาย"),
    ):
        line = next(b for b in summarize(data, Translator(lang)) if b.startswith("naive-inplace "))
        assert because not in line and small in line, (lang, line)
