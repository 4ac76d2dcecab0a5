"""CPU op groups: the one home of what a CPU op's name says it is (the CPU lanes of tables and
plots, the GEMMs and the mask-building ops the CPU-op analysis looks for).

The CPU side has no kernel families; these groups let the report stack CPU op time the way it
stacks GPU time by category (attnprof.analysis.attribution.classify). A name is read by its
structure, never by a substring of the whole name: `namespace::op.overload`, the op's trailing
`_` (in-place) dropped. An aten op is matched by its op name exactly (a few groups, named below,
by a word of it: attention, conv, norm, softmax); an op of another namespace (flashinfer::,
flash_attn::, vllm::, ...) is attention when its op names attention, prefill or decode, else
other. So `flashinfer::batch_prefill_with_paged_kv_cache` is attention, not a mask because its
name holds "fill_", and `aten::upsample_bilinear2d` is not a GEMM because it holds "linear".
"""

from __future__ import annotations

__all__ = ["GEMM_OPS", "MASK_BUILDERS", "cpu_category", "op_parts"]

# the aten GEMMs (matrix products of two operands), by their full names: the CPU-op analysis's
# GEMM -> softmax -> GEMM chains (cpu_ops.py), a model's attention GEMMs (model_share.py) and the
# gemm lane alike
GEMM_OPS = frozenset(
    f"aten::{op}"
    for op in ("mm", "bmm", "addmm", "baddbmm", "addbmm", "_addmm_activation", "matmul", "linear", "einsum")
)
# the aten ops that build a mask (ones, a triangle, a filled or selected tensor), by their full
# names as the trace records them: MASK_REBUILT_EACH_CALL's ops (cpu_ops.py); the mask lane holds
# them and the ops that apply one
MASK_BUILDERS = frozenset(
    (
        "aten::ones",
        "aten::tril",
        "aten::triu",
        "aten::scalar_tensor",
        "aten::fill_",
        "aten::where",
        "aten::full",
    )
)


def op_parts(name: str) -> tuple[str, str]:
    """(namespace, op) of a CPU op's name, lower case: "aten::masked_fill_.Scalar" ->
    ("aten", "masked_fill"); a name without a namespace has namespace ""."""
    ns, _, op = name.lower().rpartition("::")
    if ns:  # an overload; a name without a namespace ("nn.Module: Linear") keeps its dots
        op = op.split(".", 1)[0]
    return ns, (op.rstrip("_") or op)


def _ops(names: frozenset[str]) -> frozenset[str]:
    return frozenset(op_parts(n)[1] for n in names)


# aten groups by exact op name, checked in order
_EXACT: tuple[tuple[str, frozenset[str]], ...] = (
    ("gemm", _ops(GEMM_OPS)),
    ("mask", _ops(MASK_BUILDERS) | {"masked_fill", "isneginf", "logical_not"}),
    ("copy", frozenset({"clone", "copy", "_copy_from", "to", "_to_copy", "contiguous", "empty_like"})),
    (
        "layout",
        frozenset(
            {
                "transpose",
                "permute",
                "view",
                "reshape",
                "_reshape_alias",
                "expand",
                "expand_as",
                "as_strided",
                "unsqueeze",
                "t",
                "select",
                "index_select",
                "select_backward",
                "slice",
                "slice_backward",
                "_unsafe_view",
                "empty",
                "resolve_conj",
                "resolve_neg",
            }
        ),
    ),
    (
        "elementwise",
        frozenset(
            {
                "mul",
                "div",
                "add",
                "sub",
                "exp",
                "neg",
                "relu",
                "gelu",
                "silu",
                "sigmoid",
                "tanh",
                "clamp",
                "hardtanh",
                "pow",
                "rsqrt",
                "sqrt",
                "dropout",
                "threshold_backward",
            }
        ),
    ),
    ("reduction", frozenset({"sum", "max", "amax", "all", "any", "mean"})),
)
# aten groups by a word of the op name (their ops come in many spellings: _scaled_dot_product_
# flash_attention, native_layer_norm_backward, _softmax_backward_data), checked before the rest
_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "attention",
        ("scaled_dot_product", "flash_attention", "efficient_attention", "flex_attention", "cudnn_attention"),
    ),
    # convolutions before GEMMs: oneDNN's and cuDNN's convolution ops, the aten wrappers
    ("conv", ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose", "conv_depthwise")),
    ("norm", ("layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm")),
    ("softmax", ("softmax",)),
)
# another namespace's op is attention when its op name says so
_ATTENTION_WORDS = ("attention", "attn", "prefill", "decode")


def cpu_category(name: str) -> str:
    """Group a CPU op's name: "aten::bmm" -> gemm, "aten::masked_fill_" -> mask,
    "flashinfer::batch_prefill_with_kv_cache" -> attention, ..., else "other"."""
    ns, op = op_parts(name)
    if ns not in ("aten", ""):
        return "attention" if any(w in op for w in _ATTENTION_WORDS) else "other"
    for cat, words in _WORDS:
        if any(w in op for w in words):
            return cat
    for cat, ops in _EXACT:
        if op in ops:
            return cat
    return "other"
