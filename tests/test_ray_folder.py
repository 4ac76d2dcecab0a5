"""`analyze DIR --executor ray` on a local Ray instance (loopback only): a synthetic folder of 64
ranks, each a shared trace with its rank shifted, skewed collectives and one planted straggler,
which must be found; the result equals the local pool's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'attnprof[ray]'")

from _rank_folder import build
from attnprof.analysis.ranks import analyze_folder
from attnprof.errors import UserError

RANKS = 64
STRAGGLER = 41


def _folder(root: Path) -> Path:
    return build(root / "ranks", RANKS, STRAGGLER, comm_args=True)


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
    assert view is not None and view.aligned == 8 and view.bases == {"process_group_seq": 8}
    assert all(c.bus_bandwidth_gbps is not None for c in view.collectives)
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
