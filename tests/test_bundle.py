"""`attnprof bundle RUN_DIR`: one zip of a real run that unpacks into a run directory."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]


def _bundle(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: a bundle's work is the same, a subprocess would add an
    interpreter and its imports (report, plots) to each call; the last compare stays a
    subprocess, reading the unpacked run as a user's shell would."""
    from attnprof.cli import main

    capsys.readouterr()
    code = main(["bundle", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["attnprof", "bundle", *args], code, out, err)


def test_bundle_holds_the_run_and_unpacks_into_a_run_directory(
    cpu_run: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, record = cpu_run
    out = tmp_path / "b.zip"
    p = _bundle(capsys, str(run_dir), "-o", str(out), "--lang", "id")
    assert p.returncode == 0, p.stderr
    assert str(out) in p.stdout
    top = run_dir.resolve().name
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        assert f"{top}/run.json" in names and f"{top}/report.id.html" in names
        traces = sorted(p for p in (run_dir / "traces").iterdir())
        assert traces and all(f"{top}/traces/{t.name}" in names for t in traces)
        assert all(f"{top}/tables/{t.name}" in names for t in (run_dir / "tables").iterdir())
        assert zf.read(f"{top}/run.json") == (run_dir / "run.json").read_bytes()
        assert zf.read(f"{top}/traces/{traces[0].name}") == traces[0].read_bytes()
        assert zf.getinfo(f"{top}/traces/{traces[0].name}").compress_type == zipfile.ZIP_STORED
        html = zf.read(f"{top}/report.id.html").decode()
        assert '<html lang="id">' in html and f"traces/{traces[0].name}" in html
        assert all(r.variant in html for r in record.results)
        zf.extractall(tmp_path / "x")
    assert not (run_dir / "report.id.html").exists()  # the run directory is not changed
    a = subprocess.run(
        [*ATTNPROF, "compare", str(tmp_path / "x" / top)], capture_output=True, text=True, timeout=300
    )
    assert a.returncode == 0, a.stderr


def test_bundle_refuses_what_is_not_a_run_and_keeps_an_existing_archive(
    cpu_run: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _bundle(capsys, str(tmp_path))
    assert p.returncode == 2 and "no run.json" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    out = tmp_path / "exists.zip"
    out.write_bytes(b"keep me")
    p = _bundle(capsys, str(cpu_run[0]), "-o", str(out))
    assert p.returncode == 2 and "--force" in p.stderr and out.read_bytes() == b"keep me"
    p = _bundle(capsys, str(cpu_run[0]), "-o", str(out), "--force")
    assert p.returncode == 0 and zipfile.is_zipfile(out)
