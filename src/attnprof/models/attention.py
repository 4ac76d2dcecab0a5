"""attnprof's attention variants inside transformers models, and per-layer profiler ranges.

Registration: attnprof's own variants become attention implementations a model can select with
`attn_implementation=` through transformers' AttentionInterface (and AttentionMaskInterface for
the mask each one wants):

- ``attnprof-naive`` and ``attnprof-naive-inplace``: attnprof.variants.naive.naive_attention, the
  blog's matmul / masked_fill / softmax / matmul, with the out-of-place or in-place masked_fill.
  Their mask is transformers' boolean SDPA mask, inverted once per forward (True = masked out, as
  masked_fill wants), and never skipped for causal models, so the naive code always sees a mask.
- ``attnprof-sdpa-MATH``, ``-FLASH``, ``-EFFICIENT``, ``-CUDNN``: transformers' own SDPA
  integration run under ``torch.nn.attention.sdpa_kernel([backend])``, so one backend is pinned
  inside the model. The backend is spelled in capitals, as in PyTorch's SDPBackend, because
  transformers treats any implementation name containing a lower-case "flash" as a request for a
  FlashAttention kernel from the Hub.

Ranges: while a profiler is recording, every call of a model's attention function (whatever the
implementation, eager included) runs inside ``record_function("attn_fwd/layer.N")``; with a
backward pass, two identity autograd nodes around the call open ``attn_bwd/layer.N`` when the
gradient reaches the attention output and close it when the gradients of q, k and v are done.
The forward ranges come from wrapping what ``AttentionInterface.get_interface`` returns, which is
the one place every model built on the interface looks its attention function up; N is the
layer index in the module's name (``model.layers.3.self_attn`` -> 3).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "BWD_PREFIX",
    "FWD_PREFIX",
    "VARIANT_IMPLEMENTATIONS",
    "canonical",
    "layer_ranges",
    "register_variants",
]

FWD_PREFIX = "attn_fwd/layer."
BWD_PREFIX = "attn_bwd/layer."
_SDPA_BACKENDS = ("math", "flash", "efficient", "cudnn")
# implementation name -> the attnprof variant it runs
VARIANT_IMPLEMENTATIONS: dict[str, str] = {
    "attnprof-naive": "naive",
    "attnprof-naive-inplace": "naive-inplace",
    **{f"attnprof-sdpa-{b.upper()}": f"sdpa-{b}" for b in _SDPA_BACKENDS},
}
_LAYER = re.compile(r"\.(\d+)(?:\.|$)")
_registered: list[bool] = []


def _naive_forward(inplace: bool) -> Callable[..., tuple[torch.Tensor, None]]:
    def forward(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        from attnprof.variants.naive import naive_attention

        if kwargs.get("softcap") is not None:
            raise ValueError("attnprof-naive does not implement softcap; use eager")
        if dropout and module.training:
            raise ValueError("attnprof-naive does not implement attention dropout; use eval mode or eager")
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        out = naive_attention(query, key, value, attention_mask, scale, inplace=inplace)
        return out.transpose(1, 2).contiguous(), None

    return forward


def _naive_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """transformers' boolean SDPA mask (True = attend), never skipped, inverted for masked_fill."""
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    mask = sdpa_mask(*args, **kwargs)
    return None if mask is None else ~mask


def _pinned_sdpa(backend: str) -> Callable[..., Any]:
    def forward(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        from attnprof.variants.sdpa import _ENUM

        with sdpa_kernel([getattr(SDPBackend, _ENUM[backend])]):
            return sdpa_attention_forward(module, *args, **kwargs)

    return forward


def canonical(name: str) -> str:
    """Accept attnprof-sdpa-flash for attnprof-sdpa-FLASH (and any case of attnprof's names)."""
    for known in VARIANT_IMPLEMENTATIONS:
        if name.lower() == known.lower():
            return known
    return name


def register_variants() -> None:
    """Register attnprof's variants with transformers (once per process)."""
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register("attnprof-naive", _naive_forward(inplace=False))
    AttentionInterface.register("attnprof-naive-inplace", _naive_forward(inplace=True))
    AttentionMaskInterface.register("attnprof-naive", _naive_mask)
    AttentionMaskInterface.register("attnprof-naive-inplace", _naive_mask)
    for b in _SDPA_BACKENDS:
        AttentionInterface.register(f"attnprof-sdpa-{b.upper()}", _pinned_sdpa(b))
        AttentionMaskInterface.register(f"attnprof-sdpa-{b.upper()}", sdpa_mask)
    _registered.append(True)


def layer_index(model: torch.nn.Module) -> dict[int, int]:
    """id(module) -> layer number, from the first number in each module's dotted name."""
    out: dict[int, int] = {}
    for name, mod in model.named_modules():
        m = _LAYER.search(name)
        if m:
            out.setdefault(id(mod), int(m.group(1)))
    return out


def _backward_markers() -> tuple[Any, Any]:
    import torch

    class Close(torch.autograd.Function):
        """Applied to q, k, v: its backward runs once all their gradients are computed."""

        @staticmethod
        def forward(ctx: Any, state: dict[str, Any], *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            ctx.state = state
            return tuple(x.view_as(x) for x in xs)

        @staticmethod
        def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:
            rf = ctx.state.pop("rf", None)
            if rf is not None:
                rf.__exit__(None, None, None)
            return (None, *grads)

    class Open(torch.autograd.Function):
        """Applied to the attention output: its backward runs first in the attention's backward."""

        @staticmethod
        def forward(ctx: Any, state: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
            ctx.state = state
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
            rf = torch.profiler.record_function(ctx.state["name"])
            rf.__enter__()
            ctx.state["rf"] = rf
            return None, grad

    return Open, Close


@contextmanager
def layer_ranges(*models: torch.nn.Module, backward: bool = False) -> Iterator[None]:
    """Inside this block, attention calls of `models` run in per-layer profiler ranges whenever a
    profiler is recording (and cost one dictionary lookup when none is)."""
    import torch
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    index: dict[int, int] = {}
    for model in models:
        index.update(layer_index(model))
    seen: dict[int, int] = {}
    markers = _backward_markers() if backward else None
    original = ALL_ATTENTION_FUNCTIONS.get_interface

    def number(module: Any) -> int:
        key = id(module)
        if key in index:
            return index[key]
        # a module with no number in its name: number them in call order, after the others
        return seen.setdefault(key, len(seen) + (max(index.values()) + 1 if index else 0))

    def get_interface(attn_implementation: str, default: Callable[..., Any]) -> Callable[..., Any]:
        fn = original(attn_implementation, default)

        def wrapped(module: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            if not torch.autograd._profiler_enabled():
                return fn(module, query, key, value, *args, **kwargs)
            n = number(module)
            state: dict[str, Any] = {"name": f"{BWD_PREFIX}{n}"}
            track = markers is not None and torch.is_grad_enabled()
            if markers is not None and track:
                query, key, value = markers[1].apply(state, query, key, value)
            with torch.profiler.record_function(f"{FWD_PREFIX}{n}"):
                out, weights = fn(module, query, key, value, *args, **kwargs)
            if markers is not None and track:
                out = markers[0].apply(state, out)
            return out, weights

        return wrapped

    ALL_ATTENTION_FUNCTIONS.get_interface = get_interface  # type: ignore[method-assign]
    try:
        yield
    finally:
        del ALL_ATTENTION_FUNCTIONS.get_interface  # back to the class's method
