"""The workload model: validation, FLOPs, bytes, inputs."""

from __future__ import annotations

import pytest

from attnprof.errors import UserError
from attnprof.workload import Workload, parse_shape


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"seq": 0}, "seq must be a positive integer"),
        ({"batch": -1}, "batch must be a positive integer"),
        ({"head_dim": 0}, "head_dim"),
        ({"heads": 8, "kv_heads": 3}, "multiple of kv heads"),
        ({"dtype": "fp8"}, "unknown dtype"),
    ],
)
def test_validation_names_the_problem(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError) as info:
        Workload(**kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_defaults_fill_kv_and_normalise_dtype() -> None:
    w = Workload(batch=2, heads=8, seq=128, head_dim=32, dtype="bfloat16")
    assert (w.kv_heads, w.kv_seq, w.dtype, w.element_size) == (8, 128, "bf16", 2)
    assert w.tag == "2_8_128_32"


def test_causal_flops_count_only_unmasked_pairs() -> None:
    w = Workload(batch=1, heads=1, seq=4, head_dim=1)
    # 4 + 3 + 2 + 1 = 10 visible pairs of 16
    assert w.unmasked_pairs() == 10
    assert w.flops_useful() == 4 * 10
    assert w.flops_executed(materialises=True) == 4 * 16
    assert w.flops_executed(materialises=False) == 4 * 10
    assert Workload(batch=1, heads=1, seq=4, head_dim=1, causal=False).flops_useful() == 4 * 16


def test_causal_alignment_when_lengths_differ() -> None:
    # top-left: query i sees keys 0..i; 6 queries over 4 keys -> 1+2+3+4 + 2 full rows of 4
    w = Workload(batch=1, heads=1, seq=6, kv_seq=4, head_dim=1)
    assert w.causal_alignment == "top-left"
    assert w.unmasked_pairs() == 10 + 8
    w2 = Workload(batch=1, heads=1, seq=2, kv_seq=5, head_dim=1)
    assert w2.unmasked_pairs() == 1 + 2


def test_bytes_model_with_gqa() -> None:
    w = Workload(batch=2, heads=8, kv_heads=2, seq=16, head_dim=4, dtype="fp16")
    q = 2 * 8 * 16 * 4
    kv = 2 * 2 * 2 * 16 * 4
    assert w.bytes_min() == (2 * q + kv) * 2
    assert w.score_bytes() == 2 * 8 * 16 * 16 * 2


def test_inputs_deterministic_and_mask_built_once() -> None:
    import torch

    w = Workload(batch=1, heads=4, kv_heads=2, seq=8, kv_seq=8, head_dim=4, seed=3)
    a, b = w.make_inputs(), w.make_inputs()
    assert torch.equal(a.q, b.q) and torch.equal(a.k, b.k)
    assert a.k.shape == (1, 2, 8, 4)
    assert a.mask is not None and a.mask.dtype == torch.bool and a.mask.shape == (8, 8)
    assert bool(a.mask[0, 1]) and not bool(a.mask[1, 0])
    assert Workload(causal=False, seq=8, head_dim=4).make_inputs().mask is None


def test_parse_shape() -> None:
    assert parse_shape("8,16,1024,64") == (8, 16, 1024, 64)
    with pytest.raises(UserError):
        parse_shape("8,16")
