"""attnprof report --store: a sweep's results store as a report (scaling curves per group, every
result, the recommendation per bucket, a bullet summary) in three languages; the harness's
standard reasons and the expectations' observations in the reader's language."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnprof.cli import main
from attnprof.compare.expect import OBSERVED, ExpectationResult
from attnprof.reasons import ENGLISH
from attnprof.recommend import recommend
from attnprof.report.i18n import LANGUAGES, Translator, load_catalog, placeholders
from attnprof.report.reasons import LEGACY_PATTERNS, translate_reason
from attnprof.report.store_report import (
    build_store_report_data,
    recommendation_table,
    results_table,
    store_summary,
)
from attnprof.store import Store


@pytest.mark.parametrize(
    ("lang", "heading", "reason"),
    [
        ("en", "Summary", "PyTorch implements it for CUDA only; this run is on cpu"),
        ("id", "Ringkasan", "PyTorch hanya menyediakannya untuk CUDA; eksekusi ini berjalan di cpu"),
        ("th", "สรุป", "PyTorch มีให้ใช้บน CUDA เท่านั้น แต่การรันนี้อยู่บน cpu"),
    ],
)
def test_store_report_html_in_three_languages(
    cpu_store: Path, tmp_path: Path, lang: str, heading: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"store.{lang}.html"
    assert main(["report", "--store", str(cpu_store), "--lang", lang, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text(encoding="utf-8")
    assert f'<html lang="{lang}">' in html and f"<h2>{heading}</h2>" in html
    # self-contained: no script, nothing fetched, no link out at all
    assert "<script" not in html and '<link rel="stylesheet"' not in html
    assert re.findall(r'(?:src|href)="(https?:[^"]*)"', html) == []
    # one panel per (dtype, head_dim, B, H) group: D=16 and D=32, each with one line per variant
    # that ran (sdpa-efficient did not), ids unique across the page
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == 2 and html.count('<figure class="plot">') == 2
    for svg in svgs:
        series = re.findall(r'id="f\d+-series-([^"]+)"', svg)
        assert sorted(series) == ["naive-inplace", "sdpa-flash"]
    assert "D=16 B=1 H=2" in html and "D=32 B=1 H=2" in html
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    # the recommendation table: one row per bucket (3 lengths x 2 head dims)
    rec = html[html.index('id="recommendation-table"') :]
    rec = rec[: rec.index("</table>")]
    assert rec.count("<tr") == 1 + 6
    # every result, the harness's reason in the reader's language
    res = html[html.index('id="results-table"') :]
    assert res[: res.index("</table>")].count("<tr") == 1 + 18
    assert reason in html
    summary = html[
        html.index('<ul class="summary">') : html.index("</ul>", html.index('<ul class="summary">'))
    ]
    assert summary.count("<li>") >= 1 + 6 + 1  # counts, one per bucket, did not run


def test_the_report_renders_the_recommendation_records(cpu_store: Path) -> None:
    data = build_store_report_data(cpu_store)
    with Store(cpu_store, readonly=True) as st:
        recs = recommend(st.query())
    assert [r.bucket for r in data.recommendations] == [r.bucket for r in recs]
    table = recommendation_table(data.recommendations, Translator("en"))
    assert [row[2] for row in table.rows] == [r.best.variant if r.best else "none correct" for r in recs]
    en = store_summary(data, Translator("en"))
    assert en[0] == "The store holds 18 results over 6 shapes: 12 ok, 6 unsupported."
    assert any(re.fullmatch(r"fp32 D=32 S≤128 \[cpu\]: (sdpa-flash|naive-inplace) .*\.", line) for line in en)
    assert en[-1] == (
        "Did not run here: sdpa-efficient (PyTorch implements it for CUDA only; this run is on cpu)."
    )
    ind = store_summary(data, Translator("id"))
    th = store_summary(data, Translator("th"))
    assert ind[0] == "Penyimpanan ini berisi 18 hasil untuk 6 bentuk: 12 berhasil, 6 tidak didukung."
    assert th[0].startswith("ที่เก็บผลนี้มีผล 18 รายการ")
    assert len(en) == len(ind) == len(th)


def test_store_markdown_and_summary_only(cpu_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--store", str(cpu_store), "--format", "md", "--lang", "th"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# รายงานการกวาดค่าของ attnprof: attnprof-results.db")
    assert "## คำแนะนำตามกลุ่มรูปร่าง" in md and "| กลุ่ม | n | เร็วที่สุด |" in md
    assert main(["report", "--store", str(cpu_store), "--summary-only", "--lang", "id"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert all(line.startswith("- ") for line in lines) and lines[0].startswith(
        "- Penyimpanan ini berisi 18 hasil"
    )


@pytest.fixture(scope="module")
def kinds_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real CPU sweep of one variant at one shape over four workloads that differ only in
    their mask (none, sliding=8) and direction (forward, forward + backward)."""
    from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, run_sweep

    store = tmp_path_factory.mktemp("kinds") / "kinds.db"
    cfg = SweepConfig(
        grid=GridSpec(device="cpu", heads=[2], seq=[32], head_dim=[16], dtype=["fp32"],
                      mask=["none", "sliding=8"], backward=[False, True], variants=["naive"]),
        run=RunSettings(profile=False, time_budget_s=0.03, min_samples=3, warmup_calls=2),
        sweep=SweepSettings(store=str(store)),
    )  # fmt: skip
    assert run_sweep(cfg).counts == {"ok": 4}
    return store


def test_store_results_rows_tell_apart_what_results_tells_apart(
    kinds_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four workloads of one variant, mask none / sliding=8, with and without backward: the
    report's results table showed four identical rows (B H S D and "causal: no") where
    `attnprof results` shows four configurations. Each row now says its mask and direction,
    from the same identity (workload.py WorkloadId) that `attnprof results` groups by."""
    from attnprof.report.sweep_view import results_tables
    from attnprof.report.table import Table
    from attnprof.workload import WorkloadId

    data = build_store_report_data(kinds_store)
    assert len({WorkloadId.of(r) for r in data.results}) == 4
    table = results_table(data, Translator("en"))
    status = table.header.index("Status")
    identity = [tuple(str(c) for c in row[:status]) for row in table.rows]
    assert len(set(identity)) == 4, identity
    work = table.header.index("Work")
    assert sorted(row[work] for row in table.rows) == [
        "full",
        "full fwd+bwd",
        "sliding=8",
        "sliding=8 fwd+bwd",
    ]
    # `attnprof results`: one bold configuration line per workload, the same four
    (terminal,) = [x for x in results_tables(data.results) if isinstance(x, Table)]
    lines = [str(row[0]) for row in terminal.rows if not str(row[0]).startswith("  ")]
    assert lines == [f"{WorkloadId.of(r).shape} fp32{WorkloadId.of(r).kind}" for r in data.results]
    assert len(set(lines)) == 4
    # the Markdown report and the other languages carry the same words
    assert main(["report", "--store", str(kinds_store), "--format", "md", "--lang", "id"]) == 0
    md = capsys.readouterr().out
    assert "| Pekerjaan |" in md and "tanpa masker fwd+bwd" in md and "sliding=8 fwd+bwd" in md


def test_store_default_output_beside_the_store(
    cpu_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    store = tmp_path / "mine.db"
    shutil.copy(cpu_store, store)
    assert main(["report", "--store", str(store), "--lang", "id"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == tmp_path / "mine.report.id.html" and out.is_file()


def test_a_store_given_as_the_path_is_reported_as_a_store_and_refused_by_compare(
    cpu_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`attnprof report s.db` said "neither a run directory nor a trace file": a store is
    recognised by its SQLite header (whatever its name) and reported; `compare` of one names the
    commands that read stores, in one line, and writes nothing."""
    import shutil

    store = tmp_path / "sweep.sqlite"
    shutil.copy(cpu_store, store)
    assert main(["report", str(store), "--lang", "th"]) == 0
    assert Path(capsys.readouterr().out.strip()) == tmp_path / "sweep.report.th.html"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["compare", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a sweep's results store" in err and f"results --store {store}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    notes = tmp_path / "notes.db"  # a .db that is no SQLite file is still refused as before
    notes.write_text("hello")
    assert main(["report", str(notes)]) == 2
    assert "neither a run directory nor a trace file" in capsys.readouterr().err


def test_run_dir_and_store_are_mutually_exclusive(
    cpu_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report"]) == 2
    assert main(["report", str(tmp_path), "--store", str(cpu_store)]) == 2
    assert main(["report", "--store", str(tmp_path / "none.db")]) == 2
    assert main(["report", "--store", str(cpu_store), "--baseline", "naive"]) == 2
    assert main(["report", "--store", str(cpu_store), "--expect", "cpu"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "attnprof: error: give a run directory to report, or --store FILE for a sweep's results store",
        "attnprof: error: give either a run directory or --store FILE, not both",
        f"attnprof: error: no results store at {tmp_path / 'none.db'}: run `attnprof sweep` first or "
        "pass --store FILE",
        "attnprof: error: --baseline applies to a run directory or a trace, not to --store",
        "attnprof: error: --expect cpu applies to a run directory or a trace, not to --store",
    ]


# -- translations of what comes from the harness and the expectations ---------------------------

# the standard reasons as records written before reason codes hold them: English only
HARNESS_SAMPLES = [
    "sdpa-efficient: PyTorch implements it for CUDA only; this run is on cpu",
    "hub-flash: FlashAttention kernels run on CUDA only; this run is on cpu",
    "sdpa-flash on CUDA needs fp16 or bf16; got fp32 (use --dtype bf16)",
    "hub-flash needs fp16 or bf16; got fp32 (use --dtype bf16)",
    "sdpa-efficient in bf16 needs compute capability >= 8.0; this GPU is 7.5",
    "sdpa-cudnn needs compute capability >= 8.0; this GPU is 7.0",
    "sdpa-flash supports head_dim <= 256; got 512",
    "sdpa-cudnn needs cuDNN, which this torch build cannot load",
]


@pytest.mark.parametrize("reason", HARNESS_SAMPLES)
def test_standard_reasons_of_records_without_a_code_are_translated(reason: str) -> None:
    # the English message is the harness's text exactly: the pattern and the catalog agree
    assert translate_reason(reason, Translator("en")) == reason
    name = reason.split(":")[0].split(" ")[0]
    numbers = re.findall(r"\d+(?:\.\d+)?", reason)
    for lang in ("id", "th"):
        said = translate_reason(reason, Translator(lang))
        assert said != reason and said.startswith(name)
        assert all(n in said for n in numbers), (lang, said)


def test_other_reasons_stay_as_the_harness_wrote_them() -> None:
    for reason in ("naive failed during build: RuntimeError: boom", "Memory efficient kernel not used", ""):
        assert translate_reason(reason, Translator("th")) == reason


def test_every_legacy_pattern_is_a_reason_code_with_the_same_fields() -> None:
    en = load_catalog("en")
    for code, pattern in LEGACY_PATTERNS:
        # a group named <field>_pct or <field>_float is the field, read as a number (report/reasons.py)
        fields = {re.sub(r"_(pct|float)$", "", g) for g in pattern.groupindex}
        assert placeholders(en[f"harness.{code}"]) == fields, code
        assert code in ENGLISH


def test_every_reason_code_has_its_english_in_the_catalog() -> None:
    # the catalog's English is the sentence run.json records as `reason`, word for word
    en = load_catalog("en")
    assert {f"harness.{c}" for c in ENGLISH} == {k for k in en if k.startswith("harness.")}
    for code, text in ENGLISH.items():
        assert en[f"harness.{code}"] == text, code


def test_every_observation_code_has_a_message_with_the_english_text() -> None:
    en = load_catalog("en")
    assert {f"observed.{c}" for c in OBSERVED} == {k for k in en if k.startswith("observed.")}
    for code, text in OBSERVED.items():
        assert en[f"observed.{code}"] == text
    for lang in LANGUAGES:
        assert all(f"observed.{c}" in load_catalog(lang) for c in OBSERVED)


def test_expectation_observations_are_translated(cpu_run: tuple[Path, object]) -> None:
    from attnprof.report.data import build_report_data
    from attnprof.report.tables import expectation_table, observed_cell

    data = build_report_data(cpu_run[0])
    skipped = [e for e in data.expectations if e.observed_code == "applies_to"]
    assert skipped and skipped[0].observed.startswith("applies to ")
    th = expectation_table(data.expectations, Translator("th"))
    en = expectation_table(data.expectations, Translator("en"))
    # English: the text the terminal shows; Thai: the catalog's sentence with the same values
    assert [row[3] for row in en.rows] == [e.observed for e in data.expectations]
    observed_th = {row[3] for row in th.rows}
    assert "ใช้กับ dtype=bf16 แต่การรันนี้เป็น fp32" in observed_th
    assert not any(o.startswith("applies to") for o in observed_th)
    # the variants that did not run: the harness's standard reasons in Thai, in the table and summary
    from attnprof.report.summary import summarize
    from attnprof.report.tables import not_run_table

    reasons_th = {row[0]: row[2] for row in not_run_table(data, Translator("th")).rows}
    assert reasons_th["sdpa-efficient"] == ("sdpa-efficient: PyTorch มีให้ใช้บน CUDA เท่านั้น แต่การรันนี้อยู่บน cpu")
    summary_th = summarize(data, Translator("th"))
    assert any("sdpa-efficient (PyTorch มีให้ใช้บน CUDA เท่านั้น แต่การรันนี้อยู่บน cpu)" in b for b in summary_th)
    e = ExpectationResult(
        variant="sdpa-efficient",
        row="sdpa-efficient",
        check="memcpy",
        expected="absent",
        observed="did not run: unsupported (sdpa-efficient: PyTorch implements it for CUDA only; this run is on cpu)",
        status="skipped",
        observed_code="did_not_run_reason",
        observed_args={
            "status": "unsupported",
            "reason": "sdpa-efficient: PyTorch implements it for CUDA only; this run is on cpu",
        },
    )
    assert observed_cell(e, Translator("id")) == (
        "tidak berjalan: tidak didukung (sdpa-efficient: PyTorch hanya menyediakannya untuk CUDA; eksekusi ini "
        "berjalan di cpu)"
    )
    assert observed_cell(e, Translator("en")) == e.observed
    for code in ("not_in_run", "present", "absent", "not_measured"):
        plain = ExpectationResult(
            variant="x", row=None, check="c", expected="", observed=OBSERVED[code], status="skipped",
            observed_code=code,
        )  # fmt: skip
        assert observed_cell(plain, Translator("id")) != OBSERVED[code]
        assert observed_cell(plain, Translator("en")) == OBSERVED[code]
