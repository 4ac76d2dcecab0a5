"""The CPU peak: measured with GEMMs up to 2048+ in the run's dtype, cached per machine with its
provenance, above every variant on this machine; a figure above 100% is flagged the same way,
with the same number, in the table, the finding, the summary and the JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from attnprof.compare.compare import compare
from attnprof.harness.env import cache_path, environment, peak_text, run_peak
from attnprof.harness.run import RunOptions, run
from attnprof.records import PeakProvenance, decode_run, encode_json
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.peak_view import peak_source
from attnprof.report.summary import summarize
from attnprof.report.tables import comparison_table, env_items, finding_items
from attnprof.workload import Workload


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ATTNPROF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "peaks.json"


def test_peak_is_measured_large_and_cached_with_provenance(fresh_cache: Path) -> None:
    env = environment("cpu")
    tflops, prov = run_peak(env, "fp32")
    source = peak_text(prov)
    assert tflops > 0 and "fp32 2048" in prov.tried and "fp32 2048" in source and "threads" in source
    assert prov.kind == "measured" and prov.threads and prov.host == env.host
    assert cache_path() == fresh_cache
    # the provenance as data, said in Indonesian with no English left (host and sizes are names)
    env.peak_tflops, env.peak_source, env.peak_provenance = tflops, source, prov
    ind = peak_source(env, Translator("id"))
    assert ind.startswith("diukur: GEMM persegi terbaik dari fp32 512") and "0,4 dtk" in ind, ind
    if fresh_cache.exists():  # not written when the machine was busy while measuring (said so)
        data = json.loads(fresh_cache.read_text())
        (entry,) = data["peaks"].values()
        assert entry["tflops"] == tflops and "best square GEMM" in entry["what"]
        assert entry["provenance"]["tried"] == prov.tried
        again, prov2 = run_peak(env, "fp32")  # from the cache, at once
        assert again == tflops and "cached in" in peak_text(prov2) and prov2.cached_in == str(fresh_cache)
        assert prov2.measured_at == prov.measured_at
    else:
        assert "not cached" in source and prov.not_cached
        assert "tidak disimpan dalam tembolok" in ind


def test_cpu_peak_is_above_every_variant(fresh_cache: Path, tmp_path: Path) -> None:
    for wl, variants in (
        (Workload(batch=1, heads=4, seq=256, head_dim=64), None),
        (Workload(batch=1, heads=4, seq=256, head_dim=64, dtype="bf16"), ["sdpa", "sdpa-flash"]),
    ):
        rec = run(wl, variants, options=RunOptions(profile=False, time_budget_s=0.2, min_samples=5))
        prov = rec.environment.peak_provenance
        if prov is not None and prov.busy:
            # measured while the machine was busy (a low figure, not kept): no % is taken of it
            assert all(r.pct_of_peak is None for r in rec.results), rec.results
            assert any(r.tflops_useful is not None for r in rec.results)
            continue
        timed = [r for r in rec.results if r.pct_of_peak is not None]
        assert timed
        for r in timed:
            assert r.pct_of_peak is not None
            assert r.pct_of_peak <= 100.0, (r.label, r.pct_of_peak, rec.environment)


def test_above_peak_is_one_number_everywhere(cpu_run: tuple[Path, object], tmp_path: Path) -> None:
    """A run whose peak was wrong (a millionth of the real one): every output flags the same figure."""
    src = cpu_run[0]
    rec = decode_run((src / "run.json").read_bytes())
    env = rec.environment
    assert env.peak_tflops
    env.peak_tflops /= 1e6
    if env.peak_provenance is not None and env.peak_provenance.busy:
        # this test is about a wrong peak, not a busy one (whose % is not computed): as if cached
        env.peak_provenance = msgspec.structs.replace(
            env.peak_provenance, not_cached=[], cached_in=str(tmp_path / "peaks.json")
        )
    for r in rec.results:
        if r.tflops_useful is not None:
            r.pct_of_peak = 100.0 * r.tflops_useful / env.peak_tflops
    (tmp_path / "run.json").write_bytes(encode_json(rec))
    (tmp_path / "traces").symlink_to(src / "traces")

    comp = compare([tmp_path])
    row = comp.row("naive-inplace")
    assert row.above_peak
    pct = f"{row.pct_of_peak:.0f}"  # type: ignore[operator]
    payload = msgspec.to_builtins(comp)
    js = next(r for r in payload["rows"] if r["label"] == "naive-inplace")
    assert f"{js['pct_of_peak']:.0f}" == pct
    # a percentage 0-100 in compare's JSON, as in run.json (it was a fraction in one, % in the other)
    timed = next(r for r in rec.results if r.variant == "naive-inplace")
    assert js["pct_of_peak"] == pytest.approx(timed.pct_of_peak)
    above = [f for f in row.findings if f.code == "ABOVE_PEAK"]
    assert len(above) == 1 and str(above[0].evidence["pct_of_peak"]) == pct
    assert above[0].message.startswith(f"{pct}% of the peak")

    data = build_report_data(tmp_path, expect=None)
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        table = comparison_table(data, t)
        cell = next(c for c in next(r for r in table.rows if r[0] == "naive-inplace") if "⚠" in c)
        assert f"({pct}% ⚠)" in cell
        msgs = [
            m for v, code, _, m, _ in finding_items(data, t) if v == "naive-inplace" and code == "ABOVE_PEAK"
        ]
        assert len(msgs) == 1 and msgs[0].startswith(f"{pct}%")
        bullets = [b for b in summarize(data, t) if "naive-inplace" in b and f"{pct}%" in b]
        assert len(bullets) == 1
        peak_item = dict(env_items(data, t))[t("env.peak")]
        # the provenance in the reader's language (id: "diukur", th: "วัดจริง"), up to the colon
        measured = t(
            "env.peak_measured", tried="", best="", repeats="", budget="", threads="", host="", when=""
        )
        assert re.match(rf"[\d.,e+-]+ TFLOP/s: {re.escape(measured.split(':')[0])}:", peak_item), peak_item


def _with_peak(cpu_run: tuple[Path, object], tmp_path: Path, prov: PeakProvenance, name: str) -> Path:
    """The shared run's run.json with another peak provenance (what a run on a busy or a quiet
    machine records); its pct_of_peak fields as the harness wrote them before this rule."""
    src = cpu_run[0]
    rec = decode_run((src / "run.json").read_bytes())
    env = rec.environment
    assert env.peak_tflops
    env.peak_provenance = prov
    for r in rec.results:
        if r.tflops_useful is not None:
            r.pct_of_peak = 100.0 * r.tflops_useful / env.peak_tflops
    out = tmp_path / name
    out.mkdir()
    (out / "run.json").write_bytes(encode_json(rec))
    (out / "traces").symlink_to(src / "traces")
    return out


BUSY = "other processes used 93% of the 2 CPUs while timing"  # one of harness/load.py's reasons


def test_a_peak_measured_on_a_busy_machine_gives_no_percentage(cpu_run, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Measured while busy (not cached): a low peak, so % of it is "not computed", with why, in
    compare, its JSON, the report in en/id/th and run's terminal; a cached peak's % stays."""
    from attnprof.report.run_view import render_run

    measured = dict(kind="measured", dtype="fp32", tried=["fp32 512"], best_at="fp32 n = 512", threads=2)
    busy = _with_peak(cpu_run, tmp_path, PeakProvenance(**measured, not_cached=[BUSY]), "busy")
    quiet = _with_peak(cpu_run, tmp_path, PeakProvenance(**measured, cached_in="/c/peaks.json"), "quiet")

    comp = compare([busy], analyse=False)
    timed = [r for r in comp.rows if r.tflops_useful is not None]
    assert timed and all(r.pct_of_peak is None for r in timed)
    assert not any(f.code == "ABOVE_PEAK" for r in comp.rows for f in r.findings)
    assert any(
        n.startswith("% of peak not computed: peak measured while the machine was busy: " + BUSY)
        for n in comp.notes
    )
    assert all(r["pct_of_peak"] is None for r in msgspec.to_builtins(comp)["rows"])
    data = build_report_data(busy, expect=None)
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        item = dict(env_items(data, t))[t("env.peak")]
        tail = t("env.peak_busy", what="", reasons="").split(";")[-1].strip()
        assert tail and tail in item, item
        table = comparison_table(data, t)
        # the TFLOP/s cells carry no "(12%)" of the busy peak
        assert not any(re.search(r"\(\d[\d.,]*\s?%", str(c)) for r in table.rows for c in r), lang
    record = decode_run((busy / "run.json").read_bytes())
    capsys.readouterr()
    render_run(record, busy, no_color=True)
    shown = capsys.readouterr().out
    assert "% of peak not computed: peak measured while the machine was busy" in shown
    assert "rerun on a quiet machine" in shown

    # where the peak came from the cache: the percentage is shown, and nothing about a busy peak
    comp = compare([quiet], analyse=False)
    assert all(r.pct_of_peak is not None for r in comp.rows if r.tflops_useful is not None)
    assert not any("not computed" in n for n in comp.notes)
    en = Translator("en")
    item = dict(env_items(build_report_data(quiet, expect=None), en))[en("env.peak")]
    assert "not computed" not in item
    render_run(decode_run((quiet / "run.json").read_bytes()), quiet, no_color=True)
    assert "not computed" not in capsys.readouterr().out


def test_a_cached_peak_is_used_and_not_remeasured(fresh_cache: Path) -> None:
    """A cached figure is the run's peak, with cached_in and no busy reasons, whatever the load."""
    from attnprof.harness.env import _cache_key, _save_cache

    env = environment("cpu")
    import torch

    prov = PeakProvenance(kind="measured", dtype="fp32", tried=["fp32 512"], threads=torch.get_num_threads())
    key = _cache_key(env, "fp32", torch.get_num_threads())
    _save_cache(fresh_cache, {key: {"tflops": 123.0, "what": "x", "provenance": msgspec.to_builtins(prov)}})
    tflops, got = run_peak(env, "fp32")
    assert tflops == 123.0 and got.cached_in == str(fresh_cache) and not got.not_cached and not got.busy
