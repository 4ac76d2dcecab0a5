"""A variant whose calls take seconds (bf16 on a CPU without native bf16 matmul) gets one warm-up
call, one profiled step and three timing rounds, and says so; a fast run keeps the full schedule."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from attnprof.harness.run import SLOW_CALL_S, SLOW_MIN_SAMPLES, SLOW_STEPS, RunOptions, run
from attnprof.workload import Workload

SLOW = textwrap.dedent(
    f'''
    import os
    import time
    import torch.nn.functional as F

    def sleepy(q, k, v, is_causal=False, scale=None):
        """SDPA after a sleep just over attnprof's slow-call threshold; each call appends the
        calling process's id to the file SLEEPY_CALLS names (the test counts them)."""
        with open(os.environ["SLEEPY_CALLS"], "a") as fh:
            fh.write(f"{{os.getpid()}}\\n")
        time.sleep({SLOW_CALL_S} + 0.1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    '''
)


def test_slow_calls_get_a_short_schedule_and_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = tmp_path / "calls"
    monkeypatch.setenv("SLEEPY_CALLS", str(calls))  # the trial's child process inherits it
    src = tmp_path / "slow.py"
    src.write_text(SLOW)
    out = tmp_path / "r"
    rec = run(
        Workload(batch=1, heads=2, seq=64, head_dim=16),
        ["sdpa", f"{src}:sleepy"],
        out=out,
        options=RunOptions(time_budget_s=0.2, min_samples=10),
    )
    by = {r.variant: r for r in rec.results}
    slow, fast = by["sleepy"], by["sdpa"]
    assert slow.status == "ok" and fast.status == "ok"
    assert slow.trace is not None and (out / slow.trace).is_file()  # profiled, one step
    assert any(
        w.startswith("one call takes 1.") and "2 warm-up calls and 1 profiled step" in w
        for w in slow.warnings
    )
    assert not any(w.startswith("one call takes") for w in fast.warnings)  # fast: full schedule
    for r in (slow, fast):  # timing is interleaved: the short timing holds for the whole run
        assert r.timing is not None and r.timing.n == SLOW_MIN_SAMPLES and r.timing.cold is None
        assert any(w.startswith(f"timed in {SLOW_MIN_SAMPLES} interleaved rounds") for w in r.warnings)
        assert r.min_rounds == SLOW_MIN_SAMPLES
    # the short schedule holds in the user variant's trial run (a child process, run_variant's
    # own timing) too: 2 warm-up calls, the lean and the profiled step, and a calibration call
    # and 3 rounds of timing in each process; the trial's timing once took 12 (cold rounds)
    pids = calls.read_text().split()
    per_process = sorted(pids.count(p) for p in dict.fromkeys(pids))
    assert len(per_process) == 2 and max(per_process) <= 9, per_process
    # recorded per variant: the schedule each was profiled with, against the run's default
    assert rec.steps == (1, 1, 3) and rec.min_rounds == 10
    assert slow.profile_steps == SLOW_STEPS and fast.profile_steps == (1, 1, 3)
    _shown_per_variant(out)


def _shown_per_variant(out: Path) -> None:
    """The reports name the variant profiled otherwise beside the run's default (not "1, 1, 3"
    alone), and the rounds both were timed in; sdpa, profiled at the default, is not named."""
    import io

    from rich.console import Console

    from attnprof.report.data import build_report_data
    from attnprof.report.i18n import Translator
    from attnprof.report.tables import env_items
    from attnprof.report.terminal import render_comparison

    data = build_report_data(out)
    sdpa, sleepy = data.comparison.row("sdpa"), data.comparison.row("sleepy")
    assert sleepy.own_steps == SLOW_STEPS and sdpa.own_steps is None
    assert sleepy.own_min_rounds == sdpa.own_min_rounds == SLOW_MIN_SAMPLES
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        env = dict(env_items(data, t))
        assert env[t("env.steps")] == "1, 1, 3 (sleepy: 0, 0, 1)", (lang, env)
        assert env[t("env.rounds")] == f"10 ({t.join(['sdpa', 'sleepy'])}: {SLOW_MIN_SAMPLES})", (lang, env)
    buf = io.StringIO()
    render_comparison(Console(file=buf, width=100, color_system=None), data.comparison)
    text = buf.getvalue()
    assert "sleepy: profiled with schedule 0, 0, 1 (wait, warmup, active), not the run's 1, 1, 3." in text
    assert f"sdpa and sleepy: timed in at least {SLOW_MIN_SAMPLES} rounds, not the run's 10." in text
    assert "sdpa: profiled" not in text


def test_fast_runs_keep_the_full_schedule(tmp_path: Path) -> None:
    rec = run(
        Workload(batch=1, heads=2, seq=64, head_dim=16),
        ["sdpa"],
        out=tmp_path / "r",
        options=RunOptions(profile=False, time_budget_s=0.1, min_samples=10),
    )
    t = rec.results[0].timing
    assert t is not None and t.n >= 10 and t.cold is not None
    assert not any("interleaved rounds" in w for w in rec.results[0].warnings)


def test_cpu_dtype_note_names_the_missing_flags() -> None:
    from attnprof.harness.env import cpu_dtype_note

    note = cpu_dtype_note("cpu", "bf16", {"avx2", "f16c"})
    assert note is not None and "avx512_bf16 nor amx_bf16" in note and "emulated" in note
    assert cpu_dtype_note("cpu", "bf16", {"avx2", "amx_bf16"}) is None  # native: no note
    assert cpu_dtype_note("cpu", "fp16", {"avx2", "avx512_fp16"}) is None
    assert cpu_dtype_note("cpu", "fp32", {"avx2"}) is None  # fp32 is every CPU's own
    assert cpu_dtype_note("cuda", "bf16", {"avx2"}) is None  # not a CPU matmul


def test_run_prints_and_records_the_note_on_this_machine(tmp_path: Path) -> None:
    """On this machine's real flags: the note is printed (stderr) and recorded (run.json) exactly
    when its flags lack native bf16."""
    import subprocess
    import sys

    from attnprof.harness.env import cpu_dtype_note
    from attnprof.records import decode_run

    expected = cpu_dtype_note("cpu", "bf16")
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "attnprof", "run", "-v", "sdpa", "--shape", "1,2,32,16", "--dtype", "bf16"]
    cmd += ["--device", "cpu", "--no-profile", "--time-budget", "0.05", "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (f"note: {expected}" in proc.stderr) if expected else ("note:" not in proc.stderr)
    env = decode_run((out / "run.json").read_bytes()).environment
    assert env.notes == ([expected] if expected else [])
