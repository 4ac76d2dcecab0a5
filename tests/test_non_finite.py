"""A variant whose output (or gradient) holds NaN or inf: its error reads NaN/inf in the table,
run.json and the reports, never a small number; it never wins; a run where no variant is correct
exits 1 with one line. Real `attnprof run`s of tiny user variants."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from _pty import on_pty
from attnprof.harness.accuracy import compare as check

VARIANTS = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F

    def nan(q, k, v, is_causal=False, scale=None):
        return torch.full_like(q, float("nan"))

    def inf(q, k, v, is_causal=False, scale=None):
        return torch.full_like(q, float("inf"))

    def good(q, k, v, is_causal=False, scale=None):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)

    def grad_nan(q, k, v, is_causal=False, scale=None):
        # the right output; sqrt's gradient at 0 is inf, times 0: a NaN dq
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
        return out + (q * 0).sqrt() * 0
    """
)
RUN = ["--shape", "1,2,16,8", "--no-profile", "--time-budget", "0.05", "--no-color"]


def _run(tmp: Path, names: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    src = tmp / "v.py"
    src.write_text(VARIANTS)
    out = tmp / "run"
    variants = ",".join(f"{src}:{n}" for n in names.split(","))
    p = subprocess.run(
        [sys.executable, "-m", "attnprof", "run", "-v", variants, *RUN, *extra, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )
    return p, out


def _results(out: Path) -> dict[str, dict]:
    return {r["label"]: r for r in json.loads((out / "run.json").read_text())["results"]}


def test_all_nan_output_has_no_max_error() -> None:
    ref = torch.zeros(1, 2, 4, 8, dtype=torch.float64)
    acc = check(torch.full_like(ref, float("nan")), ref, "fp32")
    assert not acc.ok and acc.nan_count == ref.numel()
    assert acc.max_abs_err is None and acc.max_rel_err is None  # not the 0.0 of no finite value
    assert acc.error_text() == f"non-finite ({ref.numel()} NaN)"
    fine = check(ref + 1e-6, ref, "fp32")
    assert fine.ok and fine.max_abs_err is not None and fine.max_abs_err > 0


@pytest.mark.parametrize("name", ["nan", "inf"])
def test_run_of_only_non_finite_variants_exits_1_with_one_line(tmp_path: Path, name: str) -> None:
    p, out = _run(tmp_path, name)
    assert p.returncode == 1, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("attnprof: error:")]
    assert len(errors) == 1 and "no variant gave a correct output" in errors[0]
    assert "Traceback" not in p.stderr
    r = _results(out)[name]
    assert r["status"] == "incorrect"
    assert r["accuracy"]["max_abs_err"] is None
    count = r["accuracy"]["nan_count" if name == "nan" else "inf_count"]
    assert count == 1 * 2 * 16 * 8
    row = next(line for line in p.stdout.splitlines() if line.lstrip().startswith(name + " "))
    assert f"non-finite ({count} {'NaN' if name == 'nan' else 'inf'})" in row and "e+00" not in row


def test_correct_variant_wins_over_a_nan_one(tmp_path: Path) -> None:
    p, out = _run(tmp_path, "nan,good")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines() if line.strip()[:4] in ("nan ", "good")}
    assert "incorrect" in rows["nan"] and "fastest" not in rows["nan"]
    assert "fastest" in rows["good"]
    for lang, word in (("en", "non-finite"), ("id", None), ("th", None)):
        md = tmp_path / f"r.{lang}.md"
        r = subprocess.run(
            [sys.executable, "-m", "attnprof", "report", str(out), "--lang", lang, "-o", str(md)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        text = md.read_text()
        nan_rows = [line for line in text.splitlines() if line.startswith("| nan ")]
        assert nan_rows and all("0.0e+00" not in line and "256" in line for line in nan_rows)
        if word:
            assert word in text


def test_nan_gradient_reads_non_finite(tmp_path: Path) -> None:
    p, out = _run(tmp_path, "grad_nan,good", "--backward")
    assert p.returncode == 0, p.stderr
    # a pipe's 100 columns leave the grad err column out: a 160-column terminal shows it
    src = str(tmp_path / "v.py")
    rc, screen = on_pty(
        ["run", "-v", f"{src}:grad_nan,{src}:good", *RUN, "--backward", "-o", str(tmp_path / "tty")],
        no_color="1",
    )
    assert rc == 0, screen[-400:]
    row = next(line for line in screen.decode().splitlines() if line.lstrip().startswith("grad_nan "))
    assert "non-finite (256 NaN) ✗" in row  # the gradient column; the forward max err is a number
    dq = _results(out)["grad_nan"]["grad_accuracy"]["dq"]
    assert dq["max_abs_err"] is None and dq["nan_count"] == 256
    md = tmp_path / "r.md"
    subprocess.run(
        [sys.executable, "-m", "attnprof", "report", str(out), "-o", str(md)], check=True, timeout=300
    )
    line = next(x for x in md.read_text().splitlines() if "grad_nan gives the right output" in x)
    assert "non-finite (256 NaN)" in line
