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
  rows. K and V count with their own (GQA) heads in bytes. Varlen ops (packed tokens with
  cu_seqlens): op_varlen.py, per sequence; FlexAttention: op_flex.py. A decode shape (few queries per
  sequence) is judged by bytes: its bound is memory whatever the peaks.
- Convolutions (forward from input, weight, stride, padding, dilation, groups;
  convolution_backward's input and weight gradients per its output_mask).
- Norms, softmax, elementwise ops, reductions, embedding and copies: bytes (inputs + output);
  FLOPs per element as docs/analysis.md lists (copies and embedding compute nothing: 0).
"""

from __future__ import annotations

from attnprof.analysis.perf.op_args import Args, OpCost, broadcast, decode_inputs, nbytes
from attnprof.analysis.perf.op_flex import FLEX_OPS, flex_cost
from attnprof.analysis.perf.op_varlen import VARLEN_OPS, varlen_cost
from attnprof.analysis.perf.op_vector import VECTOR_OPS, vector_cost
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


# -- GEMMs ------------------------------------------------------------------------------------
def _gemm(name: str, a: Args) -> OpCost | None:
    ib: int | None = None
    if name in ("aten::addmm", "aten::baddbmm"):
        ib, ix, iw = 0, 1, 2
    elif name == "aten::linear":
        ix, iw, ib = 0, 1, 2
    else:  # mm, bmm, matmul, _scaled_mm, _grouped_mm: (a, b, ...)
        ix, iw = 0, 1
        if name == "aten::_scaled_mm":
            ib = 4
        elif name == "aten::_grouped_mm":
            ib = 3
    # the FLOPs need only the dims; the bytes need each tensor's element size too, and are
    # not measured (None) where a recorded type is one attnprof does not know
    xs, ws = a.shape(ix), a.shape(iw)
    if xs is None or ws is None:
        return None
    x, w = a.tensor(ix), a.tensor(iw)
    bias = a.tensor(ib) if ib is not None else None
    bias_dims = a.shape(ib) if ib is not None else None
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
            bshape = broadcast(bx, bw)
        except ValueError:
            return None
        m, k, n, batch = x2[-2], x2[-1], w2[-1], numel(bshape)
        out = [*bshape, m, n]
    # a bias of known type counts by its numel (a 0-d one too); one of unknown type only when
    # dims are recorded for it: an absent optional input records [] with no type
    has_bias = numel(bias[0]) > 0 if bias is not None else bool(bias_dims) and numel(bias_dims or []) > 0
    flops = gemm_flops(m, n, k, batch=batch, bias=has_bias)
    size: float | None = None
    if x is not None and w is not None and (bias is not None or not has_bias):
        out_size = x[2]
        if name == "aten::_scaled_mm":  # out_dtype (a ScalarType code) when recorded, else fp8 in
            out_size = _CODE_SIZE.get(a.scalar(6) or "", x[2])
        size = nbytes(x, w, bias if has_bias else None) + numel(out) * out_size
    dtype = x[1] if x is not None else a.type_name(ix)
    return OpCost(flops, size, "gemm 2*M*N*K" + (" + bias" if has_bias else ""), dtype, True, "gemm")


# -- attention --------------------------------------------------------------------------------
# op -> (layout of q/k/v, their positions, is_causal position, backward?); layouts: "bhsd"
# (SDPA's [B, H, S, D]), "bshd" (the kernels' [B, S, H, D]), varlen ops ([tokens, H, D]) are op_varlen.py's
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
    "flashattn::_flash_attn_forward": ("bshd", (0, 1, 2), 5, False),
    "flashattn::_flash_attn_backward": ("bshd", (1, 2, 3), 11, True),
}
# window_size_left / right positions, where the op records them
_WINDOWS = {
    "aten::_flash_attention_forward": (11, 12),
    "aten::_flash_attention_backward": (15, 16),
    "flash_attn::_flash_attn_forward": (6, 7),
    "flash_attn::_flash_attn_backward": (12, 13),
    "flashattn::_flash_attn_forward": (6, 7),
    "flashattn::_flash_attn_backward": (12, 13),
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


def _attention(name: str, a: Args) -> OpCost | None:
    if name in VARLEN_OPS and (name not in _ATTN or _packed(a, _ATTN[name][1][0])):
        return varlen_cost(name, a)  # packed [tokens, H, D] operands (op_varlen.py)
    layout, (iq, ik, iv), ic, backward = _ATTN[name]
    q, k, v = a.tensor(iq), a.tensor(ik), a.tensor(iv)
    if q is None or k is None or v is None:
        return None
    if len(q[0]) != 4 or len(k[0]) != 4 or len(v[0]) != 4:
        return None
    if layout == "bhsd":
        (b, hq, sq, d), (_, hkv, skv, _), dv = q[0], k[0], v[0][3]
    else:
        (b, sq, hq, d), (_, skv, hkv, _), dv = q[0], k[0], v[0][3]
    causal: str | None = None
    words = []
    if name.startswith(("flash_attn::", "flashattn::")):
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
    size = attention_bytes(b, hq, hkv, sq, skv, d, q[2], head_dim_v=dv, backward=backward)
    decode = sq <= DECODE_MAX_QUERIES and skv > sq
    what = ["attention", "bwd (2.5x fwd)" if backward else "fwd"]
    what.append(f"causal {causal}" if causal else "dense")
    what.extend(words)
    if hkv != hq:
        what.append(f"GQA {hq}/{hkv} heads")
    if decode:
        what.append("decode: judged by bytes")
    convention = "window pairs" if left is not None or right is not None else None
    return OpCost(flops, size, ", ".join(what), q[1], True, "attention", decode=decode, convention=convention)


def _packed(a: Args, iq: int) -> bool:
    q = a.tensor(iq)
    return q is not None and len(q[0]) == 3


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


_CONV_BWD = {
    "aten::convolution_backward",
    "aten::cudnn_convolution_backward",
    "aten::cudnn_convolution_backward_input",
}


def _conv(name: str, a: Args) -> OpCost | None:
    if name == "aten::cudnn_convolution_backward_input":
        # (self_size, grad_output, weight, ...), as PyTorch <= 1.10 records it: the input
        # gradient of a plain convolution from grad_output's spatial size and the weight alone
        go, w = a.tensor(1), a.tensor(2)
        if go is None or w is None or len(go[0]) < 3 or len(w[0]) != len(go[0]):
            return None
        flops = conv_flops(go[0][0], w[0][0], go[0][2:], w[0][1], w[0][2:])
        return OpCost(
            flops, nbytes(go, w), "conv bwd (dgrad; input gradient size not recorded)", go[1], True, "conv"
        )
    backward = name in ("aten::convolution_backward", "aten::cudnn_convolution_backward")
    if backward:
        # convolution_backward(grad_output, input, weight, ...); the older
        # cudnn_convolution_backward(input, grad_output, weight, ..., output_mask at 10)
        i_go, i_x = (1, 0) if name == "aten::cudnn_convolution_backward" else (0, 1)
        go, x, w = a.tensor(i_go), a.tensor(i_x), a.tensor(2)
        if go is None or x is None or w is None or len(x[0]) < 3 or len(w[0]) != len(x[0]):
            return None
        cudnn = name == "aten::cudnn_convolution_backward"
        transposed, groups = (False, 1) if cudnn else (bool(a.flag(7)), a.integer(9) or 1)
        mask = a.scalar(10)
        want = [s.strip().lower() == "true" for s in mask.strip("[]()").split(",")] if mask else [True, True]
        fwd = _conv_fwd_flops(x[0], w[0], go[0][2:], transposed, groups)
        n_grads = int(bool(want[0])) + int(len(want) > 1 and bool(want[1]))
        size = (
            nbytes(go, x, w) + (nbytes(x) if want[0] else 0) + (nbytes(w) if len(want) > 1 and want[1] else 0)
        )
        parts = [p for p, on in (("dgrad", want[0]), ("wgrad", len(want) > 1 and want[1])) if on]
        return OpCost(fwd * n_grads, size, "conv bwd (" + " + ".join(parts) + ")", x[1], True, "conv")
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
    size = nbytes(x, w, bias) + out_bytes
    return OpCost(flops, size, "conv fwd" + (" (transposed)" if transposed else ""), x[1], True, "conv")


def _expand(v: list[int], nd: int) -> list[int]:
    return v * nd if len(v) == 1 else v


def _conv_fwd_flops(x: list[int], w: list[int], out: list[int], transposed: bool, groups: int) -> float:
    """Forward FLOPs: a transposed conv is the input-gradient of a plain one (the same count
    with input and output swapped)."""
    if transposed:  # weight [C_in, C_out/groups, k...]: every input element scatters
        return conv_flops(x[0], x[1], x[2:], w[1], w[2:])
    return conv_flops(x[0], w[0], out, w[1], w[2:])


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


def model_op(name: str, args: Args) -> OpCost | None:
    """The cost of one call of `name` with these inputs, or None (not modelled)."""
    try:
        if name in _GEMMS:
            return _gemm(name, args)
        if name in _ATTN or name in VARLEN_OPS:
            return _attention(name, args)
        if name in FLEX_OPS:
            return flex_cost(name, args)
        if name in _CONV or name in _CONV_BWD:
            return _conv(name, args)
        return vector_cost(name, args)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None  # inputs recorded in a form the model does not read: unmodelled


def known(name: str) -> bool:
    """Whether the model has a formula for this op name at all."""
    return (
        name in _GEMMS
        or name in _ATTN
        or name in VARLEN_OPS
        or name in FLEX_OPS
        or name in _CONV
        or name in _CONV_BWD
        or name in VECTOR_OPS
    )
