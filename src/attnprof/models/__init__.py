"""Attention inside real Hugging Face transformers models (`attnprof model`).

    presets.py    small, realistic architectures (llama, qwen2, gpt2, bert, vit) at three sizes
    load.py       MODEL -> config and model: a preset, a config.json or checkpoint, a cached Hub id
    attention.py  attnprof's variants registered with transformers' AttentionInterface, and the
                  per-layer profiler ranges (attn_fwd/layer.N, attn_bwd/layer.N)
    harness.py    each implementation in turn: check, warm up, profile, compare, time, analyse
    options.py    ModelOptions
    plan.py       what a run will run, checked before a model is built (check_model)
    step.py       a step's inputs and call (prefill, decode, forward + backward)
    analyse.py    attention's share of a step, per-layer times, findings, the fastest

transformers is an optional dependency (pip install 'attnprof[models]'); nothing here imports it
until a model is loaded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ModelOptions", "run_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from attnprof.models import harness

        return getattr(harness, name)
    raise AttributeError(name)
