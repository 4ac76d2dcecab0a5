"""The SQLite results store: one row per job, written in one transaction, keyed so resume is exact.

Durability and concurrency come from SQLite itself, not from us:
- WAL journal: readers never block the writer, and a process killed with SIGKILL mid-write leaves
  either the whole transaction or none of it (the next open rolls the WAL back to the last commit).
- synchronous=NORMAL: in WAL mode a commit survives the death of the process (it is in the WAL
  file); only a power cut can lose the last few commits, which a resumed sweep simply reruns.
- busy_timeout: two sweeps writing one store wait for each other's short transactions instead of
  failing with "database is locked".
- job_key UNIQUE + INSERT ... ON CONFLICT DO NOTHING: a job finished by one sweep and then by a
  concurrent one is stored once (the first writer wins).
The store does not work on network file systems that lack POSIX locks (NFS): SQLite's own caveat.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import stat
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from attnprof.errors import UserError
from attnprof.records import Environment, MachineLoad, ReasonCode, RunResult, TimingSummary
from attnprof.store.rows import (
    ADDED_DEFAULTS,
    COLUMNS,
    Filters,
    ResultRow,
    StoredResult,
    now_iso,
)
from attnprof.store.schema import (
    LEGACY_STATUSES,
    READ_MIN_VERSION,
    SCHEMA_VERSION,
    STATUS_SQL,
    STATUSES,
    migrate,
    schema_version,
    stored_as,
)

__all__ = ["DEFAULT_STORE", "Filters", "ResultRow", "Store", "StoredResult", "is_store_file", "now_iso"]

DEFAULT_STORE = Path("attnprof-results.db")

BUSY_TIMEOUT_MS = 60_000


_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_store_file(path: Path) -> bool:
    """Whether path is an SQLite file (by its header; a store's name may be anything): what
    `report` and `compare` take for a sweep's store rather than a run or a trace."""
    try:
        with path.open("rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _is_damaged(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorname", "")
    return code in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in str(exc)


def _process_started(pid: int) -> float | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # dead, not yet reaped by its parent
            return None
        return float(proc.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _me() -> tuple[str, int, float]:
    pid = os.getpid()
    return socket.gethostname(), pid, _process_started(pid) or 0.0


def _lease_alive(host: str, pid: int, started: float, expires_at: float, *, now: float) -> bool:
    """A lease holds until it expires; on this host, only while its owner process lives (the
    same pid with the same start time: a pid reused by another process does not count)."""
    if expires_at <= now:
        return False
    if host != socket.gethostname():
        return True  # cannot see the process: trust the expiry
    seen = _process_started(int(pid))
    return seen is not None and abs(seen - float(started)) < 1.0


# the JSON-held parts of a row, decoded on read
_LOAD = MachineLoad | None
_TIMING = TimingSummary | None
_REASON_CODE = ReasonCode | None


def _env_key(env: Environment) -> str:
    return hashlib.sha256(msgspec.json.encode(env)).hexdigest()[:32]


class Store:
    """The results store at `path` (created and migrated on open). Use as a context manager.

    One Store object belongs to one thread; each process opens its own.
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly and not self.path.exists():
            raise UserError(
                f"no results store at {self.path}: run `attnprof sweep` first or pass --store FILE"
            )
        if not readonly:
            parent = self.path.parent
            if not parent.exists():
                raise UserError(f"cannot create store {self.path}: folder {parent} does not exist")
        self._check_file()
        # Opening a store races with other processes opening it: switching a fresh file to WAL
        # and the first migration need a lock, and SQLite answers some of these races (a peer
        # mid-way through the switch to WAL, say) with SQLITE_BUSY at once, without waiting in
        # busy_timeout. Those are retried with a short backoff; any other error is final.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.01
        while True:
            try:
                self.conn = self._connect_readonly() if readonly else self._connect()
                break
            except sqlite3.OperationalError as exc:
                transient = "locked" in str(exc) or "busy" in str(exc)
                if not transient or time.monotonic() > deadline:
                    raise self._error(exc) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except sqlite3.DatabaseError as exc:
                raise self._error(exc) from exc
        self._env_ids: dict[str, int] = {}

    def _check_file(self) -> None:
        """Refuse, before SQLite touches it, a file that is not a SQLite database at all; and for
        reading, an empty file (writing commands may make a store of a 0-byte file)."""
        # one stat, one answer: is_file() then exists() raced a peer creating the store (false,
        # then true: "not a file" for a file that had just appeared)
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode):
            raise UserError(f"store {self.path} is not a file: pass --store FILE")
        try:
            with self.path.open("rb") as fh:
                head = fh.read(16)
        except FileNotFoundError:  # removed between the stat and the open
            return
        # a peer creating the store may not have written SQLite's header yet (an empty or partial
        # first page): for a writer that is the store being made, not a foreign file
        if not self.readonly and _SQLITE_MAGIC.startswith(head):
            return
        if not head:
            if self.readonly:
                raise UserError(
                    f"store {self.path} is an empty file (0 bytes), not an attnprof results store: "
                    f"run `attnprof sweep --store {self.path}` first, or pass the right --store"
                )
            return
        if head != _SQLITE_MAGIC:
            raise UserError(
                f"store {self.path} is not a SQLite database (it starts with {head[:12]!r}), so not an "
                "attnprof results store: pass the right --store (nothing was written to it)"
            )

    def _error(self, exc: sqlite3.Error) -> UserError:
        """The one line for a SQLite error at open or while reading."""
        if _is_damaged(exc):
            return UserError(
                f"store {self.path} is damaged ({exc}); nothing was written to it. Recover what is "
                f"left with: sqlite3 {self.path} .recover | sqlite3 recovered.db"
            )
        code = getattr(exc, "sqlite_errorname", "")
        if code in ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH"):
            verb = "read" if self.readonly else "write"
            return UserError(
                f"cannot {verb} store {self.path} ({exc}): check the permissions of the file and its "
                "folder, or pass another --store"
            )
        return UserError(f"store {self.path} is not a usable SQLite database: {exc}")

    def _check_ours(self, conn: sqlite3.Connection) -> None:
        """Refuse a database that is not an attnprof store (never add our tables to another
        program's database), one from a newer attnprof, and a damaged one, before any write."""
        tables = {
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(r[0]).startswith("sqlite_")
        }
        version = schema_version(conn)
        if version > SCHEMA_VERSION:
            raise UserError(
                f"store {self.path} has schema version {version}, newer than this attnprof "
                f"understands ({SCHEMA_VERSION}): upgrade attnprof or use another --store"
            )
        if tables and (version == 0 or not {"results", "environments"} <= tables):
            shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
            raise UserError(
                f"store {self.path} is another program's SQLite database (tables: {shown}), not an "
                "attnprof results store: pass another --store (nothing was written to it)"
            )
        if self.readonly and not tables:
            raise UserError(
                f"store {self.path} is an empty SQLite database, not an attnprof results store: "
                f"run `attnprof sweep --store {self.path}` first, or pass the right --store"
            )
        if self.readonly and version < READ_MIN_VERSION:
            raise UserError(
                f"store {self.path} has schema version {version} from an older attnprof (this one "
                f"reads {READ_MIN_VERSION} and later); a sweep into it with this attnprof upgrades it in place"
            )
        check = conn.execute("PRAGMA quick_check").fetchone()
        if tables and str(check[0]) != "ok":
            raise UserError(
                f"store {self.path} is damaged ({check[0]}); nothing was written to it. Recover what "
                f"is left with: sqlite3 {self.path} .recover | sqlite3 recovered.db"
            )

    def _connect_readonly(self) -> sqlite3.Connection:
        # mode=ro: the reading commands (results, recommend, report) never write, so they work on
        # a store in a read-only folder, never create or upgrade one, and never add tables to a
        # file that is not ours.
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "") != "SQLITE_CANTOPEN":
                raise
            # A WAL store in a folder we cannot write: SQLite cannot create its -shm file there.
            # Nobody can be writing to it through a -wal either, so it reads as an immutable file.
            conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._check_ours(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit; every write below opens its own explicit
        # transaction, so a job's rows commit together or not at all.
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._check_ours(conn)  # before the first write (the switch to WAL is one)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise UserError(
                    f"store {self.path}: SQLite could not switch to WAL mode (got {mode}); "
                    "put the store on a local file system"
                )
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn, path=str(self.path))
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Pages damaged past what quick_check saw at open still end in one line."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and not _is_damaged(exc):
                raise
            raise self._error(exc) from exc

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so a concurrent writer waits in busy_timeout
        # here rather than failing later on lock upgrade (SQLITE_BUSY without retry).
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            # a store that opened but cannot be written (a read-only or immutable file, a full
            # disk): the user's store, not our bug
            if isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorname", "") in (
                "SQLITE_READONLY",
                "SQLITE_FULL",
                "SQLITE_IOERR",
                "SQLITE_CANTOPEN",
                "SQLITE_PERM",
            ):
                fix = (
                    "free some space or pass another --store"
                    if exc.sqlite_errorname == "SQLITE_FULL"
                    else "check the permissions of the file and its folder, or pass another --store"
                )
                raise UserError(f"cannot write store {self.path} ({exc}): {fix}") from None
            raise

    # -- sweeps ------------------------------------------------------------------------------
    def begin_sweep(self, *, executor: str, total_jobs: int, config: dict[str, Any]) -> int:
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO sweeps (started_at, host, pid, executor, total_jobs, config) VALUES (?,?,?,?,?,?)",
                (now_iso(), socket.gethostname(), os.getpid(), executor, total_jobs, json.dumps(config)),
            )
            return int(cur.lastrowid or 0)

    def end_sweep(self, sweep_id: int) -> None:
        with self._write() as c:
            c.execute("UPDATE sweeps SET finished_at = ? WHERE id = ?", (now_iso(), sweep_id))

    # -- job leases --------------------------------------------------------------------------
    # A sweep claims each job just before it runs it; a concurrent sweep skips a job whose lease
    # is held by a live owner, and takes over one whose owner died (same host, pid gone or reused)
    # or whose lease expired (an owner on another host that went away). Recording the result
    # drops the lease in the same transaction.
    def claim(
        self, key: str, *, ttl_s: float, sweep_id: int | None = None, rerun: Collection[str] = ()
    ) -> bool:
        """Lease job `key` to this process for ttl_s seconds. False when another live owner holds
        it, or when its result is stored with a status not in `rerun`. The stored result is read
        in the same write transaction as the lease: a concurrent sweep records a result and drops
        its lease in one transaction, so a result looked up before this one could be stale (the
        job was then timed twice)."""
        host, pid, started = _me()
        now = time.time()
        with self._write() as c:
            stored = c.execute(
                f"SELECT {STATUS_SQL.format(p='')} FROM results WHERE job_key = ?", (key,)
            ).fetchone()
            if stored is not None and LEGACY_STATUSES.get(str(stored[0]), str(stored[0])) not in rerun:
                return False
            row = c.execute(
                "SELECT host, pid, proc_started, expires_at FROM leases WHERE job_key = ?", (key,)
            ).fetchone()
            if row is not None and (row[0], row[1]) != (host, pid) and _lease_alive(*row, now=now):
                return False
            c.execute(
                "INSERT INTO leases (job_key, host, pid, proc_started, sweep_id, claimed_at, expires_at) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT(job_key) DO UPDATE SET host = excluded.host, "
                "pid = excluded.pid, proc_started = excluded.proc_started, sweep_id = excluded.sweep_id, "
                "claimed_at = excluded.claimed_at, expires_at = excluded.expires_at",
                (key, host, pid, started, sweep_id, now_iso(), now + ttl_s),
            )
            return True

    def release_mine(self) -> int:
        """Drop every lease this process holds (a sweep ending, or interrupted)."""
        host, pid, _ = _me()
        with self._write() as c:
            return c.execute("DELETE FROM leases WHERE host = ? AND pid = ?", (host, pid)).rowcount

    def leases(self) -> list[tuple[str, str, int, bool]]:
        """(job_key, host, pid, alive) of every lease."""
        now = time.time()
        rows = self.conn.execute("SELECT job_key, host, pid, proc_started, expires_at FROM leases").fetchall()
        return [(str(k), str(h), int(p), _lease_alive(h, p, st, ex, now=now)) for k, h, p, st, ex in rows]

    # -- writing results ---------------------------------------------------------------------
    def _environment_id(self, c: sqlite3.Connection, env: Environment | None) -> int | None:
        if env is None:
            return None
        key = _env_key(env)
        if key in self._env_ids:
            return self._env_ids[key]
        c.execute(
            "INSERT INTO environments (env_key, device, device_name, torch_version, host, json) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(env_key) DO NOTHING",
            (
                key,
                env.device,
                env.device_name,
                env.torch_version,
                env.host,
                msgspec.json.encode(env).decode(),
            ),
        )
        row = c.execute("SELECT id FROM environments WHERE env_key = ?", (key,)).fetchone()
        self._env_ids[key] = int(row[0])
        return self._env_ids[key]

    def record(self, row: ResultRow, *, replace: bool = False) -> bool:
        """Store one job's result in one transaction. False when the key was already there.

        replace=True overwrites an existing row (used to retry failed jobs).
        """
        r = row.result
        w = row.workload
        t = r.timing
        acc = r.accuracy
        mem = r.memory
        prof = r.profile
        values: dict[str, Any] = {
            "job_key": row.job_key,
            "variant": row.variant,
            "mode": row.mode,
            **msgspec.structs.asdict(w),
            "causal": int(w.causal),
            "backward": int(w.backward),
            "config": msgspec.json.encode({"workload": w, "variant": row.variant, "mode": row.mode}).decode(),
            "status": r.status,  # `incorrect` as such since schema 5
            "reason": r.reason,
            "backend": r.backend,
            "pytorch_choice": row.pytorch_choice,
            "median_ms": t.median_ms if t else None,
            "iqr_ms": t.iqr_ms if t else None,
            "mean_ms": t.mean_ms if t else None,
            "min_ms": t.min_ms if t else None,
            "n_samples": t.n if t else None,
            "samples_ms": json.dumps(t.samples_ms) if t else None,
            "gpu_ops_per_forward": prof.gpu_ops_per_forward if prof else None,
            "cpu_ops_per_forward": prof.cpu_ops_per_forward if prof else None,
            "peak_bytes": mem.peak_bytes if mem else None,
            # a refused job measured nothing, but its estimate is why it was refused
            "estimate_bytes": mem.estimate_bytes
            if mem
            else (r.estimate_bytes if r.status == "refused" else None),
            "max_abs_err": acc.max_abs_err if acc else None,
            # the gradients count too (--backward): recommend must never pick a wrong backward
            "accuracy_ok": (int(not r.incorrect) if acc else None),
            "tflops": r.tflops_useful,
            "trace_path": r.trace,
            "result": msgspec.json.encode(r).decode(),
            "worker": row.worker,
            "wall_s": row.wall_s,
            "started_at": row.started_at,
            "finished_at": row.finished_at,
            "sweep_id": row.sweep_id,
            "log_tail": row.log_tail,
        }
        if r.status not in STATUSES:
            raise ValueError(f"unknown status {r.status!r}")
        with self._write() as c:
            values["environment_id"] = self._environment_id(c, row.environment)
            cols = ", ".join(values)
            marks = ", ".join("?" for _ in values)
            if replace:
                updates = ", ".join(f"{k} = excluded.{k}" for k in values if k != "job_key")
                conflict = f"ON CONFLICT(job_key) DO UPDATE SET {updates}"
            else:
                conflict = "ON CONFLICT(job_key) DO NOTHING"
            cur = c.execute(
                f"INSERT INTO results ({cols}) VALUES ({marks}) {conflict}", tuple(values.values())
            )
            c.execute("DELETE FROM leases WHERE job_key = ?", (row.job_key,))
            return cur.rowcount > 0

    # -- reading -----------------------------------------------------------------------------
    def done_keys(
        self, keys: Iterable[str] | None = None, *, statuses: Sequence[str] | None = None
    ) -> set[str]:
        """The job keys already stored (all of them, or those among `keys`), optionally by status."""
        sql = "SELECT job_key FROM results"
        args: list[Any] = []
        if statuses:
            look = stored_as(list(statuses))
            sql += f" WHERE {STATUS_SQL.format(p='')} IN ({','.join('?' for _ in look)})"
            args.extend(look)
        with self._reading():
            found = {str(r[0]) for r in self.conn.execute(sql, args)}
        return found if keys is None else found & set(keys)

    def has(self, key: str) -> bool:
        with self._reading():
            return self.conn.execute("SELECT 1 FROM results WHERE job_key = ?", (key,)).fetchone() is not None

    def status_of(self, key: str) -> str | None:
        with self._reading():
            row = self.conn.execute(
                f"SELECT {STATUS_SQL.format(p='')} FROM results WHERE job_key = ?", (key,)
            ).fetchone()
        return None if row is None else LEGACY_STATUSES.get(str(row[0]), str(row[0]))

    def count(self) -> int:
        with self._reading():
            return int(self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def query(self, filters: Filters | None = None, *, samples: bool = False) -> list[StoredResult]:
        f = filters or Filters()
        where: list[str] = []
        args: list[Any] = []
        for col in ("variant", "status", "dtype", "seq", "head_dim", "batch", "heads", "device"):
            values = getattr(f, col)
            if col == "status":
                values = stored_as([LEGACY_STATUSES.get(s, s) for s in values])
            if values:
                name = STATUS_SQL.format(p="r.") if col == "status" else f"r.{col}"
                where.append(f"{name} IN ({','.join('?' for _ in values)})")
                args.extend(values)
        if f.causal is not None:
            where.append("r.causal = ?")
            args.append(int(f.causal))
        if f.sweep_id is not None:
            where.append("r.sweep_id = ?")
            args.append(f.sweep_id)
        with self._reading():
            present = {row[1] for row in self.conn.execute("PRAGMA table_info(results)")}
        # a store read without upgrading (schema < 4) has no mask/backward/phase: their defaults
        cols = [f"r.{c}" if c in present else ADDED_DEFAULTS[c] for c in COLUMNS]
        cols += ["e.device_name", "e.torch_version", "e.host"]
        cols.append("r.samples_ms" if samples else "NULL")
        # an SQLite built without its JSON functions: no codes, and reports fall back on the
        # English reason (attnprof.report.reasons)
        json_ok = self._json()
        cols.append("json_extract(r.result, '$.reason_code')" if json_ok else "NULL")
        cols.append("json_extract(r.result, '$.timing.load')" if json_ok else "NULL")
        cols.append("json_extract(r.result, '$.timing_total')" if json_ok else "NULL")
        names = [
            *COLUMNS,
            "device_name",
            "torch_version",
            "host",
            "samples_ms",
            "reason_code",
            "load",
            "timing_total",
        ]
        sql = (
            f"SELECT {', '.join(cols)} FROM results r LEFT JOIN environments e ON e.id = r.environment_id"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY r.device, r.dtype, r.batch, r.heads, r.kv_heads, r.seq, r.kv_seq, r.head_dim,"
            " r.causal, "
            + ("r.mask, r.backward, r.phase, " if "mask" in present else "")
            + "r.variant, r.mode"
        )
        out: list[StoredResult] = []
        with self._reading():
            rows = self.conn.execute(sql, args).fetchall()
        for row in rows:
            d = dict(zip(names, row, strict=True))
            d["causal"] = bool(d["causal"])
            d["backward"] = bool(d["backward"])
            if d["accuracy_ok"] is not None:
                d["accuracy_ok"] = bool(d["accuracy_ok"])
            d["samples_ms"] = json.loads(d["samples_ms"]) if d["samples_ms"] else None
            code = d["reason_code"]
            d["reason_code"] = msgspec.json.decode(code, type=_REASON_CODE) if code else None
            d["load"] = msgspec.json.decode(d["load"], type=_LOAD) if d["load"] else None
            total = d["timing_total"]
            d["timing_total"] = msgspec.json.decode(total, type=_TIMING) if total else None
            if d["timing_total"] is not None and not samples:
                d["timing_total"].samples_ms = []  # as samples_ms: only where asked (they are long)
            out.append(StoredResult(**d))
        return out

    def _json(self) -> bool:
        try:
            self.conn.execute("SELECT json_extract('{}', '$.a')").fetchone()
        except sqlite3.OperationalError:
            return False
        return True

    def run_result(self, key: str) -> RunResult | None:
        with self._reading():
            row = self.conn.execute("SELECT result FROM results WHERE job_key = ?", (key,)).fetchone()
        if row is None:
            return None
        result = msgspec.json.decode(row[0], type=RunResult)
        result.status = LEGACY_STATUSES.get(result.status, result.status)  # type: ignore[assignment]
        return result

    def integrity_ok(self) -> bool:
        return str(self.conn.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
