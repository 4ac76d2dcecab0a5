"""Memory honesty: nothing is built for a variant before its memory check passes, the check counts
everything the variant will build (the mask included), and fused variants never build a mask.

The time a refusal takes is measured in benchmarks/bench_refusal.py (no timing assertions here);
its memory is bounded here, generously, in a fresh process so that nothing else counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attnprof.harness.prepare import prepare
from attnprof.harness.run import RunOptions, Shared
from attnprof.variants.registry import get_variant
from attnprof.workload import Workload

HUGE = Workload(batch=1, heads=8, seq=65536, head_dim=64)

_REFUSE = """
import json, resource, sys
import torch  # imported before the baseline: only what the refusal allocates counts
from pathlib import Path
from attnprof.harness.run import run
from attnprof.workload import Workload
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rec = run(Workload(batch=1, heads=8, seq=int(sys.argv[2]), head_dim=64), ["naive"], out=Path(sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": rec.results[0].status, "reason": rec.results[0].reason,
                  "rss_kib": after, "rise_kib": after - before}))
"""


def test_naive_at_65536_and_131072_is_refused_without_building_anything(tmp_path: Path) -> None:
    for seq in (65536, 131072):  # 131072 used to die in the allocator building its mask
        p = subprocess.run(
            [sys.executable, "-c", _REFUSE, str(tmp_path / str(seq)), str(seq)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        got = json.loads(p.stdout.strip().splitlines()[-1])
        assert got["status"] == "refused", got
        assert "mask tensors" in got["reason"] and "--force" in got["reason"]
        # the mask alone would be 4 GiB (16 GiB at 131072): the whole process stays under 2 GiB
        assert got["rss_kib"] < 2 * 1024 * 1024, got
        assert got["rise_kib"] < 512 * 1024, got
        assert (tmp_path / str(seq) / "run.json").exists()


def test_the_memory_check_counts_the_mask_inputs_and_reference() -> None:
    naive, flash = get_variant("naive"), get_variant("sdpa-flash")
    assert naive.mask_cost(HUGE) == 65536 * 65536  # one bool per pair
    assert flash.mask_cost(HUGE) == 0  # is_causal: no mask
    assert naive.estimate_bytes(HUGE) >= 3 * HUGE.score_bytes() + naive.mask_cost(HUGE)
    pending = Shared(HUGE).pending_bytes(accuracy=True)
    assert pending == HUGE.input_bytes() + HUGE.reference_bytes()
    assert pending < 3 * 2**30  # the fp64 reference works in blocks of rows, not S x S
    # a dense attn_mask costs SDPA its mask too
    slide = HUGE.replace(mask="sliding=256")
    assert flash.mask_cost(slide) >= 65536 * 65536


def test_a_refused_variant_builds_no_input_and_a_fused_one_no_mask() -> None:
    shared = Shared(HUGE)
    result, prepared = prepare(HUGE, get_variant("naive"), None, RunOptions(), shared, None)
    assert result.status == "refused" and prepared is None
    assert shared._inputs is None and shared._exact is None  # nothing was built
    # sdpa-flash with is_causal: its build asks for no mask (the variant is not run here: a
    # forward at S=65536 takes minutes on a CPU)
    inputs = shared.inputs()
    built = get_variant("sdpa-flash").build(HUGE, inputs)
    assert built.mask_path == "is_causal=True"
    assert "mask" not in inputs._cache and "bias" not in inputs._cache


def test_inputs_build_the_mask_only_when_asked() -> None:
    w = Workload(batch=1, heads=2, seq=16, head_dim=8, mask="sliding=4")
    inputs = w.make_inputs()
    assert inputs._cache == {}
    m = inputs.mask
    assert m is not None and m.shape == (16, 16)
    # row 10 sees keys 7..10
    assert [j for j in range(16) if not bool(m[10, j])] == [7, 8, 9, 10]
    assert inputs.mask is m  # built once
