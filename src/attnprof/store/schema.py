"""The results store's schema, versioned with SQLite's user_version, and its migrations.

Each migration is a list of statements that takes the database from version N-1 to N. They run in
order inside one write transaction, so two processes opening a fresh store at the same moment
cannot both migrate it: the second waits on the lock and then sees the new user_version.
A store written by a newer attnprof (user_version above ours) is refused rather than guessed at.

Version history:
1. environments and results (one row per job, unique job_key).
2. sweeps (one row per `attnprof sweep` invocation), results.sweep_id and results.log_tail (the
   stderr tail of a crashed worker), and an index for the shape filters of `attnprof results`.
3. leases: the job a sweep is running, with its owner (host, pid and the process's start time,
   so a reused pid is not taken for the owner) and an expiry, so that concurrent sweeps on one
   store split the grid and a crashed sweep's jobs are taken over. Reading needs only version 2.
4. results.mask, backward and phase: the workload as people run it.
5. the status column says `incorrect` for a job that ran and failed the accuracy check (before,
   such a row held "ok" with accuracy_ok = 0). Migration 1's CHECK did not allow the word and
   SQLite cannot change a CHECK in place, so the results table is rebuilt (same columns, same
   rows, in one transaction) with the old pair rewritten as `incorrect`. A store read without
   upgrading (read-only, schema 2 to 4) still holds the pair: STATUS_SQL reads it as one word.
"""

from __future__ import annotations

import re
import sqlite3

from attnprof.errors import UserError

__all__ = [
    "LEGACY_STATUSES",
    "MIGRATIONS",
    "READ_MIN_VERSION",
    "SCHEMA_VERSION",
    "STATUSES",
    "STATUS_SQL",
    "check_statuses",
    "migrate",
    "schema_version",
    "stored_as",
]

# The statuses migration 1's CHECK allowed: the harness's own (ok, unsupported, refused, oom,
# error) and the sweep's (crashed worker, timeout). `incorrect` came later (migration 5).
_COLUMN_STATUSES = ("ok", "unsupported", "refused", "oom", "crashed", "timeout", "error")
# Every status a job can end in, as readers see it, and (since migration 5) as the column holds it:
# `incorrect` ran and failed the accuracy check.
STATUSES = ("ok", "incorrect", "unsupported", "refused", "oom", "crashed", "timeout", "error")
# The status of a row as one word: a store from before migration 5, read without upgrading, holds
# "ok" with accuracy_ok = 0 for an incorrect result
STATUS_SQL = "(CASE WHEN {p}status = 'ok' AND {p}accuracy_ok = 0 THEN 'incorrect' ELSE {p}status END)"


# Statuses older stores hold, and what they mean now: a sweep's own memory gate once stored
# "skipped" for what the harness calls "refused" (one gate now). Read back as the new word; the
# rows stay as they are (the column's CHECK allows both), so an older attnprof still reads them.
LEGACY_STATUSES = {"skipped": "refused"}

# the CHECK of migration 1, as it was written: every status a row may hold, legacy ones included
_STATUS_CHECK = ", ".join(f"'{s}'" for s in (*_COLUMN_STATUSES, *LEGACY_STATUSES))
# migration 5's: today's statuses and the legacy ones
_STATUS_CHECK_5 = ", ".join(f"'{s}'" for s in (*STATUSES, *LEGACY_STATUSES))


def check_statuses(values: list[str], flag: str) -> list[str]:
    """The statuses of a --status/--retry flag in today's words (an old word is taken too);
    UserError for anything else."""
    bad = sorted(set(values) - set(STATUSES) - set(LEGACY_STATUSES))
    if bad:
        raise UserError(f"{flag} {','.join(bad)}: not a status; use some of {', '.join(STATUSES)}")
    return list(dict.fromkeys(LEGACY_STATUSES.get(s, s) for s in values))


def stored_as(statuses: list[str]) -> list[str]:
    """What to look for in the status column for these statuses: each with its legacy words."""
    return [*statuses, *(old for old, new in LEGACY_STATUSES.items() if new in statuses)]


# the results table (migration 1; migration 5 rebuilds it with the columns added since and a CHECK
# that allows `incorrect`)
_RESULTS = """
        CREATE TABLE {name} (
            id                  INTEGER PRIMARY KEY,
            job_key             TEXT NOT NULL UNIQUE,
            environment_id      INTEGER REFERENCES environments(id),
            variant             TEXT NOT NULL,
            mode                TEXT NOT NULL,
            batch               INTEGER NOT NULL,
            heads               INTEGER NOT NULL,
            kv_heads            INTEGER NOT NULL,
            seq                 INTEGER NOT NULL,
            kv_seq              INTEGER NOT NULL,
            head_dim            INTEGER NOT NULL,
            dtype               TEXT NOT NULL,
            device              TEXT NOT NULL,
            causal              INTEGER NOT NULL,
            seed                INTEGER NOT NULL,
            config              TEXT NOT NULL,
            status              TEXT NOT NULL CHECK (status IN ({check})),
            reason              TEXT,
            backend             TEXT,
            pytorch_choice      TEXT,
            median_ms           REAL,
            iqr_ms              REAL,
            mean_ms             REAL,
            min_ms              REAL,
            n_samples           INTEGER,
            samples_ms          TEXT,
            gpu_ops_per_forward REAL,
            cpu_ops_per_forward REAL,
            peak_bytes          INTEGER,
            estimate_bytes      INTEGER,
            max_abs_err         REAL,
            accuracy_ok         INTEGER,
            tflops              REAL,
            trace_path          TEXT,
            result              TEXT NOT NULL,
            worker              TEXT,
            wall_s              REAL,
            started_at          TEXT NOT NULL,
            finished_at         TEXT NOT NULL{extra}
        )
        """
_ADDED = (
    ("sweep_id", "INTEGER REFERENCES sweeps(id)"),  # 2
    ("log_tail", "TEXT"),  # 2
    ("mask", "TEXT NOT NULL DEFAULT ''"),  # 4
    ("backward", "INTEGER NOT NULL DEFAULT 0"),  # 4
    ("phase", "TEXT NOT NULL DEFAULT 'prefill'"),  # 4
)
# the columns of migration 1's table, then those added since, in the order the table holds them
_COLUMNS_5 = [
    *re.findall(r"^ {12}(\w+) ", _RESULTS.format(name="r", check="", extra=""), flags=re.M),
    *(c for c, _ in _ADDED),
]
_REBUILT = _RESULTS.format(
    name="results_5", check=_STATUS_CHECK_5, extra="".join(f",\n            {c:<19} {t}" for c, t in _ADDED)
)


MIGRATIONS: list[list[str]] = [
    # 1
    [
        """
        CREATE TABLE environments (
            id            INTEGER PRIMARY KEY,
            env_key       TEXT NOT NULL UNIQUE,
            device        TEXT NOT NULL,
            device_name   TEXT NOT NULL,
            torch_version TEXT NOT NULL,
            host          TEXT NOT NULL,
            json          TEXT NOT NULL
        )
        """,
        _RESULTS.format(name="results", check=_STATUS_CHECK, extra=""),
    ],
    # 2
    [
        """
        CREATE TABLE sweeps (
            id          INTEGER PRIMARY KEY,
            started_at  TEXT NOT NULL,
            finished_at TEXT,
            host        TEXT NOT NULL,
            pid         INTEGER NOT NULL,
            executor    TEXT NOT NULL,
            total_jobs  INTEGER NOT NULL,
            config      TEXT NOT NULL
        )
        """,
        "ALTER TABLE results ADD COLUMN sweep_id INTEGER REFERENCES sweeps(id)",
        "ALTER TABLE results ADD COLUMN log_tail TEXT",
        "CREATE INDEX results_shape ON results(dtype, seq, head_dim, variant)",
    ],
    # 3
    [
        """
        CREATE TABLE leases (
            job_key       TEXT PRIMARY KEY,
            host          TEXT NOT NULL,
            pid           INTEGER NOT NULL,
            proc_started  REAL NOT NULL,
            sweep_id      INTEGER,
            claimed_at    TEXT NOT NULL,
            expires_at    REAL NOT NULL
        )
        """,
    ],
    # 4: the workload as people run it (--mask, --backward, --phase); older rows are causal or
    # no mask (from `causal`), forward only, prefill
    [
        "ALTER TABLE results ADD COLUMN mask TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE results ADD COLUMN backward INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE results ADD COLUMN phase TEXT NOT NULL DEFAULT 'prefill'",
    ],
    # 5: `incorrect` in the status column (the table rebuilt: a CHECK cannot be altered). Nothing
    # references results, so it is dropped and the copy renamed in place; the index is remade.
    [
        _REBUILT,
        f"INSERT INTO results_5 ({', '.join(_COLUMNS_5)}) SELECT {', '.join(_COLUMNS_5)} FROM results",
        "UPDATE results_5 SET status = 'incorrect' WHERE status = 'ok' AND accuracy_ok = 0",
        "DROP TABLE results",
        "ALTER TABLE results_5 RENAME TO results",
        "CREATE INDEX results_shape ON results(dtype, seq, head_dim, variant)",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
# the oldest schema the reading commands can read without upgrading (leases are not read)
READ_MIN_VERSION = 2


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, *, target: int = SCHEMA_VERSION, path: str = "") -> int:
    """Bring the database up to `target` (default: the current version); return the old version.

    The connection must be in autocommit mode (isolation_level=None): the transaction is ours.
    """
    if schema_version(conn) == target:
        return target  # the common case, without taking the write lock
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn)  # re-read under the lock: another process may have migrated
        if found > SCHEMA_VERSION:
            raise UserError(
                f"store {path or '(memory)'} has schema version {found}, newer than this attnprof "
                f"understands ({SCHEMA_VERSION}): upgrade attnprof or use another --store"
            )
        for version in range(found + 1, target + 1):
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
        # PRAGMA cannot take a bound parameter; target is an int we computed
        conn.execute(f"PRAGMA user_version = {int(max(found, target))}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
