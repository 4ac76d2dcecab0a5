"""Compiled variants within dynamo's recompile limit (issue 21): one process that builds a compiled
variant for more configurations than torch._dynamo.config.recompile_limit (a reused sweep worker)
must keep compiling them, never run the frame eagerly while it is labelled compiled; and should
the limit be hit anyway, the call fails loudly. The limit is lowered to 2 here (dynamo's own
setting) so that the test compiles four times, not nine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from attnprof.variants.base import Built, Decision, Variant
from attnprof.variants.compiling import make_room
from attnprof.workload import Inputs, Workload


@pytest.fixture
def low_limit() -> Iterator[None]:
    cfg = torch._dynamo.config
    # dynamo's own config patch (a module attribute set by monkeypatch would not be restored)
    with cfg.patch(recompile_limit=2, fail_on_recompile_limit_hit=cfg.fail_on_recompile_limit_hit):
        torch._dynamo.reset()
        yield
    torch._dynamo.reset()


def _double(workload: Workload, inputs: Inputs) -> Built:
    q = inputs.q

    def call() -> torch.Tensor:  # one code object for every build, as the variants' calls are
        return q * 2

    return Built(call=call)


TWICE = Variant(name="twice", description="q * 2", build=_double, capability=lambda w: Decision.ok())


def test_more_configurations_than_the_limit_all_run_compiled(low_limit: None) -> None:
    twin = TWICE.compiled_twin()
    new_graphs = []
    for seq in (8, 12, 16, 20):  # twice the limit: dynamo alone would run the last two eagerly
        w = Workload(batch=1, heads=1, seq=seq, head_dim=16)
        inputs = w.make_inputs()
        built = twin.build(w, inputs)
        before = counters["stats"]["unique_graphs"]
        out = built.call()
        new_graphs.append(counters["stats"]["unique_graphs"] - before)
        assert torch.equal(out, inputs.q * 2)
    assert new_graphs == [1, 1, 1, 1]


def test_past_the_limit_a_call_fails_instead_of_running_eagerly(low_limit: None) -> None:
    def call(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    make_room(call)  # turns fail_on_recompile_limit_hit on, as every compiled build does
    fn = torch.compile(call, dynamic=False, backend="eager")  # compiled around make_room's count
    fn(torch.ones(1))
    fn(torch.ones(2))
    with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        fn(torch.ones(3))  # the third shape of one code object, over a limit of 2


def test_make_room_resets_only_past_the_limit(low_limit: None) -> None:
    def f() -> None:
        return None

    def g() -> None:
        return None

    assert [make_room(f), make_room(g), make_room(f), make_room(g)] == [False, False, False, False]
    assert make_room(f) is True  # f's third build: dynamo is reset first
