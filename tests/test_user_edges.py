"""The edges a real user hits, each through the real CLI in a subprocess: read-only folders,
foreign and damaged stores, files that are not what they claim, options typed in odd places.
Every case must end in one line (exit 2, or 3 for --strict) and write nothing it should not."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]
FAST = ["--no-profile", "--time-budget", "0.02", "--min-samples", "3"]


def attnprof(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ATTNPROF, *args], capture_output=True, text=True, timeout=timeout)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    """The single line a user error prints; fails on a traceback or on more than one line."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("attnprof: error: "), lines[0]
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store from a real (tiny, time-only) sweep: 2 lengths x 2 variants."""
    store = tmp_path_factory.mktemp("store") / "r.db"
    p = attnprof(
        "sweep", "--store", str(store), "-s", "16,32", "-H", "2", "-d", "16",
        "-v", "naive-inplace,sdpa-math", "--device", "cpu", "--no-progress", *FAST,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return store


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can write into, root included (the suite runs as root in CI, and root
    ignores chmod): chattr +i where we are root, chmod 555 otherwise. Checked before use."""
    d = tmp_path / "ro"
    d.mkdir()
    (d / "keep.txt").write_text("already here\n")
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(d)]).returncode != 0:
            pytest.skip("running as root without a working chattr +i: no folder is read-only for root here")
    else:
        d.chmod(0o555)
    try:
        (d / "probe").write_text("x")
    except OSError:
        pass
    else:
        pytest.skip("could not make a read-only folder on this file system")
    try:
        yield d
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(d)], check=False)
        else:
            d.chmod(0o755)


def populate_then_lock(d: Path, src: Path) -> Path:
    """Copy `src` into the (already locked) folder by unlocking it for a moment."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(d)], check=True)
    else:
        d.chmod(0o755)
    target = d / src.name
    shutil.copy(src, target)
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(d)], check=True)
    else:
        d.chmod(0o555)
    return target


# -- permissions ------------------------------------------------------------------------------
def test_run_out_in_a_read_only_folder_is_one_line_naming_the_path(read_only_dir: Path) -> None:
    out = read_only_dir / "run"
    p = attnprof("run", "-v", "naive", "--shape", "1,1,8,4", "--no-profile", "--out", str(out))
    assert p.returncode == 2
    assert str(out) in one_error_line(p)
    assert sorted(x.name for x in read_only_dir.iterdir()) == ["keep.txt"]


def test_report_output_in_a_read_only_folder_is_one_line(
    cpu_run: tuple[Path, object], read_only_dir: Path
) -> None:
    target = read_only_dir / "report.html"
    p = attnprof("report", str(cpu_run[0]), "-o", str(target))
    assert p.returncode == 2
    assert str(target) in one_error_line(p)


def test_results_and_recommend_outputs_in_a_read_only_folder(real_store: Path, read_only_dir: Path) -> None:
    for args, target in (
        (["results", "-o"], read_only_dir / "results.txt"),
        (["results", "--format", "csv", "-o"], read_only_dir / "results.csv"),
        (["recommend", "--policy-out"], read_only_dir / "policy.json"),
    ):
        p = attnprof(args[0], "--store", str(real_store), *args[1:], str(target))
        assert p.returncode == 2, (args, p.stderr)
        assert str(target) in one_error_line(p)
    assert sorted(x.name for x in read_only_dir.iterdir()) == ["keep.txt"]


def test_a_store_in_a_read_only_folder_is_read(real_store: Path, read_only_dir: Path) -> None:
    store = populate_then_lock(read_only_dir, real_store)
    before = digest(store)
    p = attnprof("results", "--store", str(store), "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.strip().splitlines()) == 1 + 4  # header and the 4 jobs
    p = attnprof("recommend", "--store", str(store), "--json")
    assert p.returncode == 0, p.stderr
    assert digest(store) == before
    assert sorted(x.name for x in read_only_dir.iterdir()) == ["keep.txt", "r.db"]


# -- foreign, empty and damaged stores --------------------------------------------------------
def test_reading_commands_refuse_a_foreign_database_and_leave_it_alone(tmp_path: Path) -> None:
    foreign = tmp_path / "contacts.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('Ann', '555')")
    conn.commit()
    conn.close()
    empty = tmp_path / "empty.db"
    empty.touch()
    before = digest(foreign)
    for cmd in (["results"], ["recommend"], ["report", "--format", "md"]):
        p = attnprof(*cmd, "--store", str(foreign))
        assert p.returncode == 2, (cmd, p.stderr)
        line = one_error_line(p)
        assert "another program's SQLite database (tables: contacts)" in line, line
        p = attnprof(*cmd, "--store", str(empty))
        assert p.returncode == 2, (cmd, p.stderr)
        assert "empty file (0 bytes)" in one_error_line(p)
    # a sweep (which writes) refuses it too, before the first job
    p = attnprof("sweep", "--store", str(foreign), "-s", "16", "-H", "1", "-d", "8", "-v", "naive", *FAST)
    assert p.returncode == 2 and "another program's" in one_error_line(p)
    assert digest(foreign) == before and empty.stat().st_size == 0
    assert sorted(x.name for x in tmp_path.iterdir()) == ["contacts.db", "empty.db"]  # no -wal, no -shm


def test_a_damaged_store_says_damaged_suggests_recover_and_is_not_written(
    real_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "r.db"
    shutil.copy(real_store, store)
    page = sqlite3.connect(store).execute("PRAGMA page_size").fetchone()[0]
    pages = store.stat().st_size // page
    assert pages >= 4, pages
    with store.open("r+b") as fh:  # overwrite every page after the first (header and schema) with junk
        for n in range(1, pages):
            fh.seek(n * page)
            fh.write(bytes([0xA5]) * page)
    before = digest(store)
    for cmd in (["results"], ["recommend"]):
        p = attnprof(*cmd, "--store", str(store))
        assert p.returncode == 2, (cmd, p.stderr)
        line = one_error_line(p)
        assert "is damaged" in line and "sqlite3" in line and ".recover" in line, line
    p = attnprof("sweep", "--store", str(store), "-s", "16", "-H", "1", "-d", "8", "-v", "naive", *FAST)
    assert p.returncode == 2 and "is damaged" in one_error_line(p)
    assert digest(store) == before


# -- files that are not what they claim -------------------------------------------------------
def test_a_binary_toml_is_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "grid.toml"
    junk.write_bytes(bytes(range(256)) * 4)
    p = attnprof("sweep", str(junk), "--print-config")
    assert p.returncode == 2 and "not a text file" in one_error_line(p)
    p = attnprof(
        "run", "-v", "naive", "--shape", "1,1,8,4", "--expect", str(junk), "--out", str(tmp_path / "r")
    )
    assert p.returncode == 2 and "not a text file" in one_error_line(p)
    assert not (tmp_path / "r").exists()  # refused before the run, not after it


def test_a_run_json_of_an_unknown_major_schema_is_refused(
    cpu_run: tuple[Path, object], tmp_path: Path
) -> None:
    future = tmp_path / "future"
    shutil.copytree(cpu_run[0], future)
    text = (future / "run.json").read_text()
    (future / "run.json").write_text(text.replace('"attnprof.run/1"', '"attnprof.run/99"', 1))
    for cmd in (["compare", str(future)], ["report", str(future), "--format", "md"]):
        p = attnprof(*cmd)
        assert p.returncode == 2, (cmd, p.stderr)
        line = one_error_line(p)
        assert "attnprof.run/99" in line and "attnprof.run/1" in line, line
    assert attnprof("compare", str(cpu_run[0])).returncode == 0  # the same run at /1 is read


# -- options ----------------------------------------------------------------------------------
def test_debug_is_accepted_after_the_subcommand_and_version_prints(tmp_path: Path) -> None:
    for args in (["--debug", "list", "--json"], ["list", "--json", "--debug"]):
        p = attnprof(*args)
        assert p.returncode == 0, (args, p.stderr)
    p = attnprof("--version")
    from attnprof import __version__

    assert p.returncode == 0 and p.stdout.strip() == f"attnprof {__version__}"


def test_an_empty_variant_selection_is_an_error(tmp_path: Path) -> None:
    for sel in (",", " , ,"):
        p = attnprof("run", "-v", sel, "--out", str(tmp_path / "r"))
        assert p.returncode == 2
        assert "names nothing" in one_error_line(p)
    assert not (tmp_path / "r").exists()


def test_strict_fails_on_an_expectation_naming_no_variant(
    cpu_run: tuple[Path, object], tmp_path: Path
) -> None:
    spec = tmp_path / "typo.toml"
    spec.write_text('[[expect]]\nvariant = "sdpa-flsh"\nstatus = ["ok"]\n')
    p = attnprof("compare", str(cpu_run[0]), "--expect", str(spec), "--strict", "--no-color")
    assert p.returncode == 3, p.stderr
    assert "'sdpa-flsh' matches nothing here" in p.stderr
    # a real variant that is simply not in this run stays skipped, and passes --strict
    spec.write_text('[[expect]]\nvariant = "sdpa-cudnn:compile"\nstatus = ["ok"]\n')
    p = attnprof("compare", str(cpu_run[0]), "--expect", str(spec), "--strict", "--no-color")
    assert p.returncode == 0, p.stderr
    # without --strict the typo is reported, not fatal
    spec.write_text('[[expect]]\nvariant = "sdpa-flsh"\nstatus = ["ok"]\n')
    assert attnprof("compare", str(cpu_run[0]), "--expect", str(spec), "--no-color").returncode == 0


# -- interrupts -------------------------------------------------------------------------------
def _wait_for(predicate: object, proc: subprocess.Popen[str], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert proc.poll() is None, f"finished before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def test_ctrl_c_during_run_saves_what_finished_and_resume_finishes_it(tmp_path: Path) -> None:
    out = tmp_path / "r"
    variants = (
        "sdpa-efficient,naive,sdpa-math,naive-inplace"  # sdpa-efficient: unsupported on CPU, done at once
    )
    proc = subprocess.Popen(
        [*ATTNPROF, "run", "-v", variants, "--shape", "1,2,64,16", "--time-budget", "0.5", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    traces = out / "traces"
    _wait_for(lambda: traces.is_dir() and any(traces.iterdir()), proc, "first trace")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    line = [ln for ln in err.splitlines() if ln.startswith("attnprof: interrupted")]
    assert len(line) == 1 and f"attnprof run --resume {out}" in line[0], err
    assert "Traceback" not in err
    record = json.loads((out / "run.json").read_text())
    assert record["interrupted"] is True
    done = [r["label"] for r in record["results"]]
    pending = record["resume"]["pending"]
    assert "sdpa-efficient" in done and sorted(done + pending) == sorted(variants.split(","))
    assert pending  # a trace was written, so a runnable variant was still to be timed
    # the folder is readable as it is, refused as a new --out, and finished by --resume
    shown = attnprof("compare", str(out))
    assert shown.returncode == 0, shown.stderr
    assert f"interrupted run; not run yet: {', '.join(pending)}" in " ".join(shown.stdout.split())
    again = attnprof("run", "-v", "naive", "--out", str(out))
    assert again.returncode == 2 and "--resume" in one_error_line(again)
    p = attnprof("run", "--resume", str(out), "--json")
    assert p.returncode == 0, p.stderr
    final = json.loads((out / "run.json").read_text())
    assert final["interrupted"] is False and final["resume"] is None
    assert sorted(r["label"] for r in final["results"]) == sorted(variants.split(","))
    assert {r["label"]: r["status"] for r in final["results"]}["naive"] == "ok"
    p = attnprof("run", "--resume", str(out))
    assert p.returncode == 2 and "nothing to resume" in one_error_line(p)


def test_the_sweep_time_budget_has_one_value_in_code_print_config_and_docs(tmp_path: Path) -> None:
    import tomllib

    from attnprof.sweep.grid import RunSettings

    docs = (Path(__file__).parent.parent / "docs" / "sweeping.md").read_text()
    block = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    printed = attnprof("sweep", "--print-config", "-s", "16", "-v", "naive", "--device", "cpu").stdout
    shown = tomllib.loads(printed)  # the job list below the config is TOML comments
    assert tomllib.loads(block)["run"]["time_budget_s"] == RunSettings().time_budget_s
    assert shown["run"]["time_budget_s"] == RunSettings().time_budget_s


# -- concurrent sweeps ------------------------------------------------------------------------
def test_a_crashed_or_expired_owners_jobs_are_taken_over_and_live_ones_left(
    real_store: Path, tmp_path: Path
) -> None:
    import psutil

    from attnprof.store import Store

    store = tmp_path / "r.db"
    shutil.copy(real_store, store)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid whose process has exited: an owner that crashed
    me = psutil.Process()
    host = socket.gethostname()
    now = time.time()
    with Store(store) as st:
        keys = sorted(st.done_keys())
        assert len(keys) == 4
        st.conn.execute("DELETE FROM results")
        leases = [
            (keys[0], host, gone.pid, 1.0, now + 3600),  # crashed owner on this host
            (keys[1], host, me.pid, me.create_time(), now + 3600),  # live owner (this test)
            (keys[2], "elsewhere", 1, 1.0, now - 1),  # another host's, expired
            (keys[3], "elsewhere", 1, 1.0, now + 3600),  # another host's, still valid
        ]
        st.conn.executemany(
            "INSERT INTO leases (job_key, host, pid, proc_started, claimed_at, expires_at) VALUES (?,?,?,?,'',?)",
            leases,
        )
    p = attnprof(
        "sweep", "--store", str(store), "-s", "16,32", "-H", "2", "-d", "16",
        "-v", "naive-inplace,sdpa-math", "--device", "cpu", "--no-progress", "--json", *FAST,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert (summary["ran"], summary["finished_elsewhere"]) == (2, 2)
    with Store(store) as st:
        assert st.done_keys() == {keys[0], keys[2]}
        assert sorted((k, alive) for k, _, _, alive in st.leases()) == [(keys[1], True), (keys[3], True)]


def test_ctrl_c_during_a_sweep_says_what_is_stored_and_how_to_resume(tmp_path: Path) -> None:
    store = tmp_path / "r.db"
    args = ["sweep", "--store", str(store), "-s", "16,32,48,64,80,96", "-H", "1", "-d", "8"]
    args += [
        "-v",
        "naive,sdpa-math",
        "--device",
        "cpu",
        "--no-profile",
        "--time-budget",
        "0.3",
        "--no-progress",
    ]
    proc = subprocess.Popen([*ATTNPROF, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stored() -> int:
        try:
            with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
                return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.Error:
            return 0

    _wait_for(lambda: stored() >= 2, proc, "two stored results")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    line = [ln for ln in err.splitlines() if ln.startswith("attnprof: interrupted")]
    n = stored()
    assert len(line) == 1 and f"{n} result(s) stored in {store}" in line[0], err
    resume = line[0].split("resume with: attnprof ", 1)[1].split()
    assert resume == args
    p = attnprof(*resume, "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert (summary["already_stored"], summary["ran"]) == (n, 12 - n)


def test_a_sweep_with_a_broken_user_variant_fails_before_the_first_job(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef attention(q, k, v, *, is_causal=True, scale=None):\n    return q +\n")
    nofunc = tmp_path / "nofunc.py"
    nofunc.write_text("def other(q, k, v, **kw):\n    return q\n")
    store = tmp_path / "r.db"
    for spec, needle in ((f"{bad}:attention", "SyntaxError"), (f"{nofunc}:attention", "no callable")):
        p = attnprof(
            "sweep", "--store", str(store), "-s", "16", "-H", "1", "-d", "8", "-v", f"naive,{spec}", *FAST
        )
        assert p.returncode == 2, p.stderr
        line = one_error_line(p)
        assert needle in line and "before the first job" in line, line
    assert not store.exists()  # nothing was run or stored


# -- what a run prints ------------------------------------------------------------------------
def test_run_output_has_no_usdt_lines_and_the_footer_names_kv_heads_and_length(tmp_path: Path) -> None:
    p = attnprof(
        "run", "-v", "naive", "--shape", "1,2,16,8", "--kv-heads", "1", "--kv-seq", "32",
        "--time-budget", "0.05", "--out", str(tmp_path / "r"), "--no-color",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert any((tmp_path / "r" / "traces").iterdir())  # it did profile
    assert "USDT" not in p.stdout + p.stderr and "profiler_start" not in p.stdout + p.stderr
    # the workload's one label (workload.py WorkloadId): kv heads and length after a slash
    assert "1x2/1x16/32x8 fp32" in " ".join(p.stdout.split())


def test_compile_says_why_flex_gets_no_twin(tmp_path: Path) -> None:
    printed = attnprof(
        "sweep", "--print-config", "-s", "16", "-v", "naive,flex", "--compile", "both", "--device", "cpu"
    )
    assert printed.returncode == 0, printed.stderr
    assert "flex has no torch.compile twin: it is compiled with torch.compile already" in printed.stdout
    assert "naive" in printed.stdout.split("job(s)", 1)[1]
    # run: the note comes as soon as the variants are resolved (here before --out is refused)
    taken = tmp_path / "taken"
    (taken / "traces").mkdir(parents=True)
    p = attnprof("run", "-v", "flex", "--compile", "--out", str(taken))
    assert p.returncode == 2
    assert "note: --compile adds no twin of flex: it is compiled with torch.compile already" in p.stderr


# -- terminal tables --------------------------------------------------------------------------
def _compare_text(run_dir: Path, columns: int, *, tty: bool) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    cmd = [*ATTNPROF, "compare", str(run_dir), "--no-color"]
    if not tty:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_tables_fit_the_width_and_never_cut_a_number(cpu_run: tuple[Path, object]) -> None:
    run_dir = cpu_run[0]
    narrow = _compare_text(run_dir, 60, tty=False)
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert "…" not in narrow  # no cell cut short: columns are left out instead, and named
    assert "left out to fit 60 columns:" in narrow and "TFLOP/s" in narrow.split("left out", 1)[1]
    piped = _compare_text(run_dir, 160, tty=False)  # a pipe keeps 100 columns
    assert max(len(line) for line in piped.splitlines()) <= 100 and "…" not in piped
    wide = _compare_text(run_dir, 160, tty=True)  # a 160-column terminal gets all of it
    assert "…" not in wide and "left out" not in wide.split("Per forward", 1)[0]
    header = next(line for line in wide.splitlines() if "median" in line and "speed" in line)
    assert "TFLOP/s" in header and "max err" in header
