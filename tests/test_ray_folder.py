"""`analyze DIR --executor ray` on a local Ray instance (loopback only): a synthetic folder of 64
ranks, each a shared trace with its rank shifted, skewed collectives and one planted straggler,
which must be found; the result equals the local pool's."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'attnprof[ray]'")

from _rank_folder import build
from attnprof.analysis.ranks.folder import analyze_folder
from attnprof.errors import UserError
from attnprof.ray_start import is_loopback, ray_started

RANKS = 64
STRAGGLER = 41


def _folder(root: Path) -> Path:
    return build(root / "ranks", RANKS, STRAGGLER, comm_args=True)


@pytest.fixture(scope="module")
def ray_local():  # type: ignore[no-untyped-def]
    # started as attnprof starts one without --ray-address (on this machine's loopback only)
    ray, owns = ray_started(None)
    assert owns
    try:
        yield ray
    finally:
        ray.shutdown()


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids: list[int] = []
        for tid in os.listdir(f"/proc/{p}/task"):
            with open(f"/proc/{p}/task/{tid}/children") as f:
                kids += [int(c) for c in f.read().split()]
        out.update(kids)
        todo += kids
    return out


def _listening(pids: set[int]) -> list[str]:
    """The local addresses of the TCP sockets these processes listen on (/proc/net/tcp{,6})."""
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                link = os.readlink(f"/proc/{p}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    # the address in hex, 32-bit words in the host's (little-endian) byte order
                    raw = bytes.fromhex(cols[1].split(":")[0])
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                    addr = ipaddress.ip_address(words)
                    mapped = getattr(addr, "ipv4_mapped", None)
                    out.append(str(mapped or addr))
    return out


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's /proc/net/tcp")
def test_a_local_ray_is_on_the_loopback_address_only(ray_local: Any) -> None:
    assert [n["NodeManagerAddress"] for n in ray_local.nodes()] == ["127.0.0.1"]
    # every socket Ray's processes (GCS, raylet, workers: this process's descendants) listen on
    listening = _listening(_descendants(os.getpid()) | {os.getpid()})
    assert len(listening) >= 3, listening  # the GCS, the raylet and the driver's own at least
    assert all(ipaddress.ip_address(a).is_loopback for a in listening), listening
    assert ray_started(None) == (ray_local, False)  # one already running is used, not owned
    assert is_loopback("127.0.0.1:6379") and is_loopback("ray://localhost:10001")
    assert not is_loopback("auto") and not is_loopback("ray://head:10001")


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
