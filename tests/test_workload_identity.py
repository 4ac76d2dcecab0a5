"""Runs of different workloads are never set against each other silently: compare refuses them
unless asked (and then says so everywhere); a report of a folder of shapes compares each workload
with its own baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from attnprof.compare.compare import compare
from attnprof.errors import UserError
from attnprof.harness.run import RunOptions, run
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.report.tables import comparison_table
from attnprof.workload import Workload


@pytest.fixture(scope="module")
def two_shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shapes")
    opts = RunOptions(profile=False, time_budget_s=0.05, min_samples=5)
    run(
        Workload(batch=1, heads=2, seq=64, head_dim=16),
        ["naive-inplace", "sdpa"],
        out=root / "a",
        options=opts,
    )
    run(
        Workload(batch=1, heads=2, seq=128, head_dim=16, dtype="bf16"),
        ["naive-inplace", "sdpa"],
        out=root / "b",
        options=opts,
    )
    return root


def test_compare_refuses_different_workloads_unless_asked(two_shapes: Path) -> None:
    a, b = two_shapes / "a", two_shapes / "b"
    with pytest.raises(
        UserError, match=r"different workloads \(fp32 1x2x64x16 \[cpu\] in a; bf16 1x2x128x16"
    ):
        compare([a, b], analyse=False)
    comp = compare([a, b], analyse=False, mixed_workloads=True)
    assert comp.mixed_workloads and comp.workloads == ["fp32 1x2x64x16 [cpu]", "bf16 1x2x128x16 [cpu]"]
    assert comp.notes[0].startswith("mixed workloads: ")
    assert msgspec.to_builtins(comp)["mixed_workloads"] is True

    proc = subprocess.run(
        [sys.executable, "-m", "attnprof", "compare", str(a), str(b)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--mixed-workloads" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "attnprof", "compare", str(a), str(b), "--mixed-workloads", "--no-color"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    words = " ".join(proc.stdout.split())  # the table title wraps at the terminal's width
    assert "DIFFERENT workloads" in words and "fp32 1x2x64x16" in words
    proc = subprocess.run(
        [sys.executable, "-m", "attnprof", "compare", str(a), str(b), "--mixed-workloads", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(proc.stdout)["mixed_workloads"] is True


def test_report_of_a_folder_compares_within_each_workload(two_shapes: Path) -> None:
    data = build_report_data(two_shapes, expect=None)
    comp = data.comparison
    assert not comp.mixed_workloads and len(comp.baselines) == 2
    for r in comp.rows:
        base = comp.row(comp.baselines[r.workload or ""])
        assert base.workload == r.workload  # every ratio is within one workload
    en = summarize(data, Translator("en"))
    # an "unreliable timing" line comes first when any row's timing window was loaded
    first = 1 if en[0].startswith("This run's timing is unreliable") else 0
    assert en[first].startswith("This report holds 2 workloads"), en
    speed = [line for line in en if "faster than" in line or "tied in" in line]
    assert speed and all(
        line.startswith(("fp32 1x2x64x16 [cpu]: ", "bf16 1x2x128x16 [cpu]: ")) for line in speed
    )
    table = comparison_table(data, Translator("id"))
    assert table.header[4].startswith("Kecepatan terhadap acuan beban kerjanya")
    assert any(row[0].endswith("(bf16 1x2x128x16 [cpu])") for row in table.rows)
