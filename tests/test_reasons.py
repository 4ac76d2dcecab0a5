"""Typed rejection reasons: every rejection a run records carries a reason code with its fields
beside the English sentence; reports say it in their language from the code; a record written
before codes (English only) still reads, through the legacy patterns."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from attnprof.harness.prepare import prepare
from attnprof.harness.run import RunOptions, Shared, run, run_variant
from attnprof.reasons import ENGLISH, english, reason
from attnprof.records import decode_run, encode_json
from attnprof.report.i18n import Translator
from attnprof.report.reasons import translate_reason
from attnprof.units import fmt_bytes
from attnprof.variants.registry import check, get_variant, list_variants
from attnprof.workload import Workload

CPU = Workload(batch=1, heads=2, seq=64, head_dim=16)
HUGE = Workload(batch=1, heads=8, seq=65536, head_dim=64)
FAST = RunOptions(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1, warmup_s=0.0)


def test_every_rejection_on_this_machine_carries_a_code_that_says_its_english() -> None:
    rejected = [(v, d) for v, d in list_variants(CPU) if not d.accepted]
    assert {v.name for v, _ in rejected} >= {"sdpa-efficient", "sdpa-cudnn", "hub-flash"}
    for v, d in rejected:
        assert d.reason_code is not None and d.reason_code.code in ENGLISH, v.name
        assert english(d.reason_code) == d.reason
    accepted = [d for _, d in list_variants(CPU) if d.accepted]
    assert accepted and all(d.reason_code is None for d in accepted)


def test_flex_backward_on_cpu_is_a_coded_rejection_said_in_each_language() -> None:
    d = check(get_variant("flex"), CPU.replace(backward=True))
    if d.reason_code is not None and d.reason_code.code == "needs_cxx":
        pytest.skip("no C++ compiler here: flex is rejected before its backward check")
    assert d.reason_code == reason("no_backward", name="flex", device="cpu")
    said = {lang: translate_reason(d.reason, Translator(lang), d.reason_code) for lang in ("en", "id", "th")}
    assert said["en"] == d.reason
    assert len(set(said.values())) == 3 and all(s.startswith("flex: ") and "cpu" in s for s in said.values())


def test_a_memory_refusal_records_its_figures_and_renders_them_in_every_language() -> None:
    result, prepared = prepare(HUGE, get_variant("naive"), None, RunOptions(), Shared(HUGE), None)
    assert result.status == "refused" and prepared is None
    why = result.reason_code
    assert why is not None and why.code == "memory"
    # with accuracy on, the fp64 temporaries of the check are counted too (issue 21)
    assert [p.code for p in why.parts] == [
        "memory.scores",
        "memory.mask",
        "memory.pending",
        "memory.accuracy",
    ]
    assert why.args["name"] == "naive" and why.args["device"] == "cpu"
    need, free = why.args["need_bytes"], why.args["free_bytes"]
    assert isinstance(need, int) and isinstance(free, int) and need > free
    assert result.reason == english(why) and "--force" in (result.reason or "")
    # the figures are the record's, formatted where they are said
    for lang in ("id", "th"):
        said = translate_reason(result.reason, Translator(lang), why)
        assert said != result.reason and said.startswith("naive: ")
        assert fmt_bytes(need) in said and fmt_bytes(free) in said and "--force" in said
    # the code survives run.json's encoding
    back = msgspec.json.decode(encode_json(result), type=type(result))
    assert back.reason_code == why


def test_a_sweep_jobs_share_of_the_memory_is_the_same_gate_with_its_limit() -> None:
    result = run_variant(HUGE, "naive", options=FAST, memory_share=0.8)
    assert result.status == "refused"
    why = result.reason_code
    assert why is not None and why.code == "memory_share" and why.args["share"] == 0.8
    assert isinstance(why.args["limit_bytes"], int) and why.args["limit_bytes"] < why.args["free_bytes"]
    assert "80% of the" in (result.reason or "") and "force = true" in (result.reason or "")
    assert "80%" in translate_reason(result.reason, Translator("th"), why)
    # force lets it through the gate (not run to the end here: it would build 100 GiB)
    from attnprof.harness.run import memory_gate

    forced = msgspec.structs.replace(FAST, force=True)
    assert memory_gate(get_variant("naive"), HUGE, Shared(HUGE), forced, share=0.8) is None


def test_a_run_json_without_codes_still_says_the_standard_reasons_in_thai(tmp_path: Path) -> None:
    from attnprof.report.data import build_report_data
    from attnprof.report.tables import not_run_table

    out = tmp_path / "r"
    run(CPU, ["naive-inplace", "sdpa-efficient"], out=out, options=FAST)
    raw = (out / "run.json").read_bytes()
    rec = decode_run(raw)
    coded = next(r for r in rec.results if r.variant == "sdpa-efficient")
    assert coded.reason_code is not None and coded.reason_code.code == "cuda_only"
    th = Translator("th")
    with_code = {row[0]: row[2] for row in not_run_table(build_report_data(out), th).rows}
    # the same run as an older attnprof wrote it: no reason_code key at all
    text = re.sub(rb',\s*"reason_code": (null|\{[^{}]*\{[^{}]*\}[^{}]*\})', b"", raw)
    assert b'"reason_code":' not in text
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_bytes(text)
    assert decode_run(text).results[1].reason_code is None
    without = {row[0]: row[2] for row in not_run_table(build_report_data(old), th).rows}
    assert without == with_code
    assert without["sdpa-efficient"] == "sdpa-efficient: PyTorch มีให้ใช้บน CUDA เท่านั้น แต่การรันนี้อยู่บน cpu"


def test_a_variants_reason_inside_a_models_is_said_whole_in_each_language() -> None:
    inner = check(get_variant("sdpa-efficient"), CPU).reason_code
    assert inner is not None
    why = reason("in_model", inner, name="attnprof-sdpa-efficient")
    assert (
        english(why)
        == "attnprof-sdpa-efficient: sdpa-efficient: PyTorch implements it for CUDA only; this run is on cpu"
    )
    assert translate_reason(english(why), Translator("th"), why) == (
        "attnprof-sdpa-efficient: sdpa-efficient: PyTorch มีให้ใช้บน CUDA เท่านั้น แต่การรันนี้อยู่บน cpu"
    )
    with pytest.raises(KeyError, match="no reason code"):
        reason("not_a_code", name="x")


def test_the_load_meters_reasons_are_codes_said_in_each_language_and_old_records_still_read() -> None:
    """Issue 30: the load meter's reasons are carried as codes with their figures, never parsed
    back from English; a record written before them (English only) reads the same."""
    from attnprof.harness.load import LoadMeter
    from attnprof.records import MachineLoad
    from attnprof.report.reasons import say_loads
    from attnprof.units import number_locale

    load = LoadMeter().start().stop(0.904)  # an IQR of 90.4% of the median: past SPREAD_LIMIT
    spread = next(c for c in load.reason_codes if c.code == "load_spread")
    assert spread.args["share"] == 0.904
    assert "timing spread up to 90% of the median (IQR)" in load.reasons
    assert load.reasons == [english(c) for c in load.reason_codes]
    old = msgspec.json.decode(
        msgspec.json.encode({**msgspec.to_builtins(load), "reason_codes": []}), type=MachineLoad
    )
    for lang, words in (("id", "sebaran waktu hingga 90% dari median (IQR)"), ("th", "90% ของมัธยฐาน")):
        t = Translator(lang)
        said = say_loads([(load.reasons, load.reason_codes)], t)
        assert any(words in s for s in said), said
        assert say_loads([(old.reasons, old.reason_codes)], t) == said  # the English read as before
    # a figure with decimals in the reader's locale: Indonesian's decimal comma
    avg = reason("load_loadavg", load=5.25, n=2)
    with number_locale("id"):
        assert say_loads([([english(avg)], [avg])], Translator("id")) == [
            "rata-rata beban (loadavg) 5,2 pada 2 CPU"
        ]
    assert english(avg) == "load average 5.2 on 2 CPUs"
