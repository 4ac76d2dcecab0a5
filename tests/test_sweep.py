"""attnprof sweep: grid expansion, the worker pool (real crashes), and real sweeps on CPU that are
killed with SIGKILL and resumed, run concurrently on one store, and exported."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psutil
import pytest

from attnprof.cli import main
from attnprof.errors import UserError
from attnprof.harness.run import RunOptions
from attnprof.store import Store
from attnprof.sweep import (
    GridSpec,
    SweepConfig,
    SweepSettings,
    expand,
    job_key,
    load_config,
    run_sweep,
)
from attnprof.sweep.grid import JobSpec, parse_bools, parse_ints
from attnprof.sweep.local import LocalExecutor
from attnprof.sweep.pool import Task, WorkerPool, WorkerStartError
from attnprof.workload import Workload

TESTS = Path(__file__).parent

# A user variant that aborts the process at S == 64 and is plain SDPA otherwise.
CRASH_VARIANT = '''
import os
import torch


def attention(q, k, v, *, is_causal=True, scale=None):
    """Aborts the process at S == 64 (for the crash-isolation tests)."""
    if q.shape[-2] == 64:
        print("crash_variant: calling os.abort()", flush=True)
        os.abort()
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
'''

SLOW_VARIANT = '''
import time
import torch


def attention(q, k, v, *, is_causal=True, scale=None):
    """Hangs (for the timeout test)."""
    time.sleep(60)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
'''

FAST = ["--device", "cpu", "--time-budget", "0.02", "--min-samples", "3", "--no-profile", "--no-progress"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def sweep_cmd(store: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from attnprof.cli import main; main()",
        "sweep",
        "--store",
        str(store),
        *FAST,
        *args,
    ]


# -- grid ---------------------------------------------------------------------------------------


def test_flag_lists_parse() -> None:
    assert parse_ints("512, 1024,2048", "--seq") == [512, 1024, 2048]
    assert parse_bools("both", "--causal") == [True, False]
    with pytest.raises(UserError, match="not an integer"):
        parse_ints("512,abc", "--seq")
    with pytest.raises(UserError, match="true, false, both"):
        parse_bools("maybe", "--causal")


def test_grid_expansion_drops_invalid_gqa_and_dedups() -> None:
    cfg = SweepConfig(
        grid=GridSpec(heads=[4, 8], kv_heads=[0, 4, 3], seq=[64], variants=["naive", "sdpa-flash"])
    )
    jobs, notes = expand(cfg)
    # heads 4: kv 0 and kv 4 are the same workload; kv 3 invalid. heads 8: kv 0, kv 4 valid; kv 3 invalid
    assert len({j.workload for j in jobs}) == 3
    assert len(jobs) == 6
    assert notes == ["2 combination(s) dropped: heads not a multiple of kv_heads"]


def test_unknown_variant_and_missing_file_fail_fast(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown variant 'nope'"):
        expand(SweepConfig(grid=GridSpec(variants=["nope"])))
    with pytest.raises(UserError, match="does not exist"):
        expand(SweepConfig(grid=GridSpec(variants=[str(tmp_path / "x.py") + ":f"])))


def test_toml_config_and_unknown_keys(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "s.toml",
        '[grid]\nseq = [64, 128]\ndtype = ["fp32", "bf16"]\nvariants = ["naive"]\n[run]\ntime_budget_s = 0.1\n',
    )
    cfg = load_config(good)
    assert cfg.grid.seq == [64, 128] and cfg.run.time_budget_s == 0.1
    assert len(expand(cfg)[0]) == 4
    bad = write(tmp_path, "b.toml", "[grid]\nsequence = [64]\n")
    with pytest.raises(UserError, match="sequence"):
        load_config(bad)


def test_run_table_is_the_harness_run_options_and_jobs_carry_a_typed_label(tmp_path: Path) -> None:
    cfg = load_config(
        write(
            tmp_path, "r.toml", '[grid]\ncompile = [false, true]\nvariants = ["naive"]\n[run]\nforce = true\n'
        )
    )
    assert isinstance(cfg.run, RunOptions) and cfg.run.force
    jobs, _ = expand(cfg)
    assert [(j.variant, j.compile, j.mode, j.label) for j in jobs] == [
        ("naive", False, "eager", "naive"),
        ("naive", True, "compile", "naive:compile"),
    ]
    assert jobs[1].describe().startswith("naive:compile ")  # the label, never "naive_compile"
    # compile is the grid's axis: the [run] table refuses it rather than saying it twice
    with pytest.raises(UserError, match=r"\[grid\] compile"):
        expand(load_config(write(tmp_path, "c.toml", "[run]\ncompile = true\n")))


def test_print_config_shows_grid_and_count_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "r.db"
    code = main(
        [
            "sweep",
            "--store",
            str(store),
            "--seq",
            "64,128",
            "--dtype",
            "fp32,bf16",
            "-v",
            "naive,sdpa-flash",
            "--print-config",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "seq = [64, 128]" in out
    assert "# 4 configuration(s) x variants = 8 job(s)" in out
    run_table = out.split("[run]")[1].split("[sweep]")[0]
    assert "force = false" in run_table and "compile" not in run_table
    assert not store.exists()
    # the printed config is valid TOML that expands to the same grid
    cfg = load_config(write(tmp_path, "p.toml", out))
    assert len(expand(cfg)[0]) == 8


def test_bad_sweep_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--store", str(tmp_path / "r.db"), "--seq", "0", "--print-config"]) == 2
    assert main(["sweep", "--store", str(tmp_path / "r.db"), "--executor", "slurm"]) == 2
    assert main(["results", "--store", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("attnprof: error:") for line in err)


def test_job_key_ignores_gpu_index_and_settings() -> None:
    jobs, _ = expand(SweepConfig(grid=GridSpec(seq=[64], variants=["naive", "sdpa-flash"], device="cuda:0")))
    jobs1, _ = expand(
        SweepConfig(
            grid=GridSpec(seq=[64], variants=["naive", "sdpa-flash"], device="cuda:1"),
            run=RunOptions(time_budget_s=9),
        )
    )
    assert [job_key(j, "H200") for j in jobs] == [job_key(j, "H200") for j in jobs1]
    assert len({job_key(j, "H200") for j in jobs}) == 2
    assert job_key(jobs[0], "H200") != job_key(jobs[0], "A100")


# -- worker pool ----------------------------------------------------------------------------------


def helper_pool(size: int = 1, **kw: object) -> WorkerPool:
    env = {"PYTHONPATH": str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return WorkerPool("_sweep_helpers", size, env_for=lambda slot: env | {"SLOT": str(slot)}, **kw)  # type: ignore[arg-type]


def test_pool_reuses_workers_and_isolates_crashes() -> None:
    with helper_pool(1, init={"x": 1}) as pool:
        tasks = [
            Task("echo", 1), Task("echo", 2), Task("abort", "x"), Task("echo", 3),
            Task("segfault", None), Task("fail", 4), Task("big", 100_000), Task("echo", 5),
        ]  # fmt: skip
        outs = {o.task.id: o for o in pool.run(tasks)}
        o = [outs[t.id] for t in tasks]
        # reuse: the first two ran in one process, which kept state between them
        assert o[0].value["pid"] == o[1].value["pid"] and o[1].value["calls"] == 2
        assert o[0].value["init"] == {"x": 1}
        # abort: recorded with how it died and its last output (stdout and stderr)
        assert o[2].kind == "crashed" and "SIGABRT" in o[2].message
        assert "about to abort: x" in o[2].log_tail and "last words on stderr" in o[2].log_tail
        # a fresh worker took over
        assert o[3].kind == "ok" and o[3].value["pid"] != o[0].value["pid"] and o[3].value["calls"] == 1
        # a real segfault (ctypes write to address 0)
        assert o[4].kind == "crashed" and "SIGSEGV" in o[4].message and "address 0" in o[4].log_tail
        # a handler's exception is an error with its traceback, and the worker lives on
        assert o[5].kind == "error" and "handler failed on 4" in o[5].message
        assert o[6].kind == "ok" and len(o[6].value["data"]) == 100_000  # frames bigger than a pipe buffer
        assert o[7].value["pid"] == o[6].value["pid"]
        assert pool.spawned == 3


def test_pool_timeout_kills_and_replaces() -> None:
    with helper_pool(2) as pool:
        outs = list(pool.run([Task("sleep", 30, timeout_s=0.5), Task("echo", 1), Task("echo", 2)]))
        kinds = sorted(o.kind for o in outs)
        assert kinds == ["ok", "ok", "timeout"]
        # killed at its timeout, not slept out: a bound on meaning (30 s), not a speed check
        assert 0.5 <= next(o for o in outs if o.kind == "timeout").wall_s < 30


def test_pool_env_per_slot_and_recycle() -> None:
    with helper_pool(2) as pool:
        outs = list(pool.run([Task("env", ["SLOT"]) for _ in range(6)]))
        assert {o.value["SLOT"] for o in outs} <= {"0", "1"}
        first = pool.call("recycle", None)
        after = pool.call("echo", None)
        assert after["pid"] != first["pid"]


def test_local_executor_one_worker_per_visible_gpu_and_cpu_thread_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pinning itself, checked on CPU: with --device cuda the executor starts one worker per
    entry of CUDA_VISIBLE_DEVICES and gives each exactly one of them."""
    from attnprof.sweep.local import LocalExecutor

    monkeypatch.setenv("PYTHONPATH", str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    ex = LocalExecutor(device="cuda", handlers="_sweep_helpers")
    try:
        assert ex.workers == 2
        outs = list(ex.pool.run([Task("env", ["CUDA_VISIBLE_DEVICES"]) for _ in range(8)]))
        assert {o.value["CUDA_VISIBLE_DEVICES"] for o in outs} <= {"3", "5"}
        pins = {o.worker.split("/")[0]: o.value["CUDA_VISIBLE_DEVICES"] for o in outs}
        assert len(set(pins.values())) == len(pins)  # no two workers share a GPU
    finally:
        ex.close()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UserError, match="no GPU is visible"):
        LocalExecutor(device="cuda", handlers="_sweep_helpers")
    ex = LocalExecutor(device="cpu", workers=2, handlers="_sweep_helpers")
    try:
        value = ex.pool.call("echo", None)
        assert value["init"]["threads"] == max(1, (os.cpu_count() or 1) // 2)
    finally:
        ex.close()


def test_pool_reports_workers_that_cannot_start() -> None:
    with (
        WorkerPool("no_such_module_for_attnprof", 1) as pool,
        pytest.raises(WorkerStartError, match="start-up"),
    ):
        list(pool.run([Task("echo", 1)]))


# -- real sweeps ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    """One local executor (one CPU worker process) for this module's in-process sweeps: each
    sweep would otherwise start a worker of its own and pay for importing torch in it. A worker
    that crashes or times out is still replaced, as in any one sweep; the sweeps started as
    subprocesses below (kill -9, two at once) keep the default executor each sweep makes."""
    ex = LocalExecutor(device="cpu")
    yield ex
    ex.close()


def small_config(
    store: Path, variants: list[str], *, seq: list[int] | None = None, **sweep: object
) -> SweepConfig:
    return SweepConfig(
        grid=GridSpec(
            device="cpu", batch=[1], heads=[2], seq=seq or [16, 64], head_dim=[16], variants=variants
        ),
        run=RunOptions(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1),
        sweep=SweepSettings(store=str(store), **sweep),  # type: ignore[arg-type]
    )


def test_crash_isolation_with_an_aborting_user_variant(tmp_path: Path, executor: LocalExecutor) -> None:
    crash = write(tmp_path, "crash_variant.py", CRASH_VARIANT)
    store = tmp_path / "r.db"
    cfg = small_config(store, ["naive-inplace", f"{crash}:attention", "sdpa-flash"])
    summary = run_sweep(cfg, executor=executor)
    assert summary.ran == 6 and summary.counts == {"ok": 5, "crashed": 1}
    with Store(store) as st:
        rows = {(r.variant.rsplit(":", 1)[-1], r.seq): r for r in st.query()}
    crashed = rows[("attention", 64)]
    assert crashed.status == "crashed"
    assert "SIGABRT" in (crashed.reason or "") and "calling os.abort()" in (crashed.log_tail or "")
    assert rows[("attention", 16)].status == "ok"
    # the jobs after the crash ran in a fresh worker
    assert rows[("sdpa-flash", 64)].status == "ok"
    assert rows[("sdpa-flash", 64)].worker != crashed.worker
    # resume: nothing left to do, and crashed stays crashed
    again = run_sweep(cfg, executor=executor)
    assert (again.ran, again.already) == (0, 6)
    # --retry crashed runs exactly that job again
    retry = run_sweep(
        small_config(store, ["naive-inplace", f"{crash}:attention", "sdpa-flash"], retry=["crashed"]),
        executor=executor,
    )
    assert retry.ran == 1 and retry.counts == {"crashed": 1}
    with Store(store) as st:
        assert st.count() == 6


def test_memory_estimate_over_the_limit_is_refused_and_timeout_is_recorded(
    tmp_path: Path, executor: LocalExecutor
) -> None:
    slow = write(tmp_path, "slow_variant.py", SLOW_VARIANT)
    store = tmp_path / "r.db"
    # naive at S=65536, H=8: one fp32 score tensor is 128 GiB, far over any free RAM here
    big = SweepConfig(
        grid=GridSpec(device="cpu", heads=[8], seq=[65536], head_dim=[16], variants=["naive"]),
        run=RunOptions(profile=False, time_budget_s=0.02, min_samples=3),
        sweep=SweepSettings(store=str(store)),
    )
    summary = run_sweep(big, executor=executor)
    # the harness's one memory gate, against the worker's share of the free memory
    assert summary.counts == {"refused": 1}
    hang = small_config(store, [f"{slow}:attention"], seq=[16], timeout_s=3)
    summary = run_sweep(hang, executor=executor)
    assert summary.counts == {"timeout": 1}
    with Store(store) as st:
        rows = {r.status: r for r in st.query()}
    refused = rows["refused"]
    assert "needs an estimated" in (refused.reason or "") and "80% of the" in (refused.reason or "")
    assert (refused.estimate_bytes or 0) > 100 * 2**30
    assert refused.reason_code is not None and refused.reason_code.code == "memory_share"
    # --retry and --status take the word older stores wrote for it
    assert run_sweep(
        msgspec.structs.replace(big, sweep=SweepSettings(store=str(store), retry=["skipped"])),
        executor=executor,
    ).counts == {"refused": 1}
    assert "3 s timeout" in (rows["timeout"].reason or "")


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _rows_written(store: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_resume_after_kill_9_at_random_moments(tmp_path: Path) -> None:
    """Kill the sweep process with SIGKILL at random moments, each kill in the next run of the
    same sweep: once during start-up (before the store may exist), then twice a random time after
    a random number of that run's jobs were stored; then let it finish: every job is in the store
    exactly once, the crashing variant's jobs are marked crashed, and each killed sweep's workers
    die with it. One sweep killed three times stands in for three sweeps killed twice each (the
    seeds 1-3 this test once ran): the same kinds of moment, one start of torch for each kill."""
    rng = random.Random(1)  # random moments, the same ones every run
    crash = write(tmp_path, "crash_variant.py", CRASH_VARIANT)
    store = tmp_path / "r.db"
    seqs = [16, 32, 48, 64, 80, 96]
    variants = ["naive-inplace", "sdpa-flash", f"{crash}:attention"]
    args = ["--seq", ",".join(map(str, seqs)), "-H", "2", "-d", "16", "-v", ",".join(variants)]
    total = len(variants) * len(seqs)
    kills = 0
    for attempt in range(3):
        before = _rows_written(store)
        proc = subprocess.Popen(sweep_cmd(store, *args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if attempt == 0:  # during start-up: the store may not exist yet
            time.sleep(rng.uniform(0.2, 1.5))
        else:  # a random time after a random number of this run's jobs have been stored
            wait_rows = rng.randint(1, 4)
            deadline = time.monotonic() + 60
            while (
                _rows_written(store) < before + wait_rows
                and proc.poll() is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
        workers = _children(proc.pid)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        # PR_SET_PDEATHSIG: no orphaned worker keeps running the killed sweep's job
        _gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, f"workers outlived the killed sweep: {alive}"
        with Store(store) as st:
            assert st.integrity_ok()
    # each job takes >= 0.1 s (the harness's timing warm-up): 18 jobs outlast the kill points
    # (at most 4 rows and 0.3 s after them, twice)
    assert kills == 3
    done = subprocess.run(sweep_cmd(store, *args, "--json"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["jobs"] == total
    assert summary["already_stored"] + summary["ran"] == total
    assert summary["already_stored"] > 0
    with Store(store) as st:
        rows = st.query()
        keys = [r.job_key for r in rows]
        assert len(keys) == len(set(keys)) == total
        statuses = {(r.variant.rsplit(":", 1)[-1], r.seq): r.status for r in rows}
        assert statuses[("attention", 64)] == "crashed"
        assert all(s == "ok" for k, s in statuses.items() if k != ("attention", 64))
        env_name = st.conn.execute("SELECT device_name FROM environments").fetchone()[0]
    # the store's keys are exactly the grid's
    grid = GridSpec(device="cpu", heads=[2], seq=seqs, head_dim=[16], variants=variants)
    assert set(keys) == {job_key(j, env_name) for j in expand(SweepConfig(grid=grid))[0]}


def test_two_concurrent_sweeps_on_one_store(tmp_path: Path) -> None:
    store = tmp_path / "r.db"
    a = ["--seq", "16,32,48", "-H", "2", "-d", "16", "-v", "naive-inplace,sdpa-flash,sdpa-math"]
    b = ["--seq", "32,48,64", "-H", "2", "-d", "16", "-v", "naive-inplace,sdpa-flash,sdpa-math"]
    procs = [
        subprocess.Popen(
            sweep_cmd(store, *x, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for x in (a, b)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    summaries = [json.loads(o) for o, _ in outs]
    with Store(store) as st:
        assert st.integrity_ok()
        rows = st.query()
        assert len(rows) == len({r.job_key for r in rows}) == 12  # 4 lengths x 3 variants, each once
        assert st.conn.execute("SELECT COUNT(*) FROM sweeps").fetchone()[0] == 2
    # the overlap (S=32, 48) was run by one sweep and left by the other (a lease or a stored
    # result): no job was timed twice, each sweep timing the other
    assert sum(s["ran"] for s in summaries) == 12
    with Store(store) as st:
        assert st.leases() == []  # both released what they held


def test_results_command_formats_and_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], executor: LocalExecutor
) -> None:
    store = tmp_path / "r.db"
    run_sweep(small_config(store, ["naive-inplace", "sdpa-flash", "sdpa-efficient"]), executor=executor)
    capsys.readouterr()
    assert main(["results", "--store", str(store), "--no-color"]) == 0
    table = capsys.readouterr().out
    assert "sdpa-efficient" in table and "unsupported" in table and "6 result(s)" in table
    # it fits 100 columns with every variant name whole; why a row is not ok is said below it
    assert max(len(line) for line in table.splitlines()) <= 100
    assert "naive-inplace " in table and "sdpa-flash " in table and "…" not in table
    assert "sdpa-efficient (2 rows): unsupported: " in table
    assert "ops" not in table.split("\n", 2)[1]  # profiling was off: no empty ops/peak columns
    wide = tmp_path / "results.txt"
    assert main(["results", "--store", str(store), "-o", str(wide)]) == 0
    assert "6 result(s)" in wide.read_text()
    assert main(["results", "--store", str(store), "--format", "csv", "--status", "ok"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 4 and {r["variant"] for r in rows} == {"naive-inplace", "sdpa-flash"}
    assert main(["results", "--store", str(store), "--format", "json", "--seq", "64", "--samples"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 3 and all(r["seq"] == 64 for r in data)
    assert all(len(r["samples_ms"]) >= 3 for r in data if r["status"] == "ok")
    assert main(["results", "--store", str(store), "--format", "xml"]) == 2
    pytest.importorskip("pyarrow", reason="parquet export needs the parquet extra (pyarrow)")
    import pandas as pd

    out = tmp_path / "r.parquet"
    assert main(["results", "--store", str(store), "--format", "parquet", "-o", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 6


def test_keep_traces_and_profile(tmp_path: Path, executor: LocalExecutor) -> None:
    store = tmp_path / "r.db"
    traces = tmp_path / "traces"
    cfg = small_config(store, ["naive", "sdpa-flash"], seq=[32], keep_traces=str(traces))
    cfg.run.profile = True
    run_sweep(cfg, executor=executor)
    with Store(store) as st:
        rows = st.query()
    assert len(rows) == 2
    for r in rows:
        assert r.status == "ok" and r.trace_path and Path(r.trace_path).is_file()
        assert r.trace_path.endswith(".json.gz") and Path(r.trace_path).is_relative_to(traces)
        assert r.cpu_ops_per_forward and r.cpu_ops_per_forward > 0


def test_tensorboard_dir_gets_one_sub_folder_per_job(tmp_path: Path, executor: LocalExecutor) -> None:
    store = tmp_path / "r.db"
    tb = tmp_path / "tb"
    cfg = small_config(store, ["naive"], seq=[16, 32])
    cfg.run.profile = True
    cfg.run.tensorboard_dir = str(tb)
    run_sweep(cfg, executor=executor)
    jobs = sorted(p for p in tb.iterdir() if p.is_dir())
    assert len(jobs) == 2
    for job in jobs:
        (f,) = job.iterdir()
        assert f.name.endswith(".pt.trace.json.gz") and "naive" in f.name


def test_grid_takes_masks_backward_and_phase_and_keys_stay_stable() -> None:
    cfg = SweepConfig(
        grid=GridSpec(
            seq=[64], mask=["causal", "sliding=16", "padding=9"], backward=[False, True], device="cpu"
        )
    )
    jobs, _ = expand(cfg)
    masks = {(j.workload.mask, j.workload.backward) for j in jobs}
    assert ("sliding=16", True) in masks and ("causal", False) in masks
    # padding=9 needs one length per batch element (batch 1 here: fine); a misfit is dropped, said
    assert ("padding=9", False) in masks
    bad = SweepConfig(grid=GridSpec(seq=[64], batch=[2], mask=["padding=9"], device="cpu"))
    with pytest.raises(UserError, match="one key length per batch element"):
        expand(bad)
    # the keys of plain causal forward jobs are those of stores written before masks existed
    plain = next(j for j in jobs if j.workload.mask == "causal" and not j.workload.backward)
    old = JobSpec(
        workload=Workload(batch=1, heads=8, seq=64, head_dim=64, device="cpu").to_record(),
        variant=plain.variant,
    )
    assert job_key(plain, "cpu") == job_key(old, "cpu")
    assert len({job_key(j, "cpu") for j in jobs}) == len(jobs)
