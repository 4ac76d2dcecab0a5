"""What a model run will run, checked before anything heavy happens: the model resolved, its
shapes and the one attention call inside it (a Workload), and which implementations may run here
(the default list, the names transformers knows, the capability rules `attnprof run` uses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnprof.errors import UserError
from attnprof.models.options import ModelOptions
from attnprof.models.step import padded_lengths, text_config
from attnprof.reasons import reason
from attnprof.records import ReasonCode, Status

if TYPE_CHECKING:
    from attnprof.models.load import Loaded
    from attnprof.workload import Workload

__all__ = [
    "DEFAULT_IMPLEMENTATIONS",
    "TRANSFORMERS_IMPLEMENTATIONS",
    "Plan",
    "check_implementation",
    "check_model",
    "describe",
    "origin",
]


TRANSFORMERS_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")


def _default_implementations() -> tuple[str, ...]:
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    return (*TRANSFORMERS_IMPLEMENTATIONS, *VARIANT_IMPLEMENTATIONS)


DEFAULT_IMPLEMENTATIONS = _default_implementations()


def _known_implementations() -> list[str]:
    """attnprof's and transformers' implementation names (those registered in its
    AttentionInterface: a newer transformers knows more), so a typo is caught before a model is
    built instead of failing every layer with transformers' long message."""
    names = ["eager", *DEFAULT_IMPLEMENTATIONS]
    try:
        from transformers import AttentionInterface

        names += [str(k) for k in AttentionInterface._global_mapping]
    except (ImportError, AttributeError):  # an older or newer transformers: attnprof's list
        pass
    return list(dict.fromkeys(names))


# implementations left out of the default list on a CPU, with the reason (they run when asked for)
_CPU_SLOW = {"flex_attention": reason("cpu_slow", name="flex_attention")}


def _shapes(loaded: Loaded, opts: ModelOptions) -> tuple[int, int]:
    from attnprof.models.presets import get_preset

    preset = get_preset(loaded.name) if loaded.source == "preset" else None
    size = loaded.size or "small"
    batch = opts.batch if opts.batch is not None else (preset.batch[size] if preset else 1)
    if loaded.kind == "vision":
        cfg = loaded.config
        if opts.seq is not None:
            raise UserError(
                "--seq does not apply to a vision model: its sequence is (image_size / patch_size)^2 + 1"
            )
        seq = (cfg.image_size // cfg.patch_size) ** 2 + 1
    else:
        seq = opts.seq if opts.seq is not None else (preset.seq[size] if preset else 128)
        limit = getattr(text_config(loaded.config), "max_position_embeddings", None)
        if limit and seq + 1 > limit:
            raise UserError(
                f"--seq {seq} exceeds this model's max_position_embeddings ({limit}); pass a smaller --seq"
            )
    for name, value in (("--batch", batch), ("--seq", seq)):
        if value < 1:
            raise UserError(f"{name} must be a positive integer, got {value}")
    return batch, seq


def _attention_workload(loaded: Loaded, opts: ModelOptions, batch: int, seq: int, dtype: str) -> Workload:
    from attnprof.workload import Workload

    cfg = text_config(loaded.config)
    heads = int(cfg.num_attention_heads)
    kv = int(getattr(cfg, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
    decode = opts.phase == "decode"
    if loaded.kind == "encoder":
        mask = "padding=" + ",".join(str(n) for n in padded_lengths(batch, seq))
    else:
        mask = "causal" if loaded.kind == "causal-lm" else "none"
    # the workload fields of `attnprof run` (mask, backward, phase) describe the same call
    return Workload(
        mask=mask,
        backward=opts.backward,
        phase=opts.phase,
        batch=batch,
        heads=heads,
        kv_heads=kv,
        seq=1 if decode else seq,
        kv_seq=seq + 1 if decode else seq,
        head_dim=head_dim,
        dtype=dtype,
        device=opts.device,
        causal=loaded.kind == "causal-lm",
        seed=opts.seed,
    )


def check_implementation(
    impl: str, workload: Workload, base: Any, explicit: bool
) -> tuple[Status, ReasonCode] | None:
    """(status, reason) when `impl` cannot run here, else None."""
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    if not explicit and workload.device == "cpu" and impl in _CPU_SLOW:
        return "skipped", _CPU_SLOW[impl]
    if impl in VARIANT_IMPLEMENTATIONS:
        from attnprof.variants.registry import check, get_variant

        variant = get_variant(VARIANT_IMPLEMENTATIONS[impl])
        decision = check(variant, workload)
        if not decision.accepted:
            assert decision.reason_code is not None  # Decision.no records one
            return "unsupported", reason("in_model", decision.reason_code, name=impl)
    return None


def origin(impl: str) -> str:
    return "attnprof" if impl.startswith("attnprof-") else "transformers"


def describe(impl: str) -> str:
    from attnprof.models.attention import VARIANT_IMPLEMENTATIONS

    if impl in VARIANT_IMPLEMENTATIONS:
        from attnprof.variants.registry import get_variant

        return f"attnprof {get_variant(VARIANT_IMPLEMENTATIONS[impl]).description}, via AttentionInterface"
    return f"transformers attn_implementation={impl!r}"


@dataclass
class Plan:
    """What run_model will run, checked before anything heavy happens."""

    loaded: Loaded
    batch: int
    seq: int
    workload: Workload  # one attention call inside the model
    implementations: list[str]


def check_model(model: str, opts: ModelOptions) -> Plan:
    """Resolve MODEL and check the options: every UserError a run can raise for its input, raised
    before a model is built (the CLI calls this before it starts its progress display)."""
    from attnprof.models.attention import canonical
    from attnprof.models.load import load
    from attnprof.workload import DTYPES

    if opts.phase not in ("prefill", "decode"):
        raise UserError(f"unknown --phase {opts.phase!r}: use prefill or decode")
    if opts.phase == "decode" and opts.backward:
        raise UserError("--backward with --phase decode: a decode step is inference only; drop one of them")
    loaded = load(model, opts.size)
    if opts.phase == "decode" and loaded.kind != "causal-lm":
        kind = "an encoder" if loaded.kind == "encoder" else "a vision model"
        raise UserError(f"--phase decode needs a decoder with a KV cache; {model} is {kind}")
    cuda = opts.device.startswith("cuda")
    dtype_name = opts.dtype or ("bf16" if cuda else "fp32")
    if str(dtype_name).lower() not in DTYPES:
        raise UserError(f"unknown dtype {dtype_name!r}: use one of fp32, fp16, bf16")
    batch, seq = _shapes(loaded, opts)
    workload = _attention_workload(loaded, opts, batch, seq, dtype_name)
    impls = list(dict.fromkeys(canonical(i) for i in (opts.implementations or DEFAULT_IMPLEMENTATIONS)))
    if not impls:
        raise UserError("-v/--variants is empty: name at least one implementation, e.g. -v eager,sdpa")
    known = _known_implementations()
    unknown = [i for i in impls if i not in known and "/" not in i]  # owner/repo: a Hub kernel
    if unknown:
        raise UserError(
            f"unknown -v/--variants {', '.join(unknown)}: use one of {', '.join(known)} "
            "(or a Hub kernel as owner/repo)"
        )
    return Plan(loaded, batch, seq, workload, impls)
