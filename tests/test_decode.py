"""--phase decode: a few new queries against a long KV cache, with GQA (the serving shape)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnprof.cli.options import build_workload
from attnprof.errors import UserError
from attnprof.harness.run import RunOptions, run_variant
from attnprof.workload import Workload

FAST = RunOptions(profile=False, time_budget_s=0.02, min_samples=3, warmup_calls=1, warmup_s=0.0)


def test_decode_workload_from_flags() -> None:
    w = build_workload(phase="decode", kv_seq=512, kv_heads=2, heads=8, device="cpu")
    assert (w.seq, w.kv_seq, w.kv_heads, w.phase, w.q_offset) == (1, 512, 2, "decode", 511)
    w4 = build_workload(phase="decode", decode_queries=4, kv_seq=512, device="cpu")
    assert (w4.seq, w4.q_offset) == (4, 508)
    # the 4 queries are the newest tokens: they see 509, 510, 511 and 512 keys
    assert w4.unmasked_pairs() == 509 + 510 + 511 + 512
    with pytest.raises(UserError, match="--phase decode"):
        build_workload(decode_queries=4, device="cpu")
    with pytest.raises(UserError, match="kv-seq >= --decode-queries"):
        Workload(seq=8, kv_seq=4, phase="decode")


@pytest.mark.parametrize("queries", [1, 3])
@pytest.mark.parametrize("mask", ["causal", "sliding=16", "alibi"])
def test_decode_with_gqa_matches_the_reference(queries: int, mask: str) -> None:
    w = Workload(batch=2, heads=8, kv_heads=2, seq=queries, kv_seq=64, head_dim=16, phase="decode", mask=mask)
    for name in ("naive", "naive-inplace", "sdpa", "sdpa-math", "sdpa-flash"):
        res = run_variant(w, name, options=FAST)
        assert res.status == "ok", res.reason
        assert res.accuracy is not None and res.accuracy.ok, (name, mask, queries, res.accuracy)
    sdpa = run_variant(w, "sdpa", options=FAST)
    if mask == "causal":
        # one query sees the whole cache: no mask at all; several: SDPA's lower-right CausalBias,
        # which on CPU is materialised (its fused paths are CUDA's: variants/sdpa.lower_right_path)
        assert sdpa.mask_path == (
            "no mask"
            if queries == 1
            else "attn_mask=causal_lower_right(Sq, Skv) (a CausalBias): CausalBias materialises it as a "
            "dense bool mask (no fused kernel takes it without one)"
        )
        assert sdpa.flops_executed == (w.flops_executed(False) if queries == 1 else w.flops_dense())


def test_decode_cli_run(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "attnprof", "run", "--phase", "decode", "--kv-seq", "256", "--kv-heads", "2",
         "-H", "4", "-d", "16", "-v", "sdpa,naive-inplace", "--time-budget", "0.05", "--no-profile",
         "--out", str(tmp_path / "r"), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["workload"]["phase"] == "decode" and rec["workload"]["seq"] == 1
    assert rec["workload"]["kv_seq"] == 256 and rec["workload"]["kv_heads"] == 2
    assert all(r["status"] == "ok" and r["accuracy"]["ok"] for r in rec["results"])
