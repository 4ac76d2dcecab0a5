"""The Ray executor on a local Ray instance on CPU: jobs as Ray tasks, results streamed into the
driver's SQLite store, crash isolation inside a task, resume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'attnprof[ray]'")

from attnprof.ray_start import ray_started
from attnprof.store import Store
from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, run_sweep
from attnprof.sweep.ray_exec import RayExecutor

CRASH_VARIANT = '''
import os
import torch


def attention(q, k, v, *, is_causal=True, scale=None):
    """Aborts the process on long sequences."""
    if q.shape[-2] >= 64:
        print("crash_variant: calling os.abort()", flush=True)
        os.abort()
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
'''


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[RayExecutor]:
    # a local instance as attnprof starts one (on the loopback address only, attnprof.ray_start),
    # no dashboard; torn down after the module
    ray, _ = ray_started(None)
    try:
        yield RayExecutor(device="cpu", num_cpus=1)
    finally:
        ray.shutdown()


def test_ray_sweep_stores_streams_isolates_and_resumes(ray_executor: RayExecutor, tmp_path: Path) -> None:
    crash = tmp_path / "crash_variant.py"
    crash.write_text(CRASH_VARIANT)
    store = tmp_path / "r.db"
    cfg = SweepConfig(
        grid=GridSpec(
            device="cpu",
            heads=[2],
            seq=[16, 64],
            head_dim=[16],
            variants=["naive-inplace", "sdpa-flash", f"{crash}:attention"],
        ),
        run=RunSettings(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1),
        sweep=SweepSettings(store=str(store), executor="ray"),
    )
    seen: list[str] = []
    summary = run_sweep(cfg, executor=ray_executor, on_result=lambda r, s: seen.append(r.result.status))
    assert ray_executor.max_in_flight == 2
    assert summary.ran == 6 and summary.counts == {"ok": 5, "crashed": 1}
    assert len(seen) == 6  # streamed: one callback per result, each after its row was stored
    with Store(store) as st:
        rows = st.query()
        assert len(rows) == 6
        crashed = next(r for r in rows if r.status == "crashed")
        assert crashed.seq == 64 and "SIGABRT" in (crashed.reason or "")
        assert "calling os.abort()" in (crashed.log_tail or "")
        assert all((r.worker or "").startswith("ray:") for r in rows)
        assert st.conn.execute("SELECT executor FROM sweeps").fetchone()[0] == "ray"
    again = run_sweep(cfg, executor=ray_executor)
    assert (again.ran, again.already) == (0, 6)
