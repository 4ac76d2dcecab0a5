"""Files a command writes: never over one of its inputs, whole or not at all, and every OS error
on a path (or on stdout) one line naming it and the fix. Real runs, a real store, real system
refusals (/dev/full, RLIMIT_FSIZE, a name over 255 bytes, /proc, an immutable file)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from attnprof.errors import UserError
from attnprof.outputs import atomic_path, refuse_inputs, write_atomic

ATTNPROF = [sys.executable, "-m", "attnprof"]
FAST = ["--no-profile", "--time-budget", "0.02", "--min-samples", "3"]
LONG = "a" * 300  # one path component over NAME_MAX (255 bytes)


def attnprof(*args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ATTNPROF, *args], capture_output=True, text=True, timeout=300, env=env, **kw)  # type: ignore[call-overload]


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr, p.stderr
    assert "internal error" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("attnprof: error: "), lines[0]
    assert p.returncode == 2, (p.returncode, p.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run, profiled (traces and tables), at a tiny shape."""
    out = tmp_path_factory.mktemp("run") / "r"
    p = attnprof("run", "-v", "naive,sdpa", "--shape", "1,2,32,16", "--time-budget", "0.05", "-o", str(out))
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("store") / "r.db"
    p = attnprof(
        "sweep", "--store", str(db), "-s", "16,32", "-H", "2", "-d", "16",
        "-v", "naive-inplace,sdpa-math", "--device", "cpu", "--no-progress", *FAST,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return db


def _limit_file_size(limit: int) -> None:
    # a write past the limit fails with EFBIG instead of killing the process with SIGXFSZ
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


# -- never over an input -------------------------------------------------------------------------


def test_report_never_writes_over_the_run_it_reads(run_dir: Path) -> None:
    before = (run_dir / "run.json").read_bytes()
    trace = sorted((run_dir / "traces").iterdir())[0]
    trace_before = trace.read_bytes()
    for target in (run_dir / "run.json", run_dir / ".." / run_dir.name / "run.json", trace):
        line = one_error_line(attnprof("report", str(run_dir), "--format", "md", "-o", str(target)))
        assert "one of this command's inputs" in line and "-o/--output" in line, line
    assert (run_dir / "run.json").read_bytes() == before
    assert trace.read_bytes() == trace_before


def test_a_hard_link_to_an_input_is_the_input(run_dir: Path, tmp_path: Path) -> None:
    link = tmp_path / "looks-new.md"
    os.link(run_dir / "run.json", link)
    line = one_error_line(attnprof("report", str(run_dir), "--format", "md", "-o", str(link)))
    assert "run.json" in line, line


def test_bundle_with_force_does_not_replace_the_run_record(run_dir: Path) -> None:
    before = (run_dir / "run.json").read_bytes()
    one_error_line(attnprof("bundle", str(run_dir), "-o", str(run_dir / "run.json"), "--force"))
    assert (run_dir / "run.json").read_bytes() == before


def test_results_and_policy_never_replace_the_store(store: Path) -> None:
    before = store.read_bytes()
    for args in (["results", "--store", str(store), "-o", str(store)],
                 ["results", "--store", str(store), "-f", "csv", "-o", str(store)],
                 ["recommend", "--store", str(store), "--policy-out", str(store)]):  # fmt: skip
        line = one_error_line(attnprof(*args))
        assert "one of this command's inputs" in line, line
    assert store.read_bytes() == before


def test_a_report_written_twice_over_its_own_output_is_fine(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    for _ in range(2):  # the report is an output, not an input: the second one replaces it
        p = attnprof("report", str(run_dir), "-o", str(out))
        assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("# attnprof report")


# -- whole or not at all ---------------------------------------------------------------------------


def test_a_full_disk_leaves_the_old_report_whole(run_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    old = "<html>an earlier report, kept</html>\n" * 10
    report.write_text(old)
    # the new report is far larger than 4 KiB: its write fails part way, as on a full disk
    p = subprocess.run(
        [*ATTNPROF, "report", str(run_dir), "-o", str(report)],
        capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limit_file_size(4096),
    )  # fmt: skip
    line = one_error_line(p)
    assert str(report) in line and "file too large" in line, line
    assert report.read_text() == old
    assert sorted(x.name for x in tmp_path.iterdir()) == ["report.html"]  # no temporary left


def test_a_full_disk_leaves_the_old_policy_whole(store: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    p = attnprof("recommend", "--store", str(store), "--policy-out", str(policy))
    assert p.returncode == 0, p.stderr
    old = policy.read_bytes()
    assert len(old) > 256
    p = subprocess.run(
        [*ATTNPROF, "recommend", "--store", str(store), "--policy-out", str(policy)],
        capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limit_file_size(256),
    )  # fmt: skip
    one_error_line(p)
    assert policy.read_bytes() == old


def test_dev_full_is_one_line_for_a_file_and_for_stdout(run_dir: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    line = one_error_line(attnprof("report", str(run_dir), "-o", "/dev/full"))
    assert "/dev/full" in line and "no space left" in line, line
    trace = sorted((run_dir / "traces").iterdir())[0]
    with open("/dev/full", "w") as full:
        for args in (["analyze", str(trace)], ["analyze", "--json", str(trace)],
                     ["report", str(run_dir), "--format", "md"]):  # fmt: skip
            p = subprocess.run(
                [*ATTNPROF, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300
            )
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            assert p.returncode == 2 and len(lines) == 1, p.stderr
            assert "cannot write the output (no space left on device)" in lines[0], lines[0]


def test_names_too_long_and_paths_under_proc_are_one_line(run_dir: Path, tmp_path: Path, store: Path) -> None:
    cases = [
        (["report", str(run_dir), "-o", str(tmp_path / f"{LONG}.html")], "choose a shorter name"),
        (["run", "-v", "naive", "--shape", "1,1,8,8", *FAST[:3], "-o", str(tmp_path / LONG)], "shorter name"),
        (["sweep", "--store", str(tmp_path / f"{LONG}.db"), "-s", "8", "-H", "1", "-d", "8", "-v", "naive",
          "--device", "cpu", "--no-progress", *FAST], "shorter name"),
        (["results", "--store", str(store), "-f", "csv", "-o", str(tmp_path / f"{LONG}.csv")], "shorter name"),
        (["report", str(run_dir), "-o", "/proc/attnprof-report.html"], "kernel file system"),
        (["recommend", "--store", str(store), "--policy-out", "/sys/policy.json"], "kernel file system"),
    ]  # fmt: skip
    for args, fix in cases:
        line = one_error_line(attnprof(*args))
        assert fix in line, (args[0], line)
    assert not list(tmp_path.iterdir())


@pytest.fixture
def immutable_store(store: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the store nobody may write, root included (chattr +i as root, chmod 444 else)."""
    db = tmp_path / "ro.db"
    shutil.copyfile(store, db)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(db)]).returncode != 0:
            pytest.skip("root without a working chattr +i: no file is read-only for root here")
    else:
        db.chmod(0o444)
    try:
        yield db
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(db)], check=False)
        else:
            db.chmod(0o644)


def test_a_sweep_into_a_read_only_store_is_one_line(immutable_store: Path) -> None:
    p = attnprof(
        "sweep", "--store", str(immutable_store), "-s", "64", "-H", "2", "-d", "16", "-v", "naive-inplace",
        "--device", "cpu", "--no-progress", *FAST,
    )  # fmt: skip
    line = one_error_line(p)
    assert str(immutable_store) in line and "--store" in line, line


# -- locale and colour -----------------------------------------------------------------------------


def test_an_ascii_locale_gets_ascii_spellings(run_dir: Path, store: Path) -> None:
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    env.pop("PYTHONIOENCODING")
    trace = sorted((run_dir / "traces").iterdir())[0]
    for args in (
        ["analyze", str(trace)],
        ["results", "--store", str(store)],
        ["report", str(run_dir), "--format", "md"],
    ):
        p = attnprof(*args, env=env)
        assert p.returncode == 0, p.stderr
        assert "UnicodeEncodeError" not in p.stderr
        p.stdout.encode("ascii")  # everything printed is ASCII
    p = attnprof("results", "--store", str(store), env=env)
    assert "+/-" in p.stdout  # median ± IQR, spelled in ASCII


def _column_edges(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c == "|"]


@pytest.mark.parametrize(
    "env_over", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}]
)
def test_tables_line_up_when_the_output_cannot_write_the_plus_minus(
    store: Path, env_over: dict[str, str]
) -> None:
    # "±" printed as "+/-" is two columns wider: the widths must be those of the text printed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"} | env_over
    p = attnprof("results", "--store", str(store), env=env)
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if "|" in ln]
    assert any("+/-" in r for r in rows), p.stdout  # the case this test is about is there
    assert len(rows) >= 3 and len({tuple(_column_edges(r)) for r in rows}) == 1, p.stdout


def test_fit_encoding_spells_a_table_for_its_stream_and_leaves_utf8_alone() -> None:
    import io

    from rich.table import Table
    from rich.text import Text

    from attnprof.report.console import fit_encoding, make_console

    def table() -> Table:
        t = Table(title="median ± IQR")
        t.add_column("time ± IQR")
        t.add_row(Text("1.0 ms ± 2 µs", style="bold"))
        return t

    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    spelled = fit_encoding(make_console(file=ascii_out), table())
    assert spelled.title == "median +/- IQR" and spelled.columns[0].header == "time +/- IQR"
    cell = spelled.columns[0]._cells[0]
    assert cell.plain == "1.0 ms +/- 2 us" and str(cell.style) == "bold"
    # latin-1 has µ and ±: nothing to change; UTF-8: the table itself, untouched
    latin = fit_encoding(make_console(file=io.TextIOWrapper(io.BytesIO(), encoding="latin-1")), table())
    assert latin.columns[0]._cells[0].plain == "1.0 ms ± 2 µs"
    utf8 = make_console(file=io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    t = table()
    assert fit_encoding(utf8, t) is t and t.title == "median ± IQR"


def test_no_color_is_honoured(store: Path) -> None:
    env = {**os.environ, "FORCE_COLOR": "1"}  # a terminal's colours, in a pipe
    env.pop("NO_COLOR", None)
    coloured = attnprof("results", "--store", str(store), env=env).stdout
    plain = attnprof("results", "--store", str(store), env={**env, "NO_COLOR": "1"}).stdout
    colour = "\x1b[3"  # SGR 30-39: a foreground colour
    assert colour in coloured  # the test can fail: without NO_COLOR there are colours
    assert colour not in plain


# -- the helper itself -----------------------------------------------------------------------------


def test_write_atomic_keeps_the_mode_and_follows_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_writer_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the renderer failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_refuse_inputs_fires_on_the_same_file_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "report.en.html").write_text("<html></html>")
    with pytest.raises(UserError, match="one of this command's inputs"):
        refuse_inputs(run / "run.json", [run], option="-o")
    refuse_inputs(run / "report.en.html", [run], option="-o")  # an earlier output: not an input
    refuse_inputs(tmp_path / "new.md", [run], option="-o")  # does not exist yet
    refuse_inputs("-", [run], option="-o")  # stdout
