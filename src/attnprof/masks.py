"""Attention masks beyond causal: what each one allows, counted and built without an S x S tensor.

A mask is given as text (`--mask`):

    causal          query i sees keys 0..i (top-left in prefill; bottom-right in decode)
    none            every query sees every key
    sliding=W       causal, and only the last W keys (i - W < j <= i)
    prefix=P        prefix-LM: the first P keys are seen by every query (bidirectional prefix),
                    the rest causally
    document=N      N equal documents packed in one sequence: causal within a document only
    padding=L1,...  per-batch key lengths: batch b sees keys 0..Lb-1 (no causal mask)
    alibi           causal plus ALiBi's per-head linear bias slope_h * (j - i)
    bias            an arbitrary additive float bias [1, H, Sq, Skv] (deterministic, from the seed)

Query positions are absolute: query row r sits at position r + q_offset, where q_offset is 0 in
prefill (top-left, as torch.tril and SDPA's is_causal) and Skv - Sq in decode (the queries are the
newest tokens of the cache). The module counts visible pairs per row in O(Sq) arithmetic and builds
dense masks only for a block of rows when asked, so a refusal never allocates an S x S tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from attnprof.errors import UserError

if TYPE_CHECKING:
    import torch

__all__ = ["MASK_KINDS", "MaskSpec", "alibi_slopes", "parse_mask"]

MaskKind = Literal["causal", "none", "sliding", "prefix", "document", "padding", "alibi", "bias"]
MASK_KINDS: tuple[str, ...] = ("causal", "none", "sliding", "prefix", "document", "padding", "alibi", "bias")
_HELP = "causal, none, sliding=W, prefix=P, document=N, padding=L1,L2,..., alibi or bias"


@dataclass(frozen=True)
class MaskSpec:
    kind: MaskKind = "causal"
    value: int = 0  # W for sliding, P for prefix, N for document
    lengths: tuple[int, ...] = ()  # padding: one key length per batch element

    @property
    def text(self) -> str:
        """The canonical spelling, the one run.json and the store keep."""
        if self.kind in ("sliding", "prefix", "document"):
            return f"{self.kind}={self.value}"
        if self.kind == "padding":
            return "padding=" + ",".join(str(n) for n in self.lengths)
        return self.kind

    @property
    def causal_part(self) -> bool:
        """Whether the mask hides future keys (its queries never see keys after themselves)."""
        return self.kind in ("causal", "sliding", "document", "alibi")

    @property
    def has_bias(self) -> bool:
        return self.kind in ("alibi", "bias")

    @property
    def boolean(self) -> bool:
        """A mask some key pairs are hidden by (as opposed to none or a pure bias)."""
        return self.kind not in ("none", "bias")

    # -- counting ----------------------------------------------------------------------------
    def visible_per_batch(self, batch: int, sq: int, skv: int, q_offset: int) -> list[int]:
        """Visible (query, key) pairs per batch element and head, in O(Sq)."""
        if self.kind == "padding":
            return [sq * n for n in self.lengths]
        total = sum(self._row_visible(r + q_offset, skv) for r in range(sq))
        return [total] * batch

    def _row_visible(self, pos: int, skv: int) -> int:
        last = min(pos, skv - 1)  # the last key a causal row sees
        if self.kind in ("none", "bias"):
            return skv
        if self.kind in ("causal", "alibi"):
            return max(0, last + 1)
        if self.kind == "sliding":
            return max(0, last - max(0, pos - self.value + 1) + 1)
        if self.kind == "prefix":
            return min(skv, max(last + 1, self.value))
        if self.kind == "document":
            doc = min(pos, skv - 1) * self.value // skv
            start = -(-doc * skv // self.value)  # first key of that document: ceil(doc*skv/N)
            return max(0, last - start + 1)
        raise AssertionError(self.kind)

    # -- building ----------------------------------------------------------------------------
    def allowed(
        self, rows: torch.Tensor, cols: torch.Tensor, *, skv: int, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Boolean 'may attend' for absolute query positions `rows` ([R, 1]) and key positions
        `cols` ([1, C]) (or any broadcastable index tensors, as flex's mask_mod passes). Padding
        reads `lengths` indexed by batch instead and is handled by the caller."""
        if self.kind in ("none", "bias", "padding"):
            return (rows >= 0) & (cols >= 0)
        causal = cols <= rows
        if self.kind in ("causal", "alibi"):
            return causal
        if self.kind == "sliding":
            return causal & (rows - cols < self.value)
        if self.kind == "prefix":
            return causal | (cols < self.value)
        if self.kind == "document":
            return causal & ((rows * self.value) // skv == (cols * self.value) // skv)
        raise AssertionError(self.kind)

    def validate(self, *, batch: int, heads: int, seq: int, kv_seq: int, q_offset: int) -> None:
        """Refuse a mask that does not fit the shape, or that leaves a query row seeing no key
        (its softmax would be 0/0 = NaN, in every implementation)."""
        if self.kind == "padding":
            if len(self.lengths) != batch:
                raise UserError(
                    f"--mask {self.text}: give one key length per batch element ({batch}), "
                    f"e.g. --mask padding={','.join([str(kv_seq)] * batch)}"
                )
            bad = [n for n in self.lengths if not 1 <= n <= kv_seq]
            if bad:
                raise UserError(f"--mask {self.text}: every length must be within 1..kv_seq ({kv_seq})")
            return
        if self.kind in ("sliding", "document") and seq + q_offset > kv_seq:
            raise UserError(
                f"--mask {self.text} needs seq <= kv_seq (queries are positions of the key sequence); "
                f"got seq {seq}, kv_seq {kv_seq}"
            )
        if self.kind == "document" and self.value > kv_seq:
            raise UserError(f"--mask {self.text}: more documents than keys ({kv_seq})")
        if self.kind == "prefix" and self.value > kv_seq:
            raise UserError(f"--mask {self.text}: the prefix is longer than kv_seq ({kv_seq})")


def parse_mask(text: str) -> MaskSpec:
    """--mask TEXT -> MaskSpec, or one clear UserError."""
    raw = text.strip().lower()
    name, sep, arg = raw.partition("=")
    name = name.strip()
    aliases = {"full": "none", "no": "none", "off": "none"}
    name = aliases.get(name, name)
    if name not in MASK_KINDS:
        raise UserError(f"unknown --mask {text!r}: use {_HELP}")
    if name in ("causal", "none", "alibi", "bias"):
        if sep:
            raise UserError(f"--mask {name} takes no value; got {text!r}")
        return MaskSpec(kind=name)  # type: ignore[arg-type]
    if not sep or not arg.strip():
        example = {"sliding": "sliding=256", "prefix": "prefix=64", "document": "document=4"}.get(
            name, "padding=512,384"
        )
        raise UserError(f"--mask {name} needs a value, e.g. --mask {example}")
    parts = [p.strip() for p in arg.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise UserError(f"--mask {text!r}: the value must be positive integer(s)")
    numbers = tuple(int(p) for p in parts)
    if name == "padding":
        return MaskSpec(kind="padding", lengths=numbers)
    if len(numbers) != 1 or numbers[0] < 1:
        raise UserError(f"--mask {text!r}: give one positive integer, e.g. --mask {name}=256")
    return MaskSpec(kind=name, value=numbers[0])  # type: ignore[arg-type]


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's head slopes (Press et al.): a geometric sequence starting at 2^(-8/n) for the
    closest power of two n <= heads, interleaved with the next power's odd terms beyond it."""

    def pow2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if heads & (heads - 1) == 0:
        return pow2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return pow2(closest) + pow2(2 * closest)[0::2][: heads - closest]
