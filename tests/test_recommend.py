"""attnprof recommend: the choice rules on hand-built rows, then a small real CPU sweep end to end
(sweep -> store -> recommend -> policy file -> attnprof.policy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

from attnprof.cli import main
from attnprof.policy import Policy
from attnprof.recommend import build_policy, recommend, seq_bucket
from attnprof.records import MachineLoad
from attnprof.report.i18n import Translator
from attnprof.report.store_report import StoreReportData, store_summary
from attnprof.store import StoredResult
from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, run_sweep


def row(variant: str, seq: int, median: float | None, *, ok: bool = True, accurate: bool = True, batch: int = 1,
        choice: str = "flash", dtype: str = "fp32", iqr: float = 0.0, samples: list[float] | None = None,
        backend: str | None = None, device: str = "cpu", busy: bool = False) -> StoredResult:  # fmt: skip
    load = MachineLoad(wall_s=1.0, cpus=2, own_cpu_share=0.5, other_cpu_share=0.5 if busy else 0.0,
                       steal_share=0.0, loadavg_1m=None, max_spread=None, unreliable=busy,
                       reasons=["other processes used 50% of the 2 CPUs while timing"] if busy else [])  # fmt: skip
    return StoredResult(
        samples_ms=samples, load=load,
        job_key=f"{variant}-{seq}-{batch}-{dtype}", variant=variant, mode="eager", batch=batch, heads=2, kv_heads=2,
        seq=seq, kv_seq=seq, head_dim=16, dtype=dtype, device=device, causal=True, mask="causal", backward=False,
        phase="prefill", seed=0,
        status="ok" if ok else "error", reason=None if ok else "boom", backend=backend, pytorch_choice=choice,
        median_ms=median, iqr_ms=iqr, n_samples=3, gpu_ops_per_forward=None, cpu_ops_per_forward=None,
        peak_bytes=None, estimate_bytes=None, max_abs_err=1e-7 if accurate else 0.5, accuracy_ok=accurate,
        tflops=None, trace_path=None, device_name="Test CPU", torch_version="2.13.0", host="h", worker=None,
        wall_s=None, started_at="t", finished_at="t", sweep_id=None, log_tail=None,
    )  # fmt: skip


def test_seq_buckets() -> None:
    assert [seq_bucket(n) for n in (1, 2, 3, 300, 512, 513)] == [1, 2, 4, 512, 512, 1024]


def test_fastest_correct_variant_margin_and_dispatch_flag() -> None:
    rows = [
        # bucket 33-64: two configurations (batch 1 and 2)
        row("naive", 64, 1.0), row("naive", 64, 2.0, batch=2),
        row("sdpa-math", 64, 1.5, samples=_spread(1.5)), row("sdpa-math", 64, 3.0, batch=2, samples=_spread(3.0)),
        row("sdpa-flash", 64, 3.0, samples=_spread(3.0)), row("sdpa-flash", 64, 6.0, batch=2, samples=_spread(6.0)),
        row("fast-but-wrong", 64, 0.1, accurate=False), row("fast-but-wrong", 64, 0.2, batch=2),
        row("failed", 64, None, ok=False),
        # bucket 65-128: flash wins, as PyTorch picks
        row("sdpa-math", 128, 4.0), row("sdpa-flash", 128, 2.0),
    ]  # fmt: skip
    recs = recommend(rows)
    assert [(r.bucket.seq_min, r.bucket.seq_max) for r in recs] == [(33, 64), (65, 128)]
    short, long = recs
    assert short.configurations == 2
    assert short.best is not None and short.best.variant == "naive"
    assert short.runner_up is not None and short.runner_up.variant == "sdpa-math"
    assert short.margin == pytest.approx(1.5)
    assert "fast-but-wrong" in short.rejected and "tolerance" in short.rejected["fast-but-wrong"]
    assert short.rejected["failed"].startswith("error")
    assert (short.best_sdpa, short.pytorch_choice, short.differs) == ("math", "flash", True)
    assert short.gain_over_pytorch == pytest.approx(2.0)  # flash is 2x the time of math here
    assert long.best is not None and long.best.variant == "sdpa-flash"
    assert (long.best_sdpa, long.differs, long.margin) == ("flash", False, pytest.approx(2.0))
    assert (short.verdict, long.verdict) == ("pin", "default")  # long: PyTorch already picks flash
    policy = build_policy(recs)
    assert [r["backend"] for r in policy["rules"]] == ["math", "default"]
    matched = Policy.from_dict(policy).rule_for(
        device="cpu", dtype="fp32", causal=True, head_dim=16, gqa=False, seq=50, kv_seq=50
    )
    assert matched is not None and matched.backend == "math"


def test_a_pinning_gain_from_too_few_samples_is_no_verdict() -> None:
    """The same 2x pinning gain as above, from 3 samples a job (or none stored): compare/rank.py's
    rule refuses a 95% interval, so the verdict is "too few samples to tell" with the range of
    the ratios, and the policy keeps PyTorch's dispatch; with 11 samples a job it pins."""

    def rows(samples: int) -> list[StoredResult]:
        def s(m: float) -> list[float] | None:
            return [m * x for x in (0.98, 1.0, 1.02, 0.99, 1.01, 1.0, 0.97, 1.03, 1.0, 1.0, 1.0)][
                :samples
            ] or None

        return [row("sdpa-math", 64, 1.5, samples=s(1.5)), row("sdpa-flash", 64, 3.0, samples=s(3.0))]

    (few,) = recommend(rows(3))
    assert few.verdict == "too_few" and few.pin_gain == pytest.approx(2.0) and few.pin_samples == 3
    assert few.pin_gain_low is None and few.pin_gain_high is None  # no 95% claim
    assert few.pin_gain_range_low == pytest.approx(2.0 * 0.98 / 1.02)  # unpaired: the extremes
    assert few.pin_gain_range_high == pytest.approx(2.0 * 1.02 / 0.98)
    assert [r["backend"] for r in build_policy([few])["rules"]] == ["default"]
    for lang, words in (("en", "too few to tell"), ("id", "terlalu sedikit"), ("th", "น้อยเกินกว่าจะบอกได้")):
        line = next(
            x
            for x in store_summary(
                StoreReportData(store="s.db", results=rows(3), recommendations=[few]), Translator(lang)
            )
            if "64" in x and words in x
        )
        # the range and "a 95% interval needs 6", no interval given
        assert "95% 6" not in line and " 6" in line and ("1.9" in line or "1,9" in line), (lang, line)
    (none,) = recommend(rows(0))
    assert none.verdict == "too_few" and none.pin_samples == 0 and none.pin_gain_range_low is None
    (enough,) = recommend(rows(11))
    assert enough.verdict == "pin" and enough.pin_gain_low is not None and enough.pin_gain_low > 1.0


def test_margins_inside_the_timing_noise_are_ties() -> None:
    # 5% apart, but each measurement's IQR is 20% of its median
    rows = [row("sdpa-math", 64, 1.0, iqr=0.2), row("sdpa-flash", 64, 1.05, iqr=0.2)]
    (rec,) = recommend(rows)
    assert rec.margin == pytest.approx(1.05)
    assert rec.within_noise and rec.differs and rec.gain_within_noise
    clean = [row("sdpa-math", 64, 1.0, iqr=0.01), row("sdpa-flash", 64, 1.5, iqr=0.01)]
    (rec,) = recommend(clean)
    assert not rec.within_noise and not rec.gain_within_noise


def _spread(median: float, pct: float = 0.05) -> list[float]:
    return [median * (1 + pct * (i - 5) / 5) for i in range(11)]


def test_recommend_prefers_pytorch_default_over_a_slower_pinned_math() -> None:
    """sdpa (default dispatch, ran flash) 2x faster than the only pinned backend swept (math): the
    recommendation keeps PyTorch's choice, with the factor and its interval, and the policy pins
    nothing."""
    rows = [
        row("sdpa", 512, 1.0, samples=_spread(1.0), backend="flash"),
        row("sdpa-math", 512, 2.0, samples=_spread(2.0), backend="math"),
        row("naive-inplace", 512, 2.5, samples=_spread(2.5)),
    ]
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.variant == "sdpa"
    assert rec.best_sdpa == "math"  # the fastest *pinned* backend ...
    assert (rec.default_variant, rec.default_backend) == ("sdpa", "flash")
    assert rec.pin_gain == pytest.approx(0.5)  # ... runs at half the default's speed
    assert rec.pin_gain_low is not None and rec.pin_gain_high is not None and rec.pin_gain_high < 1.0
    assert rec.verdict == "default"
    (rule,) = build_policy([rec])["rules"]
    assert rule["backend"] == "default" and rule["pin_gain"] == pytest.approx(0.5)
    policy = Policy.from_dict(build_policy([rec]))
    q = torch.zeros(1, 2, 512, 16)
    assert policy.backend_for(q, q, q, is_causal=True) is None  # PyTorch's own dispatch
    # pinning wins beyond noise: pinned flash 2x faster than the default (which ran math)
    rows = [
        row("sdpa", 512, 2.0, samples=_spread(2.0), backend="math"),
        row("sdpa-flash", 512, 1.0, samples=_spread(1.0), backend="flash"),
    ]
    (rec,) = recommend(rows)
    assert rec.verdict == "pin" and rec.pin_gain == pytest.approx(2.0)
    assert rec.pin_gain_low is not None and rec.pin_gain_low > 1.0
    # the same, 2% apart inside 20% noise: a tie, so no pin
    rows = [
        row("sdpa", 512, 1.02, samples=_spread(1.02, 0.2), backend="math"),
        row("sdpa-flash", 512, 1.0, samples=list(reversed(_spread(1.0, 0.2))), backend="flash"),
    ]
    (rec,) = recommend(rows)
    assert (
        rec.verdict == "default"
        and rec.pin_gain_low is not None
        and rec.pin_gain_low < 1.0 < (rec.pin_gain_high or 0)
    )


def test_the_default_that_ran_the_fastest_pinned_backend_is_the_same_kernel() -> None:
    """sdpa ran flash and pinned flash is fastest: one kernel, so nothing to pin, whatever the
    two separate jobs measured (here 1.5x apart beyond their noise: drift, not the backends)."""
    rows = [
        row("sdpa", 512, 1.5, samples=_spread(1.5), backend="flash"),
        row("sdpa-flash", 512, 1.0, samples=_spread(1.0), backend="flash"),
        row("sdpa-math", 512, 3.0, samples=_spread(3.0), backend="math"),
    ]
    (rec,) = recommend(rows)
    assert (rec.best_sdpa, rec.default_backend) == ("flash", "flash")
    assert (rec.verdict, rec.pin_gain, rec.pin_gain_low, rec.same_kernel) == ("default", 1.0, None, True)
    rule = build_policy([rec])["rules"][0]
    assert (rule["backend"], rule["same_kernel"]) == ("default", True)
    # the default ran math: then pinned flash 1.5x faster beyond noise is a real pin
    rows[0] = row("sdpa", 512, 1.5, samples=_spread(1.5), backend="math")
    (rec,) = recommend(rows)
    assert rec.verdict == "pin" and rec.pin_gain == pytest.approx(1.5) and not rec.same_kernel
    assert build_policy([rec])["rules"][0]["same_kernel"] is False


def test_a_winner_and_runner_up_that_are_one_kernel_tie() -> None:
    """A sweep here: sdpa (which ran flash) 1.25x faster than sdpa-flash, beyond the 10% CPU
    drift, was shown as a margin. They are one kernel: a tie, said so in the store's summary.
    Where sdpa ran math, the same figures are a real margin over sdpa-flash."""
    rows = [
        row("sdpa", 256, 1.0, samples=_spread(1.0, 0.01), backend="flash"),
        row("sdpa-flash", 256, 1.25, samples=_spread(1.25, 0.01), backend="flash"),
        row("sdpa-math", 256, 3.0, samples=_spread(3.0, 0.01), backend="math"),
    ]
    (rec,) = recommend(rows)
    assert (rec.best.variant, rec.runner_up.variant) == ("sdpa", "sdpa-flash")  # type: ignore[union-attr]
    assert rec.margin == pytest.approx(1.25) and rec.within_noise and rec.margin_same_kernel
    data = StoreReportData(store="s.db", results=rows, recommendations=[rec])
    for lang, words in (
        ("en", "run the same kernel (flash)"),
        ("id", "kernel yang sama (flash)"),
        ("th", "เคอร์เนลตัวเดียวกัน (flash)"),
    ):
        assert any(words in b for b in store_summary(data, Translator(lang))), lang
    rows[0] = row("sdpa", 256, 1.0, samples=_spread(1.0, 0.01), backend="math")
    (rec,) = recommend(rows)
    assert not rec.within_noise and not rec.margin_same_kernel
    assert not any("same kernel" in b for b in store_summary(
        StoreReportData(store="s.db", results=rows, recommendations=[rec]), Translator("en")))  # fmt: skip


def test_a_busy_machine_gives_ties_and_no_verdict() -> None:
    """Pinned flash 2x faster than the default, beyond noise: "pin" on a quiet machine; where
    either job was timed while the machine was busy, "unknown" (no pin), the margin a tie, and
    the load's reasons carried."""
    quiet = [
        row("sdpa", 512, 2.0, samples=_spread(2.0), backend="math"),
        row("sdpa-flash", 512, 1.0, samples=_spread(1.0), backend="flash"),
    ]
    (rec,) = recommend(quiet)
    assert rec.verdict == "pin" and not rec.within_noise and rec.unreliable == []
    busy = [quiet[0], row("sdpa-flash", 512, 1.0, samples=_spread(1.0), backend="flash", busy=True)]
    (rec,) = recommend(busy)
    assert rec.verdict == "unknown" and rec.within_noise
    assert rec.unreliable == ["other processes used 50% of the 2 CPUs while timing"]
    assert build_policy([rec])["rules"][0]["backend"] == "default"


@pytest.mark.parametrize(("device", "verdict"), [("cpu", "default"), ("cuda", "pin")])
def test_separate_cpu_jobs_must_differ_beyond_their_drift(device: str, verdict: str) -> None:
    """Pinned flash 5% faster than the default with 1% noise: the interval excludes 1, but on
    CPU separate jobs drift by up to 10% (docs/benchmarks.md), so no pin there; on a GPU no drift
    was measured, so the interval decides."""
    rows = [
        row("sdpa", 512, 1.05, samples=_spread(1.05, 0.01), backend="math", device=device),
        row("sdpa-flash", 512, 1.0, samples=_spread(1.0, 0.01), backend="flash", device=device),
    ]
    (rec,) = recommend(rows)
    assert rec.pin_gain_low is not None and rec.pin_gain_low > 1.0
    assert rec.verdict == verdict
    assert rec.within_noise is (device == "cpu")


def test_a_variant_missing_on_some_configuration_is_not_a_candidate() -> None:
    rows = [row("naive", 64, 1.0), row("naive", 64, 1.0, batch=2), row("sdpa-flash", 64, 0.5)]
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.variant == "naive"
    assert "not run on 1 of the bucket's 2" in rec.rejected["sdpa-flash"]


def test_no_correct_variant() -> None:
    (rec,) = recommend([row("naive", 64, 1.0, accurate=False)])
    assert rec.best is None and rec.best_sdpa is None and not rec.differs
    assert build_policy([rec])["rules"] == []


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("rec") / "r.db"
    cfg = SweepConfig(
        grid=GridSpec(device="cpu", heads=[2], seq=[32, 128], head_dim=[16], dtype=["fp32", "bf16"],
                      variants=["naive-inplace", "sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient"]),
        run=RunSettings(profile=False, time_budget_s=0.03, min_samples=5, warmup_calls=2),
        sweep=SweepSettings(store=str(store)),
    )  # fmt: skip
    summary = run_sweep(cfg)
    assert summary.counts == {"ok": 16, "unsupported": 4}
    return store


def test_recommend_on_a_real_cpu_sweep(
    swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy_file = tmp_path / "policy.json"
    assert main(["recommend", "--store", str(swept), "--json", "--policy-out", str(policy_file)]) == 0
    recs: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert len(recs) == 4  # fp32/bf16 x S 17-32 / 65-128
    for r in recs:
        assert r["best"]["variant"] in {"naive-inplace", "sdpa", "sdpa-math", "sdpa-flash"}
        assert r["margin"] is None or r["margin"] >= 1.0
        assert r["best_sdpa"] in {"math", "flash"}  # the two backends PyTorch has on CPU
        assert r["pytorch_choice"] == "flash"  # PyTorch's CPU dispatch for these 4-D causal shapes
        assert r["differs"] == (r["best_sdpa"] != "flash")
        assert "sdpa-efficient" in r["rejected"] and r["rejected"]["sdpa-efficient"].startswith("unsupported")
    policy = Policy.load(policy_file)
    for r in recs:
        b = r["bucket"]
        q = torch.zeros(
            1,
            2,
            b["seq_max"],
            b["head_dim"],
            dtype={"fp32": torch.float32, "bf16": torch.bfloat16}[b["dtype"]],
        )
        expected = r["best_sdpa"] if r["verdict"] == "pin" else None
        assert policy.backend_for(q, q, q, is_causal=True) == expected
        assert r["default_variant"] == "sdpa" and r["verdict"] in ("pin", "default", "unknown")
        assert (r["verdict"] == "unknown") <= bool(r["unreliable"])  # a busy machine says why
        assert r["pin_gain"] is not None
    # the table names a variant per bucket and says where PyTorch's choice differs
    assert main(["recommend", "--store", str(swept), "--no-color"]) == 0
    table = capsys.readouterr().out
    assert "4 bucket(s)" in table and "PyTorch" in table and "differs" in table
    # it fits 100 columns, names the device once in a title and every winner whole
    assert max(len(line) for line in table.splitlines()) <= 100
    assert table.splitlines()[0].startswith("fastest per bucket on cpu")
    assert "…" not in table
    for r in recs:
        assert f"{r['best']['variant']} " in table
    n_differs = sum(r["differs"] for r in recs)
    assert f"differs from the fastest SDPA backend in {n_differs}" in table
    flat = " ".join(table.split())  # the console wraps long lines at 100 columns
    assert f"pinning beats it beyond noise in {sum(r['verdict'] == 'pin' for r in recs)}" in flat


def test_recommend_on_an_empty_store_is_a_user_error(tmp_path: Path) -> None:
    from attnprof.store import Store

    Store(tmp_path / "e.db").close()
    assert main(["recommend", "--store", str(tmp_path / "e.db")]) == 2


def _with_backward(r: StoredResult, total_ms: float) -> StoredResult:
    """A --backward job: the forward's median stays in median_ms, forward + backward in timing_total."""
    from attnprof.records import TimingSummary

    total = TimingSummary(median_ms=total_ms, iqr_ms=0.01 * total_ms, mean_ms=total_ms, min_ms=total_ms,
                          n=9, threads=2, method="perf_counter", noisy=False, samples_ms=_spread(total_ms, 0.01))  # fmt: skip
    return msgspec.structs.replace(r, backward=True, timing_total=total, job_key=r.job_key + "-bwd")


def test_backward_and_masked_jobs_are_buckets_of_their_own_ranked_by_what_they_ran() -> None:
    """A sweep with --backward both and two masks stored, per variant and shape, a forward-only
    job and a fwd+bwd one: one bucket held both and each variant's time was whichever came last.
    Now each (mask, backward, phase) is its own bucket; a backward bucket ranks by forward +
    backward (here sdpa-math has the faster forward but the slower step); the policy gets rules
    only for what attnprof.policy can match (plain forwards) and names the rest."""
    fwd = [
        row("sdpa-flash", 256, 2.0, samples=_spread(2.0, 0.01), backend="flash"),
        row("sdpa-math", 256, 1.0, samples=_spread(1.0, 0.01), backend="math"),
    ]
    bwd = [_with_backward(fwd[0], 4.0), _with_backward(fwd[1], 9.0)]
    # as the sweep stores a sliding-window job: causal False, the mask named
    sliding = [
        msgspec.structs.replace(r, mask="sliding=64", causal=False, job_key=r.job_key + "-sw") for r in fwd
    ]
    recs = recommend(fwd + bwd + sliding)
    by = {(rec.bucket.mask, rec.bucket.backward): rec for rec in recs}
    assert set(by) == {("causal", False), ("causal", True), ("sliding=64", False)}
    assert by["causal", False].best.variant == "sdpa-math"  # type: ignore[union-attr]
    assert by["causal", True].best.variant == "sdpa-flash"  # type: ignore[union-attr]
    assert by["causal", True].margin == pytest.approx(9.0 / 4.0)
    assert by["causal", True].bucket.label().endswith(" fwd+bwd")
    assert by["sliding=64", False].bucket.label() == "fp32 D=16 S≤256 sliding=64"  # not "full"
    full = msgspec.structs.replace(by["causal", False].bucket, causal=False, mask="none")
    assert full.label() == "fp32 D=16 S≤256 full"
    policy = build_policy(recs)
    assert [r["backend"] for r in policy["rules"]] == ["math"]
    assert len(policy["left_out"]) == 2


def test_no_verdict_pins_nothing_and_the_fastest_backend_is_of_those_measured() -> None:
    """A sweep that timed pinned math and efficient but never PyTorch's own dispatch (`sdpa`):
    no verdict, so the policy keeps PyTorch's choice (it once pinned math there), and the
    fastest SDPA backend is said to be the fastest of those measured, naming them."""
    from attnprof.report.i18n import Translator
    from attnprof.report.store_report import StoreReportData, recommendation_table, store_summary

    rows = [
        row("sdpa-math", 512, 1.0, samples=_spread(1.0), backend="math", choice="flash"),
        row("sdpa-efficient", 512, 2.0, samples=_spread(2.0), backend="efficient", choice="flash"),
    ]
    (rec,) = recommend(rows)
    assert rec.verdict is None and rec.best_sdpa == "math" and rec.sdpa_measured == ["math", "efficient"]
    (rule,) = build_policy([rec])["rules"]
    assert rule["backend"] == "default" and rule["verdict"] is None
    data = StoreReportData(store="s.db", results=rows, recommendations=[rec])
    en = store_summary(data, Translator("en"))
    assert any("the fastest of the SDPA backends measured (math and efficient) is math" in x for x in en), en
    # flash was never run: the dispatch column says it is a prediction
    table = recommendation_table([rec], Translator("en"))
    assert table.header[6] == "PyTorch's dispatch" and "flash (predicted)" in [str(c) for c in table.rows[0]]


def test_the_store_report_says_the_machine_was_busy_first() -> None:
    from attnprof.report.i18n import Translator
    from attnprof.report.store_report import StoreReportData, store_summary

    quiet = [row("sdpa", 512, 2.0, samples=_spread(2.0), backend="math"), row("naive", 512, 3.0)]
    data = StoreReportData(store="s.db", results=quiet, recommendations=recommend(quiet))
    assert not any("busy" in x for x in store_summary(data, Translator("en")))
    busy = [quiet[0], row("naive", 512, 3.0, busy=True)]
    data = StoreReportData(store="s.db", results=busy, recommendations=recommend(busy))
    for lang in ("en", "id", "th"):
        first = store_summary(data, Translator(lang))[1]  # after what the store holds
        assert "1" in first and "2" in first and "50" in first  # 1 of 2 results, 50% of the CPUs
    assert store_summary(data, Translator("en"))[1].startswith(
        "1 of 2 results were timed while the machine was busy"
    )
