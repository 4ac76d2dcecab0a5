"""Apply a recommendation at run time: pin the SDPA backend a sweep found fastest for a call's shape.

    from attnprof.policy import Policy, scaled_dot_product_attention
    p = Policy.load("attnprof-policy.json")          # written by `attnprof recommend --policy-out`
    out = scaled_dot_product_attention(q, k, v, is_causal=True, policy=p)
    with p.pinned(q, k, v, is_causal=True):          # or pin around your own F.sdpa call
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)

A rule matches on device type, dtype, causal, head_dim and GQA-or-not; among those, the rule
whose sequence bucket holds the call's (Sq, Skv) wins, else the nearest bucket (distance in
powers of two). No matching rule: PyTorch's own dispatch, unpinned. Lookups are cached per shape,
so the per-call cost is a dict lookup plus entering sdpa_kernel.

Pinning uses torch.nn.attention.sdpa_kernel with one backend. If the pinned backend cannot run a
call (a mask or dropout it does not support), the call is retried under PyTorch's own dispatch
and a warning is issued once per shape, unless strict=True.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from attnprof.errors import UserError
from attnprof.recommend import POLICY_SCHEMA

if TYPE_CHECKING:
    import torch

__all__ = ["Policy", "Rule", "pinned", "scaled_dot_product_attention"]

_DTYPES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}


class Rule(msgspec.Struct, kw_only=True):
    device: str
    dtype: str
    causal: bool
    head_dim: int
    gqa: bool
    seq_min: int
    seq_max: int
    kv_seq_min: int
    kv_seq_max: int
    backend: str  # math, flash, efficient, cudnn, or "default" (PyTorch's own dispatch)
    device_name: str = ""
    pytorch_choice: str | None = None
    best_variant: str | None = None
    gain_over_pytorch: float | None = None
    gain_within_noise: bool = False


class _PolicyFile(msgspec.Struct, kw_only=True):
    schema: str
    rules: list[Rule]
    created: str = ""
    source: str = ""


def _distance(n: int, lo: int, hi: int) -> float:
    if lo <= n <= hi:
        return 0.0
    edge = lo if n < lo else hi
    return abs(math.log2(n) - math.log2(edge))


class Policy:
    """A list of rules (see the module docstring); build one with Policy.load or from_dict."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self._cache: dict[tuple[Any, ...], Rule | None] = {}
        self._warned: set[tuple[Any, ...]] = set()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        try:
            pf = msgspec.convert(data, type=_PolicyFile)
        except msgspec.ValidationError as exc:
            raise UserError(f"not an attnprof policy: {exc}") from None
        if pf.schema != POLICY_SCHEMA:
            raise UserError(
                f"policy schema {pf.schema!r} is not {POLICY_SCHEMA!r}: regenerate it with attnprof recommend"
            )
        return cls(pf.rules)

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise UserError(
                f"policy file {p} does not exist: write one with attnprof recommend --policy-out {p}"
            ) from None
        except json.JSONDecodeError as exc:
            raise UserError(f"policy file {p} is not JSON: {exc}") from None
        return cls.from_dict(data)

    def rule_for(
        self, *, device: str, dtype: str, causal: bool, head_dim: int, gqa: bool, seq: int, kv_seq: int
    ) -> Rule | None:
        key = (device, dtype, causal, head_dim, gqa, seq, kv_seq)
        if key in self._cache:
            return self._cache[key]
        best: tuple[float, int, Rule] | None = None
        for i, r in enumerate(self.rules):
            if (r.device, r.dtype, r.causal, r.head_dim, r.gqa) != (device, dtype, causal, head_dim, gqa):
                continue
            d = _distance(seq, r.seq_min, r.seq_max) + _distance(kv_seq, r.kv_seq_min, r.kv_seq_max)
            if best is None or (d, i) < best[:2]:
                best = (d, i, r)
        rule = best[2] if best else None
        self._cache[key] = rule
        return rule

    def backend_for(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool
    ) -> str | None:
        """The backend (math, flash, efficient, cudnn) to pin for this call, or None."""
        dtype = _DTYPES.get(str(q.dtype))
        if dtype is None or q.dim() != 4:
            return None
        rule = self.rule_for(
            device=q.device.type,
            dtype=dtype,
            causal=is_causal,
            head_dim=int(q.shape[-1]),
            gqa=int(q.shape[1]) != int(k.shape[1]),
            seq=int(q.shape[-2]),
            kv_seq=int(k.shape[-2]),
        )
        # "default": the sweep found no pinned backend beating PyTorch's own dispatch here
        return rule.backend if rule and rule.backend != "default" else None

    @contextmanager
    def pinned(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool
    ) -> Iterator[str | None]:
        """Pin this call's recommended backend inside the block; yields its name (None: unpinned)."""
        backend = self.backend_for(q, k, v, is_causal=is_causal)
        with _sdpa_kernel(backend):
            yield backend


def _sdpa_kernel(backend: str | None) -> Any:
    if backend is None:
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    member = {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }.get(backend)
    if member is None:
        raise UserError(f"policy names backend {backend!r}: use math, flash, efficient or cudnn")
    return sdpa_kernel([member])


@contextmanager
def pinned(
    policy: Policy, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool
) -> Iterator[str | None]:
    """Module-level spelling of Policy.pinned."""
    with policy.pinned(q, k, v, is_causal=is_causal) as backend:
        yield backend


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    enable_gqa: bool = False,
    policy: Policy | None = None,
    strict: bool = False,
) -> torch.Tensor:
    """F.scaled_dot_product_attention with the policy's backend pinned for this call's shape."""
    import torch.nn.functional as F

    kwargs: dict[str, Any] = {
        "attn_mask": attn_mask,
        "dropout_p": dropout_p,
        "is_causal": is_causal,
        "scale": scale,
    }
    if enable_gqa:
        kwargs["enable_gqa"] = True
    if policy is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    backend = policy.backend_for(q, k, v, is_causal=is_causal)
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    try:
        with _sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
    except RuntimeError as exc:
        if strict:
            raise
        key = (tuple(q.shape), tuple(k.shape), str(q.dtype), backend)
        if key not in policy._warned:
            policy._warned.add(key)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            warnings.warn(
                f"attnprof policy: backend {backend} cannot run this call ({first[:200]}); "
                "using PyTorch's own dispatch",
                RuntimeWarning,
                stacklevel=2,
            )
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
