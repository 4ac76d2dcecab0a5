"""A checkout without ../shared beside it: the suite stops before collecting anything, with one
line saying where it looked for the shared traces and how to put them there (exit 4, a usage
error), instead of collection errors in the modules that read a shared trace at import time and
tests that skip as "empty parameter set". And those modules collect without ../shared (they look
their traces up inside the tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import attnprof
from _paths import REPO

# the modules that read ../shared while collecting (5 collection errors without it), and one that
# never reads it
IMPORT_TIME = ["test_loader_fuzz", "test_no_color", "test_op_varlen_flex", "test_perf_model", "test_sanitize"]


def _checkout(tmp_path: Path) -> Path:
    """The tests and pyproject.toml (pytest's settings) in tmp/repo, with no tmp/shared beside."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    assert not (tmp_path / "shared").exists()
    return repo


def _pytest(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(attnprof.__file__).resolve().parents[1])  # this checkout's code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_checkout_without_shared_stops_with_one_line(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    done = _pytest(repo, "tests/test_units.py", *(f"tests/{m}.py" for m in IMPORT_TIME))
    out = done.stdout + done.stderr
    assert done.returncode == 4, out[-2000:]
    assert "ERROR collecting" not in out and "skipped" not in out and "passed" not in out, out[-2000:]
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out[-2000:]
    assert lines[0].startswith("ERROR: attnprof's tests need the shared traces")
    assert str(tmp_path / "shared" / "traces") in lines[0] and "beside the repository" in lines[0]


def test_the_modules_that_read_shared_traces_collect_without_them(tmp_path: Path) -> None:
    """Without the session's check (--noconftest), the modules that looked their traces up at
    import time collect: they look them up in the tests."""
    repo = _checkout(tmp_path)
    done = _pytest(repo, "--noconftest", "--collect-only", *(f"tests/{m}.py" for m in IMPORT_TIME))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "ERROR collecting" not in out and "error" not in out.splitlines()[-1]
