"""attnprof's timing against another timer, measured alike (issue 32, harness/crosscheck.py).

On CPU there is no Triton: the mechanism runs with real timers (attnprof's own sampler and
do_bench's dedicated loop written out with perf_counter) on a real SDPA call. A timer that
times twice the work must come out as "differ" with a ratio near 0.5; the interleaving must
alternate which timer goes first; the bound (the interval's half-width) must be stated. The
real do_bench path is a GPU test in tests/test_harness.py (the shared GPU check runs that file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from attnprof.analysis.stats import RatioInterval
from attnprof.harness.crosscheck import (
    SampleTimer,
    attnprof_timer,
    cross_check,
    dedicated_loop,
    triton_do_bench,
    verdict,
)
from attnprof.variants.registry import get_variant
from attnprof.workload import Workload


@pytest.fixture(autouse=True)
def _one_thread():  # type: ignore[no-untyped-def]
    """One intra-op thread: on a shared 2-core machine a second thread that loses its core turns
    a 0.1 ms call into an ~8 ms one for whole rounds at a time, which is the machine's noise and
    not what these tests are about."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _sdpa_call() -> Callable[[], Any]:
    w = Workload(batch=1, heads=2, seq=128, head_dim=32)
    built = get_variant("sdpa").build(w, w.make_inputs())
    return built.call


def _twice(timer: SampleTimer) -> SampleTimer:
    """A timer of twice the work: the same real timer, on a call that runs the call twice."""

    def t(call: Callable[[], Any], seconds: float) -> list[float]:
        def both() -> None:
            call()
            call()

        return timer(both, seconds)

    return t


def test_a_known_factor_of_two_is_told_apart_with_its_bound() -> None:
    call = _sdpa_call()
    with torch.no_grad():
        cc = cross_check(
            call,
            {"attnprof": attnprof_timer("cpu"), "loop x2": _twice(dedicated_loop("cpu"))},
            device="cpu",
            rounds=8,
            round_s=0.04,
        )
    assert cc.rounds == 8 and cc.interval is not None and cc.interval.paired
    assert cc.ratio is not None and 0.3 < cc.ratio < 0.75, cc.lines()
    assert cc.verdict == "differ", cc.lines()
    text = "\n".join(cc.lines())
    assert "medians of 8 interleaved rounds" in text
    assert f"differences beyond +-{cc.resolution:.1%} are told apart from none" in text
    assert text.endswith("verdict: differ by more than 5%")


def test_attnprof_and_the_dedicated_loop_on_one_call_do_not_differ_beyond_their_bound() -> None:
    """The same call, attnprof's rotation sampler against do_bench's loop shape on CPU: their
    ratio's interval holds 1 within a loose tolerance (a shared 2-core machine is noisy; the
    rounds are paired, so drift cancels)."""
    call = _sdpa_call()
    with torch.no_grad():
        cc = cross_check(
            call,
            {"attnprof": attnprof_timer("cpu"), "loop": dedicated_loop("cpu")},
            device="cpu",
            rounds=8,
            round_s=0.04,
            tolerance=0.3,
        )
    assert cc.verdict != "differ", cc.lines()
    assert cc.ratio is not None and 0.6 < cc.ratio < 1.6, cc.lines()


def test_rounds_alternate_which_timer_goes_first_and_companions_rotate() -> None:
    call = _sdpa_call()
    w = Workload(batch=1, heads=2, seq=64, head_dim=16)
    other = get_variant("naive-inplace").build(w, w.make_inputs()).call
    seen: list[str] = []

    def logged(name: str, timer: SampleTimer) -> SampleTimer:
        def t(c: Callable[[], Any], seconds: float) -> list[float]:
            seen.append(name)
            return timer(c, seconds)

        return t

    with torch.no_grad():
        cc = cross_check(
            call,
            {
                "a": logged("a", attnprof_timer("cpu", companions={"naive-inplace": other})),
                "b": logged("b", dedicated_loop("cpu")),
            },
            device="cpu",
            rounds=4,
            round_s=0.01,
        )
    assert seen == cc.order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert cc.rounds == 4 and cc.interval is None  # 4 rounds: fewer than a 95% claim needs (6)
    assert cc.verdict == "cannot tell"
    assert "this comparison can hold no bound" in "\n".join(cc.lines())


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [
        (0.98, 1.03, "agree"),
        (1.06, 1.20, "differ"),
        (0.80, 0.94, "differ"),
        (0.99, 1.07, "cannot tell"),  # straddles the +5% edge: too noisy to hold the bound
        (0.90, 1.10, "cannot tell"),
    ],
)
def test_verdicts_against_the_tolerance(low: float, high: float, want: str) -> None:
    iv = RatioInterval(ratio=(low + high) / 2, low=low, high=high, paired=True, n=12)
    assert verdict(iv, 0.05) == want
    assert verdict(None, 0.05) == "cannot tell"


def test_two_timers_exactly() -> None:
    with pytest.raises(ValueError, match="two timers"):
        cross_check(lambda: None, {"a": dedicated_loop("cpu")}, device="cpu")


def test_triton_do_bench_needs_triton() -> None:
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        with pytest.raises(ModuleNotFoundError):
            triton_do_bench()
    else:
        assert callable(triton_do_bench())
