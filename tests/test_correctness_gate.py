"""The correctness gate: a variant whose output is non-finite or outside the dtype's tolerance is
`incorrect` everywhere: never fastest, never the baseline, never recommended, no % of peak, no
"because"; shown with its error and an INCORRECT_OUTPUT finding. Real runs at a tiny shape."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
import torch

from attnprof.compare.compare import INCORRECT, compare
from attnprof.errors import UserError
from attnprof.harness.accuracy import compare as check
from attnprof.harness.accuracy import tolerance
from attnprof.harness.run import RunOptions, run
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.markdown import render_markdown
from attnprof.report.summary import summarize
from attnprof.workload import Workload

TINY = Workload(batch=1, heads=2, seq=64, head_dim=16)

BROKEN = textwrap.dedent(
    '''
    import torch

    def nan_attention(q, k, v, is_causal=False, scale=None):
        """All NaN, instantly."""
        return torch.full_like(q, float("nan"))

    def double_q(q, k, v, is_causal=False, scale=None):
        """A wrong answer from a fast kernel: q * 2."""
        return q * 2
    '''
)


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    tmp = tmp_path_factory.mktemp("gate")
    src = tmp / "broken.py"
    src.write_text(BROKEN)
    out = tmp / "run"
    record = run(
        TINY,
        ["naive-inplace", "sdpa", f"{src}:nan_attention", f"{src}:double_q"],
        out=out,
        # no trial run of the user variants in a child process each (isolation is
        # test_run_isolation's subject): two fewer imports of torch
        options=RunOptions(time_budget_s=0.05, min_samples=5, isolate_user=False),
    )
    return out, record


def test_tolerance_is_dtype_aware_and_non_finite_fails() -> None:
    assert tolerance("fp32") < tolerance("fp16") < tolerance("bf16")
    ref = torch.randn(1, 2, 8, 4, dtype=torch.float64)
    assert check(ref.float(), ref, "fp32").ok
    assert check(ref.bfloat16(), ref, "bf16").ok  # bf16 rounding is inside bf16's tolerance
    assert not check(ref.bfloat16(), ref, "fp32").ok  # ... and far outside fp32's
    nan = ref.clone()
    nan[0, 0, 0, 0] = float("nan")
    acc = check(nan, ref, "fp32")
    assert (acc.ok, acc.nan_count) == (False, 1)
    assert not check(ref * 2, ref, "bf16").ok
    with pytest.raises(ValueError, match="no tolerance"):
        tolerance("int8")


def test_broken_variants_are_recorded_incorrect_without_throughput(broken_run) -> None:  # type: ignore[no-untyped-def]
    _, record = broken_run
    by = {r.variant: r for r in record.results}
    for name in ("nan_attention", "double_q"):
        r = by[name]
        assert r.status == "incorrect" and r.timing is not None  # it ran and was timed ...
        assert r.accuracy is not None and not r.accuracy.ok  # ... and is wrong
        assert r.tflops_useful is None and r.pct_of_peak is None
        assert any(w.startswith("incorrect output") for w in r.warnings)
    assert by["nan_attention"].accuracy.nan_count == TINY.batch * TINY.heads * TINY.seq * TINY.head_dim
    assert by["naive-inplace"].accuracy.ok and by["sdpa"].accuracy.ok
    assert by["naive-inplace"].status == by["sdpa"].status == "ok"
    # run.json says it in the same word compare and the store use
    on_disk = {
        r["variant"]: r["status"]
        for r in json.loads((out_of(broken_run) / "run.json").read_text())["results"]
    }
    assert on_disk["double_q"] == on_disk["nan_attention"] == "incorrect" and on_disk["sdpa"] == "ok"


def out_of(broken_run) -> Path:  # type: ignore[no-untyped-def]
    return Path(broken_run[0])


def test_an_older_run_json_with_ok_and_a_failed_check_reads_back_incorrect(
    broken_run, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """run.json written before the word held "ok" with a failing accuracy: read once, it is incorrect
    (and a correct one stays ok); compare then reads the same word."""
    from attnprof.records import decode_run

    out, _ = broken_run
    raw = json.loads((out / "run.json").read_text())
    for r in raw["results"]:
        if r["status"] == "incorrect":
            r["status"] = "ok"  # as the harness wrote it before
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps(raw))
    rec = decode_run((old / "run.json").read_bytes())
    assert {r.variant: r.status for r in rec.results} == {
        "naive-inplace": "ok", "sdpa": "ok", "nan_attention": "incorrect", "double_q": "incorrect"
    }  # fmt: skip


def test_compare_and_reports_never_rank_an_incorrect_variant(broken_run) -> None:  # type: ignore[no-untyped-def]
    out, _ = broken_run
    comp = compare([out], diff=True)
    bad = [r for r in comp.rows if r.variant in ("nan_attention", "double_q")]
    assert [r.status for r in bad] == [INCORRECT, INCORRECT]
    for r in bad:
        assert r.speedup is None and r.pct_of_peak is None and r.tflops_useful is None
        assert r.finding_codes[0] == "INCORRECT_OUTPUT"
        assert r.median_ms is not None  # its time is still shown
    assert comp.baseline == "naive-inplace"
    assert all(d.b not in ("nan_attention", "double_q") for d in comp.diffs)
    with pytest.raises(UserError, match="incorrect output"):
        compare([out], baseline="nan_attention", analyse=False)

    data = build_report_data(out, expect=None)
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        bullets = summarize(data, t)
        assert "nan_attention" not in bullets[0] and "double_q" not in bullets[0]  # the fastest line
        speed = [b for b in bullets if "nan_attention" in b or "double_q" in b]
        assert len(speed) == 2  # one "incorrect output" bullet each, nothing else
        md = render_markdown(data, t)
        assert t("speed.incorrect") in md
    en = summarize(data, Translator("en"))
    nan_cells = TINY.batch * TINY.heads * TINY.seq * TINY.head_dim
    assert any(f"{nan_cells} NaN" in b for b in en if "nan_attention" in b)


def test_cli_json_marks_incorrect_rows(broken_run) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    out, _ = broken_run
    proc = subprocess.run(
        [sys.executable, "-m", "attnprof", "compare", str(out), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["label"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows["double_q"]["status"] == "incorrect" and rows["double_q"]["speedup"] is None
    assert rows["sdpa"]["status"] == "ok"


def test_sweep_and_recommend_reject_incorrect(tmp_path: Path) -> None:
    from attnprof.recommend import recommend
    from attnprof.store import Filters, Store
    from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, run_sweep

    src = tmp_path / "broken.py"
    src.write_text(BROKEN)
    db = tmp_path / "s.db"
    cfg = SweepConfig(
        grid=GridSpec(device="cpu", heads=[2], seq=[64], head_dim=[16], dtype=["fp32"],
                      variants=["naive-inplace", f"{src}:double_q"]),
        run=RunSettings(profile=False, time_budget_s=0.03, min_samples=3, warmup_calls=2),
        sweep=SweepSettings(store=str(db)),
    )  # fmt: skip
    run_sweep(cfg)
    with Store(db, readonly=True) as store:
        rows = store.query()
    # one word in the store's rows, as in run.json and compare
    assert {r.variant.split(":")[-1]: r.status for r in rows} == {
        "naive-inplace": "ok",
        "double_q": "incorrect",
    }
    with Store(db, readonly=True) as store:
        (bad,) = store.query(Filters(status=["incorrect"]))
        (good,) = store.query(Filters(status=["ok"]))
        assert bad.variant.endswith("double_q") and good.variant == "naive-inplace"
        assert store.status_of(bad.job_key) == "incorrect"
        stored = store.run_result(bad.job_key)
        assert stored is not None and stored.status == "incorrect"
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.variant == "naive-inplace"
    assert any(
        "double_q" in k and v.startswith("incorrect: ") and "tolerance" in v for k, v in rec.rejected.items()
    )
    # `results` and its --status filter say it in the same word, with why
    import subprocess
    import sys

    def results(*extra: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "attnprof", "results", "--store", str(db), "--no-color", *extra],
            capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    shown = results()
    assert "incorrect" in shown and "outside the fp32 tolerance" in shown
    only = results("--status", "incorrect", "-f", "json")
    assert [r["status"] for r in json.loads(only)] == ["incorrect"]


def test_a_nan_output_shows_its_counts_not_a_max_error(broken_run, capsys) -> None:  # type: ignore[no-untyped-def]
    """An all-NaN output's max error over its finite values is 0.0e+00: every error cell (the
    report's tables in en/id/th, compare's terminal, run's table) shows its NaN count instead."""
    from attnprof.report.run_view import render_run
    from attnprof.report.tables import comparison_table, error_cell

    out, record = broken_run
    data = build_report_data(out, expect=None)
    row = data.comparison.row("nan_attention")
    nan_cells = TINY.batch * TINY.heads * TINY.seq * TINY.head_dim
    for lang, word in (("en", "non-finite"), ("id", "tak berhingga"), ("th", "ค่าไม่จำกัด")):
        cell = error_cell(row, Translator(lang))
        assert word in cell and "NaN" in cell and "e+00" not in cell
        assert cell.emphasis == "bad"
        table = comparison_table(data, Translator(lang))
        assert any(str(cell) == str(c) for r in table.rows for c in r)
    # a finite wrong answer keeps its max error
    assert "e" in error_cell(data.comparison.row("double_q"), Translator("en"))
    capsys.readouterr()
    render_run(record, out, no_color=True)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("nan_attention"))
    assert f"non-finite ({nan_cells} NaN)" in line and "0.0e+00" not in line
