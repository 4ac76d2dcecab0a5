"""attnprof report: catalogs in three languages, the summary, Markdown and self-contained HTML."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from markupsafe import escape as html_escape

from _records import environment
from attnprof.analysis.attribution.classify import cpu_category
from attnprof.analysis.records.result import Finding
from attnprof.cli import main
from attnprof.compare.compare import Comparison, OpStat, Row, against_baseline
from attnprof.records import RunRecord
from attnprof.report.data import ReportData, build_report_data
from attnprof.report.i18n import LANGUAGES, Translator, load_catalog, parse_po, placeholders
from attnprof.report.summary import summarize
from attnprof.workload import Workload

# ids whose text is the same in every language on purpose: abbreviations, units, and templates
# that hold only fields and punctuation
SAME_EVERYWHERE = {
    "env.cpu", "col.iqr", "env.peak_value", "summary.in_workload",
    "harness.in_model",
    # op and library names used as category names
    "category.gemm", "category.softmax", "category.triton",
    # units and torch's word for a tensor's type, as the per-op table heads its columns
    "perf.col.tflops", "perf.col.tbps", "perf.col.dtype",
    # the analysis view: GEMM, the count symbol n, and a line of fields and units only
    "av.part.gemm", "av.col.n", "av.roof",
    # the cross-rank view's bandwidth units (nccl-tests' algbw and busbw) and templates of fields
    "coll.col.algbw", "coll.col.busbw", "coll.basis.count", "measured.default_except",
    # a finding's clause that is a list of host-event names only
    "clause.idle.names",
}  # fmt: skip
# words Indonesian spells as English does (loanwords), and its list separator
SAME_IN = {
    "id": {"col.median", "col.status", "list.sep", "check.status", "severity.info", "perf.col.formula", "av.col.kernel"},
    "th": set(),
}  # fmt: skip


def _row_svgs(html: str) -> int:
    """The SVGs of the plots section (the per-op model's rooflines are in a section of their own)."""
    plots = html[html.index('<section id="plots">') :]
    return plots[: plots.index("</section>")].count("<svg")


def test_every_message_exists_in_every_language_with_the_same_fields() -> None:
    en = load_catalog("en")
    assert len(en) > 100
    for lang in LANGUAGES:
        cat = load_catalog(lang)
        assert set(cat) == set(en), (lang, set(en) ^ set(cat))
        for key, text in cat.items():
            assert text.strip() or key == "list.sep", (lang, key)  # Thai separates a list with a space
            assert placeholders(text) == placeholders(en[key]), (lang, key)
    # translated for real: apart from units and abbreviations, no message is left in English
    for lang in ("id", "th"):
        cat = load_catalog(lang)
        untranslated = {k for k in en if cat[k] == en[k]} - SAME_EVERYWHERE - SAME_IN[lang]
        assert not untranslated, (lang, sorted(untranslated))
    assert re.search(r"[\u0e00-\u0e7f]", load_catalog("th")["h.summary"])


def test_the_translations_keep_code_and_numbers() -> None:
    for lang in LANGUAGES:
        t = Translator(lang)
        line = t("reason.SAFE_SOFTMAX")
        assert "_safe_softmax" in line
        assert "fp32" in t("reason.FP32_UPCAST") and "masked_fill" in t("reason.OUT_OF_PLACE_COPY")
        assert "4.0" in t("speed.faster", ratio="4.0")


def test_parse_po_reads_multiline_entries_and_escapes() -> None:
    text = 'msgid ""\nmsgstr "Language: xx\\n"\n\n# comment\nmsgid "a.b"\nmsgstr ""\n"first \\"q\\" "\n"second"\n'
    assert parse_po(text) == {"a.b": 'first "q" second'}
    with pytest.raises(ValueError, match="unsupported"):
        parse_po("msgctxt 'x'\n")


def test_lists_are_joined_the_way_each_language_does() -> None:
    items = ["upcasts to fp32", "uses _safe_softmax"]
    assert Translator("en").join(["a", "b", "c"]) == "a, b and c"
    assert Translator("id").join(["a", "b", "c"]) == "a, b dan c"
    assert Translator("th").join(["ก", "ข", "ค"]) == "ก ข และค"
    assert Translator("th").join(["ก", "flex"]) == "ก และ flex"
    assert Translator("en").join(items[:1]) == "upcasts to fp32"


def _data(rows: list[Row], baseline: str = "naive-inplace") -> ReportData:
    env = environment()
    wl = Workload(batch=2, heads=8, seq=512, head_dim=64, dtype="bf16").to_record()
    rec = RunRecord(schema="attnprof.run/1", created="now", environment=env, workload=wl, results=[])
    # the claims and their causes, as compare makes them (Row.why)
    against_baseline(rows, next((r for r in rows if r.label == baseline), None))
    comp = Comparison(baseline=baseline, rows=rows, sources=["r"])
    return ReportData(run_dirs=["r"], record=rec, comparison=comp)


def _jitter(pct: float, step: int) -> list[float]:
    """20 rounds of +-pct noise in an order set by `step`, scaled to a median of exactly 1."""
    xs = [1.0 + pct * ((step * i) % 20 - 9.5) / 9.5 for i in range(20)]
    med = statistics.median(xs)
    return [x / med for x in xs]


# round-to-round noise of 3% that every row shares (one run's interleaved samples share each
# round's load): their ratios are then exact
_NOISE = _jitter(0.03, 7)


# what the mask-rebuild finding's evidence counts (the ops it points at), as the analyser writes it
_MASK_EVIDENCE = {"cpu_ops_per_instance": {"aten::ones": 1, "aten::triu": 1}}


def _row(
    label: str,
    ms: float,
    codes: list[str],
    ops: float,
    *,
    jitter: list[float] | None = None,
    times: dict[str, float] | None = None,
) -> Row:
    """A row with a clean time of `ms`; `times`: its traced CPU op self times per forward (µs, one
    call each), of which the reasons' causes are sized."""
    noise = jitter or _NOISE
    samples = [ms * x for x in noise]
    op_stats = [
        OpStat(name=n, category=cpu_category(n), family=cpu_category(n), count=1.0, time_us=us)
        for n, us in (times or {}).items()
    ]
    return Row(
        label=label,
        variant=label,
        kind="run",
        source="r",
        dtype="bf16",
        median_ms=statistics.median(samples),
        samples_ms=samples,
        paired_rounds=True,
        cpu_ops_per_forward=ops,
        gpu_ops_per_forward=0,
        ops=op_stats,
        ops_lane="cpu" if op_stats else None,
        ops_time_us_per_forward=sum(o.time_us for o in op_stats) or None,
        findings=[
            Finding(c, "info", "", _MASK_EVIDENCE if c == "MASK_REBUILT_EACH_CALL" else {}) for c in codes
        ],
    )


def test_the_summary_says_why_in_three_languages() -> None:
    # each cause the sentences name accounts for a quarter of the gap or more by its traced share
    # (sdpa-math: a quarter of 4 ms in each of its conversions, mask building and _safe_softmax,
    # against a 3 ms gap; sdpa-flash: naive-inplace's 1 ms of attention math against 0.4 ms fused)
    data = _data(
        [
            _row(
                "naive-inplace", 1.0, ["UNFUSED_ATTENTION"], 36, times={"aten::bmm": 60, "aten::softmax": 40}
            ),
            _row(
                "sdpa-math",
                4.0,
                ["UNFUSED_ATTENTION", "FP32_UPCAST", "MASK_REBUILT_EACH_CALL", "SAFE_SOFTMAX"],
                81,
                times={
                    "aten::_to_copy": 25,
                    "aten::triu": 15,
                    "aten::ones": 10,
                    "aten::_safe_softmax": 25,
                    "aten::bmm": 25,
                },
            ),
            # 25% noise of its own: 1.04x is inside the noise
            _row("naive", 1.04, ["UNFUSED_ATTENTION", "OUT_OF_PLACE_COPY"], 45, jitter=_jitter(0.25, 13)),
            _row(
                "sdpa-flash",
                0.5,
                ["FUSED_ATTENTION", "TRANSPOSES_BEFORE_KERNEL"],
                19,
                times={"aten::_scaled_dot_product_flash_attention_for_cpu": 80, "aten::transpose": 20},
            ),
        ]
    )
    en = summarize(data, Translator("en"))
    assert en[0] == "Fastest here: sdpa-flash, 500 µs per forward (median of 20 calls without the profiler)."
    assert (
        "naive-inplace is 4.0x faster than sdpa-math in bf16 (95% interval 4.0–4.0x) because sdpa-math "
        "upcasts to fp32, "
        "rebuilds the causal mask on every call and uses _safe_softmax."
    ) in en
    tie = next(
        line for line in en if line.startswith("naive and naive-inplace are tied in bf16: 1.04x apart")
    )
    assert tie.endswith("includes 1x.")
    assert (
        "sdpa-flash is 2.0x faster than naive-inplace in bf16 (95% interval 2.0–2.0x) because sdpa-flash "
        "computes attention "
        "in one fused kernel."
    ) in en
    assert "CPU (aten) ops per forward: naive-inplace 36, sdpa-math 81, naive 45, sdpa-flash 19." in en
    ind = summarize(data, Translator("id"))
    assert (
        # Indonesian writes a decimal comma (Babel's CLDR symbols)
        "naive-inplace 4,0x lebih cepat daripada sdpa-math pada bf16 (interval 95% 4,0–4,0x) karena "
        "sdpa-math menaikkan masukan ke "
        "fp32, membangun ulang masker kausal pada setiap pemanggilan dan memakai _safe_softmax."
    ) in ind
    th = summarize(data, Translator("th"))
    assert (
        "naive-inplace เร็วกว่า sdpa-math 4.0 เท่าใน bf16 (ช่วงความเชื่อมั่น 95% 4.0–4.0 เท่า) "
        "เพราะ sdpa-math แปลงข้อมูลขึ้นเป็น fp32 "
        "สร้างมาสก์เชิงเหตุใหม่ทุกครั้งที่เรียก และใช้ _safe_softmax"
    ) in th
    assert len(en) == len(ind) == len(th)


def test_summary_without_reasons_and_without_runs() -> None:
    data = _data([_row("naive-inplace", 1.0, [], 36), _row("other", 2.0, [], 36)])
    assert "naive-inplace is 2.0x faster than other in bf16 (95% interval 2.0–2.0x)." in summarize(
        data, Translator("en")
    )
    failed = _data([Row(label="x", kind="run", source="r", status="error", reason="boom")])
    assert summarize(failed, Translator("id")) == [
        "Tidak ada yang berhasil berjalan, jadi tidak ada yang bisa dibandingkan."
    ]


@pytest.fixture(scope="module")
def report_data(cpu_run: tuple[Path, object]) -> ReportData:
    return build_report_data(cpu_run[0])


def test_report_data_from_a_live_run(report_data: ReportData) -> None:
    assert report_data.expectation_file == "cpu"  # "auto" picks the built-in for the device
    assert report_data.expectations and not [e for e in report_data.expectations if e.status == "not met"]
    assert report_data.comparison.diffs  # each variant against the baseline
    assert report_data.scaling == [] and report_data.scaling_axis is None


@pytest.mark.parametrize(
    ("lang", "heading", "summary_word"),
    [("en", "Summary", "faster"), ("id", "Ringkasan", "cepat"), ("th", "สรุป", "เร็ว")],
)
def test_html_report_is_self_contained(
    cpu_run: tuple[Path, object],
    tmp_path: Path,
    lang: str,
    heading: str,
    summary_word: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / f"report.{lang}.html"
    assert main(["report", str(cpu_run[0]), "--lang", lang, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text(encoding="utf-8")
    assert f'<html lang="{lang}">' in html and f"<h2>{heading}</h2>" in html
    # offline: no script, no external stylesheet, image or font; the only URL is Perfetto's link
    assert "<script" not in html and '<link rel="stylesheet"' not in html and "@import" not in html
    # finding codes in table cells break between their words, not inside one (issue 9, layout)
    assert "UNFUSED_<wbr>ATTENTION" in html and "UNFUSED_ATTENTION</td>" not in html
    assert re.findall(r'(?:src|href)="(https?:[^"]*)"', html) == ["https://ui.perfetto.dev"]
    assert "url(http" not in html
    # the plots: time, categories and timeline, inline SVG with their ids made unique
    assert html.count('<figure class="plot">') == 3 and _row_svgs(html) == 3
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    summary = html[
        html.index('<ul class="summary">') : html.index("</ul>", html.index('<ul class="summary">'))
    ]
    assert "sdpa-math" in summary
    # on a quiet machine the summary ranks ("faster"); when other processes took the CPUs while
    # timing (a busy laptop, a shared CI box) it first says the timing is unreliable instead
    data = build_report_data(cpu_run[0])
    t = Translator(lang)
    if any(r.load_reasons for r in data.comparison.rows if r.ok):
        lead = t("summary.unreliable", reasons="\x00").split("\x00")[0]
        first = re.search(r"<li>(.*?)</li>", summary, re.S)
        assert first is not None and first.group(1).startswith(str(html_escape(lead))), summary
    else:
        assert summary_word in summary, summary
    assert "1_2_64_16_naive_eager.json.gz" in html


def test_report_default_path_and_relative_trace_links(
    cpu_run: tuple[Path, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    run = tmp_path / "r"
    shutil.copytree(cpu_run[0], run)
    assert main(["report", str(run), "--lang", "id"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == run / "report.id.html"
    html = out.read_text(encoding="utf-8")
    assert 'href="traces/1_2_64_16_naive_eager.json.gz"' in html


def test_markdown_report_and_summary_only(
    cpu_run: tuple[Path, object], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(cpu_run[0]), "--format", "md", "--lang", "id", "--summary-only"]) == 0
    summary = capsys.readouterr().out
    lines = summary.strip().splitlines()
    assert all(line.startswith("- ") for line in lines) and len(lines) >= 4
    # first the fastest (or those tied for it), after a note on machine load where there was some
    first = (
        lines[1]
        if lines[0].startswith("- Pengukuran waktu eksekusi ini tidak dapat diandalkan")
        else lines[0]
    )
    assert first.startswith("- Tercepat di sini")
    assert any(
        "Jumlah operasi CPU (aten) per lintasan maju: naive 45, naive-inplace 36" in line for line in lines
    )
    assert main(["report", str(cpu_run[0]), "--format", "md", "--lang", "th"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# รายงาน attnprof: 1x2x64x16 fp32")
    for heading in ("## สรุป", "## การเปรียบเทียบ", "## สิ่งที่พบ", "## สิ่งที่คาดไว้", "## ไฟล์เทรซ"):
        assert heading in md
    assert re.search(r"^\| รูปแบบ \| แบ็กเอนด์ \|", md, re.M)  # the comparison table
    assert "`OUT_OF_PLACE_COPY`" in md and "ใช้รุ่นที่เขียนทับในที่ (" in md  # finding in Thai, code as is


def test_scaling_curves_when_a_folder_holds_several_shapes(tmp_path: Path) -> None:
    from attnprof.harness.run import RunOptions, run
    from attnprof.report.html import render_html
    from attnprof.workload import Workload

    for seq in (32, 64):
        run(
            Workload(batch=1, heads=2, seq=seq, head_dim=16),
            variants=["naive-inplace", "sdpa-flash"],
            out=tmp_path / f"s{seq}",
            options=RunOptions(time_budget_s=0.03, min_samples=5),
        )
    data = build_report_data(tmp_path)
    assert data.scaling_axis == "seq" and {p.seq for p in data.scaling} == {32, 64}
    assert {r.label for r in data.comparison.rows} >= {"s32/naive-inplace", "s64/sdpa-flash"}
    html = render_html(data, Translator("en"), out_dir=tmp_path)
    assert _row_svgs(html) == 4 and "Scaling: median time per forward against S" in html


def test_report_bad_options_exit_2(
    cpu_run: tuple[Path, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(cpu_run[0]), "--lang", "fr"]) == 2
    assert main(["report", str(cpu_run[0]), "--format", "pdf"]) == 2
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "attnprof: error: --lang 'fr' is not available: use one of en, id, th"
    assert len(err) == 3


def test_gpu_run_report_draws_gpu_plots(tmp_path: Path) -> None:
    """A run directory whose traces are real GPU traces (linked, not copied): the report stacks
    GPU time by kernel category and draws the GPU ops of one forward."""
    from _paths import trace
    from attnprof.records import RunResult, TimingSummary, encode_json
    from attnprof.report.html import render_html

    (tmp_path / "traces").mkdir()
    results = []
    for variant, prefix, ms in (
        ("naive-inplace", "harryjmoss__particle_transformer", 2.0),
        ("sdpa-flash", "AMD-AGI__TraceLens__tests__traces__h100", 0.5),
    ):
        link = tmp_path / "traces" / f"{variant}.json.gz"
        link.symlink_to(trace(prefix))
        timing = TimingSummary(
            median_ms=ms,
            iqr_ms=ms / 20,
            mean_ms=ms,
            min_ms=ms * 0.9,
            n=6,
            threads=1,
            method="cuda-events",
            noisy=False,
            samples_ms=[ms * f for f in (0.95, 1, 1, 1.02, 1.1, 0.98)],
        )
        results.append(RunResult(variant=variant, status="ok", timing=timing, trace=f"traces/{link.name}"))
    env = environment(device="cuda", device_name="NVIDIA H100", threads=8)
    wl = Workload(batch=8, heads=16, seq=1024, head_dim=64, dtype="bf16", device="cuda").to_record()
    rec = RunRecord(schema="attnprof.run/1", created="now", environment=env, workload=wl, results=results)
    (tmp_path / "run.json").write_bytes(encode_json(rec))

    data = build_report_data(tmp_path)
    assert data.expectation_file == "blog-cuda"
    flash = data.comparison.row("sdpa-flash")
    assert flash.timeline_lane == "gpu" and flash.gpu_category_time_us.get("attention", 0) > 0
    html = render_html(data, Translator("en"), out_dir=tmp_path)
    assert "GPU time per forward by category" in html and "The GPU ops of one forward" in html
    assert _row_svgs(html) == 3
    summary = summarize(data, Translator("en"))
    # the two traces are of unrelated programs: by their shares, the fused kernel saves under 0.02 ms
    # of the 1.5 ms gap (not named), while naive-inplace's copies take a quarter of its traced GPU
    # time, which accounts for the gap's quarter (named)
    assert (
        "sdpa-flash is 4.0x faster than naive-inplace in bf16 (95% interval 3.8–4.2x) because naive-inplace "
        "copies the scores in its out-of-place masked_fill." in summary
    )
    # a finding that times its own cause (GEMMs on CUDA cores) is sized from the same trace's share
    slow = data.comparison.row("naive-inplace")
    gemm = next(f for f in slow.findings if f.code == "CUDA_CORE_GEMM")
    assert slow.forwards and slow.ops_time_us_per_forward
    share = float(gemm.evidence["time_us"]) / slow.forwards / slow.ops_time_us_per_forward
    assert slow.cause_shares["CUDA_CORE_GEMM"] == pytest.approx(share)
    # no lean trace in this run directory: the shares are the rich pass's, and the report says so
    assert any(b.startswith("Op and category shares") and "rich profiler pass" in b for b in summary)


def test_finding_evidence_reads_as_a_short_list(cpu_run: tuple[Path, object]) -> None:
    """Evidence as a reader takes it in (issue 9: raw debug strings): one item per field, whole
    numbers without ".0", per-instance records that are identical shown once with their count,
    shapes kept whole."""
    from attnprof.report.tables import finding_items

    items = {
        (v, code): ev for v, code, _, _, ev in finding_items(build_report_data(cpu_run[0]), Translator("en"))
    }
    ev = items[("naive", "UNFUSED_ATTENTION")]
    occurrences = next(int(e.split(": ")[1]) for e in ev if e.startswith("occurrences: "))
    chains = next(e for e in ev if e.startswith("shape_chains: "))
    assert "scores_shape: [1, 2, 64, 64]" in chains
    assert chains.count("[gemm: ") == 1 and f"count {occurrences}," in chains, chains
    assert not any(re.search(r"\d\.0\b", e) for e in items[("naive", "OUT_OF_PLACE_COPY")]), items
    assert "clones_per_instance: 1" in items[("naive", "OUT_OF_PLACE_COPY")]


@pytest.mark.parametrize("traced_ms", [0.5, 1.2])
def test_a_trace_shorter_than_the_clean_time_is_not_called_profiler_overhead(traced_ms: float) -> None:
    """The inflation line (trace time / clean median) calls the spread the profiler's overhead
    only where every trace is at least as long as the clean time; a shorter one means the machine
    was busier while timing, and the line says that instead."""
    slow, fast = _row("naive-inplace", 1.0, [], 30), _row("sdpa", 1.0, [], 20)
    slow.cpu_time_us_per_forward, fast.cpu_time_us_per_forward = 2000.0, traced_ms * 1000.0
    lines = summarize(_data([slow, fast]), Translator("en"))
    text = " ".join(lines)
    assert ("not the profiler's doing" in text) is (traced_ms < 1.0)
    assert ("the profiler's overhead differs" in text) is (traced_ms >= 1.0)


def test_the_inflation_range_holds_both_passes_figures() -> None:
    """The table shows each variant's rich and lean trace/clean figures; the summary's range must
    hold all of them: a run here had naive's lean pass at 2.2x while the line said "to 1.7x"."""
    a, b = _row("naive", 1.0, [], 45), _row("sdpa", 1.0, [], 20)
    a.cpu_time_us_per_forward, a.lean_time_us_per_forward = 1600.0, 2200.0
    b.cpu_time_us_per_forward, b.lean_time_us_per_forward = 1100.0, 1050.0
    line = next(
        x for x in summarize(_data([a, b]), Translator("en")) if x.startswith("Per forward, the traces")
    )
    assert "took 1.05x (sdpa) to 2.2x (naive)" in line, line
    a.lean_time_us_per_forward = b.lean_time_us_per_forward = None  # an old run: the rich pass alone
    line = next(
        x for x in summarize(_data([a, b]), Translator("en")) if x.startswith("Per forward, the traces")
    )
    assert "took 1.10x (sdpa) to 1.6x (naive)" in line, line
