"""The workload: shape, dtype, device, mask, direction, phase; its inputs; its FLOP, byte and
memory model.

FLOPs follow DOMAIN.md section 6: a forward is two matmuls, 2*Sq*Skv*D multiply-adds each per
head, so 4*B*Hq*Sq*Skv*D. A mask only needs the visible query-key pairs ("useful" FLOPs); a
materialising implementation still computes the full square ("executed" FLOPs). The backward
pass counts 2.5x the forward's matmul FLOPs (FlashAttention's convention: five matmuls, one of
them the recomputation of the scores, against the forward's two).
In prefill, when Sq != Skv, the causal mask is aligned top-left (query i sees keys 0..i), as
PyTorch's is_causal and torch.tril do; in decode the queries are the newest Sq tokens of a
Skv-long cache (bottom-right: query i sits at position Skv - Sq + i).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import msgspec

from attnprof.errors import UserError
from attnprof.formulas import BACKWARD_FLOP_FACTOR, attention_bytes, attention_flops, attention_pairs
from attnprof.masks import MaskSpec, alibi_slopes, parse_mask
from attnprof.records import WorkloadRecord

if TYPE_CHECKING:
    import torch

__all__ = [
    "BACKWARD_FLOP_FACTOR",
    "DTYPES",
    "PHASES",
    "REFERENCE_BLOCK_BYTES",
    "Inputs",
    "Workload",
    "WorkloadId",
    "canonical_mask",
    "kind_words",
    "parse_shape",
]

PHASES = ("prefill", "decode")
# the fp64 reference (harness/reference.py) works in blocks of query rows of about this size
REFERENCE_BLOCK_BYTES = 256 * 1024 * 1024

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


# The blog's shape on a GPU; on a 2-core CPU a shape whose default suite runs in well under 60 s
CUDA_DEFAULT_SHAPE = (8, 16, 1024, 64)
CPU_DEFAULT_SHAPE = (1, 8, 512, 64)


def default_shape(device: str) -> tuple[int, int, int, int]:
    """B, H, S, D when none is given: the blog's on a GPU, a CPU-sized one elsewhere."""
    return CUDA_DEFAULT_SHAPE if device.startswith("cuda") else CPU_DEFAULT_SHAPE


def default_dtype(device: str) -> str:
    """The dtype when none is given: bf16 on a GPU (the blog's), fp32 on a CPU (its fast path)."""
    return "bf16" if device.startswith("cuda") else "fp32"


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """Parse --shape B,H,S,D."""
    parts = [p.strip() for p in text.replace("x", ",").split(",") if p.strip()]
    if len(parts) != 4 or not all(p.lstrip("-").isdigit() for p in parts):
        raise UserError(f"--shape {text!r} is not B,H,S,D: give four integers, e.g. --shape 8,16,1024,64")
    b, h, s, d = (int(p) for p in parts)
    # named here, as --shape, not by the -b/-H/-s/-d a command may not even have (analyze)
    for letter, value in zip("BHSD", (b, h, s, d), strict=True):
        if value < 1:
            raise UserError(
                f"--shape {text!r}: {letter} must be a positive integer, got {value}: e.g. --shape 8,16,1024,64"
            )
    return b, h, s, d


class _WorkloadFields(Protocol):
    """What WorkloadId.of reads: a WorkloadRecord, a Workload or a stored result alike."""

    @property
    def batch(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def kv_seq(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def causal(self) -> bool: ...
    @property
    def mask(self) -> str: ...
    @property
    def backward(self) -> bool: ...
    @property
    def phase(self) -> str: ...


def canonical_mask(mask: str, causal: bool) -> str:
    """A record's mask in its one spelling: records written before --mask hold "" and say causal
    or not in `causal`; a text parse_mask cannot read is kept as written (never guessed)."""
    if not mask:
        return "causal" if causal else "none"
    try:
        return parse_mask(mask).text
    except UserError:
        return mask


def kind_words(mask: str, backward: bool, phase: str) -> str:
    """What the work is beyond its shape and dtype, in the words every view shares (workload
    labels, recommend's buckets, the results table): "" for a causal forward in prefill (the
    default), else " full" (no mask), " sliding=16" (a named mask, as given), " fwd+bwd",
    " decode". `mask` is canonical (canonical_mask)."""
    words = "" if mask == "causal" else " full" if mask == "none" else f" {mask}"
    return words + (" fwd+bwd" if backward else "") + (" decode" if phase == "decode" else "")


class WorkloadId(msgspec.Struct, frozen=True, kw_only=True, order=True):
    """The one identity of a workload: every field that changes the work done (shape, GQA, KV
    length, dtype, device, mask, backward, phase) and nothing that does not (the seed). Two
    measurements may be set against each other only when their WorkloadIds are equal. Built by
    `of` from any record, old ones normalised there (an empty mask, kv 0 = same, dtype spellings),
    so no reader normalises again. `label` is its one spelling (also the key in JSON)."""

    dtype: str
    device: str
    batch: int
    heads: int
    kv_heads: int
    seq: int
    kv_seq: int
    head_dim: int
    mask: str = "causal"
    backward: bool = False
    phase: str = "prefill"

    @classmethod
    def of(cls, w: _WorkloadFields) -> WorkloadId:
        dtype = _SHORT.get(DTYPES.get(str(w.dtype).lower(), ""), str(w.dtype))
        return cls(
            dtype=dtype,
            device=w.device,
            batch=w.batch,
            heads=w.heads,
            kv_heads=w.kv_heads or w.heads,
            seq=w.seq,
            kv_seq=w.kv_seq or w.seq,
            head_dim=w.head_dim,
            mask=canonical_mask(w.mask, w.causal),
            backward=bool(w.backward),
            phase=w.phase or "prefill",
        )

    @property
    def causal(self) -> bool:
        return self.mask == "causal"

    @property
    def gqa(self) -> bool:
        return self.kv_heads != self.heads

    @property
    def direction(self) -> str:
        return "fwd+bwd" if self.backward else "fwd"

    @property
    def shape(self) -> str:
        """B x H x S x D, with /kv heads and /kv length where K and V differ: 1x8/2x512x64."""
        h = f"{self.heads}/{self.kv_heads}" if self.gqa else str(self.heads)
        s = f"{self.seq}/{self.kv_seq}" if self.kv_seq != self.seq else str(self.seq)
        return f"{self.batch}x{h}x{s}x{self.head_dim}"

    @property
    def kind(self) -> str:
        return kind_words(self.mask, self.backward, self.phase)

    @property
    def label(self) -> str:
        """The workload in a few characters, "fp32 1x8x512x64 [cpu]", "bf16 1x8x512x64 sliding=16
        fwd+bwd [cpu]": every field of the identity, so it is also its key."""
        return f"{self.dtype} {self.shape}{self.kind} [{self.device}]"

    @property
    def key(self) -> str:
        return self.label

    @property
    def slug(self) -> str:
        """The label as a file-system name (--keep-traces folders)."""
        h = f"{self.heads}x{self.kv_heads}"
        s = f"{self.seq}x{self.kv_seq}"
        mask = "full" if self.mask == "none" else self.mask
        extra = ("_bwd" if self.backward else "") + ("_decode" if self.phase == "decode" else "")
        name = f"{self.batch}_{h}_{s}_{self.head_dim}_{self.dtype}_{mask}{extra}_{self.device}"
        return name.replace(":", "").replace("=", "-").replace(",", "-")

    def describe(self) -> str:
        """The long form, for a run's header: B=1 H=8 S=512 D=64 fp32 cpu causal."""
        gqa = f" kv_heads={self.kv_heads}" if self.gqa else ""
        kv = f" kv_seq={self.kv_seq}" if self.kv_seq != self.seq else ""
        mask = {"causal": "causal", "none": "no mask"}.get(self.mask, f"mask {self.mask}")
        extra = (" decode" if self.phase == "decode" else "") + (" fwd+bwd" if self.backward else "")
        return (
            f"B={self.batch} H={self.heads} S={self.seq} D={self.head_dim}{gqa}{kv} "
            f"{self.dtype} {self.device} {mask}{extra}"
        )


@dataclass(frozen=True)
class Workload:
    """One attention problem. kv_heads and kv_seq default to heads and seq (0 means 'same').

    `mask` is the --mask text ("" = causal or none, from `causal`); after construction it is the
    canonical spelling and `causal` is True exactly when the mask is plain causal. In decode,
    `seq` is the number of new queries (1 by default) and `kv_seq` the cache length."""

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
    mask: str = ""
    backward: bool = False
    phase: str = "prefill"

    def __post_init__(self) -> None:
        spec = parse_mask(self.mask or ("causal" if self.causal else "none"))
        object.__setattr__(self, "mask", spec.text)
        object.__setattr__(self, "causal", spec.kind == "causal")
        if self.phase not in PHASES:
            raise UserError(f"unknown phase {self.phase!r}: use prefill or decode")
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
        if self.phase == "decode" and self.seq > self.kv_seq:
            raise UserError(
                f"decode runs {self.seq} new queries against a cache of {self.kv_seq}: "
                "give --kv-seq >= --decode-queries"
            )
        self.mask_spec.validate(
            batch=self.batch, heads=self.heads, seq=self.seq, kv_seq=self.kv_seq, q_offset=self.q_offset
        )

    @property
    def mask_spec(self) -> MaskSpec:
        return parse_mask(self.mask)

    @property
    def q_offset(self) -> int:
        """Absolute position of query row 0: 0 in prefill, Skv - Sq in decode."""
        return self.kv_seq - self.seq if self.phase == "decode" else 0

    # what the identity says of the work (its one home: WorkloadId)
    @property
    def gqa(self) -> bool:
        return self.identity.gqa

    @property
    def direction(self) -> str:
        return self.identity.direction

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
        """The blog's file-name stem of a run's traces and tables: B_H_S_D (a file name inside one
        run directory, whose variants share one workload: not an identity, WorkloadId is)."""
        return f"{self.batch}_{self.heads}_{self.seq}_{self.head_dim}"

    @property
    def identity(self) -> WorkloadId:
        return WorkloadId.of(self)

    def describe(self) -> str:
        return self.identity.describe()

    def to_record(self) -> WorkloadRecord:
        return WorkloadRecord(**dataclasses.asdict(self))

    @classmethod
    def from_record(cls, rec: WorkloadRecord) -> Workload:
        import msgspec

        return cls(**msgspec.structs.asdict(rec))

    def replace(self, **changes: object) -> Workload:
        if "causal" in changes and "mask" not in changes and self.mask in ("causal", "none"):
            changes["mask"] = ""  # re-derived from the new causal flag
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # -- FLOP / byte model ------------------------------------------------------------------
    @property
    def causal_alignment(self) -> str:
        """Top-left: query i attends keys 0..i (torch.tril, SDPA is_causal)."""
        return "top-left" if self.seq != self.kv_seq else "square"

    def visible_pairs(self) -> int:
        """Query-key pairs the mask leaves visible, summed over the batch, per head."""
        if self.causal and self.q_offset == 0:
            # top-left alignment: row i sees min(i + 1, skv) keys (closed form, any length)
            return self.batch * attention_pairs(self.seq, self.kv_seq, causal="top-left")
        return sum(self.mask_spec.visible_per_batch(self.batch, self.seq, self.kv_seq, self.q_offset))

    def unmasked_pairs(self) -> float:
        """Query-key pairs the mask leaves visible, per (batch, head) (a mean over the batch
        for padding, whose lengths differ per batch element)."""
        total = self.visible_pairs()
        return total // self.batch if total % self.batch == 0 else total / self.batch

    def flops_useful(self) -> float:
        """Forward FLOPs over the visible pairs only."""
        return attention_flops(1, self.heads, self.visible_pairs(), self.head_dim)

    def flops_dense(self) -> float:
        """Forward FLOPs of the full Sq x Skv square."""
        return attention_flops(self.batch, self.heads, self.seq * self.kv_seq, self.head_dim)

    def flops_executed(self, materialises: bool) -> float:
        """A materialising variant computes the full Sq x Skv square whatever the mask."""
        return self.flops_dense() if materialises else self.flops_useful()

    def bytes_min(self) -> float:
        """Read Q, K, V once and write O once (K, V have kv_heads heads)."""
        return attention_bytes(
            self.batch, self.heads, self.kv_heads, self.seq, self.kv_seq, self.head_dim, self.element_size
        )

    def score_bytes(self, element_size: int | None = None) -> int:
        """One B*H*Sq*Skv score tensor."""
        e = element_size if element_size is not None else self.element_size
        return self.batch * self.heads * self.seq * self.kv_seq * e

    def input_bytes(self) -> int:
        """Q, K, V and the output; with backward also dQ, dK, dV and the output's gradient."""
        base = int(self.bytes_min())
        return 2 * base if self.backward else base

    def reference_block_rows(self) -> int:
        """Query rows per block of the fp64 reference (harness/reference.py): score blocks of
        about REFERENCE_BLOCK_BYTES whatever the sequence length."""
        return max(1, REFERENCE_BLOCK_BYTES // max(1, self.heads * self.kv_seq * 8))

    def reference_bytes(self) -> int:
        """The fp64 reference: its output (and gradients), plus its working set, which is
        bounded by the block size whatever the sequence length (harness/reference.py)."""
        out = self.batch * self.heads * self.seq * self.head_dim * 8
        if self.backward:
            out += out + 2 * self.batch * self.kv_heads * self.kv_seq * self.head_dim * 8
        # a few score blocks (scores, probabilities; with backward their saved copies and
        # gradients), the block's mask and bias, and fp64 copies of K and V expanded to every
        # query head
        rows = min(self.reference_block_rows(), self.seq)
        block = self.heads * rows * self.kv_seq * 8
        kv = 2 * self.heads * self.kv_seq * self.head_dim * 8
        return out + (6 if self.backward else 3) * block + (2 if self.backward else 1) * kv

    def io_bytes(self) -> int:
        """What every variant that runs needs besides its own work: inputs and the reference."""
        return self.input_bytes() + self.reference_bytes()

    def dense_mask_bytes(self) -> int:
        """The tensors a materialising variant builds to express the mask: a bool [Sq, Skv]
        (padding: [B, 1, 1, Skv]) and, for ALiBi and bias, a float [1, H, Sq, Skv]."""
        spec = self.mask_spec
        if self.causal and self.q_offset == 0 and self.seq > 0:
            return self.seq * self.kv_seq
        out = 0
        if spec.kind == "padding":
            out += self.batch * self.kv_seq
        elif spec.boolean:
            out += self.seq * self.kv_seq
        if spec.has_bias:
            out += self.heads * self.seq * self.kv_seq * self.element_size
        return out

    # -- inputs -----------------------------------------------------------------------------
    def make_inputs(self) -> Inputs:
        """Deterministic q, k, v on the device ([B, H, S, D]); with backward, leaves that
        require grad and the output's gradient. No mask: a variant that needs a dense one asks
        Inputs.mask (built then, once), fused variants never do."""
        import torch

        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        dev = torch.device(self.device)

        def rand(h: int, s: int) -> torch.Tensor:
            t = torch.randn(self.batch, h, s, self.head_dim, generator=gen, dtype=torch.float32)
            return t.to(device=dev, dtype=self.torch_dtype).requires_grad_(self.backward)

        q = rand(self.heads, self.seq)
        k = rand(self.kv_heads, self.kv_seq)
        v = rand(self.kv_heads, self.kv_seq)
        grad_out = None
        if self.backward:
            grad_out = rand(self.heads, self.seq).detach()
        return Inputs(q=q, k=k, v=v, scale=self.head_dim**-0.5, workload=self, grad_out=grad_out)

    def mask_rows(self, r0: int, r1: int, device: str | None = None) -> torch.Tensor | None:
        """The dense 'hidden' mask (True where attention is NOT allowed, as masked_fill uses it)
        for query rows r0..r1: [r1-r0, Skv], or [B, 1, 1, Skv] for padding; None without one."""
        import torch

        spec = self.mask_spec
        dev = torch.device(device or self.device)
        if spec.kind == "padding":
            lengths = torch.tensor(spec.lengths, device=dev).view(-1, 1, 1, 1)
            return torch.arange(self.kv_seq, device=dev).view(1, 1, 1, -1) >= lengths
        if not spec.boolean:
            return None
        if self.causal and self.q_offset == 0:
            # the blog's mask: ones().triu(1), for the rows asked
            return torch.ones(r1 - r0, self.kv_seq, dtype=torch.bool, device=dev).triu(r0 + 1)
        rows = torch.arange(r0, r1, device=dev).view(-1, 1) + self.q_offset
        cols = torch.arange(self.kv_seq, device=dev).view(1, -1)
        return ~spec.allowed(rows, cols, skv=self.kv_seq)

    def bias_rows(self, r0: int, r1: int, *, dtype: torch.dtype | None = None) -> torch.Tensor | None:
        """The additive float bias for rows r0..r1, [1, H, r1-r0, Skv]: ALiBi's slope_h * (j - i),
        or the deterministic random bias of --mask bias. None for the other masks."""
        import torch

        spec = self.mask_spec
        dt = dtype or self.torch_dtype
        if spec.kind == "alibi":
            slopes = torch.tensor(alibi_slopes(self.heads), dtype=torch.float64).view(1, -1, 1, 1)
            rows = torch.arange(r0, r1, dtype=torch.float64).view(1, 1, -1, 1) + self.q_offset
            cols = torch.arange(self.kv_seq, dtype=torch.float64).view(1, 1, 1, -1)
            return (slopes * (cols - rows)).to(device=self.device, dtype=dt)
        if spec.kind == "bias":
            # rows are drawn from one seeded stream over the whole tensor, so any block of rows
            # equals the same rows of the full bias
            gen = torch.Generator(device="cpu").manual_seed(self.seed + 1)
            full = torch.randn(1, self.heads, self.seq, self.kv_seq, generator=gen, dtype=torch.float32)
            return full[:, :, r0:r1].to(device=self.device, dtype=dt)
        return None


@dataclass
class Inputs:
    """q, k, v ([B, H, S, D]) and what is built from them on demand, once."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scale: float
    workload: Workload | None = None
    grad_out: torch.Tensor | None = None  # with backward: dL/dO, fixed for every call
    _cache: dict[str, object] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def mask(self) -> torch.Tensor | None:
        """The dense 'hidden' mask, built on first use (only variants that materialise ask)."""
        if self.workload is None:
            return None
        if "mask" not in self._cache:
            self._cache["mask"] = self.workload.mask_rows(0, self.workload.seq)
        return self._cache["mask"]  # type: ignore[return-value]

    @property
    def bias(self) -> torch.Tensor | None:
        """The dense additive bias (ALiBi, bias), built on first use."""
        if self.workload is None:
            return None
        if "bias" not in self._cache:
            self._cache["bias"] = self.workload.bias_rows(0, self.workload.seq)
        return self._cache["bias"]  # type: ignore[return-value]

    def leaves(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.q, self.k, self.v
