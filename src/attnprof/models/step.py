"""A model step: its inputs, the call that runs it (prefill, decode against a KV cache, or forward
+ backward), the copy of a model that shares its weights, and the words for what one step is."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attnprof.models.options import ModelOptions

if TYPE_CHECKING:
    import torch

    from attnprof.models.load import Loaded

__all__ = [
    "output_tensor",
    "padded_lengths",
    "share_weights",
    "step_call",
    "step_inputs",
    "step_words",
    "text_config",
]


def output_tensor(out: Any) -> torch.Tensor:
    for name in ("logits", "last_hidden_state"):
        t = getattr(out, name, None)
        if t is not None:
            return t
    return out[0]


def text_config(config: Any) -> Any:
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def padded_lengths(batch: int, seq: int) -> list[int]:
    """Real tokens per sequence of an encoder's padded batch: seq - b * seq / (2 * batch)."""
    return [seq - (b * seq) // (2 * batch) for b in range(batch)]


def step_inputs(
    loaded: Loaded, batch: int, seq: int, device: str, dtype: torch.dtype, seed: int
) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    cfg = loaded.config
    if loaded.kind == "vision":
        px = torch.randn(batch, cfg.num_channels, cfg.image_size, cfg.image_size, generator=gen)
        return {"pixel_values": px.to(device=device, dtype=dtype)}
    vocab = int(text_config(cfg).vocab_size)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    if loaded.kind == "encoder":
        lengths = padded_lengths(batch, seq)
        mask = torch.zeros(batch, seq, dtype=torch.long)
        for b, n in enumerate(lengths):
            mask[b, :n] = 1
        return {"input_ids": ids, "attention_mask": mask.to(device)}
    return {"input_ids": ids}


def share_weights(base: Any) -> Any:
    """A copy of the module tree (own config, own attention choice) with the same tensors."""
    memo: dict[int, Any] = {id(p): p for p in base.parameters()}
    memo.update({id(b): b for b in base.buffers()})
    return copy.deepcopy(base, memo)


def step_call(model: Any, inputs: dict[str, Any], opts: ModelOptions) -> Callable[[], torch.Tensor]:
    import torch

    if opts.phase == "decode":
        import inspect

        ids = inputs["input_ids"]
        with torch.no_grad():
            first = model(input_ids=ids, use_cache=True)
        cache = getattr(first, "cache", None) or first.past_key_values
        nxt = ids[:, -1:]
        # transformers 5.2x renames past_key_values to cache
        key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

        def decode() -> torch.Tensor:
            with torch.no_grad():
                out = model(input_ids=nxt, use_cache=True, **{key: cache})
            cache.crop(-1)  # back to the prefill length: every step sees the same cache
            return output_tensor(out)

        return decode
    if opts.backward:

        def train() -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            with torch.enable_grad():
                out = output_tensor(model(**inputs))
                out.float().square().mean().backward()
            return out.detach()

        return train

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return output_tensor(model(**inputs))

    return forward


def step_words(loaded: Loaded, opts: ModelOptions, batch: int, seq: int) -> str:
    what = {"causal-lm": "tokens", "encoder": "tokens (padded batch)", "vision": "patches + class token"}
    if opts.phase == "decode":
        return (
            f"decode: one token per sequence against a KV cache of {seq} (cache cropped back after each step)"
        )
    base = f"forward over {batch} x {seq} {what[loaded.kind]}"
    if opts.backward:
        return base + ", loss = mean square of the output, backward (no optimizer step)"
    return base
