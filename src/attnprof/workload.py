"""The workload: shape, dtype, device, mask; its inputs; its FLOP, byte and memory model.

FLOPs follow DOMAIN.md section 6: a forward is two matmuls, 2*Sq*Skv*D multiply-adds each per
head, so 4*B*Hq*Sq*Skv*D. Causal attention only needs the unmasked query-key pairs ("useful"
FLOPs); a materialising implementation still computes the full square ("executed" FLOPs).
When Sq != Skv the causal mask is aligned top-left (query i sees keys 0..i), as PyTorch's
is_causal and torch.tril do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attnprof.errors import UserError
from attnprof.records import WorkloadRecord

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "Inputs", "Workload", "parse_shape"]

DTYPES: dict[str, str] = {
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}
_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_ELEM = {"float32": 4, "float16": 2, "bfloat16": 2}


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """Parse --shape B,H,S,D."""
    parts = [p.strip() for p in text.replace("x", ",").split(",") if p.strip()]
    if len(parts) != 4 or not all(p.lstrip("-").isdigit() for p in parts):
        raise UserError(f"--shape {text!r} is not B,H,S,D: give four integers, e.g. --shape 8,16,1024,64")
    b, h, s, d = (int(p) for p in parts)
    return b, h, s, d


@dataclass(frozen=True)
class Workload:
    """One attention problem. kv_heads and kv_seq default to heads and seq (0 means 'same')."""

    batch: int = 1
    heads: int = 8
    seq: int = 512
    head_dim: int = 64
    kv_heads: int = 0
    kv_seq: int = 0
    dtype: str = "fp32"
    device: str = "cpu"
    causal: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.kv_seq == 0:
            object.__setattr__(self, "kv_seq", self.seq)
        norm = DTYPES.get(str(self.dtype).lower())
        if norm is None:
            raise UserError(f"unknown dtype {self.dtype!r}: use one of fp32, fp16, bf16")
        object.__setattr__(self, "dtype", _SHORT[norm])
        for name, flag in (
            ("batch", "-b/--batch"),
            ("heads", "-H/--heads"),
            ("seq", "-s/--seq"),
            ("head_dim", "-d/--head-dim"),
            ("kv_heads", "--kv-heads"),
            ("kv_seq", "--kv-seq"),
        ):
            value = getattr(self, name)
            if value <= 0:
                raise UserError(f"{name} must be a positive integer, got {value}: pass {flag} >= 1")
        if self.heads % self.kv_heads:
            raise UserError(
                f"heads ({self.heads}) must be a multiple of kv heads ({self.kv_heads}) for GQA: "
                f"choose --kv-heads among the divisors of {self.heads}"
            )

    # -- identity ---------------------------------------------------------------------------
    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, DTYPES[self.dtype])

    @property
    def element_size(self) -> int:
        return _ELEM[DTYPES[self.dtype]]

    @property
    def tag(self) -> str:
        """The blog's file-name stem: B_H_S_D."""
        return f"{self.batch}_{self.heads}_{self.seq}_{self.head_dim}"

    def describe(self) -> str:
        gqa = f" kv_heads={self.kv_heads}" if self.kv_heads != self.heads else ""
        kv = f" kv_seq={self.kv_seq}" if self.kv_seq != self.seq else ""
        mask = "causal" if self.causal else "no mask"
        return (
            f"B={self.batch} H={self.heads} S={self.seq} D={self.head_dim}{gqa}{kv} "
            f"{self.dtype} {self.device} {mask}"
        )

    def to_record(self) -> WorkloadRecord:
        return WorkloadRecord(**dataclasses.asdict(self))

    @classmethod
    def from_record(cls, rec: WorkloadRecord) -> Workload:
        import msgspec

        return cls(**msgspec.structs.asdict(rec))

    def replace(self, **changes: object) -> Workload:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # -- FLOP / byte model ------------------------------------------------------------------
    @property
    def causal_alignment(self) -> str:
        """Top-left: query i attends keys 0..i (torch.tril, SDPA is_causal)."""
        return "top-left" if self.seq != self.kv_seq else "square"

    def unmasked_pairs(self) -> int:
        """Query-key pairs that a causal mask leaves visible, per (batch, head)."""
        sq, skv = self.seq, self.kv_seq
        if not self.causal:
            return sq * skv
        # top-left alignment: row i sees min(i + 1, skv) keys
        full_rows = max(0, sq - skv)  # rows i >= skv see all skv keys
        tri = min(sq, skv)
        return tri * (tri + 1) // 2 + full_rows * skv

    def flops_useful(self) -> float:
        return 4.0 * self.batch * self.heads * self.unmasked_pairs() * self.head_dim

    def flops_executed(self, materialises: bool) -> float:
        """A materialising variant computes the full Sq x Skv square even under a causal mask."""
        if materialises:
            return 4.0 * self.batch * self.heads * self.seq * self.kv_seq * self.head_dim
        return self.flops_useful()

    def bytes_min(self) -> float:
        """Read Q, K, V once and write O once (K, V have kv_heads heads)."""
        e = self.element_size
        q = self.batch * self.heads * self.seq * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.kv_seq * self.head_dim
        return float((2 * q + kv) * e)

    def score_bytes(self, element_size: int | None = None) -> int:
        """One B*H*Sq*Skv score tensor."""
        e = element_size if element_size is not None else self.element_size
        return self.batch * self.heads * self.seq * self.kv_seq * e

    def io_bytes(self) -> int:
        """Q, K, V, the output and the fp64 reference output."""
        return int(self.bytes_min()) + self.batch * self.heads * self.seq * self.head_dim * 8

    # -- inputs -----------------------------------------------------------------------------
    def make_inputs(self) -> Inputs:
        """Deterministic q, k, v on the device ([B, H, S, D]) and the causal mask built once."""
        import torch

        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        dev = torch.device(self.device)

        def rand(h: int, s: int) -> torch.Tensor:
            t = torch.randn(self.batch, h, s, self.head_dim, generator=gen, dtype=torch.float32)
            return t.to(device=dev, dtype=self.torch_dtype)

        q = rand(self.heads, self.seq)
        k = rand(self.kv_heads, self.kv_seq)
        v = rand(self.kv_heads, self.kv_seq)
        mask = None
        if self.causal:
            # True where attention is NOT allowed, as the blog's masked_fill uses it
            mask = torch.ones(self.seq, self.kv_seq, dtype=torch.bool, device=dev).triu(1)
        return Inputs(q=q, k=k, v=v, mask=mask, scale=self.head_dim**-0.5)


@dataclass(frozen=True)
class Inputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None
    scale: float
