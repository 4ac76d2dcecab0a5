"""Vector ops' costs from their recorded inputs: norms, softmax, elementwise ops, reductions,
embedding and copies. Bytes are what bounds them; FLOPs per element as docs/analysis.md lists
(copies and embedding compute nothing).
"""

from __future__ import annotations

from attnprof.analysis.perf.op_args import FLOATS, Args, OpCost, broadcast, nbytes
from attnprof.formulas import numel

__all__ = ["VECTOR_OPS", "vector_cost"]

# -- tables -------------------------------------------------------------------------------
_NORMS = {
    "aten::layer_norm": 7,
    "aten::native_layer_norm": 7,
    "aten::rms_norm": 4,
    "aten::_fused_rms_norm": 4,
    "aten::group_norm": 7,
    "aten::native_group_norm": 7,
    "aten::batch_norm": 7,
    "aten::native_batch_norm": 7,
    "aten::_native_batch_norm_legit": 7,
    "aten::cudnn_batch_norm": 7,
    "aten::miopen_batch_norm": 7,
    "aten::instance_norm": 7,
}
_NORM_BWD = {
    "aten::native_layer_norm_backward",
    "aten::native_group_norm_backward",
    "aten::native_batch_norm_backward",
    "aten::cudnn_batch_norm_backward",
    "aten::_fused_rms_norm_backward",
}
_SOFTMAX = {"aten::softmax": 5, "aten::_softmax": 5, "aten::_safe_softmax": 5, "aten::_log_softmax": 5}
_SOFTMAX_BWD = {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"}
_ELEMENTWISE = {
    f"aten::{n}"
    for base in [
        "add",
        "sub",
        "mul",
        "div",
        "rsub",
        "pow",
        "exp",
        "exp2",
        "log",
        "log2",
        "log1p",
        "sqrt",
        "rsqrt",
        "neg",
        "abs",
        "sign",
        "reciprocal",
        "silu",
        "gelu",
        "relu",
        "sigmoid",
        "tanh",
        "clamp",
        "clamp_min",
        "clamp_max",
        "cos",
        "sin",
        "erf",
        "where",
        "masked_fill",
        "fill",
        "zero",
        "maximum",
        "minimum",
        "lerp",
        "addcmul",
        "addcdiv",
        "threshold",
        "hardtanh",
        "leaky_relu",
        "elu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "floor",
        "ceil",
        "round",
        "trunc",
        "remainder",
        "fmod",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "logical_and",
        "logical_or",
        "logical_not",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "nan_to_num",
        "square",
        "triu",
        "tril",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardtanh_backward",
        "leaky_relu_backward",
        "elu_backward",
        "mish_backward",
        "relu_",
    ]
    for n in (base, f"{base}_")
}
_BOOL_OUT = {
    f"aten::{n}"
    for n in [
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "logical_and",
        "logical_or",
        "logical_not",
    ]
}
_REDUCTIONS = {
    f"aten::{n}"
    for n in [
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "prod",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "argmax",
        "argmin",
        "logsumexp",
        "cumsum",
        "any",
        "all",
    ]
}


def _promote(ts: list[tuple[list[int], str, int]]) -> int:
    """Element size of an elementwise op's result: PyTorch promotes over the tensors with
    dimensions; a 0-dim tensor only raises the category (int to float), not the size."""
    dimmed = [t for t in ts if t[0]] or ts
    rank = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1}
    best = max(dimmed, key=lambda t: (rank.get(t[1], 2), t[2]))
    zero = [t for t in ts if not t[0] and rank.get(t[1], 2) > rank.get(best[1], 2)]
    return max(zero, key=lambda t: t[2])[2] if zero else best[2]


def vector_cost(name: str, a: Args) -> OpCost | None:
    ts = a.tensors()
    if not ts:
        return None
    x = a.tensor(0)
    dtype = next((t[1] for t in ts if t[1] in FLOATS), ts[0][1])
    if name in _NORMS or name in _SOFTMAX:
        if x is None:
            return None
        per = _NORMS.get(name) or _SOFTMAX[name]
        fam = "norm" if name in _NORMS else "softmax"
        weights = [t for t in ts[1:] if t is not x]
        if fam == "norm" and name in ("aten::rms_norm", "aten::_fused_rms_norm"):
            per = 4 if weights else 3
        elif fam == "norm" and not weights:
            per = 5  # no affine weight and bias
        out_size = x[2]
        if name == "aten::_softmax" and a.flag(2):  # half_to_float
            out_size = 4
        size = nbytes(*ts) + numel(x[0]) * out_size
        return OpCost(per * numel(x[0]), size, f"{fam}: {per} FLOPs/element", dtype, False, fam)
    if name in _NORM_BWD or name in _SOFTMAX_BWD:
        # reads the gradient, the input or output and the saved statistics, writes the
        # gradients: bytes are what is known, and what bounds it
        g = a.tensor(0)
        if g is None:
            return None
        fam = "norm" if name in _NORM_BWD else "softmax"
        size = nbytes(*ts) + nbytes(g) + sum(nbytes(t) for t in ts[2:3] if fam == "norm" and t[0])
        return OpCost(0.0, size, f"{fam} bwd: bytes only", dtype, False, fam)
    if name == "aten::copy_":
        dst, src = a.tensor(0), a.tensor(1)
        if dst is None or src is None:
            return None
        return OpCost(0.0, nbytes(dst, src), "copy: bytes only", dtype, False, "copy")
    if name in ("aten::embedding", "aten::embedding_dense_backward"):
        if name == "aten::embedding":
            w, idx = a.tensor(0), a.tensor(1)
            if w is None or idx is None or len(w[0]) != 2:
                return None
            rows = numel(idx[0]) * w[0][1] * w[2]
            return OpCost(
                0.0, nbytes(idx) + 2.0 * rows, "embedding: rows read + written", w[1], False, "embedding"
            )
        g, idx = a.tensor(0), a.tensor(1)
        n_weights = a.integer(2)
        if g is None or idx is None or n_weights is None:
            return None
        grad_w = n_weights * g[0][-1] * g[2]
        return OpCost(0.0, nbytes(g, idx) + grad_w, "embedding bwd: bytes only", g[1], False, "embedding")
    if name in _REDUCTIONS:
        if x is None:
            return None
        dims = a.ints(1)
        keep = a.flag(2)
        out = _reduced(x[0], dims, bool(keep)) if name not in ("aten::cumsum",) else x[0]
        size = nbytes(x) + numel(out) * (8 if name in ("aten::argmax", "aten::argmin") else x[2])
        return OpCost(float(numel(x[0])), size, "reduction: 1 FLOP/input element", dtype, False, "reduction")
    if name in _ELEMENTWISE:
        shapes = [t[0] for t in ts]
        try:
            out = shapes[0]
            for s in shapes[1:]:
                out = broadcast(out, s)
        except ValueError:
            return None
        inplace = name.endswith("_")
        if inplace and x is not None:
            out_size = x[2]
        elif name in _BOOL_OUT:
            out_size = 1
        else:
            out_size = _promote(ts)
        size = nbytes(*ts) + numel(out) * out_size
        return OpCost(
            float(numel(out)), size, "elementwise: 1 FLOP/output element", dtype, False, "elementwise"
        )
    return None


def _reduced(shape: list[int], dims: list[int] | None, keep: bool) -> list[int]:
    if not dims:
        return [1] * len(shape) if keep else []
    nd = len(shape)
    red = {d % nd for d in dims} if nd else set()
    return [1 if i in red else s for i, s in enumerate(shape) if keep or i not in red]


VECTOR_OPS = frozenset(
    _NORMS.keys()
    | _NORM_BWD
    | _SOFTMAX.keys()
    | _SOFTMAX_BWD
    | _ELEMENTWISE
    | _REDUCTIONS
    | {"aten::copy_", "aten::embedding", "aten::embedding_dense_backward"}
)
