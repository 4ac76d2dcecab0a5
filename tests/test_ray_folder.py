"""`analyze DIR --executor ray` on a local Ray instance (loopback only): a synthetic folder of 64
ranks, each a shared trace with its rank shifted, skewed collectives and one planted straggler,
which must be found; the result equals the local pool's."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'attnprof[ray]'")

from _paths import trace
from attnprof.analysis.ranks import analyze_folder
from attnprof.errors import UserError

TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
RANKS = 64
STRAGGLER = 41


def _folder(root: Path, n_coll: int = 8) -> Path:
    base = json.loads(gzip.decompress(trace(TRITON).read_bytes()))
    rng = random.Random(3)
    folder = root / "ranks"
    folder.mkdir()
    t0 = max(e["ts"] + e.get("dur", 0) for e in base["traceEvents"] if isinstance(e.get("ts"), int | float))
    arrivals = []
    for k in range(n_coll):
        a = {r: t0 + 1000.0 * k + rng.uniform(0, 30) for r in range(RANKS)}
        a[STRAGGLER] += 200.0
        arrivals.append((a, max(a.values()) + 50.0))
    for r in range(RANKS):
        doc = dict(base)
        skew = rng.uniform(-3, 3)  # each rank's events a little apart, as real ranks are
        events = [
            dict(e, ts=e["ts"] + skew) if isinstance(e.get("ts"), int | float) else e
            for e in base["traceEvents"]
        ]
        for a, end in arrivals:
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": ALLREDUCE,
                    "pid": 0,
                    "tid": 13,
                    "ts": a[r],
                    "dur": end - a[r],
                }
            )
        doc["traceEvents"] = events
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": RANKS}
        (folder / f"rank-{r}.1.pt.trace.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def ray_local():  # type: ignore[no-untyped-def]
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray
    finally:
        ray.shutdown()


def test_sixty_four_ranks_on_ray_find_the_planted_straggler(tmp_path: Path, ray_local: object) -> None:
    folder = _folder(tmp_path)
    (run,) = analyze_folder(folder, executor="ray")
    view = run.cross_rank.collectives
    assert len(run.cross_rank.ranks) == RANKS and len(run.traces) == RANKS
    assert view is not None and view.aligned == 8
    assert [s.rank for s in view.stragglers] == [str(STRAGGLER)]
    assert view.stragglers[0].last_in == 8
    (local,) = analyze_folder(folder, workers=2)
    assert run.to_dict() == local.to_dict()


def test_a_bad_trace_on_ray_is_one_user_error(tmp_path: Path, ray_local: object) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "rank-0.1.pt.trace.json").write_text("{not json")
    (folder / "rank-1.1.pt.trace.json").write_text('{"traceEvents": []}')
    with pytest.raises(UserError) as err:
        analyze_folder(folder, executor="ray")
    assert "rank-0" in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--executor 'spark': use 'local' or 'ray'"):
        analyze_folder(tmp_path, executor="spark")


def test_the_cli_takes_the_executor_and_refuses_an_address_without_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "attnprof", "analyze", str(tmp_path)]
    r = subprocess.run([*cmd, "--executor", "spark"], capture_output=True, text=True)
    assert r.returncode == 2 and "--executor 'spark': use 'local' or 'ray'" in r.stderr
    r = subprocess.run([*cmd, "--ray-address", "auto"], capture_output=True, text=True)
    assert r.returncode == 2 and "add --executor ray" in r.stderr
