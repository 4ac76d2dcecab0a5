"""attnprof.policy on CPU, where the choice is between the math and flash SDPA backends.

Which backend ran is read from the profiler, not assumed: math runs
aten::_scaled_dot_product_attention_math, flash aten::_scaled_dot_product_flash_attention_for_cpu.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

from attnprof.errors import UserError
from attnprof.policy import Policy, pinned, scaled_dot_product_attention

MATH_OP = "aten::_scaled_dot_product_attention_math"
FLASH_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"


def rule(
    backend: str, seq_min: int, seq_max: int, *, dtype: str = "fp32", head_dim: int = 16, gqa: bool = False
) -> dict[str, Any]:
    return {
        "device": "cpu", "dtype": dtype, "causal": True, "head_dim": head_dim, "gqa": gqa,
        "seq_min": seq_min, "seq_max": seq_max, "kv_seq_min": seq_min, "kv_seq_max": seq_max, "backend": backend,
    }  # fmt: skip


POLICY = {
    "schema": "attnprof.policy/1",
    # short sequences: math; longer: flash (the opposite of PyTorch's own choice for the short ones)
    "rules": [rule("math", 33, 64), rule("flash", 65, 128), rule("math", 33, 64, dtype="bf16")],
}


def qkv(
    seq: int, *, dtype: torch.dtype = torch.float32, kv_heads: int = 2, head_dim: int = 16
) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, seq, head_dim, generator=g).to(dtype)
    k = torch.randn(1, kv_heads, seq, head_dim, generator=g).to(dtype)
    v = torch.randn(1, kv_heads, seq, head_dim, generator=g).to(dtype)
    return q, k, v


def ops_of(fn: Any) -> set[str]:
    with profile() as prof:
        fn()
    return {e.name for e in prof.events()}


def test_pins_math_where_the_policy_says_math() -> None:
    p = Policy.from_dict(POLICY)
    q, k, v = qkv(48)
    ops = ops_of(lambda: scaled_dot_product_attention(q, k, v, is_causal=True, policy=p))
    assert MATH_OP in ops and FLASH_OP not in ops
    # without the policy PyTorch's own dispatch picks flash on CPU for this shape
    ops = ops_of(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert FLASH_OP in ops and MATH_OP not in ops


def test_pins_flash_for_longer_sequences_and_output_matches() -> None:
    p = Policy.from_dict(POLICY)
    q, k, v = qkv(100)
    assert p.backend_for(q, k, v, is_causal=True) == "flash"
    ops = ops_of(lambda: scaled_dot_product_attention(q, k, v, is_causal=True, policy=p))
    assert FLASH_OP in ops and MATH_OP not in ops
    for seq in (48, 100):
        q, k, v = qkv(seq)
        out = scaled_dot_product_attention(q, k, v, is_causal=True, policy=p)
        torch.testing.assert_close(
            out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-5, atol=1e-5
        )


def test_context_manager_pins_a_plain_sdpa_call() -> None:
    p = Policy.from_dict(POLICY)
    q, k, v = qkv(64)

    def call() -> None:
        with p.pinned(q, k, v, is_causal=True) as backend:
            assert backend == "math"
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    assert MATH_OP in ops_of(call)
    with pinned(p, q, k, v, is_causal=True) as backend:
        assert backend == "math"


def test_matching_nearest_bucket_and_no_match() -> None:
    p = Policy.from_dict(POLICY)
    assert p.backend_for(*qkv(4000), is_causal=True) == "flash"  # beyond every bucket: the nearest
    assert p.backend_for(*qkv(8), is_causal=True) == "math"
    assert p.backend_for(*qkv(48), is_causal=False) is None  # no rule for non-causal
    assert p.backend_for(*qkv(48, head_dim=32), is_causal=True) is None
    assert p.backend_for(*qkv(48, kv_heads=1), is_causal=True) is None  # GQA has its own rules
    assert p.backend_for(*qkv(48, dtype=torch.bfloat16), is_causal=True) == "math"
    q, k, v = qkv(48, head_dim=32)
    ops = ops_of(lambda: scaled_dot_product_attention(q, k, v, is_causal=True, policy=p))
    assert FLASH_OP in ops  # unpinned: PyTorch's own choice


def test_a_backend_that_cannot_run_the_call_falls_back_with_one_warning() -> None:
    p = Policy.from_dict(POLICY)
    q, k, v = qkv(48)
    mask = torch.ones(48, 48, dtype=torch.bool)
    # MATH refuses an explicit mask together with is_causal=True; PyTorch's own dispatch takes it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True, policy=p)
    assert len([w for w in caught if "attnprof policy" in str(w.message)]) == 1
    with pytest.raises(RuntimeError):
        scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True, policy=p, strict=True)


def test_load_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        Policy.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "attnprof.policy/0", "rules": []}))
    with pytest.raises(UserError, match="regenerate"):
        Policy.load(bad)
    bad.write_text(json.dumps({"schema": "attnprof.policy/1", "rules": [{"device": "cpu"}]}))
    with pytest.raises(UserError, match="not an attnprof policy"):
        Policy.load(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(POLICY))
    assert len(Policy.load(good).rules) == 3
