"""The small public API: what `import attnprof` offers, and that it costs no torch import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_import_does_not_pull_in_torch() -> None:
    code = "import sys, attnprof; attnprof.analyze; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_library_round_trip(tmp_path: Path) -> None:
    import attnprof
    from attnprof.harness.run import RunOptions

    assert set(attnprof.__all__) >= {"Workload", "run", "analyze", "list_variants", "RunRecord", "RunResult"}
    w = attnprof.Workload(batch=1, heads=2, seq=32, head_dim=16)
    names = {v.name for v, d in attnprof.list_variants(w) if d.accepted}
    assert {"naive", "sdpa-flash"} <= names
    record = attnprof.run(
        w, ["naive-inplace"], out=tmp_path / "r", options=RunOptions(time_budget_s=0.02, min_samples=3)
    )
    (result,) = record.results
    assert isinstance(result, attnprof.RunResult) and result.status == "ok" and result.trace
    analysis = attnprof.analyze(tmp_path / "r" / result.trace)
    d = analysis.to_dict()
    assert d["schema"] == "attnprof.analysis/1"
    region = d["regions"][0]
    assert region["name"] == "attn_fwd" and region["instances"] == 3
