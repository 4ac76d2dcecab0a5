"""The CUDA-only paths, exercised where the CPU build can exercise their mechanism (issue 21):
a failure inside record_failure, the memory gate's parts, the device a run's work goes to, the
environment's TF32 state, the sweep worker a sticky CUDA error poisons. What only a GPU shows is
marked `gpu` (skipped here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnprof.harness.accuracy import compare_bytes
from attnprof.harness.cuda import is_sticky, on_device, release_memory, unusable
from attnprof.harness.memory import available_bytes, cached_free_bytes
from attnprof.harness.run import RunOptions, Shared, memory_gate, record_failure, run
from attnprof.records import RunResult
from attnprof.sweep.jobs import poisoned
from attnprof.variants.registry import get_variant
from attnprof.workload import Workload

STICKY = "CUDA error: an illegal memory access was encountered"


def _raise_sticky() -> None:
    raise RuntimeError(STICKY)


def test_record_failure_survives_empty_cache_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    # after a sticky error every CUDA call raises it again, torch.cuda.empty_cache() included;
    # the fault is injected here because the CPU build has no CUDA context to poison
    monkeypatch.setattr(torch.cuda, "empty_cache", _raise_sticky)
    result = RunResult(variant="sdpa", mode="eager", status="ok")
    record_failure(result, "warm-up", RuntimeError(STICKY), "cuda")
    assert result.status == "error"
    assert "illegal memory access" in (result.reason or "")
    assert any("CUDA context is unusable" in w for w in result.warnings)
    assert poisoned("cuda", result)  # the sweep replaces this worker


def test_record_failure_on_a_healthy_cleanup_adds_no_warning() -> None:
    result = RunResult(variant="naive", mode="eager", status="ok")
    record_failure(result, "build", RuntimeError("shapes do not match"), "cpu")
    assert result.status == "error" and result.warnings == []
    assert not poisoned("cpu", result)
    # an ordinary CUDA failure (not sticky) keeps the worker
    cuda_result = RunResult(variant="naive", mode="eager", status="error", reason="CUDA error: out of memory")
    assert not poisoned("cuda", cuda_result)


def test_a_run_whose_cleanup_raises_still_writes_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the whole suite on CPU, with the cleanup of the failing variant raising as a poisoned CUDA
    # context's does: run.json is still written, with the failure and the variants after it
    import attnprof.harness.failures as harness_failures

    def cleanup_raises(device: str) -> str | None:
        return release_memory("cuda")  # with empty_cache raising: returns the error, never raises

    monkeypatch.setattr(torch.cuda, "empty_cache", _raise_sticky)
    monkeypatch.setattr(harness_failures, "release_memory", cleanup_raises)
    bad = tmp_path / "bad.py"
    bad.write_text(
        f"def attention(q, k, v, *, is_causal=True, scale=None):\n    raise RuntimeError({STICKY!r})\n"
    )
    w = Workload(batch=1, heads=2, seq=16, head_dim=16)
    # in this process (no trial child): a trial that ends in a sticky error is recorded from the
    # trial and never reaches this process's cleanup (test_harness's sticky-trial test)
    opts = RunOptions(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1, isolate_user=False)
    rec = run(w, [f"{bad}:attention", "naive-inplace"], out=tmp_path / "run", options=opts)
    assert (tmp_path / "run" / "run.json").exists()
    status = {r.variant: r.status for r in rec.results}
    assert status["naive-inplace"] == "ok"
    failed = [r for r in rec.results if r.status == "error"]
    assert len(failed) == 1 and any("unusable" in x for x in failed[0].warnings)


def test_sticky_errors_are_told_from_ordinary_ones() -> None:
    assert is_sticky("CUDA error: device-side assert triggered")
    assert is_sticky(STICKY)
    assert not is_sticky("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert not is_sticky("CUDA error: invalid configuration argument")
    assert not unusable("cpu")


def test_the_memory_gate_names_each_part_it_counts() -> None:
    w = Workload(batch=1, heads=2, seq=64, head_dim=16)
    v = get_variant("sdpa-math")
    shared = Shared(w)
    # a share so small that every variant is refused, to read the parts of the need
    shared.prepared_transient = 10 * 2**30  # as if a huge variant were prepared and held
    why = memory_gate(v, w, shared, RunOptions(), share=1e-12)
    assert why is not None
    parts = {p.code: p.args for p in why.parts}
    assert parts["memory.accuracy"]["size_bytes"] == compare_bytes(w) == 6 * 2 * 64 * 16 * 8
    transient = v.estimate_bytes(w) - v.mask_cost(w)
    assert parts["memory.retained"]["size_bytes"] == 10 * 2**30 - transient
    assert "memory.flush" not in parts  # CPU timing flushes no L2
    need = (
        v.estimate_bytes(w) + shared.pending_bytes(accuracy=True) + compare_bytes(w) + 10 * 2**30 - transient
    )
    assert why.args["need_bytes"] == need


def test_the_memory_gate_counts_no_part_that_is_not_there() -> None:
    w = Workload(batch=1, heads=2, seq=64, head_dim=16)
    why = memory_gate(get_variant("sdpa-math"), w, Shared(w), RunOptions(check_accuracy=False), share=1e-12)
    assert why is not None
    codes = {p.code for p in why.parts}
    assert not codes & {"memory.accuracy", "memory.retained", "memory.flush"}
    # a variant larger than every one prepared before it needs no more than its own estimate
    shared = Shared(w)
    shared.prepared_transient = 1
    why = memory_gate(get_variant("naive"), w, shared, RunOptions(), share=1e-12)
    assert why is not None and "memory.retained" not in {p.code for p in why.parts}


def test_compare_bytes_counts_the_larger_gradient_of_decode() -> None:
    w = Workload(batch=1, heads=2, seq=4, kv_seq=256, head_dim=16, phase="decode", backward=True)
    assert compare_bytes(w) == 6 * 2 * 256 * 16 * 8  # dK/dV (Skv rows), not the output (Sq rows)


def test_cpu_memory_has_no_cached_part_and_cuda_n_is_made_current() -> None:
    assert cached_free_bytes("cpu") == 0
    assert available_bytes("cpu") > 0
    # cuda:N: the run's GPU is made current (events, streams, SDPA's device properties follow it)
    ctx = on_device("cuda:1")
    assert isinstance(ctx, torch.cuda.device) and ctx.idx == 1
    assert not isinstance(on_device("cpu"), torch.cuda.device)
    assert not isinstance(on_device("cuda"), torch.cuda.device)  # the current device already


def test_environment_records_the_fp32_matmul_precision() -> None:
    from attnprof.harness.env import environment

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        env = environment("cpu")
        assert env.float32_matmul_precision == "high"
        torch.set_float32_matmul_precision("highest")
        assert environment("cpu").float32_matmul_precision == "highest"
    finally:
        torch.set_float32_matmul_precision(before)
    assert env.cuda_matmul_allow_tf32 is None  # recorded on CUDA only, where it applies


def test_a_ray_workers_job_process_follows_the_gpus_ray_gives_each_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ray reuses its worker processes and sets CUDA_VISIBLE_DEVICES per GPU task; the job process
    # (real worker processes here, running tests/_sweep_helpers.py) must see this task's GPUs
    import os

    from attnprof.sweep import ray_exec

    tests = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", str(tests) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(ray_exec, "_POOL", None)
    monkeypatch.setattr(ray_exec, "_POOL_GPUS", None)
    seen = []
    try:
        for gpus in ("0", "0", "1"):
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
            pool = ray_exec._pool("_sweep_helpers")
            got = pool.call("env", ["CUDA_VISIBLE_DEVICES"], timeout_s=60)
            seen.append((got["CUDA_VISIBLE_DEVICES"], pool.call("echo", None, timeout_s=60)["pid"]))
    finally:
        if ray_exec._POOL is not None:
            ray_exec._POOL.close()
    assert [g for g, _ in seen] == ["0", "0", "1"]
    assert seen[0][1] == seen[1][1] != seen[2][1]  # kept while the GPUs stay, replaced when they change
