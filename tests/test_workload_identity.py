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
from attnprof.records import WorkloadRecord
from attnprof.report.data import build_report_data
from attnprof.report.i18n import Translator
from attnprof.report.summary import summarize
from attnprof.report.tables import comparison_table
from attnprof.sweep.grid import JobSpec
from attnprof.workload import Workload, WorkloadId


@pytest.fixture(scope="module")
def two_shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shapes")
    opts = RunOptions(profile=False, time_budget_s=0.05, min_samples=6)
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


@pytest.fixture(scope="module")
def two_masks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("masks")
    opts = RunOptions(profile=False, time_budget_s=0.05, min_samples=6)
    for name, mask in (("none", "none"), ("sliding", "sliding=16")):
        run(
            Workload(batch=1, heads=2, seq=64, head_dim=16, mask=mask),
            ["naive-inplace", "sdpa"],
            out=root / name,
            options=opts,
        )
    return root


def test_compare_of_two_masks_is_two_workloads(two_masks: Path) -> None:
    """One shape with no mask and with a sliding window is two workloads: compare refuses them
    (it once printed 0.0028x between them), and with --mixed-workloads says which two."""
    a, b = two_masks / "none", two_masks / "sliding"
    with pytest.raises(
        UserError, match=r"fp32 1x2x64x16 full \[cpu\] in none; fp32 1x2x64x16 sliding=16 \[cpu\]"
    ):
        compare([a, b], analyse=False)
    comp = compare([a, b], analyse=False, mixed_workloads=True)
    assert comp.workloads == ["fp32 1x2x64x16 full [cpu]", "fp32 1x2x64x16 sliding=16 [cpu]"]
    assert {r.mask for r in comp.rows} == {"none", "sliding=16"}
    # one workload with itself: no refusal, one key
    assert compare([a, a], analyse=False).workloads == ["fp32 1x2x64x16 full [cpu]"]


def _record(**changes: object) -> WorkloadRecord:
    fields: dict[str, object] = dict(
        batch=1,
        heads=8,
        kv_heads=8,
        seq=512,
        kv_seq=512,
        head_dim=64,
        dtype="fp32",
        device="cpu",
        causal=True,
    )
    fields.update(changes)
    return WorkloadRecord(**fields)  # type: ignore[arg-type]


def test_identity_holds_every_field_that_changes_the_work() -> None:
    base = WorkloadId.of(_record())
    assert base.label == "fp32 1x8x512x64 [cpu]"
    # an old record (no mask text, kv 0 for 'same', a long dtype name) reads as the new one
    assert WorkloadId.of(_record(mask="", kv_heads=0, kv_seq=0, dtype="float32")) == base
    assert WorkloadId.of(_record(mask="causal", seed=7)) == base  # the seed changes no work
    others = [
        _record(causal=False),
        _record(causal=False, mask="sliding=16"),
        _record(backward=True),
        _record(phase="decode", seq=1),
        _record(kv_heads=2),
        _record(kv_seq=1024),
        _record(dtype="bf16"),
        _record(device="cuda"),
    ]
    labels = [WorkloadId.of(r).label for r in others]
    assert len(set(labels)) == len(labels) and base.label not in labels
    assert labels[:4] == [
        "fp32 1x8x512x64 full [cpu]",
        "fp32 1x8x512x64 sliding=16 [cpu]",
        "fp32 1x8x512x64 fwd+bwd [cpu]",
        "fp32 1x8x1/512x64 decode [cpu]",
    ]
    # a sweep job's folder, a recommend bucket and the workload say the mask the same way
    spec = JobSpec(workload=_record(causal=False, mask="sliding=16", backward=True), variant="sdpa")
    assert spec.slug() == "1_8x8_512x512_64_fp32_sliding-16_bwd_cpu"
    assert Workload.from_record(spec.workload).describe() == WorkloadId.of(spec.workload).describe()
