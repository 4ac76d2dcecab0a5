"""An aten op's recorded inputs, decoded: tensors (shape, dtype, element size) and scalars by
position, and the cost record every op formula returns (analysis/perf/op_model.py, op_vector.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from attnprof.formulas import numel

__all__ = [
    "CAUSAL_PAIRS",
    "FLOATS",
    "Args",
    "OpCost",
    "broadcast",
    "decode_inputs",
    "flops_convention",
    "nbytes",
]

# "Input type" strings -> (attnprof dtype, bytes per element)
_DTYPES: dict[str, tuple[str, int]] = {
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int64_t": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
}
FLOATS = ("fp8", "bf16", "fp16", "fp32", "fp64")


@dataclass(frozen=True)
class OpCost:
    # None: not measured (the op's FLOPs hang on tensor values the trace does not record, as a
    # varlen op's cu_seqlens); its bytes may still be known
    flops: float | None
    # None: not measured (a tensor's dims are recorded but its "Input type" is one attnprof
    # does not know the element size of: the FLOPs still follow from the dims)
    bytes: float | None
    formula: str  # which model, in words ("gemm", "attention fwd, causal top-left", ...)
    dtype: str  # the dtype whose peak bounds the op (its first floating input's)
    matrix: bool  # tensor-core / matrix work (GEMM, attention, conv) vs vector work
    family: str  # gemm, attention, conv, norm, softmax, elementwise, reduction, embedding, copy
    decode: bool = False  # decode-shaped attention: judged by bytes
    # how the FLOPs are known: "exact", "dense upper bound" (a block-sparse op whose sparsity
    # is not recorded: every block counted), "not measured" (flops None)
    basis: str = "exact"
    # how the FLOPs were counted where tools differ (flops_convention); None: from the family
    convention: str | None = None


# Causal attention counted by its exact (query, key) pairs: S(S+1)/2 per head for Sq = Skv, the
# diagonal included; TraceLens counts S²/2, so its figures are lower by 1/(S+1) (0.2% at S=559)
CAUSAL_PAIRS = "causal pairs S(S+1)/2"


def flops_convention(cost: OpCost) -> str:
    """How an op's FLOPs were counted, for a reader comparing them with another tool's:
    "dense" (every product: GEMMs, convs, unmasked attention), CAUSAL_PAIRS, "window pairs",
    "per element" (vector ops), or the op's own (a block-sparse dense upper bound)."""
    if cost.convention is not None:
        return cost.convention
    if not cost.matrix:
        return "per element"
    return CAUSAL_PAIRS if cost.family == "attention" and "causal" in cost.formula else "dense"


class Args:
    """An op's decoded inputs: tensors (dims + dtype) and scalar values, by position."""

    def __init__(self, dims: list[Any], types: list[Any], concrete: list[Any]) -> None:
        self.dims, self.types, self.concrete = dims, types, concrete

    def tensor(self, i: int) -> tuple[list[int], str, int] | None:
        """(shape, dtype, element size) of input i when it is a recorded tensor."""
        if i >= len(self.dims) or i >= len(self.types):
            return None
        d, t = self.dims[i], self.types[i]
        if not isinstance(t, str) or t not in _DTYPES or not isinstance(d, list):
            return None
        if not all(isinstance(x, int) for x in d):
            return None
        name, size = _DTYPES[t]
        return d, name, size

    def shape(self, i: int) -> list[int] | None:
        """The recorded dims of input i, whatever its type says (FLOPs need only these)."""
        if i >= len(self.dims):
            return None
        d = self.dims[i]
        if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
            return None
        return d

    def type_name(self, i: int) -> str:
        """Input i's recorded type string as attnprof names it; "unknown" when not recorded."""
        t = self.types[i] if i < len(self.types) else None
        if isinstance(t, str) and t in _DTYPES:
            return _DTYPES[t][0]
        return t if isinstance(t, str) and t else "unknown"

    def scalar(self, i: int) -> str | None:
        if i >= len(self.concrete):
            return None
        v = self.concrete[i]
        return v if isinstance(v, str) and v != "" else None

    def flag(self, i: int) -> bool | None:
        v = self.scalar(i)
        return None if v is None else v.strip().lower() in ("true", "1")

    def integer(self, i: int) -> int | None:
        v = self.scalar(i)
        try:
            return int(float(v)) if v is not None else None
        except ValueError:
            return None

    def ints(self, i: int) -> list[int] | None:
        v = self.scalar(i)
        if v is None:
            return None
        try:
            out = msgspec.json.decode(v.replace("(", "[").replace(")", "]"))
        except msgspec.DecodeError:
            return None
        if isinstance(out, int):
            return [out]
        if isinstance(out, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in out):
            return out
        return None

    def tensors(self) -> list[tuple[list[int], str, int]]:
        return [t for i in range(len(self.dims)) if (t := self.tensor(i)) is not None]


def decode_inputs(sig: tuple[bytes, bytes, bytes]) -> Args | None:
    """The raw (Input Dims, Input type, Concrete Inputs) JSON of one op, decoded."""
    try:
        dims = msgspec.json.decode(sig[0]) if sig[0] else []
        types = msgspec.json.decode(sig[1]) if sig[1] else []
        conc = msgspec.json.decode(sig[2]) if sig[2] else []
    except msgspec.DecodeError:
        return None
    if not isinstance(dims, list) or not isinstance(types, list) or not isinstance(conc, list):
        return None
    return Args(dims, types, conc)


def nbytes(*ts: tuple[list[int], str, int] | None) -> float:
    return float(sum(numel(t[0]) * t[2] for t in ts if t is not None))


def broadcast(a: list[int], b: list[int]) -> list[int]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not broadcast")
        out.append(max(x, y))
    return out[::-1]
