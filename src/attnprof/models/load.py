"""MODEL -> a transformers config and a model: a preset, a local config or checkpoint, or a Hub
id from the local cache. Nothing is ever downloaded: Hub access runs with HF_HUB_OFFLINE=1 and
local_files_only, and a miss is one line saying so (exit 2).
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attnprof.errors import MissingExtra, UserError, first_line
from attnprof.models.presets import PRESETS, SIZES, get_preset

if TYPE_CHECKING:
    import torch

__all__ = ["Loaded", "load", "require_transformers"]

Source = Literal["preset", "config", "checkpoint", "hub"]
Kind = Literal["causal-lm", "encoder", "vision"]
_WEIGHTS = ("*.safetensors", "*.bin", "*.pt")


def require_transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the network from attnprof
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import transformers
    except ImportError:
        raise MissingExtra("transformers", "models", "attnprof model") from None
    have = _version_tuple(str(transformers.__version__))
    if have < MIN_TRANSFORMERS:
        need = ".".join(map(str, MIN_TRANSFORMERS))
        raise UserError(
            f"attnprof model needs transformers >= {need} (AttentionInterface.get_interface, "
            f"set_attn_implementation); this is {transformers.__version__}: pip install -U 'transformers>={need}'"
        )
    return transformers


# the oldest transformers whose attention API models/attention.py and harness.py drive (the
# models extra asks for the same, pyproject.toml); newer ones are allowed and tested as they come
MIN_TRANSFORMERS = (5, 0)


def _version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor) of a version string ("5.24.0", "5.0.0.dev0", "4.57.1+local")."""
    parts = re.findall(r"\d+", version.split("+")[0])[:2]
    return tuple(int(x) for x in parts) if parts else (0,)


@dataclass
class Loaded:
    name: str  # what the user passed
    source: Source
    kind: Kind
    config: Any
    model_class: str
    weights: Path | str | None  # a checkpoint to load, None for random weights
    size: str | None = None

    def build(self, *, dtype: torch.dtype, device: str, seed: int) -> torch.nn.Module:
        """The model with eager attention, in eval mode (no dropout), on `device` in `dtype`."""
        import torch

        tf = require_transformers()
        cls = getattr(tf, self.model_class)
        cfg = copy.deepcopy(self.config)
        if self.weights is not None:
            model = cls.from_pretrained(
                self.weights, config=cfg, attn_implementation="eager", dtype=dtype, local_files_only=True
            )
        else:
            torch.manual_seed(seed)
            model = cls._from_config(cfg, attn_implementation="eager", dtype=dtype)
        return model.to(device).eval()


def _classify(config: Any, tf: Any) -> tuple[Kind, str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if getattr(config, "is_encoder_decoder", False):
        raise UserError(
            f"{config.model_type} is an encoder-decoder model, which attnprof model does not run yet; "
            "give a decoder (llama, qwen2, gpt2), an encoder (bert) or a vision model (vit)"
        )
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal-lm", "AutoModelForCausalLM"
    if hasattr(config, "image_size") and hasattr(config, "num_channels"):
        return "vision", "AutoModel"
    if getattr(config, "vocab_size", None):
        return "encoder", "AutoModel"
    raise UserError(
        f"{config.model_type}: attnprof model knows how to feed text and image models only "
        "(this config has neither vocab_size nor image_size)"
    )


def _auto(tf: Any, cls_name: str, config: Any) -> str:
    # the concrete class, so that build() and the record name it
    auto = getattr(tf, cls_name)
    return str(auto._model_mapping[type(config)].__name__)


def load(model: str, size: str | None = None) -> Loaded:
    tf = require_transformers()
    preset = get_preset(model)
    if preset is not None:
        chosen = size or "small"
        if chosen not in SIZES:
            raise UserError(f"unknown --size {size!r}: use one of {', '.join(SIZES)}")
        cfg = getattr(tf, preset.config_class)(**preset.config_kwargs(chosen))  # type: ignore[arg-type]
        return Loaded(model, "preset", preset.kind, cfg, preset.model_class, None, chosen)
    if size is not None:
        raise UserError(f"--size applies to the presets ({', '.join(PRESETS)}); {model!r} is not one")
    path = Path(model).expanduser()
    if path.exists():
        return _load_path(path, model, tf)
    if model.endswith(".json") or model.startswith((".", "/", "~")):
        raise UserError(
            f"{model}: no such file or folder; give a config.json, a checkpoint folder or a preset"
        )
    try:
        cfg = tf.AutoConfig.from_pretrained(model, local_files_only=True)
    except Exception:
        raise UserError(
            f"{model!r} is not a preset ({', '.join(PRESETS)}), a local path, or a Hub model in the local "
            "cache; attnprof never downloads: fetch it first (hf download MODEL) or pass a folder"
        ) from None
    kind, auto = _classify(cfg, tf)
    return Loaded(model, "hub", kind, cfg, _auto(tf, auto, cfg), model)


def _load_path(path: Path, name: str, tf: Any) -> Loaded:
    cfg_file = path if path.is_file() else path / "config.json"
    if not cfg_file.is_file():
        raise UserError(f"{path}: no config.json in this folder; give a config.json or a checkpoint folder")
    try:
        cfg = tf.AutoConfig.from_pretrained(str(cfg_file))
    except Exception as exc:
        first = first_line(exc) or type(exc).__name__
        raise UserError(f"{cfg_file}: not a transformers config ({first[:200]})") from None
    kind, auto = _classify(cfg, tf)
    weights = path.is_dir() and any(any(path.glob(p)) for p in _WEIGHTS)
    source: Source = "checkpoint" if weights else "config"
    return Loaded(name, source, kind, cfg, _auto(tf, auto, cfg), str(path) if weights else None)
