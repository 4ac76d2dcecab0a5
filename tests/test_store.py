"""The SQLite results store: schema and migrations, one transaction per result, unique job keys,
concurrent writers, kill -9 in the middle of writes, and the export formats."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from _records import environment
from attnprof.errors import UserError
from attnprof.records import (
    Accuracy,
    MemoryResult,
    ProfileSummary,
    RunResult,
    TimingSummary,
    WorkloadRecord,
)
from attnprof.store import SCHEMA_VERSION, Filters, ResultRow, Store, StoredResult, now_iso
from attnprof.store.export import export_rows
from attnprof.store.schema import migrate, schema_version
from attnprof.workload import Workload

ENV = environment(
    attnprof_version="0.1.0",
    torch_version="2.13.0+cpu",
    host="testhost",
    device_name="Test CPU",
    cpu_model="Test CPU",
)


def make_row(
    key: str, *, seq: int = 64, variant: str = "sdpa-flash", status: str = "ok", median: float = 1.0
) -> ResultRow:
    wl = Workload(batch=1, heads=2, seq=seq, head_dim=16).to_record()
    ok = status == "ok"
    result = RunResult(
        variant=variant,
        status=status,  # type: ignore[arg-type]
        reason=None if ok else f"{status} on purpose",
        backend="flash" if ok else None,
        timing=TimingSummary(
            median_ms=median, iqr_ms=0.1, mean_ms=median, min_ms=median * 0.9, n=3, threads=2,
            method="perf_counter", noisy=False, samples_ms=[median * 0.9, median, median * 1.1],
        ) if ok else None,
        accuracy=Accuracy(max_abs_err=1e-7, max_rel_err=1e-6, nan_count=0, inf_count=0, tolerance=1e-5, ok=True) if ok else None,
        memory=MemoryResult(peak_bytes=4096, method="test", estimate_bytes=8192) if ok else None,
        profile=ProfileSummary(forwards=3, cpu_ops_per_forward=19, gpu_ops_per_forward=0,
                               cpu_time_us_per_forward=10, gpu_time_us_per_forward=0) if ok else None,
        tflops_useful=0.5 if ok else None,
        trace="/tmp/x.json.gz" if ok else None,
    )  # fmt: skip
    t = now_iso()
    return ResultRow(
        job_key=key, workload=wl, variant=variant, mode="eager", result=result, environment=ENV,
        pytorch_choice="flash", started_at=t, finished_at=t, wall_s=0.01, worker="test",
    )  # fmt: skip


def test_new_store_is_wal_and_current(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        assert st.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert schema_version(st.conn) == SCHEMA_VERSION
        tables = {r[0] for r in st.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"results", "environments", "sweeps"} <= tables


def test_version_1_store_is_migrated_without_losing_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute(
        "INSERT INTO results (job_key, variant, mode, batch, heads, kv_heads, seq, kv_seq, head_dim, dtype, device,"
        " causal, seed, config, status, result, started_at, finished_at)"
        " VALUES ('k1','naive','eager',1,2,2,64,64,16,'fp32','cpu',1,0,'{}','ok','{\"variant\":\"naive\",\"status\":\"ok\"}','t','t')"
    )
    conn.close()
    with Store(path) as st:
        assert schema_version(st.conn) == SCHEMA_VERSION
        rows = st.query()
        assert [r.job_key for r in rows] == ["k1"]
        assert rows[0].sweep_id is None and rows[0].log_tail is None
        assert st.record(make_row("k2"))
        assert st.count() == 2


def _insert(conn: sqlite3.Connection, key: str, status: str, accuracy_ok: int | None) -> None:
    conn.execute(
        "INSERT INTO results (job_key, variant, mode, batch, heads, kv_heads, seq, kv_seq, head_dim, dtype, device,"
        " causal, seed, config, status, accuracy_ok, result, started_at, finished_at)"
        " VALUES (?, 'naive', 'eager', 1, 2, 2, 64, 64, 16, 'fp32', 'cpu', 1, 0, '{}', ?, ?,"
        ' \'{"variant":"naive","status":"ok"}\', \'t\', \'t\')',
        (key, status, accuracy_ok),
    )


def test_a_schema_4_store_says_incorrect_in_its_status_column_once_migrated(tmp_path: Path) -> None:
    """Before schema 5 an incorrect result was stored as "ok" with accuracy_ok = 0 (migration 1's
    CHECK had no 'incorrect'). Read-only, the old file stays readable as it is (the pair read as
    one word); opened to write, it is migrated once: the table rebuilt, the column saying
    'incorrect', correct and unchecked rows untouched, and new incorrect rows stored as such."""
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=4)
    _insert(conn, "wrong", "ok", 0)
    _insert(conn, "right", "ok", 1)
    _insert(conn, "unchecked", "ok", None)
    _insert(conn, "old-word", "skipped", None)
    with pytest.raises(sqlite3.IntegrityError):  # what schema 4 could not hold
        _insert(conn, "new-word", "incorrect", 0)
    conn.close()
    with Store(path, readonly=True) as st:  # read without upgrading
        assert schema_version(st.conn) == 4
        assert {r.job_key: r.status for r in st.query()}["wrong"] == "incorrect"
        assert st.done_keys(statuses=["incorrect"]) == {"wrong"} and st.status_of("wrong") == "incorrect"
    with Store(path) as st:
        assert schema_version(st.conn) == SCHEMA_VERSION == 5
        column = dict(st.conn.execute("SELECT job_key, status FROM results").fetchall())
        assert column == {"wrong": "incorrect", "right": "ok", "unchecked": "ok", "old-word": "skipped"}
        assert {r.job_key: r.status for r in st.query()} == {**column, "old-word": "refused"}
        assert st.conn.execute("PRAGMA index_list(results)").fetchall()  # the shape index remade
        bad = make_row("bad")
        acc = bad.result.accuracy
        assert acc is not None
        bad.result.accuracy = msgspec.structs.replace(acc, max_abs_err=0.5, ok=False)
        bad.result.settle_status()
        assert bad.result.status == "incorrect" and st.record(bad)
        assert (
            st.conn.execute("SELECT status FROM results WHERE job_key = 'bad'").fetchone()[0] == "incorrect"
        )
    with Store(path) as st:  # once: nothing left to migrate
        assert schema_version(st.conn) == 5 and st.count() == 5


def test_store_from_a_newer_attnprof_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UserError, match="newer than this attnprof"):
        Store(path)


def test_not_a_database_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="not a SQLite database"):
        Store(path)
    with pytest.raises(UserError, match="no results store"):
        Store(tmp_path / "missing.db", readonly=True)


def test_a_key_is_stored_once_and_replace_overwrites(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        assert st.record(make_row("a", median=1.0)) is True
        assert st.record(make_row("a", median=2.0)) is False  # resume/concurrent duplicate: first wins
        assert st.count() == 1
        assert st.query()[0].median_ms == 1.0
        assert st.record(make_row("a", median=3.0, status="ok"), replace=True) is True
        assert st.count() == 1
        assert st.query()[0].median_ms == 3.0
        assert st.done_keys(["a", "b"]) == {"a"}
        # one environment row however many results share it
        assert st.conn.execute("SELECT COUNT(*) FROM environments").fetchone()[0] == 1


def test_round_trip_of_metrics_and_samples(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        st.record(make_row("a", median=2.0))
        r = st.query(samples=True)[0]
        assert r.samples_ms == [1.8, 2.0, 2.2]
        assert (r.status, r.backend, r.pytorch_choice) == ("ok", "flash", "flash")
        assert (r.peak_bytes, r.estimate_bytes, r.cpu_ops_per_forward, r.accuracy_ok) == (
            4096,
            8192,
            19,
            True,
        )
        assert r.device_name == "Test CPU" and r.torch_version == "2.13.0+cpu"
        full = st.run_result("a")
        assert full is not None and full.timing is not None and full.timing.n == 3
        assert st.query()[0].samples_ms is None  # samples only when asked


def test_stored_row_carries_the_whole_workload(tmp_path: Path) -> None:
    # StoredResult is flat, so it declares the workload's fields again: they must agree, and the
    # store writes each one and reads it back
    stored = {f.name: f.type for f in msgspec.structs.fields(StoredResult)}
    for f in msgspec.structs.fields(WorkloadRecord):
        assert stored.get(f.name) == f.type, f.name
    row = make_row("a")
    with Store(tmp_path / "r.db") as st:
        st.record(row)
        assert st.query()[0].workload() == row.workload


def test_unknown_status_is_rejected(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        with pytest.raises(ValueError, match="unknown status"):
            st.record(make_row("a", status="exploded"))
        assert st.count() == 0


def test_filters(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        st.record(make_row("a", seq=64, variant="naive"))
        st.record(make_row("b", seq=128, variant="naive"))
        st.record(make_row("c", seq=128, variant="sdpa-flash", status="crashed"))
        assert {r.job_key for r in st.query(Filters(seq=[128]))} == {"b", "c"}
        assert {r.job_key for r in st.query(Filters(status=["crashed"]))} == {"c"}
        assert {r.job_key for r in st.query(Filters(variant=["naive"], seq=[64, 128]))} == {"a", "b"}
        assert st.query(Filters(causal=False)) == []
        assert st.done_keys(statuses=["crashed"]) == {"c"}


def test_rows_older_sweeps_stored_as_skipped_read_as_refused(tmp_path: Path) -> None:
    # a sweep's memory gate stored "skipped" before the harness's one gate: such a row, written
    # as that attnprof wrote it (status column and result JSON), reads back in today's word
    path = tmp_path / "r.db"
    with Store(path) as st:
        st.record(make_row("old", status="refused"))
        st.record(make_row("new", status="refused", seq=128))
    conn = sqlite3.connect(path)
    result = json.loads(conn.execute("SELECT result FROM results WHERE job_key = 'old'").fetchone()[0])
    result["status"] = "skipped"
    result.pop("reason_code")
    conn.execute(
        "UPDATE results SET status = 'skipped', result = ? WHERE job_key = 'old'", (json.dumps(result),)
    )
    conn.commit()
    conn.close()
    for readonly in (False, True):
        with Store(path, readonly=readonly) as st:
            assert {r.job_key: r.status for r in st.query()} == {"old": "refused", "new": "refused"}
            assert {r.job_key for r in st.query(Filters(status=["refused"]))} == {"old", "new"}
            assert {r.job_key for r in st.query(Filters(status=["skipped"]))} == {"old", "new"}
            assert st.done_keys(statuses=["refused"]) == {"old", "new"}
            assert st.status_of("old") == "refused"
            old = st.run_result("old")
            assert old is not None and old.status == "refused" and old.reason_code is None


def test_a_result_reason_code_is_read_back_from_its_json(tmp_path: Path) -> None:
    from attnprof.reasons import reason

    row = make_row("a", status="unsupported")
    row.result.reason_code = reason("cuda_only", name="sdpa-flash", device="cpu")
    with Store(tmp_path / "r.db") as st:
        st.record(row)
        st.record(make_row("b"))
        got = {r.job_key: r for r in st.query()}
    assert got["a"].reason_code == row.result.reason_code and got["b"].reason_code is None
    assert got["a"].flat()["reason_code"] == "cuda_only"  # exports: the code, beside the English


def _writer(path: str, worker: int, keys: list[str]) -> None:
    with Store(path) as st:
        for k in keys:
            st.record(make_row(k, median=float(worker + 1)))


def test_concurrent_writers_store_each_key_once(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    Store(path).close()
    keys = [f"k{i}" for i in range(60)]
    ctx = mp.get_context("spawn")
    # four processes write overlapping halves of the keys at the same time
    procs = [
        ctx.Process(target=_writer, args=(path, w, keys[(w % 2) * 30 :] + keys[: (w % 2) * 30]))
        for w in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Store(path) as st:
        assert st.integrity_ok()
        assert st.count() == 60
        assert st.done_keys() == set(keys)


def _opener(path: str, barrier: Any, key: str) -> None:
    barrier.wait()  # every process opens the fresh file at the same moment
    for i in range(15):  # then opens it again and again while the others write
        with Store(path) as st:
            st.record(make_row(f"{key}-{i}"))


@pytest.mark.parametrize("round_", range(3))
def test_processes_racing_to_create_one_store(tmp_path: Path, round_: int) -> None:
    """Opening races (a peer switching the new file to WAL, or migrating it) must wait, not fail
    with 'database is locked' (seen once in CI before Store retried them)."""
    path = str(tmp_path / "fresh.db")
    ctx = mp.get_context("spawn")
    n = 6
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=_opener, args=(path, barrier, f"k{i}")) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Store(path) as st:
        assert st.integrity_ok() and st.count() == n * 15


_KILL_WRITER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from test_store import make_row
from attnprof.store import Store
with Store(sys.argv[1]) as st:
    i = 0
    while True:
        st.record(make_row(f"k{i}"))
        i += 1
        if i == 5:
            print("writing", flush=True)
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.45])
def test_kill_9_in_the_middle_of_writes_leaves_whole_rows(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILL_WRITER, str(path), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(path) as st:
        assert st.integrity_ok()
        n = st.count()
        assert n >= 5
        # the keys are exactly k0..k{n-1}: no row lost before the last committed one, none half-written
        assert st.done_keys() == {f"k{i}" for i in range(n)}
        for r in st.query(samples=True):
            assert r.median_ms == 1.0 and r.samples_ms == [0.9, 1.0, 1.1] and r.device_name == "Test CPU"


def test_export_formats(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as st:
        st.record(make_row("a", seq=64))
        st.record(make_row("b", seq=128, status="crashed"))
        rows = st.query(samples=True)
    text = export_rows(rows, "csv")
    assert text is not None
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["job_key"] for r in parsed] == ["a", "b"]
    assert parsed[1]["status"] == "crashed" and "samples_ms" not in parsed[0]
    data = json.loads(export_rows(rows, "json", samples=True) or "")
    assert data[0]["samples_ms"] == [0.9, 1.0, 1.1] and data[1]["median_ms"] is None
    with pytest.raises(UserError, match="--output"):
        export_rows(rows, "parquet")
    pytest.importorskip("pyarrow", reason="parquet export needs the parquet extra (pyarrow)")
    import pandas as pd

    out = tmp_path / "r.parquet"
    export_rows(rows, "parquet", path=out)
    frame = pd.read_parquet(out)
    assert list(frame["job_key"]) == ["a", "b"]
    assert frame.loc[0, "median_ms"] == 1.0


def test_a_wrong_gradient_is_stored_as_not_accurate(tmp_path: Path) -> None:
    """recommend reads accuracy_ok: a --backward job whose output is right but whose dk is not
    must be stored as not accurate, or it could be recommended; one whose gradients are right
    stays accurate."""
    good, bad = make_row("good"), make_row("bad")
    ok_acc = good.result.accuracy
    assert ok_acc is not None
    wrong = msgspec.structs.replace(ok_acc, max_abs_err=0.5, ok=False)
    good.result.grad_accuracy = {"dq": ok_acc, "dk": ok_acc, "dv": ok_acc}
    bad.result.grad_accuracy = {"dq": ok_acc, "dk": wrong, "dv": ok_acc}
    with Store(tmp_path / "r.db") as st:
        st.record(good)
        st.record(bad)
        stored = {r.job_key: r.accuracy_ok for r in st.query()}
    assert stored == {"good": True, "bad": False}


def test_a_backward_jobs_forward_plus_backward_timing_is_read_back(tmp_path: Path) -> None:
    """recommend ranks a backward bucket by forward + backward: the store hands the result's
    timing_total back (samples only where asked), and exports carry its median as one column."""
    row = make_row("bwd")
    t = row.result.timing
    assert t is not None
    row.result.timing_total = msgspec.structs.replace(t, median_ms=3.5, samples_ms=[3.4, 3.5, 3.6])
    with Store(tmp_path / "r.db") as st:
        st.record(row)
        st.record(make_row("fwd"))
        plain = {r.job_key: r for r in st.query()}
        sampled = {r.job_key: r for r in st.query(samples=True)}
    assert plain["bwd"].timing_total is not None and plain["bwd"].timing_total.median_ms == 3.5
    assert plain["bwd"].timing_total.samples_ms == [] and plain["fwd"].timing_total is None
    assert sampled["bwd"].timing_total.samples_ms == [3.4, 3.5, 3.6]  # type: ignore[union-attr]
    flat = plain["bwd"].flat()
    assert flat["total_median_ms"] == 3.5 and "timing_total" not in flat


def test_a_claim_after_a_concurrent_record_is_refused(tmp_path: Path) -> None:
    """CI caught two sweeps timing one job twice: sweep B looked up J's result (none yet), sweep A
    recorded J (dropping its lease), then B's claim found no lease and took J. The claim now reads
    the stored result in its own write transaction: stored means not claimable, unless its
    status is one the caller reruns (--retry)."""
    a, b = Store(tmp_path / "r.db"), Store(tmp_path / "r.db")
    try:
        assert b.status_of("J") is None  # B's look-up, before A records
        assert a.claim("J", ttl_s=60)
        a.record(make_row("J"))  # A's result, and its lease dropped
        assert a.leases() == []
        assert not b.claim("J", ttl_s=60)  # was True: J would have run again
        assert b.claim("J", ttl_s=60, rerun=("ok",))  # --retry ok: rerun on purpose
        assert b.claim("K", ttl_s=60)  # nothing stored, no lease: free
    finally:
        a.close()
        b.close()
