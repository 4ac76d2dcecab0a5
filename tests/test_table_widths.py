"""Every terminal table at 80 columns: no line wider, no number cut to "…" (a column is left
out and named instead). Real commands on a real run, store, trace and model run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]
FAST = ["--no-profile", "--time-budget", "0.02", "--min-samples", "3"]
CUT_NUMBER = re.compile(r"\d[\d.,]*\s?…")  # "1.85 …", "54.…": a number rich cut short


def at_80(*args: str) -> str:
    p = subprocess.run(
        [*ATTNPROF, *args], capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "80"}
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def check(out: str, what: str) -> None:
    wide = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not wide, (what, wide)
    assert not CUT_NUMBER.search(out), (what, out)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("w") / "r"
    printed = at_80("run", "-v", "naive,naive-inplace,sdpa,sdpa-math", "--shape", "1,2,64,16",
                    "--time-budget", "0.05", "-o", str(out))  # fmt: skip
    return out, printed


def test_run_table_fits_80_columns(run_dir: tuple[Path, str]) -> None:
    check(run_dir[1], "run")


def test_compare_and_analyze_fit_80_columns(run_dir: tuple[Path, str]) -> None:
    check(at_80("compare", str(run_dir[0])), "compare")
    trace = sorted((run_dir[0] / "traces").glob("*naive_eager*.json.gz"))[0]
    check(at_80("analyze", str(trace)), "analyze")


def test_results_and_recommend_fit_80_columns(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    at_80("sweep", "--store", str(store), "-s", "16,32", "-H", "2", "-d", "16", "-v", "naive-inplace,sdpa-math",
          "--device", "cpu", "--no-progress", *FAST)  # fmt: skip
    check(at_80("results", "--store", str(store)), "results")
    check(at_80("recommend", "--store", str(store)), "recommend")


def test_model_table_fits_80_columns(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = at_80(
        "model", "llama", "--size", "tiny", "--attn", "eager,sdpa,attnprof-naive", "-o", str(tmp_path / "m")
    )
    check(out, "model")


def test_backward_run_table_keeps_numbers_with_their_units(tmp_path: Path) -> None:
    """--backward has the most columns: at 80 columns none wraps "12.8 ms" into "12.8" and "ms"
    on two lines; columns are left out, and named, instead."""
    out = at_80("run", "-v", "naive,sdpa", "--backward", "--shape", "1,2,32,16", "--time-budget", "0.05",
                "-o", str(tmp_path / "r"))  # fmt: skip
    check(out, "run --backward")
    lines = out.splitlines()
    # a table row: the variant (with its noise mark) and its backend
    body = [ln for ln in lines if re.match(r"\s*(naive|sdpa)( ~)?\s+(aten|flash|math|efficient)\s", ln)]
    assert len(body) == 2, out  # one line per variant
    after = lines[lines.index(body[-1]) + 1]
    assert not after.strip() or not re.match(r"\s*[\d.]+\s*$|\s*(ms|µs)", after), (
        out
    )  # nothing wrapped under it
    assert not [ln for ln in lines if re.fullmatch(r"\s*(ms|µs|KiB|MiB)\s*", ln)], out
    assert "left out to fit 80 columns" in out
