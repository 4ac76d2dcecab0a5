"""A pinned SDPA backend (sdpa-math, sdpa-flash, ...) is timed inside its sdpa_kernel context,
entered once per sample outside the clock, not once per call: entering it is ~8 us of Python a
call on CPU, which made sdpa-flash a steady ~10% slower than sdpa running the same kernel."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from attnprof.harness.timed import Prepared
from attnprof.harness.timing import Scoped, time_interleaved
from attnprof.variants.registry import get_variant
from attnprof.workload import Workload

W = Workload(batch=1, heads=2, seq=64, head_dim=16)


def _built(name: str) -> Any:
    return get_variant(name).build(W, W.make_inputs())


def test_a_pinned_variant_is_timed_bare_inside_its_scope_and_auto_is_not_scoped() -> None:
    pinned = Prepared(label="sdpa-math", built=_built("sdpa-math")).calls()
    assert all(isinstance(c, Scoped) for c in pinned.values())
    auto = Prepared(label="sdpa", built=_built("sdpa")).calls()
    assert not any(isinstance(c, Scoped) for c in auto.values())  # must not: nothing to enter


def test_the_scope_is_entered_once_per_sample_and_every_timed_call_runs_pinned() -> None:
    built = _built("sdpa-math")
    assert built.scope is not None and built.bare is not None
    enters = 0
    states: list[tuple[bool, bool]] = []

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        nonlocal enters
        enters += 1
        assert built.scope is not None
        with built.scope():
            yield

    bare = built.bare

    def call() -> torch.Tensor:
        states.append((torch.backends.cuda.math_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()))
        return bare()

    out = time_interleaved(
        {"m": Scoped(call, counted)},
        device="cpu",
        budget_s=0.05,
        min_samples=5,
        max_samples=5,
        warmup_s=0.01,
        cold_share=0.0,
    )
    n = out["m"].n
    assert n == 5
    assert set(states) == {(True, False)}  # math on, flash off: pinned, for every call timed
    assert enters == n + 1  # the warm-up, then one per sample (no cold allocator pass here)
    assert len(states) > enters  # several calls per sample (each under 1 ms): one entry for them all


def test_the_call_outside_the_timing_still_pins_itself_and_undoes_it() -> None:
    # the warm-up, profile, accuracy and memory steps call `call`, which enters the pin itself:
    # the math backend's ops run (aten::_scaled_dot_product_attention_math), and the pin is undone
    built = _built("sdpa-math")
    flash_before = torch.backends.cuda.flash_sdp_enabled()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        built.call()
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_attention_math" in names
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" not in names
    assert torch.backends.cuda.flash_sdp_enabled() == flash_before
