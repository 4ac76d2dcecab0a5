"""torch.compile for attnprof's compiled variants, within dynamo's recompile limit.

Dynamo keeps at most torch._dynamo.config.recompile_limit (8 in torch 2.13,
torch/_dynamo/config.py) compiled entries per code object. A compiled variant's call is one code
object whatever the workload (base.py compiles each build's `call` closure; flex compiles
flex_attention itself), so a process that builds it for a 9th configuration (a reused sweep
worker) hits the limit, and dynamo then *runs the frame eagerly* with one log line: the 9th
flex would run eager flex, which materialises the scores, while recorded as flex / compiled.

Two guards: before each build, `make_room` counts the builds of that code object since the last
reset and calls torch._dynamo.reset() before the limit is reached (a sweep worker's earlier
configurations are done with; `attnprof run` builds each code object a few times at most and
never resets); and fail_on_recompile_limit_hit is turned on, so that should the limit be hit
anyway, the call raises (the variant is recorded as failed) instead of silently running eager.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["compile_call", "make_room"]

_builds: Counter[Any] = Counter()  # code object -> builds since the last dynamo reset


def _key(fn: Callable[..., Any]) -> Any:
    """Dynamo's cache is per code object: a function's __code__ (a callable object: its class)."""
    return getattr(fn, "__code__", None) or type(fn)


def make_room(fn: Callable[..., Any]) -> bool:
    """Before building a compiled call of `fn`: reset dynamo if this build would be past the
    recompile limit of fn's code object; fail loudly if the limit is ever hit. True when it
    reset."""
    import torch._dynamo

    cfg = torch._dynamo.config
    if not cfg.suppress_errors:  # the two are incompatible; suppress_errors is the user's choice
        cfg.fail_on_recompile_limit_hit = True
    key = _key(fn)
    reset = _builds[key] + 1 > max(1, int(cfg.recompile_limit))
    if reset:
        torch._dynamo.reset()
        _builds.clear()
    _builds[key] += 1
    return reset


def compile_call(fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """torch.compile(fn, **kwargs), after make_room(fn)."""
    import torch

    make_room(fn)
    return torch.compile(fn, **kwargs)  # type: ignore[no-any-return]
