"""Preset architectures: small, realistic configs built with random weights (no download).

Each preset names a transformers config class and its fields at three sizes. `small` is the
default and runs every implementation of a preset on a 2-core CPU in well under a minute; `tiny`
is for tests; `base` is the size of a real small model, for a GPU. Dropout is off everywhere so
that implementations compare on identical outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["PRESETS", "SIZES", "Preset", "get_preset"]

Size = Literal["tiny", "small", "base"]
SIZES: tuple[Size, ...] = ("tiny", "small", "base")
Kind = Literal["causal-lm", "encoder", "vision"]


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    config_class: str  # transformers config class
    model_class: str  # transformers model class the step runs
    kind: Kind
    common: dict[str, Any]
    sizes: dict[str, dict[str, Any]]
    batch: dict[str, int] = field(default_factory=lambda: {"tiny": 1, "small": 1, "base": 4})
    seq: dict[str, int] = field(default_factory=lambda: {"tiny": 32, "small": 128, "base": 1024})

    def config_kwargs(self, size: Size) -> dict[str, Any]:
        return {**self.common, **self.sizes[size]}


def _decoder(hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": vocab,
    }


_LLAMA_SIZES = {
    "tiny": _decoder(64, 2, 4, 2, 128, 512),
    "small": _decoder(128, 4, 4, 2, 344, 2048),
    "base": _decoder(1024, 12, 16, 4, 2816, 32000),
}

PRESETS: dict[str, Preset] = {
    "llama": Preset(
        name="llama",
        description="Llama: GQA, RoPE, RMSNorm, SwiGLU (LlamaForCausalLM)",
        config_class="LlamaConfig",
        model_class="LlamaForCausalLM",
        kind="causal-lm",
        common={"max_position_embeddings": 4096, "attention_dropout": 0.0, "tie_word_embeddings": False},
        sizes=_LLAMA_SIZES,
    ),
    "qwen2": Preset(
        name="qwen2",
        description="Qwen2: GQA with biased q/k/v projections, RoPE, RMSNorm (Qwen2ForCausalLM)",
        config_class="Qwen2Config",
        model_class="Qwen2ForCausalLM",
        kind="causal-lm",
        common={"max_position_embeddings": 4096, "attention_dropout": 0.0, "use_sliding_window": False},
        sizes=_LLAMA_SIZES,
    ),
    "gpt2": Preset(
        name="gpt2",
        description="GPT-2: multi-head attention, learned positions, LayerNorm (GPT2LMHeadModel)",
        config_class="GPT2Config",
        model_class="GPT2LMHeadModel",
        kind="causal-lm",
        common={"n_positions": 4096, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0},
        sizes={
            "tiny": {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512},
            "small": {"n_embd": 128, "n_layer": 4, "n_head": 4, "vocab_size": 2048},
            "base": {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257},
        },
    ),
    "bert": Preset(
        name="bert",
        description="BERT: bidirectional encoder, padding mask over a padded batch (BertModel)",
        config_class="BertConfig",
        model_class="BertModel",
        kind="encoder",
        common={
            "max_position_embeddings": 4096,
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        },
        sizes={
            "tiny": {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 512,
            },
            "small": {
                "hidden_size": 128,
                "num_hidden_layers": 4,
                "num_attention_heads": 4,
                "intermediate_size": 512,
                "vocab_size": 2048,
            },
            "base": {
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "vocab_size": 30522,
            },
        },
        # a padding mask needs at least two sequences of different lengths
        batch={"tiny": 2, "small": 2, "base": 8},
        seq={"tiny": 32, "small": 128, "base": 512},
    ),
    "vit": Preset(
        name="vit",
        description="ViT: image patches, bidirectional attention without a mask (ViTModel)",
        config_class="ViTConfig",
        model_class="ViTModel",
        kind="vision",
        common={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "num_channels": 3},
        sizes={
            "tiny": {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "image_size": 32,
                "patch_size": 8,
            },
            "small": {
                "hidden_size": 128,
                "num_hidden_layers": 4,
                "num_attention_heads": 4,
                "intermediate_size": 512,
                "image_size": 128,
                "patch_size": 8,
            },
            "base": {
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "image_size": 224,
                "patch_size": 16,
            },
        },
        # the sequence is set by image_size / patch_size (+1 for the class token)
        batch={"tiny": 1, "small": 1, "base": 8},
        seq={"tiny": 17, "small": 257, "base": 197},
    ),
}


def get_preset(name: str) -> Preset | None:
    return PRESETS.get(name.lower())
