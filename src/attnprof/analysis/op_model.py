"""What one aten op call costs, from its recorded inputs: FLOPs, bytes, and which formula says so.

A trace recorded with record_shapes=True gives every cpu_op its "Input Dims", "Input type" and
(for scalars) "Concrete Inputs". model_op reads them for the op families below and returns an
OpCost, or None when the op is not one the model knows or its inputs do not say enough (an
unknown op is unmodelled, never guessed). The counts themselves are attnprof.formulas'.

- GEMMs (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm): 2*M*N*K (+ M*N for
  a bias); bytes = inputs + output.
- Attention (SDPA and its flash / efficient / cuDNN / CPU-flash / math ops and their backward
  ops, flash_attn's ops): the exact (query, key) pairs of the recorded mask: is_causal is
  PyTorch's top-left alignment; the efficient kernel's custom_mask_type 2 (CausalBias
  lower_right) and flash_attn's causal are bottom-right; flash_attn's window_size narrows the
  rows. K and V count with their own (GQA) heads in bytes. A decode shape (few queries per
  sequence) is judged by bytes: its bound is memory whatever the peaks.
- Convolutions (forward from input, weight, stride, padding, dilation, groups;
  convolution_backward's input and weight gradients per its output_mask).
- Norms, softmax, elementwise ops, reductions, embedding and copies: bytes (inputs + output);
  FLOPs per element as docs/analysis.md lists (copies and embedding compute nothing: 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from attnprof.formulas import (
    BACKWARD_FLOP_FACTOR,
    attention_bytes,
    attention_flops,
    attention_pairs,
    conv_flops,
    conv_out_size,
    gemm_flops,
    numel,
)

__all__ = ["DECODE_MAX_QUERIES", "OpCost", "decode_inputs", "known", "model_op"]

# a query length up to this, against a longer KV, is decode-shaped (speculative decoding
# verifies a few tokens at once): K and V are read for few queries, bandwidth is the roof
DECODE_MAX_QUERIES = 16

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
# ScalarType codes (Concrete Inputs of a dtype argument) -> bytes per element
_CODE_SIZE = {
    "0": 1,
    "1": 1,
    "2": 2,
    "3": 4,
    "4": 8,
    "5": 2,
    "6": 4,
    "7": 8,
    "11": 1,
    "15": 2,
    "23": 1,
    "24": 1,
}
_FLOATS = ("fp8", "bf16", "fp16", "fp32", "fp64")


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    formula: str  # which model, in words ("gemm", "attention fwd, causal top-left", ...)
    dtype: str  # the dtype whose peak bounds the op (its first floating input's)
    matrix: bool  # tensor-core / matrix work (GEMM, attention, conv) vs vector work
    family: str  # gemm, attention, conv, norm, softmax, elementwise, reduction, embedding, copy
    decode: bool = False  # decode-shaped attention: judged by bytes


class _Args:
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


def decode_inputs(sig: tuple[bytes, bytes, bytes]) -> _Args | None:
    """The raw (Input Dims, Input type, Concrete Inputs) JSON of one op, decoded."""
    try:
        dims = msgspec.json.decode(sig[0]) if sig[0] else []
        types = msgspec.json.decode(sig[1]) if sig[1] else []
        conc = msgspec.json.decode(sig[2]) if sig[2] else []
    except msgspec.DecodeError:
        return None
    if not isinstance(dims, list) or not isinstance(types, list) or not isinstance(conc, list):
        return None
    return _Args(dims, types, conc)


def _bytes(*ts: tuple[list[int], str, int] | None) -> float:
    return float(sum(numel(t[0]) * t[2] for t in ts if t is not None))


# -- GEMMs ------------------------------------------------------------------------------------
def _gemm(name: str, a: _Args) -> OpCost | None:
    bias = None
    if name in ("aten::addmm", "aten::baddbmm"):
        bias, x, w = a.tensor(0), a.tensor(1), a.tensor(2)
    elif name == "aten::linear":
        x, w, bias = a.tensor(0), a.tensor(1), a.tensor(2)
    else:  # mm, bmm, matmul, _scaled_mm, _grouped_mm: (a, b, ...)
        x, w = a.tensor(0), a.tensor(1)
        if name == "aten::_scaled_mm":
            bias = a.tensor(4)
        elif name == "aten::_grouped_mm":
            bias = a.tensor(3)
    if x is None or w is None:
        return None
    xs, ws = x[0], w[0]
    if name == "aten::linear":  # x [..., K] @ weight [N, K]^T
        if len(ws) not in (1, 2) or not xs or xs[-1] != ws[-1]:
            return None
        n = ws[0] if len(ws) == 2 else 1
        m, k, batch, out = numel(xs[:-1]), xs[-1], 1, [*xs[:-1], n]
    elif name == "aten::_grouped_mm":
        if len(xs) == 2 and len(ws) == 3 and xs[1] == ws[1]:  # tokens of all groups [M, K] @ [G, K, N]
            m, k, n, batch = xs[0], xs[1], ws[2], 1
        elif len(xs) == 2 and len(ws) == 2 and xs[1] == ws[0]:  # [M, K_total] @ [K_total, N] (wgrad)
            m, k, n, batch = xs[0], xs[1], ws[1], 1
        elif len(xs) == 3 and len(ws) == 3 and xs[2] == ws[1]:
            batch, m, k, n = xs[0], xs[1], xs[2], ws[2]
        else:
            return None
        out = [batch * m, n] if batch > 1 else [m, n]
    else:
        x2 = [1, *xs] if len(xs) == 1 else xs  # matmul's 1-D operands: a row, a column
        w2 = [*ws, 1] if len(ws) == 1 else ws
        if len(x2) < 2 or len(w2) < 2 or x2[-1] != w2[-2]:
            return None
        bx, bw = x2[:-2], w2[:-2]
        try:
            bshape = _broadcast(bx, bw)
        except ValueError:
            return None
        m, k, n, batch = x2[-2], x2[-1], w2[-1], numel(bshape)
        out = [*bshape, m, n]
    has_bias = bias is not None and numel(bias[0]) > 0
    out_size = x[2]
    if name == "aten::_scaled_mm":  # out_dtype (a ScalarType code) when recorded, else fp8 in
        out_size = _CODE_SIZE.get(a.scalar(6) or "", x[2])
    flops = gemm_flops(m, n, k, batch=batch, bias=has_bias)
    nbytes = _bytes(x, w, bias if has_bias else None) + numel(out) * out_size
    return OpCost(flops, nbytes, "gemm 2*M*N*K" + (" + bias" if has_bias else ""), x[1], True, "gemm")


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not broadcast")
        out.append(max(x, y))
    return out[::-1]


# -- attention --------------------------------------------------------------------------------
# op -> (layout of q/k/v, their positions, is_causal position, backward?); layouts: "bhsd"
# (SDPA's [B, H, S, D]), "bshd" (the kernels' [B, S, H, D]), "thd" (varlen [tokens, H, D])
_ATTN: dict[str, tuple[str, tuple[int, int, int], int | None, bool]] = {
    "aten::scaled_dot_product_attention": ("bhsd", (0, 1, 2), 5, False),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", (0, 1, 2), 4, False),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", (0, 1, 2), 6, False),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", (0, 1, 2), 6, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", (0, 1, 2), 4, False),
    "aten::_scaled_dot_product_attention_math": ("bhsd", (0, 1, 2), 5, False),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", (0, 1, 2), 5, False),
    "aten::_flash_attention_forward": ("bshd", (0, 1, 2), 8, False),
    "aten::_efficient_attention_forward": ("bshd", (0, 1, 2), None, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhsd", (1, 2, 3), 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhsd", (1, 2, 3), 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhsd", (1, 2, 3), 14, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", (1, 2, 3), 7, True),
    "aten::_flash_attention_backward": ("bshd", (1, 2, 3), 11, True),
    "aten::_efficient_attention_backward": ("bshd", (1, 2, 3), None, True),
    "flash_attn::_flash_attn_forward": ("bshd", (0, 1, 2), 5, False),
    "flash_attn::_flash_attn_backward": ("bshd", (1, 2, 3), 11, True),
    "flash_attn::_flash_attn_varlen_forward": ("thd", (0, 1, 2), 9, False),
    "flash_attn::_flash_attn_varlen_backward": ("thd", (1, 2, 3), 12, True),
}
# window_size_left / right positions, where the op records them
_WINDOWS = {
    "aten::_flash_attention_forward": (11, 12),
    "aten::_flash_attention_backward": (15, 16),
    "flash_attn::_flash_attn_forward": (6, 7),
    "flash_attn::_flash_attn_backward": (12, 13),
}
# the position of an explicit attn_mask / attn_bias tensor
_MASKED = {
    "aten::scaled_dot_product_attention": 3,
    "aten::_scaled_dot_product_attention_math": 3,
    "aten::_scaled_dot_product_efficient_attention": 3,
    "aten::_scaled_dot_product_cudnn_attention": 3,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 5,
    "aten::_efficient_attention_forward": 3,
}


def _attention(name: str, a: _Args) -> OpCost | None:
    layout, (iq, ik, iv), ic, backward = _ATTN[name]
    q, k, v = a.tensor(iq), a.tensor(ik), a.tensor(iv)
    if q is None or k is None or v is None:
        return None
    if layout == "thd":
        # varlen: the per-sequence lengths are tensor values (cu_seqlens), which the profiler
        # does not record: the pairs are unknown, and so is the cost
        return None
    if len(q[0]) != 4 or len(k[0]) != 4 or len(v[0]) != 4:
        return None
    if layout == "bhsd":
        (b, hq, sq, d), (_, hkv, skv, _), dv = q[0], k[0], v[0][3]
    else:
        (b, sq, hq, d), (_, skv, hkv, _), dv = q[0], k[0], v[0][3]
    causal: str | None = None
    words = []
    if name.startswith("flash_attn::"):
        if a.flag(ic or 0):
            causal = "bottom-right"  # flash_attn >= 2.1 aligns its causal mask bottom-right
    elif name in ("aten::_efficient_attention_forward", "aten::_efficient_attention_backward"):
        # custom_mask_type: 0 none, 1 causal top-left, 2 causal bottom-right (CausalBias)
        mt = a.integer(9 if not backward else 14)
        causal = {1: "top-left", 2: "bottom-right"}.get(mt or 0)
    elif ic is not None and a.flag(ic):
        causal = "top-left"  # PyTorch's is_causal
    left = right = None
    if name in _WINDOWS:
        wl, wr = _WINDOWS[name]
        left, right = a.integer(wl), a.integer(wr)
        if left is not None and left < 0:
            left = None
        if right is not None and right < 0:
            right = None
        if left is not None or right is not None:
            words.append(
                f"window ({left if left is not None else '-'}, {right if right is not None else '-'})"
            )
    if name in _MASKED and a.tensor(_MASKED[name]) is not None:
        # an explicit mask or bias: its values are not recorded, so every pair counts (what a
        # kernel that applies an arbitrary mask computes)
        words.append("mask tensor: values not recorded, every pair counted")
    pairs = attention_pairs(sq, skv, causal=causal, window_left=left, window_right=right)
    flops = attention_flops(b, hq, pairs, d, dv)
    if backward:
        flops *= BACKWARD_FLOP_FACTOR
    nbytes = attention_bytes(b, hq, hkv, sq, skv, d, q[2], head_dim_v=dv, backward=backward)
    decode = sq <= DECODE_MAX_QUERIES and skv > sq
    what = ["attention", "bwd (2.5x fwd)" if backward else "fwd"]
    what.append(f"causal {causal}" if causal else "dense")
    what.extend(words)
    if hkv != hq:
        what.append(f"GQA {hq}/{hkv} heads")
    if decode:
        what.append("decode: judged by bytes")
    return OpCost(flops, nbytes, ", ".join(what), q[1], True, "attention", decode=decode)


# -- convolution ------------------------------------------------------------------------------
# op -> positions of (stride, padding, dilation, transposed, groups); None: not an argument
_CONV: dict[str, tuple[int, int, int, int | None, int]] = {
    "aten::convolution": (3, 4, 5, 6, 8),
    "aten::_convolution": (3, 4, 5, 6, 8),
    "aten::conv1d": (3, 4, 5, None, 6),
    "aten::conv2d": (3, 4, 5, None, 6),
    "aten::conv3d": (3, 4, 5, None, 6),
    "aten::cudnn_convolution": (3, 2, 4, None, 5),
    "aten::miopen_convolution": (4, 3, 5, None, 6),
    "aten::mkldnn_convolution": (4, 3, 5, None, 6),
}


def _conv(name: str, a: _Args) -> OpCost | None:
    backward = name == "aten::convolution_backward"
    if backward:
        go, x, w = a.tensor(0), a.tensor(1), a.tensor(2)
        if go is None or x is None or w is None or len(x[0]) < 3 or len(w[0]) != len(x[0]):
            return None
        transposed, groups = bool(a.flag(7)), a.integer(9) or 1
        mask = a.scalar(10)
        want = [s.strip().lower() == "true" for s in mask.strip("[]()").split(",")] if mask else [True, True]
        fwd = _conv_fwd_flops(x[0], w[0], go[0][2:], transposed, groups)
        n_grads = int(bool(want[0])) + int(len(want) > 1 and bool(want[1]))
        nbytes = (
            _bytes(go, x, w) + (_bytes(x) if want[0] else 0) + (_bytes(w) if len(want) > 1 and want[1] else 0)
        )
        parts = [p for p, on in (("dgrad", want[0]), ("wgrad", len(want) > 1 and want[1])) if on]
        return OpCost(fwd * n_grads, nbytes, "conv bwd (" + " + ".join(parts) + ")", x[1], True, "conv")
    pos = _CONV[name]
    x, w = a.tensor(0), a.tensor(1)
    if x is None or w is None or len(x[0]) < 3 or len(w[0]) != len(x[0]):
        return None
    nd = len(x[0]) - 2
    stride, dil = a.ints(pos[0]), a.ints(pos[2])
    pad_raw = a.scalar(pos[1])
    transposed = bool(a.flag(pos[3])) if pos[3] is not None else False
    groups = a.integer(pos[4]) or 1
    ks = w[0][2:]
    if stride is None or dil is None or pad_raw is None:
        return None  # stride / padding / dilation not recorded: the output size is unknown
    stride, dil = _expand(stride, nd), _expand(dil, nd)
    if pad_raw.strip("'\"") == "same":
        out = list(x[0][2:])
    elif pad_raw.strip("'\"") == "valid":
        out = [
            conv_out_size(s, kk, st, 0, dd) for s, kk, st, dd in zip(x[0][2:], ks, stride, dil, strict=True)
        ]
    else:
        pads = a.ints(pos[1])
        if pads is None or transposed:
            if transposed:  # output size needs output_padding too; FLOPs need only the input
                out = None
            else:
                return None
        else:
            pads = _expand(pads, nd)
            out = [
                conv_out_size(s, kk, st, p, dd)
                for s, kk, st, p, dd in zip(x[0][2:], ks, stride, pads, dil, strict=True)
            ]
    flops = _conv_fwd_flops(x[0], w[0], out or [], transposed, groups)
    c_out = w[0][1] * groups if transposed else w[0][0]
    out_bytes = 0.0 if out is None else float(x[0][0] * c_out * numel(out) * x[2])
    bias = a.tensor(2) if name not in ("aten::cudnn_convolution",) else None
    nbytes = _bytes(x, w, bias) + out_bytes
    return OpCost(flops, nbytes, "conv fwd" + (" (transposed)" if transposed else ""), x[1], True, "conv")


def _expand(v: list[int], nd: int) -> list[int]:
    return v * nd if len(v) == 1 else v


def _conv_fwd_flops(x: list[int], w: list[int], out: list[int], transposed: bool, groups: int) -> float:
    """Forward FLOPs: a transposed conv is the input-gradient of a plain one (the same count
    with input and output swapped)."""
    if transposed:  # weight [C_in, C_out/groups, k...]: every input element scatters
        return conv_flops(x[0], x[1], x[2:], w[1], w[2:])
    return conv_flops(x[0], w[0], out, w[1], w[2:])


# -- vector ops -------------------------------------------------------------------------------
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


def _vector(name: str, a: _Args) -> OpCost | None:
    ts = a.tensors()
    if not ts:
        return None
    x = a.tensor(0)
    dtype = next((t[1] for t in ts if t[1] in _FLOATS), ts[0][1])
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
        nbytes = _bytes(*ts) + numel(x[0]) * out_size
        return OpCost(per * numel(x[0]), nbytes, f"{fam}: {per} FLOPs/element", dtype, False, fam)
    if name in _NORM_BWD or name in _SOFTMAX_BWD:
        # reads the gradient, the input or output and the saved statistics, writes the
        # gradients: bytes are what is known, and what bounds it
        g = a.tensor(0)
        if g is None:
            return None
        fam = "norm" if name in _NORM_BWD else "softmax"
        nbytes = _bytes(*ts) + _bytes(g) + sum(_bytes(t) for t in ts[2:3] if fam == "norm" and t[0])
        return OpCost(0.0, nbytes, f"{fam} bwd: bytes only", dtype, False, fam)
    if name == "aten::copy_":
        dst, src = a.tensor(0), a.tensor(1)
        if dst is None or src is None:
            return None
        return OpCost(0.0, _bytes(dst, src), "copy: bytes only", dtype, False, "copy")
    if name in ("aten::embedding", "aten::embedding_dense_backward"):
        if name == "aten::embedding":
            w, idx = a.tensor(0), a.tensor(1)
            if w is None or idx is None or len(w[0]) != 2:
                return None
            rows = numel(idx[0]) * w[0][1] * w[2]
            return OpCost(
                0.0, _bytes(idx) + 2.0 * rows, "embedding: rows read + written", w[1], False, "embedding"
            )
        g, idx = a.tensor(0), a.tensor(1)
        n_weights = a.integer(2)
        if g is None or idx is None or n_weights is None:
            return None
        grad_w = n_weights * g[0][-1] * g[2]
        return OpCost(0.0, _bytes(g, idx) + grad_w, "embedding bwd: bytes only", g[1], False, "embedding")
    if name in _REDUCTIONS:
        if x is None:
            return None
        dims = a.ints(1)
        keep = a.flag(2)
        out = _reduced(x[0], dims, bool(keep)) if name not in ("aten::cumsum",) else x[0]
        nbytes = _bytes(x) + numel(out) * (8 if name in ("aten::argmax", "aten::argmin") else x[2])
        return OpCost(
            float(numel(x[0])), nbytes, "reduction: 1 FLOP/input element", dtype, False, "reduction"
        )
    if name in _ELEMENTWISE:
        shapes = [t[0] for t in ts]
        try:
            out = shapes[0]
            for s in shapes[1:]:
                out = _broadcast(out, s)
        except ValueError:
            return None
        inplace = name.endswith("_")
        if inplace and x is not None:
            out_size = x[2]
        elif name in _BOOL_OUT:
            out_size = 1
        else:
            out_size = _promote(ts)
        nbytes = _bytes(*ts) + numel(out) * out_size
        return OpCost(
            float(numel(out)), nbytes, "elementwise: 1 FLOP/output element", dtype, False, "elementwise"
        )
    return None


def _reduced(shape: list[int], dims: list[int] | None, keep: bool) -> list[int]:
    if not dims:
        return [1] * len(shape) if keep else []
    nd = len(shape)
    red = {d % nd for d in dims} if nd else set()
    return [1 if i in red else s for i, s in enumerate(shape) if keep or i not in red]


_GEMMS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",
    "aten::_grouped_mm",
}


def model_op(name: str, args: _Args) -> OpCost | None:
    """The cost of one call of `name` with these inputs, or None (not modelled)."""
    try:
        if name in _GEMMS:
            return _gemm(name, args)
        if name in _ATTN:
            return _attention(name, args)
        if name in _CONV or name == "aten::convolution_backward":
            return _conv(name, args)
        return _vector(name, args)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None  # inputs recorded in a form the model does not read: unmodelled


def known(name: str) -> bool:
    """Whether the model has a formula for this op name at all."""
    return (
        name in _GEMMS
        or name in _ATTN
        or name in _CONV
        or name == "aten::convolution_backward"
        or name in _NORMS
        or name in _NORM_BWD
        or name in _SOFTMAX
        or name in _SOFTMAX_BWD
        or name in _ELEMENTWISE
        or name in _REDUCTIONS
        or name in ("aten::copy_", "aten::embedding", "aten::embedding_dense_backward")
    )
