"""`attnprof run` isolates user variants: one that calls sys.exit, os._exit, segfaults or hangs
fails alone, recorded with its cause, and the others (and run.json) are kept. Real runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]

_VARIANTS = textwrap.dedent(
    """
    import ctypes
    import os
    import sys
    import time

    import torch.nn.functional as F


    def good(q, k, v, is_causal=True, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)


    def exits(q, k, v, is_causal=True, scale=None):
        sys.exit(3)


    def hard_exit(q, k, v, is_causal=True, scale=None):
        os._exit(0)


    def segfaults(q, k, v, is_causal=True, scale=None):
        ctypes.string_at(0)


    def hangs(q, k, v, is_causal=True, scale=None):
        time.sleep(3600)
    """
)


def test_a_user_variant_that_exits_crashes_or_hangs_fails_alone(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "uv.py").write_text(_VARIANTS)
    out = tmp_path / "r"
    names = ["good", "exits", "hard_exit", "segfaults", "hangs"]
    p = subprocess.run(
        [*ATTNPROF, "run", "-v", ",".join(["naive", *(f"uv.py:{n}" for n in names)]), "--shape", "1,2,32,16",
         "--time-budget", "0.05", "--timeout", "15", "-o", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    results = {r["variant"]: r for r in json.loads((out / "run.json").read_text())["results"]}
    # the built-in and the good user variant ran in the run's own process, timed and checked
    for name in ("naive", "good"):
        assert results[name]["status"] == "ok", results[name]
        assert results[name]["timing"]["median_ms"] > 0
    assert results["exits"]["status"] == "error"
    assert "sys.exit(3)" in results["exits"]["reason"]
    assert results["hard_exit"]["status"] == "crashed"
    assert "exited with code 0" in results["hard_exit"]["reason"]
    assert results["segfaults"]["status"] == "crashed"
    assert "SIGSEGV" in results["segfaults"]["reason"]
    assert results["hangs"]["status"] == "timeout"
    assert "--timeout 15 s" in results["hangs"]["reason"]


def test_timeout_must_be_a_positive_number(tmp_path: Path) -> None:
    for bad in ("0", "-1", "nan", "inf"):
        p = subprocess.run(
            [*ATTNPROF, "run", "-v", "naive", "--timeout", bad, "-o", str(tmp_path / "r")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert "--timeout must be a positive number" in lines[0], lines[0]
    assert not (tmp_path / "r").exists()
